"""The tiny model: tokenizer training, the saved folder, and loading it the way real checkpoints load."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import torch

from searchlab.agent.protocol import INVALID_ACTION_MESSAGE, SPECIAL_TOKENS, instruction
from searchlab.model import (
    EOS_TOKEN,
    PAD_TOKEN,
    ModelNotFoundError,
    bootstrap_tiny,
    check_protocol_tokens,
    load_model,
    load_tokenizer,
    pick_dtype,
)
from searchlab.params import TinyModelParams

SPEC = TinyModelParams(vocab_size=400, hidden_size=32, layers=2, heads=4, kv_heads=2,
                       intermediate_size=64, max_positions=128, seed=0)

NAMES = ["Ada Lovelace", "Kofi Mensah", "Zoë Brandt", "Jürgen Müller", "Li Wei", "Amélie Roux", "Omar Haddad"]
CITIES = ["Zürich", "Tokyo", "Lagos", "São Paulo", "Kraków", "Oslo", "Lima"]

PLAIN_TEXTS = [
    "Zürich has 1,234 bridges.",
    "It's 3.14159 -- or is it? (Yes!) [maybe] {no} \"quoted\" 'single' a/b\\c",
    "line one\nline two\n\nline four\r\nwindows\ttab",
    "  leading spaces and trailing  ",
    "Naïve café in Kraków, 東京 and 🙂 emoji, Ωmega",
    "0 12 345 6789 1,000,000 -42 +7 3e8 2024-06-01",
    "",
]


def _texts() -> list[str]:
    """~200 short training texts: facts with names and numbers, plus protocol demonstrations."""
    texts = []
    for i in range(168):
        name, city = NAMES[i % len(NAMES)], CITIES[(i * 3) % len(CITIES)]
        texts.append(f"{name} was born in {city} in {1800 + 7 * i} and wrote {i * 13 + 1:,} letters.")
    for i in range(32):
        name, city = NAMES[i % len(NAMES)], CITIES[i % len(CITIES)]
        texts.append(
            f"{instruction(f'Where was {name} born?')}<think>I need {name}'s birthplace.</think>\n"
            f"<search> {name} birthplace </search>\n\n<information>Doc 1(Title: {name}) {name} was born "
            f"in {city}.\n</information>\n\n<think>It is {city}.</think>\n<answer> {city} </answer>")
    return texts


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tiny") / "model"
    # A generator, as the pipeline streams passages: the texts must be read in one pass.
    facts = bootstrap_tiny(SPEC, (t for t in _texts()), out)
    return out, facts


@pytest.fixture(scope="module")
def trained(built):
    """The trained tokenizer itself: tokenizer.json read by the tokenizers library, no transformers class involved."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(built[0] / "tokenizer.json"))


@pytest.fixture(scope="module")
def loaded(built):
    return load_model(str(built[0]), device="cpu")


# ---------------------------------------------------------------- the folder and the facts


def test_facts(built, loaded):
    _, facts = built
    model, tokenizer = loaded
    assert set(facts) == {"parameters", "vocab_size", "layers", "hidden_size", "tokenizer_train_texts", "seconds"}
    assert facts["tokenizer_train_texts"] == len(_texts())
    assert facts["vocab_size"] == len(tokenizer) <= SPEC.vocab_size
    assert facts["vocab_size"] > 300  # the texts give enough merges to (nearly) fill the vocabulary
    assert (facts["layers"], facts["hidden_size"]) == (2, 32)
    assert facts["parameters"] == sum(p.numel() for p in model.parameters())
    assert facts["seconds"] >= 0


def test_folder_is_a_standard_hugging_face_model_folder(built):
    out, _ = built
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json"} <= {p.name for p in out.iterdir()}
    assert not out.with_name(out.name + ".building").exists()
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["tie_word_embeddings"] is True
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["num_key_value_heads"], config["intermediate_size"], config["max_position_embeddings"]) \
        == (2, 32, 4, 2, 64, 128)
    generation = json.loads((out / "generation_config.json").read_text())
    assert (generation["eos_token_id"], generation["pad_token_id"]) == (0, 1)
    assert (config["eos_token_id"], config["bos_token_id"], config["pad_token_id"]) == (0, 0, 1)


# ---------------------------------------------------------------- the tokenizer


@pytest.mark.parametrize("context", ["{}", "x{}", "{}x", "a{}b", " {} ", "\n\n{}\n"])
def test_protocol_tags_are_single_ids_anywhere(loaded, context):
    _, tokenizer = loaded
    for tag in SPECIAL_TOKENS:
        text = context.format(tag)
        ids = tokenizer.encode(text, add_special_tokens=False)
        tag_id = tokenizer.convert_tokens_to_ids(tag)
        assert ids.count(tag_id) == 1, (text, ids)
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode("<answer>Paris</answer>", add_special_tokens=False)[0] == \
        tokenizer.convert_tokens_to_ids("<answer>")


