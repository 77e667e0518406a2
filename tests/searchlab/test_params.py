"""The params schema: both shipped profiles validate; bad keys and values are named with file and line."""

from pathlib import Path
from typing import get_args

import pytest

from searchlab.params import ParamsError, flatten, load_params

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "params").glob("*.yaml")))
def test_shipped_profiles_validate(name):
    params = load_params(REPO / "params" / name)
    assert params.retriever.k1 == 0.9 and params.retriever.b == 0.4  # Anserini's BM25 defaults


def test_override_goes_through_schema_with_yaml_types():
    params = load_params(REPO / "params/smoke.yaml", ["index.threads=3", "retriever.url=null", "index.dense.enabled=true"])
    assert params.index.threads == 3 and params.index.dense.enabled is True and params.retriever.url is None


def test_unknown_key_in_file_names_key_and_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("index:\n  threads: 2\n  dense:\n    enabeld: true\n")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert f"{path}: index.dense.enabeld (line 4): unknown key" in str(err.value)


def test_a_key_written_twice_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("rl:\n  steps: 2\n  steps: 50\nsft:\n  epochs: 1\nrl:\n  learning_rate: 0.1\n")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert "rl.steps: line 2 and line 3" in str(err.value) and "rl: line 1 and line 6" in str(err.value)
    path.write_text("rl:\n  learning_rate: 0.1\nsft:\n  learning_rate: 0.2\n")  # one name in two sections is no duplicate
    assert load_params(path).rl.learning_rate == 0.1


def test_ill_typed_value_names_key_and_value(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("retriever:\n  topk: many\n")
    with pytest.raises(ParamsError, match=r"retriever.topk \(line 2\): .*integer.*'many'"):
        load_params(path)


@pytest.mark.parametrize("override, message", [
    ("retriever.topkk=3", r"retriever.topkk \(from --set retriever.topkk=3\): unknown key"),
    ("retriever.topk=0", r"retriever.topk \(from --set retriever.topk=0\): Input should be greater than or equal to 1"),
    ("retriever.topk", r"expected KEY=VALUE"),
    # a key the file lacks is the --set's fault, not the file's: no file name before it
    ("nosuch.key=1", r"invalid params:\n  nosuch \(from --set nosuch.key=1\): unknown key$"),
    # cross-field checks name both keys, the section's line and the --set that broke it
    ("retriever.max_topk=2", r"params/smoke.yaml: retriever \(line \d+, --set retriever.max_topk=2\): "
                             r"retriever.topk \(3\) is over retriever.max_topk \(2\)"),
    ("model.tiny.hidden_size=33", r"model.tiny \(line \d+, --set model.tiny.hidden_size=33\): "
                                  r"model.tiny.hidden_size 33 is not divisible by model.tiny.heads 2"),
    ("model.tiny.kv_heads=3", r"model.tiny.heads 2 is not divisible by model.tiny.kv_heads 3"),
    ("model.tiny.hidden_size=34", r"model.tiny.hidden_size / model.tiny.heads = 34 / 2 = 17 dimensions per head, "
                                  r"which must be even"),
    ("index.threads.x=1", r"index.threads is not a section"),
    # the eval section
    ("eval.systems=[direct, agnet]", r"eval.systems.1 .*: Input should be 'direct', 'rag', 'agent' or 'sampled', got 'agnet'"),
    ("eval.benchmarks.nq.format=flashrg", r"eval.benchmarks.nq.format \(from --set .*\): Input should be 'auto', 'flashrag'"),
    ("eval.benchmarks.nq.sample=0", r"eval.benchmarks.nq.path .*Field required"),
    ("eval.suites=[world-singel]", r"eval.suites: unknown suite\(s\) world-singel"),
    ("eval.benchmarks.world-single.path=x.jsonl", r"eval.benchmarks.world-single: the name of a built-in suite"),
    ("eval.benchmarks.a/b.path=x.jsonl", r"eval.benchmarks.a/b: a benchmark name may hold only"),
    ("eval.systems=[]", r"eval.systems: name at least one"),
    ("eval.systems=[rag, rag]", r"eval.systems: each system once"),
    ("eval.models=[sft, models:/agent]", r"eval.models.1: models:/agent: expected models:/NAME@ALIAS"),
    ("eval.models=[sft, /elsewhere/sft]", r"eval.models: two models are named 'sft'"),
])
def test_bad_override_is_named(override, message):
    with pytest.raises(ParamsError, match=message):
        load_params(REPO / "params/smoke.yaml", [override])


def test_a_model_shape_that_cannot_work_is_named_with_its_keys_and_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("model:\n  tiny:\n    hidden_size: 96\n    heads: 5\n")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert (f"{path}: model.tiny (line 2): model.tiny.hidden_size 96 is not divisible by model.tiny.heads 5"
            in str(err.value))


def test_import_source_requires_path():
    with pytest.raises(ParamsError, match="corpus.path is required"):
        load_params(REPO / "params/smoke.yaml", ["corpus.source=beir"])


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ParamsError, match="cannot read"):
        load_params(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("index: [1, 2\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(tmp_path / "bad.yaml")


def test_flatten():
    assert flatten({"a": {"b": 1, "c": {"d": None}}, "e": {}}) == {"a.b": 1, "a.c.d": None, "e": {}}


# ---------------------------------------------------------------- the eval section
def test_eval_defaults_and_the_smoke_profile_keeps_evaluation_tiny():
    default = load_params(REPO / "params/default.yaml").eval
    assert (default.suites, default.sample, default.benchmarks) == ("all", None, {})
    assert default.model_sources() == {"sft": "sft", "rl": "rl", "selfplay": "selfplay"} and default.systems == ["direct", "rag", "agent"]
    assert default.resamples == 2000
    smoke = load_params(REPO / "params/smoke.yaml").eval
    assert smoke.sample <= 3 and smoke.resamples <= 500


def test_eval_literals_match_the_evaluation_library():
    from searchlab.eval.benchmarks import FORMATS
    from searchlab.eval.systems import SYSTEMS
    from searchlab.params import BenchmarkFormat, EvalSystem

    assert get_args(BenchmarkFormat) == ("auto", *FORMATS) and get_args(EvalSystem) == SYSTEMS


def test_eval_models_are_named_by_their_source_or_explicitly():
    params = load_params(REPO / "params/smoke.yaml", [
        "eval.models=[sft, /models/Qwen2.5-0.5B/, 'models:/searchlab-agent@best', {name: base, source: /models/sft}]"])
    assert params.eval.model_sources() == {"sft": "sft", "Qwen2.5-0.5B": "/models/Qwen2.5-0.5B/",
                                           "searchlab-agent.best": "models:/searchlab-agent@best",
                                           "base": "/models/sft"}


def test_the_bucket_names_are_the_qa_stage_s():
    from typing import get_args

    from searchlab.params import Bucket
    from searchlab.synth.generate import BUCKETS

    assert get_args(Bucket) == BUCKETS
