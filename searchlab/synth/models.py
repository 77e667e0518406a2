"""Model-backed solvers for the consensus filter, and an optional NLI entailment check.

:class:`ModelSolver` answers questions with a Hugging Face causal LM (backend
``hf``) or an OpenAI-compatible chat endpoint (backend ``openai``), drawing
``params.samples`` short answers per question. :class:`NLIChecker` tells
whether a passage entails a statement, and :func:`hypothesis` turns a KB fact
into such a statement.

>>> params = SolverParams(name="qwen", role="gold", backend="hf", model="/models/qwen")
>>> solver = ModelSolver(params)  # doctest: +SKIP
>>> solver.answer(["Where was Selina Holm born?"], [['"Selina Holm"\\nSelina Holm was born in Kelmora.']])  # doctest: +SKIP
[['Kelmora']]
"""

from __future__ import annotations

import gc
import os
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from searchlab.synth.config import SolverParams

BATCH_SIZE = 16     # prompts per generate() call of the hf backend
NLI_BATCH_SIZE = 32
HTTP_TIMEOUT_S = 60.0
HTTP_RETRIES = 3    # further tries after the first, on connection errors, 429 and 5xx
HTTP_BACKOFF_S = 1.0  # wait before retry i is HTTP_BACKOFF_S * 2**i; tests set it to 0
HTTP_WORKERS = 8


class SolverError(RuntimeError):
    """A model backend could not answer (endpoint failure, malformed reply)."""


def format_prompt(question: str, passages: list[str]) -> str:
    """The user prompt: numbered passages (if any), the question, and an instruction to answer briefly."""
    parts = [f"Passage {i}: {p}" for i, p in enumerate(passages, 1)]
    parts.append(f"Question: {question}\nAnswer with a short phrase only.\nAnswer:")
    return "\n\n".join(parts)


def clean_answer(text: str | None) -> str:
    """The first non-blank line of a completion, without a leading ``Answer:``."""
    lines = (text or "").strip().splitlines()
    first = lines[0].strip() if lines else ""
    if first.lower().startswith("answer:"):
        first = first[len("answer:"):].strip()
    return first


def _device_and_dtype():
    import torch

    # bf16 halves memory on GPU; CPUs are slow or inexact in bf16, so they get float32.
    if torch.cuda.is_available():
        return "cuda", torch.bfloat16
    return "cpu", torch.float32


def _offline() -> None:
    # No model hub is reachable where this runs: fail fast on a missing model instead of
    # retrying downloads. Must happen before huggingface_hub is first imported.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


