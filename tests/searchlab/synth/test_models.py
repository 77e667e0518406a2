"""Model solvers and the NLI checker, on tiny models built locally and a real local HTTP endpoint."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from searchlab.synth import models
from searchlab.synth.config import SolverParams
from searchlab.synth.models import ModelSolver, NLIChecker, clean_answer, format_prompt, hypothesis

SENTENCES = [
    "Selina Holm was born in Kelmora in 1843 .",
    "Kelmora is a small town on the northern coast .",
    "The river Vant flows through Kelmora and into the sea .",
    "Arvid Lund wrote three novels about the sea .",
    "Question : where was Selina Holm born ?",
    "Answer with a short phrase only .",
    "Answer : Kelmora",
    "Passage 1 : Selina Holm",
    "Which town is on the northern coast ?",
    "Who wrote three novels ?",
    "What river flows through the town ?",
    "The painter Mira Salo lived in Ostvik for twenty years .",
    "Ostvik is a harbour city famous for its bridges .",
    "In what year was Selina Holm born ?",
    "Mira Salo painted the harbour and the bridges of Ostvik .",
]
QUESTIONS = ["Where was Selina Holm born?", "Who wrote three novels about the sea?", "What is Ostvik famous for?"]
PASSAGES = ['"Selina Holm"\nSelina Holm was born in Kelmora in 1843.',
            '"Ostvik"\nOstvik is a harbour city famous for its bridges.']


# ---------------------------------------------------------------- tiny local models
@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory):
    """A byte-level BPE tokenizer trained on SENTENCES, saved as a transformers fast tokenizer.

    Byte-level BPE because transformers rebuilds a qwen2 model's tokenizer as its own
    byte-level BPE class from the saved vocab and merges; a word-level one would not survive that.
    """
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(SENTENCES, BpeTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[EOS]"],
                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]")
    path = tmp_path_factory.mktemp("tokenizer")
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def lm_dir(tokenizer_dir, tmp_path_factory):
    """A randomly initialised two-layer Qwen2 causal LM over that tokenizer."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("lm")
    Qwen2ForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _classifier_dir(tokenizer_dir, tmp_path_factory, id2label: dict[int, str]) -> str:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=2, max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                        num_labels=len(id2label), id2label=id2label,
                        label2id={v: k for k, v in id2label.items()})
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("nli")
    BertForSequenceClassification(config).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def nli_dir(tokenizer_dir, tmp_path_factory):
    return _classifier_dir(tokenizer_dir, tmp_path_factory, {0: "entailment", 1: "neutral", 2: "contradiction"})


@pytest.fixture(scope="session")
def sentiment_dir(tokenizer_dir, tmp_path_factory):
    """A classifier whose labels say nothing about entailment (the trap: 'not_entailment')."""
    return _classifier_dir(tokenizer_dir, tmp_path_factory, {0: "positive", 1: "not_entailment"})


def hf_params(path: str, **kw) -> SolverParams:
    return SolverParams(name="tiny", role="closed_book", backend="hf", model=path, **kw)


# ---------------------------------------------------------------- prompt and post-processing
def test_prompt_numbers_passages_and_ends_with_answer_cue():
    prompt = format_prompt("Where?", ["p one", "p two"])
    assert prompt.index("Passage 1: p one") < prompt.index("Passage 2: p two") < prompt.index("Question: Where?")
    assert prompt.endswith("Answer with a short phrase only.\nAnswer:")
    assert format_prompt("Where?", []).startswith("Question: Where?")


@pytest.mark.parametrize("raw, cleaned", [
    (" Kelmora\nbecause the passage says so", "Kelmora"),
    ("\n\nAnswer: Kelmora ", "Kelmora"),
    ("", ""),
    (None, ""),
])
def test_clean_answer(raw, cleaned):
    assert clean_answer(raw) == cleaned


def test_hypothesis():
    assert hypothesis("Selina Holm", "born_in", "Kelmora") == "Selina Holm born in Kelmora."
    assert hypothesis("Selina Holm", "birth_year", "1843") == "Selina Holm birth year 1843."
    assert hypothesis("Ostvik", "known_for", "its bridges.") == "Ostvik known for its bridges."


# ---------------------------------------------------------------- hf backend
def test_hf_greedy_is_deterministic_and_gives_samples_answers(lm_dir):
    with ModelSolver(hf_params(lm_dir, samples=3, max_new_tokens=5)) as solver:
        contexts = [[], PASSAGES, PASSAGES[:1]]  # closed book and with passages in one batch
        first = solver.answer(QUESTIONS, contexts)
        second = solver.answer(QUESTIONS, contexts)
    assert first == second
    assert [len(a) for a in first] == [3, 3, 3]
    assert all(isinstance(s, str) for a in first for s in a)
    assert all(len(set(a)) == 1 for a in first)  # greedy: all samples agree


def test_hf_respects_max_new_tokens(lm_dir):
    generated = []
    for limit in (1, 6):
        with ModelSolver(hf_params(lm_dir, max_new_tokens=limit)) as solver:
            generate = solver.model.generate

            def spy(**kw):  # record how many tokens were generated past the prompt
                out = generate(**kw)
                generated.append((limit, out.shape[1] - kw["input_ids"].shape[1]))
                return out

            solver.model.generate = spy
            answers = solver.answer(QUESTIONS, [[]] * 3)
        if limit == 1:  # one byte-level BPE token holds at most one word
            assert all(len(a[0].split()) <= 1 for a in answers)
    assert all(0 < n <= limit for limit, n in generated)
    assert (6, 6) in generated  # the random model runs on until the limit stops it


