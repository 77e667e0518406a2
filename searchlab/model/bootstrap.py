"""Build the ``tiny`` model: a BPE tokenizer and a small Qwen2 decoder trained from scratch.

:func:`bootstrap_tiny` writes an ordinary Hugging Face model folder (``config.json``,
``model.safetensors``, ``generation_config.json``, ``tokenizer.json``,
``tokenizer_config.json``) that :func:`searchlab.model.load_model` opens exactly
like a downloaded checkpoint. Nothing downstream knows the model is tiny.

Why the tokenizer copies Qwen2's text pipeline
----------------------------------------------
In transformers 5 a tokenizer is *rebuilt by its class*. Only the vocabulary,
the merges, the post-processor and the added tokens come from ``tokenizer.json``;
the normaliser, pre-tokeniser and decoder come from the class's ``__init__``.
For a folder whose ``config.json`` says ``model_type: qwen2``,
``AutoTokenizer`` always picks ``Qwen2Tokenizer``, whatever
``tokenizer_config.json`` names (``qwen2`` is on transformers' list of model
types whose declared tokenizer class it overrides). A tokenizer trained with a
different pre-tokeniser (plain GPT-2 byte-level, say) would then be reloaded
with Qwen2's regex and encode differently: digits, contractions and spaces
split elsewhere, so ids seen in training never occur at inference.

So the tiny tokenizer is trained with the very normaliser, pre-tokeniser and
decoder that ``Qwen2Tokenizer`` builds (taken from the installed class, not
retyped), and ``tokenizer_config.json`` names ``Qwen2Tokenizer``. Whichever
route a loader takes (the class rebuild, or ``tokenizer.json`` read as-is, as
transformers 4 and ``PreTrainedTokenizerFast.from_pretrained`` do) the result is
the same tokenizer, and :func:`bootstrap_tiny` checks that before it returns.

The one cost: Qwen2's pipeline applies Unicode NFC, so text in decomposed form
(``"Zu\\u0308rich"``) comes back composed (``"Zürich"``). Text already in NFC,
which is nearly all text, round-trips byte for byte.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from searchlab.agent.protocol import SPECIAL_TOKENS
from searchlab.params import TinyModelParams
from searchlab.progress import track

#: End of text; also the BOS token (decoder-only models rarely need a separate one).
EOS_TOKEN = "<|endoftext|>"
#: Padding gets its own id so a padded position can never be mistaken for an end of text.
PAD_TOKEN = "<|pad|>"

# The class AutoTokenizer uses for model_type qwen2 in transformers 5 (see the module docstring).
_TOKENIZER_CLASS = "Qwen2Tokenizer"

# Strings the bootstrap self-check encodes besides a sample of the training texts.
_PROBES = (
    "Zürich, 1,234 people; it's 2024!\n\n  indented\ttab\r\nend",
    "x</search>",
    "<answer>Paris</answer>",
    "<think>a</think><search>b c</search>\n\n<information>Doc 1(Title: T) t\n</information>",
    "東京 — naïve café 🙂",
)


def _qwen2_pipeline():
    """The normaliser, pre-tokeniser and decoder ``Qwen2Tokenizer`` gives every tokenizer it rebuilds.

    Taken from an empty instance of the installed class rather than retyped, so
    the tiny tokenizer matches whatever this version of transformers rebuilds.
    """
    from transformers import Qwen2Tokenizer

    backend = Qwen2Tokenizer().backend_tokenizer
    return backend.normalizer, backend.pre_tokenizer, backend.decoder


def _train_tokenizer(spec: TinyModelParams, texts: Iterable[str], counter: list[int]):
    """Train the byte-level BPE ``tokenizers.Tokenizer``; ``counter[0]`` ends as the number of texts read."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer, tokenizer.pre_tokenizer, tokenizer.decoder = _qwen2_pipeline()
    # Same post-processor as Qwen2.5's tokenizer.json: adds nothing (no BOS/EOS), keeps offsets untrimmed.
    tokenizer.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)

    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        # Reserved first, so they get the ids 0..9 and no merge can ever produce them.
        special_tokens=[EOS_TOKEN, PAD_TOKEN, *SPECIAL_TOKENS],
        # All 256 byte symbols: any string, in any script, stays encodable (no unknown token).
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,  # our own bar below counts texts, which callers understand
    )

    def stream() -> Iterator[str]:
        # Texts may be a generator over tens of thousands of passages: count them as they pass.
        for text in track(texts, desc="tokenizer", unit="text"):
            counter[0] += 1
            yield text

    tokenizer.train_from_iterator(stream(), trainer=trainer)

    # The trainer registers its special tokens with special=True, which makes
    # decode(skip_special_tokens=True) delete them. The protocol tags are text the
    # agent writes and the environment parses, so they must survive that (as
    # Qwen2.5's own <tool_call> tags do): keep them atomic (one id, never split,
    # matched on the raw text) but not "special". Re-adding updates the flags in
    # place; the ids stay 2..9.
    tokenizer.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in SPECIAL_TOKENS])
    return tokenizer