class ModelSolver:
    """A solver whose answers come from a language model (``params.backend`` ``hf`` or ``openai``).

    Temperature 0 is greedy decoding (hf: one answer, repeated ``samples`` times);
    above 0 the hf backend samples at that temperature, keeping any other
    sampling settings (top-p, top-k) from the model's generation config.
    """

    def __init__(self, params: SolverParams):
        if params.backend not in ("hf", "openai"):
            raise ValueError(f"solver {params.name!r}: ModelSolver serves backends hf and openai, "
                             f"not {params.backend!r}")
        self.params = params
        self.model = self.tokenizer = self.client = None
        if params.backend == "hf":
            self._load_hf()
        else:
            self.url = params.url.rstrip("/") + "/chat/completions"
            headers = {}
            key = os.environ.get(params.api_key_env) if params.api_key_env else None
            if key:
                headers["Authorization"] = f"Bearer {key}"
            # One client for all threads: httpx clients are thread-safe and pool connections.
            self.client = httpx.Client(timeout=HTTP_TIMEOUT_S, headers=headers)

    # ------------------------------------------------------------ public
    def answer(self, questions: list[str], contexts: list[list[str]]) -> list[list[str]]:
        """``params.samples`` answers for each question, reading ``contexts[i]`` (empty: closed book)."""
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
        prompts = [format_prompt(q, c) for q, c in zip(questions, contexts)]
        if self.params.backend == "hf":
            return self._answer_hf(prompts)
        return self._answer_openai(prompts)

    def close(self) -> None:
        """Free the model (and its GPU memory) or the HTTP connections."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.model is not None:
            import torch

            self.model = self.tokenizer = None
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def __enter__(self) -> "ModelSolver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ hf
    def _load_hf(self) -> None:
        import torch

        from searchlab.model import load_model

        p = self.params
        # one loading path with the agent: a folder, a hub id, or a GGUF / packaged checkpoint (smollm2-135m-instruct)
        self.model, self.tokenizer = load_model(p.model, p.trust_remote_code)
        self.device = self.model.device
        # Decoder-only models continue from the last position, so padding must go on the left.
        self.tokenizer.padding_side = "left"
        torch.manual_seed(0)  # sampled answers are reproducible run to run

    def _render(self, prompt: str) -> str:
        from searchlab.agent.text import chat_prompt

        return chat_prompt(self.tokenizer, prompt)

    def _answer_hf(self, prompts: list[str]) -> list[list[str]]:
        import torch

        p = self.params
        sample = p.temperature > 0
        # Greedy decoding gives the same answer every time: generate once and repeat it.
        per_prompt = p.samples if sample else 1
        templated = bool(getattr(self.tokenizer, "chat_template", None))
        out: list[list[str]] = []
        for start in range(0, len(prompts), BATCH_SIZE):
            texts = [self._render(x) for x in prompts[start:start + BATCH_SIZE]]
            # A chat template already writes the special tokens (BOS etc.); don't add them twice.
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not templated)
            # Only these two: some tokenizers also return token_type_ids, which causal LMs reject.
            inputs = {k: enc[k].to(self.device) for k in ("input_ids", "attention_mask")}
            kwargs = {"do_sample": True, "temperature": p.temperature} if sample else {"do_sample": False}
            with torch.inference_mode():
                generated = self.model.generate(
                    **inputs, max_new_tokens=p.max_new_tokens, num_return_sequences=per_prompt,
                    pad_token_id=self.tokenizer.pad_token_id, **kwargs)
            new = generated[:, inputs["input_ids"].shape[1]:]  # left padding: prompts end at one column
            decoded = [clean_answer(t) for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
            for i in range(len(texts)):
                group = decoded[i * per_prompt:(i + 1) * per_prompt]
                out.append(group if sample else group * p.samples)
        return out

    # ------------------------------------------------------------ openai
    def _answer_openai(self, prompts: list[str]) -> list[list[str]]:
        with ThreadPoolExecutor(HTTP_WORKERS) as pool:
            return list(pool.map(self._ask, prompts))

    def _ask(self, prompt: str) -> list[str]:
        p = self.params
        answers: list[str] = []
        # Some OpenAI-compatible servers ignore or cap `n`: ask again for what is missing.
        while len(answers) < p.samples:
            body = {"model": p.model, "messages": [{"role": "user", "content": prompt}],
                    "temperature": p.temperature, "max_tokens": p.max_new_tokens,
                    "n": p.samples - len(answers)}
            choices = sorted(self._post(body).get("choices") or [], key=lambda c: c.get("index", 0))
            if not choices:
                raise SolverError(f"solver {p.name!r}: {self.url} answered without choices")
            answers += [clean_answer((c.get("message") or {}).get("content")) for c in choices]
        return answers[:p.samples]

    def _post(self, body: dict) -> dict:
        last = ""
        for attempt in range(HTTP_RETRIES + 1):
            if attempt:
                time.sleep(HTTP_BACKOFF_S * 2 ** (attempt - 1))
            try:
                r = self.client.post(self.url, json=body)
            except httpx.TransportError as e:  # refused, reset, timed out: worth another try
                last = f"{type(e).__name__}: {e}"
                continue
            if r.status_code == 429 or r.status_code >= 500:
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                continue
            if r.status_code != 200:  # 4xx other than 429 will not get better on retry
                raise SolverError(f"solver {self.params.name!r}: POST {self.url} failed with "
                                  f"HTTP {r.status_code}: {r.text[:200]}")
            return r.json()
        raise SolverError(f"solver {self.params.name!r}: POST {self.url} failed after "
                          f"{HTTP_RETRIES + 1} tries; last: {last}")


class NLIChecker:
    """Entailment with a sequence-classification NLI model (premise, hypothesis) → entailed or not."""

    def __init__(self, model_path: str, trust_remote_code: bool = False):
        _offline()
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.model_path = model_path
        self.device, dtype = _device_and_dtype()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            model_path, trust_remote_code=trust_remote_code, dtype=dtype).to(self.device).eval()
        self.entail_index = self._entailment_index()

    def _entailment_index(self) -> int:
        labels = {int(i): str(name).lower() for i, name in self.model.config.id2label.items()}
        # "not_entailment" / "non-entailment" (RTE, HANS) also contain "entail" but mean the opposite.
        hits = [i for i, name in sorted(labels.items())
                if "entail" in name and not name.startswith(("not", "non"))]
        if not hits:
            raise ValueError(f"NLI model {self.model_path!r} has no entailment label "
                             f"(id2label: {self.model.config.id2label})")
        return hits[0]

    def entails(self, premises: list[str], hypotheses: list[str], threshold: float = 0.5) -> list[bool]:
        """For each pair, whether P(entailment | premise, hypothesis) >= ``threshold``."""
        import torch

        if len(premises) != len(hypotheses):
            raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
        # Tokenizers without a configured limit report a huge model_max_length; cap it.
        max_length = min(self.tokenizer.model_max_length, 512)
        out: list[bool] = []
        for start in range(0, len(premises), NLI_BATCH_SIZE):
            enc = self.tokenizer(premises[start:start + NLI_BATCH_SIZE], hypotheses[start:start + NLI_BATCH_SIZE],
                                 padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            with torch.inference_mode():
                logits = self.model(**enc.to(self.device)).logits.float()
            probs = logits.softmax(-1)[:, self.entail_index]
            out += (probs >= threshold).tolist()
        return out

    def close(self) -> None:
        """Free the model."""
        self.model = self.tokenizer = None
        gc.collect()


def hypothesis(subject: str, predicate: str, value_text: str) -> str:
    """A plain sentence stating a KB fact, for :meth:`NLIChecker.entails`.

    The predicate is spelled out with spaces for underscores; no grammar is
    attempted, since NLI models cope with telegraphic statements:
    ``("Selina Holm", "born_in", "Kelmora")`` → ``"Selina Holm born in Kelmora."``.
    A value that already ends in a full stop gets no second one.
    """
    sentence = f"{subject.strip()} {predicate.strip().replace('_', ' ')} {value_text.strip()}"
    return sentence if sentence.endswith(".") else sentence + "."