def test_tags_survive_skip_special_tokens_but_eos_and_pad_do_not(loaded):
    _, tokenizer = loaded
    text = "<search>capital of Japan</search>"
    ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id, tokenizer.pad_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert tokenizer.decode(ids) == text + EOS_TOKEN + PAD_TOKEN


def test_special_token_ids(loaded):
    _, tokenizer = loaded
    assert (tokenizer.eos_token, tokenizer.bos_token, tokenizer.pad_token) == (EOS_TOKEN, EOS_TOKEN, PAD_TOKEN)
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert [tokenizer.convert_tokens_to_ids(t) for t in (EOS_TOKEN, PAD_TOKEN, *SPECIAL_TOKENS)] == list(range(12))
    assert tokenizer.model_max_length == SPEC.max_positions
    # No BOS/EOS is added behind the caller's back (as with Qwen2.5).
    assert tokenizer("hello")["input_ids"] == tokenizer.encode("hello", add_special_tokens=False)


@pytest.mark.parametrize("text", PLAIN_TEXTS + [INVALID_ACTION_MESSAGE, instruction("Who wrote 1,234 letters?")])
def test_plain_text_round_trips_exactly(loaded, trained, text):
    _, tokenizer = loaded
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    assert trained.decode(trained.encode(text).ids, skip_special_tokens=False) == text


def test_nfc_is_the_one_normalisation(loaded):
    # Qwen2's pipeline (which transformers 5 imposes on any qwen2 folder) composes
    # canonically equivalent characters; NFC text, nearly all text, is untouched.
    _, tokenizer = loaded
    decomposed = "Zu\u0308rich"
    assert tokenizer.decode(tokenizer.encode(decomposed, add_special_tokens=False)) == \
        unicodedata.normalize("NFC", decomposed) == "Zürich"


def test_loaded_tokenizer_encodes_exactly_like_the_trained_one(loaded, trained):
    _, tokenizer = loaded
    texts = _texts() + PLAIN_TEXTS + [INVALID_ACTION_MESSAGE, "x</search>", "<answer>Paris</answer>"]
    for text in texts:
        assert tokenizer.encode(text, add_special_tokens=False) == trained.encode(text).ids, text
    assert len(tokenizer) == trained.get_vocab_size()
    # The same text pipeline, not just the same answers on these texts.
    for part in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        assert getattr(tokenizer.backend_tokenizer, part).__getstate__() == getattr(trained, part).__getstate__()


def test_both_transformers_loading_routes_agree(built, trained):
    # AutoTokenizer rebuilds a qwen2 folder's tokenizer from the Qwen2Tokenizer class;
    # the generic fast class reads tokenizer.json as is (as transformers 4 did).
    # Both routes must give the same tokenizer.
    from transformers import PreTrainedTokenizerFast

    rebuilt = load_tokenizer(str(built[0]))
    as_is = PreTrainedTokenizerFast.from_pretrained(str(built[0]))
    assert type(rebuilt).__name__ == "Qwen2Tokenizer"
    for text in _texts()[::10] + PLAIN_TEXTS + list(SPECIAL_TOKENS):
        assert rebuilt.encode(text, add_special_tokens=False) == as_is.encode(text, add_special_tokens=False) \
            == trained.encode(text).ids


def test_check_protocol_tokens(loaded):
    _, tokenizer = loaded
    assert check_protocol_tokens(tokenizer) == []

    class SplitsTags:  # a tokenizer that, like a real checkpoint's, splits the tags into characters
        def encode(self, text, add_special_tokens=True):
            return [ord(c) for c in text]

    assert check_protocol_tokens(SplitsTags()) == list(SPECIAL_TOKENS)


# ---------------------------------------------------------------- the model


def test_forward_pass_gives_logits_over_the_whole_vocabulary(loaded):
    model, tokenizer = loaded
    assert not model.training and model.device.type == "cpu" and model.dtype == torch.float32
    tokenizer.padding_side = "right"
    batch = tokenizer(["Ada Lovelace was born in", "<search> Tokyo </search>", "x"],
                      return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert logits.shape == (3, batch["input_ids"].shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()


def test_generate(loaded):
    model, tokenizer = loaded
    tokenizer.padding_side = "left"
    batch = tokenizer(["Where was Ada born?", "<think>"], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             max_new_tokens=4, do_sample=False)
    assert out.shape[0] == 2 and batch["input_ids"].shape[1] < out.shape[1] <= batch["input_ids"].shape[1] + 4
    assert all(isinstance(t, str) for t in tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:]))