def _wrap(tokenizer, spec: TinyModelParams):
    """The trained tokenizer as a ``transformers`` fast tokenizer with its special tokens named."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        bos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        # Qwen2Tokenizer's default: setting it here keeps the trained and the reloaded
        # tokenizer identical. Byte-level BPE never produces an unknown token anyway.
        unk_token=EOS_TOKEN,
        model_max_length=spec.max_positions,
    )


def _build_model(spec: TinyModelParams, tokenizer):
    """A randomly initialised ``Qwen2ForCausalLM`` sized by ``spec``; the same spec gives the same weights."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.max_positions,
        # Input and output embeddings shared: with a small hidden size they would be most of the parameters.
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # A private RNG state: seeding must not disturb the caller's random stream, and
    # nothing the caller did before may change the weights.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def _check_shape(spec: TinyModelParams) -> None:
    """Reject head counts the attention layers cannot split, before spending time on training."""
    problem = spec.shape_problem()  # a spec made with model_copy(update=...) skipped the schema's own check
    if problem:
        raise ValueError(problem)


def _check_reload(folder: Path, samples: list[str]) -> None:
    """Fail loudly unless ``AutoTokenizer`` reloads ``folder``'s tokenizer exactly as trained.

    The reference is ``tokenizer.json`` read by the ``tokenizers`` library itself:
    the trained artefact, with no transformers class in between.
    """
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    trained = Tokenizer.from_file(str(folder / "tokenizer.json"))
    reloaded = AutoTokenizer.from_pretrained(str(folder))
    for text in [*_PROBES, *SPECIAL_TOKENS, *samples]:
        want = trained.encode(text, add_special_tokens=False).ids
        got = reloaded.encode(text, add_special_tokens=False)
        if want != got:
            raise RuntimeError(
                f"tiny tokenizer in {folder}: AutoTokenizer ({type(reloaded).__name__}) encodes {text!r} "
                f"as {got}, but the trained tokenizer gives {want}; this transformers version rebuilds "
                "the tokenizer differently (see searchlab.model.bootstrap's docstring)")


def _check_replaceable(out_dir: Path) -> None:
    """Refuse an ``out_dir`` that holds something other than an earlier model folder (a mistyped path)."""
    if out_dir.exists():
        is_model_folder = out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / "config.json").exists())
        if not is_model_folder:
            raise FileExistsError(f"{out_dir} exists and is not a model folder; refusing to replace it")


def _replace_folder(built: Path, out_dir: Path) -> None:
    """Move the finished folder into place, replacing an earlier model folder but nothing else."""
    if out_dir.exists():
        _check_replaceable(out_dir)
        shutil.rmtree(out_dir)
    built.rename(out_dir)


def _build_folder(spec: TinyModelParams, texts: Iterable[str], folder: Path):
    """Write tokenizer and model into the empty ``folder``; return (texts read, model, vocabulary size)."""
    counter = [0]
    raw = _train_tokenizer(spec, texts, counter)
    if counter[0] == 0:
        raise ValueError("bootstrap_tiny: no texts to train the tokenizer on")
    tokenizer = _wrap(raw, spec)
    tokenizer.save_pretrained(str(folder))
    # Name the class AutoTokenizer will use anyway (see the module docstring), so that
    # every reader of this folder, and every transformers version, agrees on it.
    config_path = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
    tokenizer_config["tokenizer_class"] = _TOKENIZER_CLASS
    config_path.write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False, sort_keys=True) + "\n",
                           encoding="utf-8")

    model = _build_model(spec, tokenizer)
    model.save_pretrained(str(folder))

    # A sample of the vocabulary's own pieces decoded back to text exercises many merges cheaply.
    vocab_samples = [raw.decode([i]) for i in range(len(SPECIAL_TOKENS) + 2, len(tokenizer), 7)]
    _check_reload(folder, vocab_samples)
    return counter[0], model, len(tokenizer)


def bootstrap_tiny(spec: TinyModelParams, texts: Iterable[str], out_dir: Path) -> dict[str, Any]:
    """Train a tokenizer on ``texts``, build a fresh tiny Qwen2 model and save both to ``out_dir``.

    ``texts`` (corpus passages and demonstration texts) are streamed once. The
    tokenizer is byte-level BPE with ``spec.vocab_size`` entries (fewer if the
    texts run out of merges), the eight protocol tags as single ids,
    ``<|endoftext|>`` as EOS and BOS and ``<|pad|>`` as padding. The model is a
    ``Qwen2ForCausalLM`` with tied embeddings, initialised from ``spec.seed``:
    the same spec and texts give byte-identical tokenizer files and identical weights.

    ``out_dir`` becomes a standard Hugging Face model folder; an earlier model
    folder there is replaced only once the new one is complete.

    Returns facts for logging: ``parameters``, ``vocab_size``, ``layers``,
    ``hidden_size``, ``tokenizer_train_texts`` and ``seconds``.
    """
    started = time.perf_counter()
    _check_shape(spec)
    out_dir = Path(out_dir)
    _check_replaceable(out_dir)  # before the training, not after it
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Build next to the target and move it in at the end: a crash never leaves a half-written model folder.
    building = out_dir.with_name(out_dir.name + ".building")
    if building.exists():
        shutil.rmtree(building)  # left over from an interrupted earlier run
    building.mkdir()
    try:
        texts_read, model, vocab_size = _build_folder(spec, texts, building)
        _replace_folder(building, out_dir)
    except BaseException:
        # Nothing half-built stays behind, whatever failed (including Ctrl-C).
        shutil.rmtree(building, ignore_errors=True)
        raise

    return {
        "parameters": sum(p.numel() for p in model.parameters()),  # tied embeddings count once
        "vocab_size": vocab_size,
        "layers": spec.layers,
        "hidden_size": spec.hidden_size,
        "tokenizer_train_texts": texts_read,
        "seconds": round(time.perf_counter() - started, 3),
    }
