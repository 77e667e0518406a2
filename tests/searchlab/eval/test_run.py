"""A whole evaluation with a real (scripted) tiny model, tokenizer and BM25 index: outputs, and resume per shard."""

from __future__ import annotations

import json

from searchlab.eval.config import EvalParams
from searchlab.eval.run import run_evaluation
from searchlab.questions.formats import Question
from tests.toyworld import SCRIPTS, Scripted, params

BENCHMARKS = {
    "capitals": [Question("c1", "What is the capital of Japan?", ["Tokyo"], {}),
                 Question("c2", "What is the capital of Norway?", ["Oslo"], {"evidence": ["oslo"]})],
    "people": [Question("p1", "Who discovered penicillin?", ["Alexander Fleming"], {})],
}


def _evaluate(model, tok, bm25, tmp_path, loads: list[str]):
    def load():
        loads.append("sft")
        return Scripted(model, tok), tok

    return run_evaluation({"sft": load}, ["direct", "rag", "agent"], BENCHMARKS, bm25, params(),
                          tmp_path / "out", tmp_path / "shards", EvalParams(resamples=200))


def test_every_system_on_every_benchmark_then_a_rerun_computes_only_missing_shards(model, tok, bm25, tmp_path,
                                                                                  monkeypatch):
    # rag shows passages first, so every question needs a scripted turn after one environment reply
    monkeypatch.setitem(SCRIPTS, "What is the capital of Japan?", ["<answer>Tokyo</answer>"] * 2)
    loads: list[str] = []
    results = _evaluate(model, tok, bm25, tmp_path, loads)
    capitals = results["benchmarks"]["capitals"]
    assert capitals["questions"] == 2 and list(capitals["systems"]) == ["sft/direct", "sft/rag", "sft/agent"]
    # scripted: Japan is answered at once; Norway's script searches, which after direct's forced <answer> is
    # merely a wrong answer
    assert capitals["systems"]["sft/direct"]["em"]["mean"] == 0.5
    assert capitals["systems"]["sft/agent"]["em"]["mean"] == 1.0
    people = results["benchmarks"]["people"]["systems"]
    assert people["sft/agent"]["em"]["mean"] == 1.0 and people["sft/direct"]["em"]["mean"] == 0.0
    assert set(capitals["comparisons"]) == {"sft/agent vs sft/rag", "sft/agent vs sft/direct"}
    assert capitals["comparisons"]["sft/agent vs sft/direct"]["difference"] == 0.5
    assert set(results["throughput"]) == {"sft/direct", "sft/rag", "sft/agent"}
    assert all(t["questions_per_s"] > 0 for t in results["throughput"].values())
    assert loads == ["sft"]  # loaded once for all shards

    out = tmp_path / "out"
    # the file holds the results but the speeds, which differ from one run to the next
    assert json.loads((out / "metrics.json").read_text()) == {k: v for k, v in results.items() if k != "throughput"}
    agent = [json.loads(line) for line in (out / "predictions/capitals/sft-agent.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in agent] == ["Tokyo", "Oslo"] and "<search>" in agent[1]["completion"]
    report = (out / "report.md").read_text()
    assert "sft/agent" in report
    assert "- direct: one turn, no search: the model thinks and answers; a search it starts is not run" in report
    assert "- rag: one turn, no search by the model" in report and "- agent: up to 4 turns" in report
    assert all((out / name).read_bytes().startswith(b"\x89PNG") for name in ("em.png", "searches.png"))
    assert not list(tmp_path.rglob("*.tmp"))

    # a rerun loads every finished shard: the model is not even loaded, and the results are the same
    again = _evaluate(model, tok, bm25, tmp_path, loads)
    assert loads == ["sft"] and again == results
    # with one shard lost (a crash before it was written), only that shard is computed again
    (tmp_path / "shards/people/sft-rag.json").unlink()
    bm25.calls.clear()
    redone = _evaluate(model, tok, bm25, tmp_path, loads)["benchmarks"]["people"]["systems"]["sft/rag"]
    assert redone == results["benchmarks"]["people"]["systems"]["sft/rag"]
    assert loads == ["sft", "sft"] and bm25.calls == [(["Who discovered penicillin?"], params().topk)]


def test_the_sampled_system_averages_several_sampled_episodes_per_question(model, tok, bm25, tmp_path):
    from searchlab.eval.config import SamplingParams
    from searchlab.eval.metrics import mean_record

    results = run_evaluation({"sft": lambda: (Scripted(model, tok), tok)}, ["agent", "sampled"], BENCHMARKS, bm25,
                             params(), tmp_path / "out", tmp_path / "shards",
                             EvalParams(resamples=200, sampling=SamplingParams(temperature=0.9, samples=3)))
    systems = results["benchmarks"]["capitals"]["systems"]
    # the scripted model writes the same turns however it samples: every sample is the greedy episode
    assert systems["sft/sampled"]["em"]["mean"] == systems["sft/agent"]["em"]["mean"] == 1.0
    records = [json.loads(line) for line in
               (tmp_path / "out/predictions/capitals/sft-sampled.jsonl").read_text().splitlines()]
    assert [r["samples"] for r in records] == [["Tokyo"] * 3, ["Oslo"] * 3]
    assert "- sampled: the agent, 3 sampled episodes per question; EM and F1 are their means (sampled at " \
           "temperature 0.9" in (tmp_path / "out/report.md").read_text()
    mixed = mean_record([{"prediction": "a", "em": 1.0, "f1": 1.0, "cover_em": 1.0, "searches": 1},
                         {"prediction": "b", "em": 0.0, "f1": 0.5, "cover_em": 0.0, "searches": 2}])
    assert (mixed["em"], mixed["f1"], mixed["searches"], mixed["samples"]) == (0.5, 0.75, 1.5, ["a", "b"])


def test_a_model_with_systems_of_its_own_runs_only_those_and_is_compared_on_them(model, tok, bm25, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setitem(SCRIPTS, "What is the capital of Japan?", ["<answer>Tokyo</answer>"] * 2)  # as above

    eval_params = EvalParams(models=["sft", {"source": "rl", "systems": ["agent"]}])
    systems = eval_params.model_systems()
    assert systems == {"sft": ["direct", "rag", "agent"], "rl": ["agent"]}
    load = lambda: (Scripted(model, tok), tok)  # noqa: E731
    results = run_evaluation({"sft": load, "rl": load}, systems, BENCHMARKS, bm25, params(), tmp_path / "out",
                             tmp_path / "shards", EvalParams(resamples=200))
    capitals = results["benchmarks"]["capitals"]
    assert list(capitals["systems"]) == ["sft/direct", "sft/rag", "sft/agent", "rl/agent"]
    assert set(capitals["comparisons"]) == {"sft/agent vs sft/rag", "sft/agent vs sft/direct", "rl/agent vs sft/agent"}
    assert sorted(p.name for p in (tmp_path / "out/predictions/capitals").iterdir()) == [
        "rl-agent.jsonl", "sft-agent.jsonl", "sft-direct.jsonl", "sft-rag.jsonl"]