def test_hf_sampling_and_batches_larger_than_one_generate_call(lm_dir, monkeypatch):
    monkeypatch.setattr(models, "BATCH_SIZE", 2)
    questions = QUESTIONS * 2
    with ModelSolver(hf_params(lm_dir, samples=4, temperature=1.5, max_new_tokens=4)) as solver:
        answers = solver.answer(questions, [PASSAGES] * len(questions))
    assert len(answers) == len(questions)
    assert all(len(a) == 4 and all(isinstance(s, str) for s in a) for a in answers)


def test_hf_uses_the_chat_template_when_there_is_one(lm_dir):
    with ModelSolver(hf_params(lm_dir, max_new_tokens=3)) as solver:
        solver.tokenizer.chat_template = (
            "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant :{% endif %}")
        rendered = solver._render("Question: Who?")
        assert rendered.startswith("user : Question: Who?") and rendered.endswith("assistant :")
        assert [len(a) for a in solver.answer(QUESTIONS, [[]] * 3)] == [1, 1, 1]


def test_rules_backend_is_refused():
    with pytest.raises(ValueError, match="rules"):
        ModelSolver(SolverParams(name="r", role="gold", backend="rules"))


# ---------------------------------------------------------------- NLI
def test_nli_returns_one_bool_per_pair(nli_dir):
    checker = NLIChecker(nli_dir)
    assert checker.entail_index == 0
    premises = [PASSAGES[0], PASSAGES[1], "Kelmora is a small town ."] * 15  # more than one batch
    hyps = [hypothesis("Selina Holm", "born_in", "Kelmora")] * len(premises)
    result = checker.entails(premises, hyps)
    assert len(result) == len(premises) and all(isinstance(b, bool) for b in result)
    assert checker.entails(premises, hyps, threshold=0.0) == [True] * len(premises)
    assert checker.entails(premises, hyps, threshold=1.01) == [False] * len(premises)
    with pytest.raises(ValueError):
        checker.entails(premises, hyps[:1])


def test_nli_without_entailment_label_names_the_model(sentiment_dir):
    with pytest.raises(ValueError, match="no entailment label") as err:
        NLIChecker(sentiment_dir)
    assert sentiment_dir in str(err.value)


# ---------------------------------------------------------------- openai backend
class Endpoint:
    """A real OpenAI-style /v1/chat/completions server that answers with the question's last word."""

    def __init__(self, fail: bool = False):
        self.requests: list[tuple[dict, dict]] = []  # (headers, body)
        self.fail = fail
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append((dict(self.headers), body))
                if endpoint.fail or self.path != "/v1/chat/completions":
                    self._send(500 if endpoint.fail else 404, {"error": "nope"})
                    return
                prompt = body["messages"][-1]["content"]
                question = next(line for line in prompt.splitlines() if line.startswith("Question:"))
                word = question.rstrip("?").split()[-1]
                # Extra lines and an "Answer:" prefix: the solver must keep only the answer.
                choices = [{"index": i, "message": {"role": "assistant", "content": f"Answer: {word}\nbecause"}}
                           for i in range(body["n"])]
                self._send(200, {"choices": choices})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    e = Endpoint()
    yield e
    e.close()


def openai_params(url: str, **kw) -> SolverParams:
    return SolverParams(name="remote", role="one_shot", backend="openai", model="tiny-chat", url=url, **kw)


def test_openai_answers_samples_per_question_and_sends_the_key(endpoint, monkeypatch):
    monkeypatch.setenv("TINY_KEY", "sekrit")
    questions = [f"Which word ends question {i} zebra{i}?" for i in range(20)]
    with ModelSolver(openai_params(endpoint.url, samples=3, api_key_env="TINY_KEY", max_new_tokens=7)) as solver:
        answers = solver.answer(questions, [PASSAGES] * len(questions))
    assert answers == [[f"zebra{i}"] * 3 for i in range(20)]  # order kept despite concurrency
    headers, body = endpoint.requests[0]
    assert headers["Authorization"] == "Bearer sekrit"
    assert body["model"] == "tiny-chat" and body["n"] == 3 and body["max_tokens"] == 7
    assert body["temperature"] == 0.0
    assert "Passage 1:" in body["messages"][0]["content"]


def test_openai_without_key_sends_no_authorization(endpoint, monkeypatch):
    monkeypatch.delenv("TINY_KEY", raising=False)
    with ModelSolver(openai_params(endpoint.url + "/", api_key_env="TINY_KEY")) as solver:
        assert solver.answer(["Is it Kelmora?"], [[]]) == [["Kelmora"]]
    assert "Authorization" not in endpoint.requests[0][0]


def test_openai_server_error_is_retried_then_reported(monkeypatch):
    monkeypatch.setattr(models, "HTTP_BACKOFF_S", 0.0)
    failing = Endpoint(fail=True)
    try:
        with ModelSolver(openai_params(failing.url)) as solver:
            with pytest.raises(models.SolverError, match="500") as err:
                solver.answer(["Where?"], [[]])
    finally:
        failing.close()
    assert f"{failing.url}/chat/completions" in str(err.value)
    assert len(failing.requests) == models.HTTP_RETRIES + 1


def test_openai_unreachable_endpoint_names_the_url(monkeypatch):
    monkeypatch.setattr(models, "HTTP_BACKOFF_S", 0.0)
    with socket.socket() as s:  # a port nobody listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with ModelSolver(openai_params(url)) as solver:
        with pytest.raises(models.SolverError, match=f"{url}/chat/completions"):
            solver.answer(["Where?"], [[]])
