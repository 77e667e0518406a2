"""The evaluate stage's inputs: benchmarks and models from the eval params, external files in the fingerprint.

The stage itself runs in the smoke pipeline (tests/flows/test_pipeline.py); these tests need no model.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from searchlab.eval.inputs import load_benchmarks
from searchlab.params import load_params
from searchlab.questions.formats import BenchmarkError
from tasks.evaluate import STAGE
from tasks.sft import STAGE as SFT_STAGE
from tasks.stage import explain_change, fingerprint, fingerprint_inputs

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = {"index": "i", "benchmarks": "b", "sft": "s", "rl": "r", "selfplay": "p", "corpus": "c", "qa": "q", "base": "m"}


def _params(*overrides):
    return load_params(REPO / "params/smoke.yaml", list(overrides))


def _write(path: Path, *questions: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "golden_answers": ["a"]}) + "\n"
                            for i, q in enumerate(questions)))
    return path


def test_an_edited_external_file_changes_the_fingerprint_and_status_names_it(tmp_path):
    bench = _write(tmp_path / "bench/mine.jsonl", "Who?")
    params = _params("eval.benchmarks.mine.path=bench/mine.jsonl")
    before = fingerprint_inputs(STAGE, params, tmp_path, UPSTREAM)
    assert list(before["external"]) == ["bench/mine.jsonl"]
    assert fingerprint_inputs(STAGE, params, tmp_path, UPSTREAM) == before  # stable (and served from the stat cache)
    _write(bench, "Who?", "What?")
    after = fingerprint_inputs(STAGE, params, tmp_path, UPSTREAM)
    assert fingerprint(after) != fingerprint(before)
    assert explain_change(before, after) == ["input bench/mine.jsonl changed"]
    # stages without external inputs keep the fingerprints they had before the field existed
    assert "external" not in fingerprint_inputs(SFT_STAGE, params, tmp_path, UPSTREAM)


def test_a_missing_external_file_or_model_folder_is_named_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match=r"eval.benchmarks.mine.path: no such file: .*absent.jsonl"):
        STAGE.external(_params("eval.benchmarks.mine.path=absent.jsonl"), tmp_path)
    with pytest.raises(ValueError, match=r"eval.models.1: models/base: no Hugging Face model folder"):
        STAGE.external(_params("eval.models=[sft, models/base]"), tmp_path)
    model = tmp_path / "models/base"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    params = _params("eval.models=[sft, models/base]")
    hashed = fingerprint_inputs(STAGE, params, tmp_path, UPSTREAM)["external"]
    assert list(hashed) == ["models/base"]  # sft is covered by its upstream fingerprint
    (model / "config.json").write_text('{"changed": true}')
    assert fingerprint_inputs(STAGE, params, tmp_path, UPSTREAM)["external"] != hashed


def test_a_malformed_external_benchmark_is_named_with_its_line_before_anything_runs(tmp_path):
    bench = _write(tmp_path / "mine.jsonl", "Who?", "What?")
    bench.write_text(bench.read_text() + '{"id": "q2", "question": "Where?"}\n')  # line 3 has no answers
    with pytest.raises(ValueError, match=rf"eval.benchmarks.mine: {bench}: line 3: key 'golden_answers' is missing"):
        STAGE.external(_params("eval.benchmarks.mine.path=mine.jsonl"), tmp_path)
    # the declared format is the one checked: a valid FlashRAG file is not a HotpotQA list
    _write(bench, "Who?")
    with pytest.raises(ValueError, match=rf"eval.benchmarks.mine: {bench}: expected a JSON list of records"):
        STAGE.external(_params("eval.benchmarks.mine.path=mine.jsonl",
                                         "eval.benchmarks.mine.format=hotpotqa"), tmp_path)
    STAGE.external(_params("eval.benchmarks.mine.path=mine.jsonl"), tmp_path)


def test_benchmarks_built_in_suites_sampled_then_external_files(tmp_path):
    suites = tmp_path / "data/benchmarks"
    _write(suites / "world-single.jsonl", "One?", "Two?", "Three?")
    _write(suites / "world-bridge.jsonl")  # the benchmarks stage found no bridge questions
    _write(tmp_path / "mine.jsonl", "Mine?")
    params = _params("eval.suites=all", "eval.sample=2", "eval.benchmarks.mine.path=mine.jsonl")
    loaded = load_benchmarks(params.eval, suites, tmp_path)
    assert list(loaded) == ["world-single", "mine"] and len(loaded["world-single"]) == 2
    with pytest.raises(BenchmarkError, match="world-bridge.jsonl: the benchmark has no records"):
        load_benchmarks(_params("eval.suites=[world-bridge]").eval, suites, tmp_path)
    with pytest.raises(ValueError, match="no benchmark to evaluate on"):
        load_benchmarks(_params("eval.suites=[]").eval, suites, tmp_path)
    # a records corpus's suites are records-*: `all` takes the ones the benchmarks stage wrote
    records = tmp_path / "records/benchmarks"
    _write(records / "records-single.jsonl", "Four?")
    assert list(load_benchmarks(_params("eval.suites=all").eval, records, tmp_path)) == ["records-single"]
    assert list(load_benchmarks(_params("eval.suites=[records-single]").eval, records, tmp_path)) == [
        "records-single"]


def test_evaluate_reads_exactly_the_model_stages_eval_models_names():
    """A model stage is named by its stage name wherever a model is chosen (`eval.models`, `rl.init`,
    `searchlab ask --model`); evaluate reads the outputs of those it names, and no other."""
    from tasks.registry import STAGES
    from tasks.sources import MODEL_STAGES

    assert set(MODEL_STAGES) == {s.name for s in STAGES if s.registers is not None} | {"base"}
    assert STAGE.needs(_params("eval.models=[sft, rl, selfplay]")) == ("index", "benchmarks", "sft", "rl", "selfplay")
    assert STAGE.needs(_params("eval.models=[base]")) == ("index", "benchmarks", "base")
    assert STAGE.needs(_params("eval.models=[base, models/x]", "eval.suites=[]")) == ("index", "base")


def test_a_question_too_long_for_the_model_is_refused_before_any_episode_naming_its_line(tmp_path):
    from searchlab.eval.inputs import check_lengths
    from searchlab.model.bootstrap import bootstrap_tiny
    from searchlab.params import TinyModelParams
    from searchlab.questions.formats import load_benchmark

    spec = TinyModelParams(vocab_size=300, hidden_size=16, layers=1, heads=2, kv_heads=1, intermediate_size=16,
                           max_positions=1024)
    bootstrap_tiny(spec, ["Who founded the city of Kelmora, and when?"] * 20, tmp_path / "model")
    path = _write(tmp_path / "mine.jsonl", "Who founded Kelmora?", "Who founded " + "the old city of " * 40 + "?")
    mine = load_benchmark(path, "mine")
    params = _params("rollout.max_turns=4")  # an episode may add 4 x 48 + 3 x 160 = 672 tokens to its prompt
    with pytest.raises(ValueError, match=rf"1 question\(s\) too long for model sft: {path}: line 2 \(\d+ tokens\)"):
        check_lengths({"mine": mine}, {"sft": tmp_path / "model"}, params)
    check_lengths({"mine": mine[:1]}, {"sft": tmp_path / "model"}, params)  # the short one fits


def test_a_benchmark_whose_evidence_the_index_lacks_is_refused_naming_the_counts(tmp_path):
    from searchlab.eval.inputs import indexed_ids
    from searchlab.eval.run import check_evidence
    from searchlab.questions.formats import load_benchmark
    from searchlab.retrieval.docstore import DocStoreWriter

    with DocStoreWriter(tmp_path / "index/docstore") as store:
        for doc in ("kelmora-0", "kelmora-1", "halkrelt-0"):
            store.add(doc, f"passage {doc}")
    path = tmp_path / "mine.jsonl"
    records = [{"id": "a", "question": "Who founded Kelmora?", "golden_answers": ["x"],
                "metadata": {"evidence": ["kelmora-0", "kelmora-1"]}},
               {"id": "b", "question": "When was Halkrelt built?", "golden_answers": ["y"],
                "metadata": {"evidence": ["halkrelt-0"]}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    mine = load_benchmark(path, "mine")
    check_evidence({"mine": mine}, lambda: indexed_ids(tmp_path / "index"), tmp_path / "index")  # all indexed
    other = tmp_path / "other"  # an index of another corpus: one of the three passages
    with DocStoreWriter(other / "docstore") as store:
        store.add("kelmora-0", "passage")
    with pytest.raises(ValueError, match=rf"2 of the 3 evidence passages that benchmark mine \({path}\) lists are "
                                         rf"not in the index {other}"):
        check_evidence({"mine": mine}, lambda: indexed_ids(other), other)
    read = []  # a benchmark without evidence (questions from files) costs no read of the index
    check_evidence({"plain": [replace(q, metadata={}) for q in mine]}, lambda: read.append(1) or set(), other)
    assert read == []


def test_where_the_retriever_listens_and_its_threads_rebuild_nothing(tmp_path):
    from tasks.dvc import render_dvc_yaml

    def fingerprint_of(*overrides):
        return fingerprint(fingerprint_inputs(SFT_STAGE, _params(*overrides), tmp_path, UPSTREAM))

    same = fingerprint_of()
    for override in ("retriever.port=9001", "retriever.host=0.0.0.0", "retriever.threads=8",
                     "retriever.max_queries=16"):
        assert fingerprint_of(override) == same, override
    assert fingerprint_of("retriever.k1=1.2") != same  # a BM25 parameter changes what is retrieved
    # DVC tracks the same keys: the section's but the execution fields
    sft = yaml.safe_load(render_dvc_yaml(_params(), REPO))["stages"]["sft"]["params"][0]["params.yaml"]
    assert "retriever.k1" in sft and "retriever.port" not in sft and "retriever.threads" not in sft
    assert "model" in sft and "sft.logging_steps" not in sft  # a section without execution fields is tracked whole


def _another(value, spec):
    """A valid value of a field other than ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return round(value / 2, 3)
    return "0.0.0.0" if spec.annotation is str else value


def test_no_execution_field_of_any_section_changes_any_stage_s_fingerprint(tmp_path):
    from searchlab.config import execution_keys
    from searchlab.params import Params
    from tasks.registry import STAGES

    base = _params()
    changed = []
    for section, spec in Params.model_fields.items():
        fields = type(getattr(base, section)).model_fields
        for key in sorted(execution_keys(spec.annotation)):
            value = getattr(getattr(base, section), key)
            other = _another(value, fields[key])
            assert other != value, f"{section}.{key}: no other value to try"
            changed.append(f"{section}.{key}={json.dumps(other)}")
    # hosts, ports, request limits, thread counts, logging intervals, vLLM memory shares
    assert {"retriever.port", "sft.logging_steps", "rl.logging_steps", "rollout.vllm_gpu_memory_utilization",
            "selfplay.vllm_gpu_memory_utilization"} <= {c.partition("=")[0] for c in changed}
    for override in changed:
        other = _params(override)
        for stage in STAGES:
            upstream = {n: UPSTREAM[n] for n in stage.needs(base)}
            assert fingerprint(fingerprint_inputs(stage, other, tmp_path, upstream)) == \
                fingerprint(fingerprint_inputs(stage, base, tmp_path, upstream)), (stage.name, override)