def test_same_spec_and_texts_give_identical_files_and_weights(built, loaded, tmp_path):
    out, _ = built
    # Consuming global randomness first must not matter: the init has its own seeded RNG state.
    torch.rand(10)
    again = tmp_path / "again"
    bootstrap_tiny(SPEC, _texts(), again)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    model, _ = loaded
    model2, _ = load_model(str(again), device="cpu")
    first, second = model.state_dict(), model2.state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_another_seed_gives_other_weights(built, tmp_path):
    from safetensors.torch import load_file

    other = tmp_path / "other"
    bootstrap_tiny(SPEC.model_copy(update={"seed": 1}), _texts(), other)
    a, b = load_file(built[0] / "model.safetensors"), load_file(other / "model.safetensors")
    assert not torch.equal(a["model.embed_tokens.weight"], b["model.embed_tokens.weight"])
    assert (other / "tokenizer.json").read_bytes() == (built[0] / "tokenizer.json").read_bytes()


def test_rebuild_replaces_a_model_folder_but_not_other_folders(tmp_path):
    small = SPEC.model_copy(update={"vocab_size": 300})
    target = tmp_path / "model"
    bootstrap_tiny(small, _texts()[:20], target)
    (target / "stale.txt").write_text("from an older run")
    bootstrap_tiny(small, _texts()[:20], target)
    assert not (target / "stale.txt").exists() and (target / "model.safetensors").exists()

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="precious"):
        bootstrap_tiny(small, _texts()[:20], precious)
    assert (precious / "notes.txt").read_text() == "keep me"


def test_a_tokenizer_transformers_would_rebuild_differently_is_refused(tmp_path, monkeypatch):
    # The transformers 5 trap: AutoTokenizer rebuilds any qwen2 folder's tokenizer
    # with Qwen2's pre-tokeniser. Trained with plain GPT-2 byte-level splitting
    # instead, the reloaded tokenizer would split digits and spaces differently;
    # bootstrap_tiny must notice and leave nothing behind.
    from tokenizers import decoders, pre_tokenizers

    import searchlab.model.bootstrap as bootstrap

    monkeypatch.setattr(bootstrap, "_qwen2_pipeline", lambda: (
        None, pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()))
    with pytest.raises(RuntimeError, match="Qwen2Tokenizer"):
        bootstrap_tiny(SPEC, _texts(), tmp_path / "gpt2-style")
    assert list(tmp_path.iterdir()) == []


def test_bad_shapes_and_empty_texts_are_rejected(tmp_path):
    # model_copy skips the schema's validation: the builder checks the shape itself
    with pytest.raises(ValueError, match="model.tiny.hidden_size 30 is not divisible by model.tiny.heads 4"):
        bootstrap_tiny(SPEC.model_copy(update={"hidden_size": 30}), _texts(), tmp_path / "a")
    with pytest.raises(ValueError, match="model.tiny.heads 4 is not divisible by model.tiny.kv_heads 3"):
        bootstrap_tiny(SPEC.model_copy(update={"kv_heads": 3}), _texts(), tmp_path / "b")
    with pytest.raises(ValueError, match="= 3 dimensions per head, which must be even"):
        bootstrap_tiny(SPEC.model_copy(update={"hidden_size": 12}), _texts(), tmp_path / "d")
    with pytest.raises(ValueError, match="no texts"):
        bootstrap_tiny(SPEC, [], tmp_path / "c")
    assert not (tmp_path / "c").exists() and not (tmp_path / "c.building").exists()


# ---------------------------------------------------------------- loading errors and dtype


def test_missing_path_names_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFoundError, match="no-such-model") as err:
        load_model(str(missing))
    assert "not found locally" in str(err.value)
    with pytest.raises(ModelNotFoundError, match="bootstrap"):
        load_model("tiny")


def test_hub_id_offline_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as on every machine here; without it the hub is retried for ~20 s
    with pytest.raises(ModelNotFoundError) as err:
        load_model("searchlab-test/no-such-checkpoint")
    message = str(err.value)
    assert "searchlab-test/no-such-checkpoint" in message and "not found locally" in message
    assert "HF_HUB_OFFLINE" in message and "unreachable" in message


def test_folder_without_a_model_names_the_folder(tmp_path):
    folder = tmp_path / "empty-folder"
    folder.mkdir()
    with pytest.raises(OSError, match="empty-folder"):
        load_model(str(folder))


def test_pick_dtype():
    assert pick_dtype("auto", "cpu") == torch.float32
    assert pick_dtype("auto", torch.device("cpu")) == torch.float32
    assert pick_dtype("bfloat16", "cpu") == torch.bfloat16
    assert pick_dtype("float16", None) == torch.float16
    assert pick_dtype("float32", "cuda") == torch.float32
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        assert pick_dtype("auto", "cuda") == torch.bfloat16
    with pytest.raises(ValueError, match="int8"):
        pick_dtype("int8", "cpu")
