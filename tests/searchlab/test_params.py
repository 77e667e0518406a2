"""The params schema: both shipped profiles validate; bad keys and values are named with file and line."""

from pathlib import Path

import pytest

from searchlab.params import ParamsError, flatten, key_origins, load_params
from searchlab.rl.config import RLParams

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
    ("eval.models=[sft, {source: rl, systems: []}]", r"eval.models.1.systems: name at least one"),
    ("eval.models=[sft, {source: rl, systems: [agent, agent]}]", r"eval.models.1.systems: each system once"),
    # a list the profile file sets, replaced by the --set: the --set is at fault, not the file's line
    ("rl.curriculum=[sec, bogus]", r"rl.curriculum.1 \(from --set rl.curriculum=\[sec, bogus\]\): Input should be"),
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
    # the demo runs the one-turn baselines for sft alone: the trained agents are compared as agents
    assert default.model_systems() == {"sft": ["direct", "rag", "agent"], "rl": ["agent"], "selfplay": ["agent"]}
    smoke = load_params(REPO / "params/smoke.yaml").eval
    assert smoke.sample <= 3 and smoke.resamples <= 500


def test_eval_models_are_named_by_their_source_or_explicitly():
    params = load_params(REPO / "params/smoke.yaml", [
        "eval.models=[sft, /models/Qwen2.5-0.5B/, 'models:/searchlab-agent@best', {name: base, source: /models/sft}]"])
    assert params.eval.model_sources() == {"sft": "sft", "Qwen2.5-0.5B": "/models/Qwen2.5-0.5B/",
                                           "searchlab-agent.best": "models:/searchlab-agent@best",
                                           "base": "/models/sft"}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_child_overriding_one_nested_key_keeps_its_parent_s_siblings(tmp_path):
    _write(tmp_path / "base.yaml", "rl:\n  steps: 7\n  reward: {metric: f1, format_penalty: 0.3}\nindex:\n  threads: 3\n")
    child = _write(tmp_path / "child.yaml", "extends: base.yaml\nrl:\n  reward:\n    format_penalty: 0.5\n")
    params = load_params(child)
    assert params.rl.reward.format_penalty == 0.5
    assert params.rl.reward.metric == "f1" and params.rl.steps == 7 and params.index.threads == 3


def test_lists_and_scalars_replace_the_parent_s_whole(tmp_path):
    _write(tmp_path / "base.yaml", "rl:\n  curriculum: [sec, noise]\neval:\n  systems: [direct, rag, agent]\n")
    child = _write(tmp_path / "child.yaml", "extends: base.yaml\nrl:\n  curriculum: [difficulty]\n"
                                            "eval:\n  systems: [agent]\n")
    params = load_params(child)
    assert params.rl.curriculum == ["difficulty"] and params.eval.systems == ["agent"]


def test_a_two_level_chain_with_paths_relative_to_each_file_and_overrides_last(tmp_path):
    _write(tmp_path / "grand.yaml", "index:\n  threads: 3\nretriever:\n  topk: 5\nrl:\n  steps: 11\n")
    _write(tmp_path / "sub/parent.yaml", "extends: ../grand.yaml\nretriever:\n  topk: 4\nrl:\n  num_generations: 6\n")
    child = _write(tmp_path / "sub/child.yaml", "extends: parent.yaml\nrl:\n  steps: 12\n")
    params = load_params(child, ["index.threads=1"])
    assert (params.index.threads, params.retriever.topk, params.rl.steps, params.rl.num_generations) == (1, 4, 12, 6)
    assert load_params(child).index.threads == 3


def test_extends_schema_or_none_starts_from_the_schema_s_defaults(tmp_path):
    plain = load_params(_write(tmp_path / "plain.yaml", "index:\n  threads: 3\n"))
    for value in ("schema", "null"):
        assert load_params(_write(tmp_path / f"{value}.yaml", f"extends: {value}\nindex:\n  threads: 3\n")) == plain


def test_a_bad_key_in_the_parent_is_named_with_the_parent_s_file_and_line(tmp_path):
    parent = _write(tmp_path / "parent.yaml", "index:\n  threads: 2\n  dense:\n    enabeld: true\n")
    child = _write(tmp_path / "child.yaml", "extends: parent.yaml\n\nindex:\n  threads: 1\nretriever:\n  topk: many\n")
    with pytest.raises(ParamsError) as err:
        load_params(child)
    assert f"{parent}: index.dense.enabeld (line 4): unknown key" in str(err.value)
    assert f"{child}: retriever.topk (line 6): " in str(err.value)  # the child's own keys: the child's lines


def test_a_bad_value_the_child_replaces_is_no_longer_the_parent_s(tmp_path):
    parent = _write(tmp_path / "parent.yaml", "retriever:\n  topk: 3\n  max_topk: 5\n")
    child = _write(tmp_path / "child.yaml", "extends: parent.yaml\nretriever:\n  topk: 9\n")
    with pytest.raises(ParamsError) as err:  # a cross-field check of a section both write: the child's line
        load_params(child)
    assert f"{child}: retriever (line 2): retriever.topk (9) is over retriever.max_topk (5)" in str(err.value)
    _write(tmp_path / "parent.yaml", "eval:\n  benchmarks: {mine: {path: x.jsonl, format: flashrg}}\n")
    _write(tmp_path / "child.yaml", "extends: parent.yaml\neval:\n  benchmarks: 3\n")
    with pytest.raises(ParamsError) as err:
        load_params(child)
    assert f"{child}: eval.benchmarks (line 3)" in str(err.value) and str(parent) not in str(err.value)


def test_a_cycle_is_an_error_naming_the_files(tmp_path):
    a = _write(tmp_path / "a.yaml", "extends: b.yaml\n")
    b = _write(tmp_path / "b.yaml", "index:\n  threads: 1\nextends: a.yaml\n")
    with pytest.raises(ParamsError) as err:
        load_params(a)
    assert f"{b}: extends (line 3): params files extend each other in a cycle: {a} extends {b} extends {a}" \
           in str(err.value)
    itself = _write(tmp_path / "self.yaml", "extends: self.yaml\n")
    with pytest.raises(ParamsError, match="cycle: .*self.yaml extends .*self.yaml"):
        load_params(itself)


def test_a_missing_parent_is_an_error_naming_both_files(tmp_path):
    child = _write(tmp_path / "child.yaml", "# a comment\nextends: nosuch.yaml\n")
    with pytest.raises(ParamsError) as err:
        load_params(child)
    assert f"{child}: extends (line 2): {tmp_path / 'nosuch.yaml'}: no such params file" in str(err.value)
    _write(tmp_path / "child.yaml", "extends: [a.yaml]\n")
    with pytest.raises(ParamsError, match=r"child.yaml: extends \(line 1\): expected the params file"):
        load_params(child)


def test_errors_in_a_parent_file_name_it(tmp_path):
    _write(tmp_path / "parent.yaml", "rl:\n  steps: 2\n  steps: 3\n")
    child = _write(tmp_path / "child.yaml", "extends: parent.yaml\n")
    with pytest.raises(ParamsError, match=r"parent.yaml: a key is written twice.*\n  rl.steps: line 2 and line 3"):
        load_params(child)


def test_extends_cannot_come_from_an_override(tmp_path):
    _write(tmp_path / "other.yaml", "index:\n  threads: 3\n")
    with pytest.raises(ParamsError, match=r"extends \(from --set extends=other.yaml\): unknown key"):
        load_params(_write(tmp_path / "p.yaml", "index:\n  threads: 1\n"), ["extends=other.yaml"])


@pytest.mark.parametrize("name, parent", [("smollm2.yaml", "default.yaml"), ("smoke.yaml", "default.yaml"),
                                          ("gpu-qwen2.5-3b.yaml", "schema"),
                                          ("own-data.yaml", "schema")])
def test_the_shipped_profiles_state_their_differences(name, parent):
    import yaml

    raw = yaml.safe_load((REPO / "params" / name).read_text())
    assert raw["extends"] == parent
    load_params(REPO / "params" / name)
    assert "extends" not in yaml.safe_load((REPO / "params/default.yaml").read_text())  # the demo: the schema's


@pytest.mark.parametrize("name", ["default.yaml", "smollm2.yaml", "smoke.yaml", "gpu-qwen2.5-3b.yaml", "own-data.yaml"])
def test_a_shipped_profile_writes_no_key_its_parent_already_gives(name):
    import yaml

    from searchlab.params import Params

    raw = yaml.safe_load((REPO / "params" / name).read_text())
    parent = raw.pop("extends", "schema")
    given = flatten((Params() if parent == "schema" else load_params(REPO / "params" / parent)).model_dump(mode="json"))
    same = [key for key, value in flatten(raw).items() if key in given and given[key] == value]
    assert same == [], f"params/{name} repeats what {parent} gives: drop these keys"


def test_key_origins_name_the_file_each_key_of_a_chain_comes_from(tmp_path):
    from searchlab.params import key_origins

    parent = _write(tmp_path / "parent.yaml", "rl:\n  steps: 3\n  curriculum: [sec]\n")
    child = _write(tmp_path / "child.yaml", "extends: parent.yaml\nrl:\n  steps: 4\n")
    assert key_origins(child) == {"rl": (child, 2), "rl.steps": (child, 3), "rl.curriculum": (parent, 3)}
    assert key_origins(tmp_path / "absent.yaml") == {}


def test_a_key_written_delete_removes_what_the_parent_sets_there(tmp_path):
    """A child of the own-data example drops its inherited question file and benchmark, and a setting the parent
    changed returns to the schema's default; the same works from --set."""
    import shutil

    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "params", tmp_path / "params")
    parent = load_params(tmp_path / "params/own-data.yaml")
    assert "geo" in parent.qa.files and "geo-test" in parent.eval.benchmarks
    child = _write(tmp_path / "params/mine.yaml", "extends: own-data.yaml\n"
                   "qa:\n  files:\n    geo: !delete\n    mine: {path: mine.jsonl}\n"
                   "eval:\n  benchmarks:\n    geo-test: !delete\n    mine-test: {path: mine-test.jsonl}\n"
                   "rl:\n  steps: !delete\n")
    params = load_params(child)
    assert list(params.qa.files) == ["mine"] and list(params.eval.benchmarks) == ["mine-test"]
    assert parent.rl.steps != RLParams().steps and params.rl.steps == RLParams().steps
    assert "qa.files.geo.path" not in key_origins(child)
    same = load_params(tmp_path / "params/own-data.yaml", ["qa.files.geo=!delete", "qa.files.mine.path=mine.jsonl",
                                                            "eval.benchmarks.geo-test=!delete",
                                                            "eval.benchmarks.mine-test.path=mine-test.jsonl",
                                                            "rl.steps=!delete"])
    assert same == params


def test_delete_of_a_key_no_parent_sets_is_refused_with_its_file_and_line(tmp_path):
    _write(tmp_path / "parent.yaml", "rl:\n  steps: 5\n")
    child = _write(tmp_path / "child.yaml", "extends: parent.yaml\nrl:\n  stepz: !delete\n")
    with pytest.raises(ParamsError, match=r"child.yaml: rl.stepz \(line 3\): !delete removes a key the file it "
                                          r"extends sets, but no file it extends sets rl.stepz"):
        load_params(child)
    alone = _write(tmp_path / "alone.yaml", "qa:\n  files:\n    geo: !delete\n")
    with pytest.raises(ParamsError, match=r"alone.yaml: qa.files.geo \(line 3\)"):
        load_params(alone)
    with pytest.raises(ParamsError, match=r"override 'rl.nope=!delete': !delete removes a key the params set, "
                                          r"but they do not set rl.nope"):
        load_params(tmp_path / "parent.yaml", ["rl.nope=!delete"])


def test_a_pretrained_model_s_fingerprint_leaves_the_tiny_model_out_and_an_imported_corpus_the_world():
    """Editing model.tiny for SmolLM2, or corpus.world for a JSONL corpus, changes no stage's fingerprint or DVC
    params; for the tiny model and the synthetic world it does."""
    own = load_params(Path("params/own-data.yaml"))
    edited = load_params(Path("params/own-data.yaml"), ["model.tiny.layers=3", "corpus.world.entities=99"])
    assert own.fingerprinted("model") == edited.fingerprinted("model") and "tiny" not in own.fingerprinted("model")
    assert own.fingerprinted("corpus") == edited.fingerprinted("corpus")
    assert "model.tiny" not in own.fingerprinted_keys("model") and "model.name_or_path" in own.fingerprinted_keys("model")
    assert "corpus.world" not in own.fingerprinted_keys("corpus")
    demo = load_params(Path("params/default.yaml"))
    tiny_edit = load_params(Path("params/default.yaml"), ["model.tiny.layers=3", "corpus.world.entities=99"])
    assert demo.fingerprinted("model") != tiny_edit.fingerprinted("model")
    assert demo.fingerprinted("corpus") != tiny_edit.fingerprinted("corpus")
    assert demo.fingerprinted_keys("model") == ["model"] and demo.fingerprinted_keys("corpus") == ["corpus"]


@pytest.mark.parametrize("override, message", [
    ("rl.steps=true", r"rl.steps \(from --set rl.steps=true\): Input should be a valid integer"),
    ("rl.steps=2.5", r"rl.steps \(from --set rl.steps=2.5\): Input should be a valid integer"),
    ("rollout.extractive_answers=1", r"rollout.extractive_answers \(from --set rollout.extractive_answers=1\): "
                                     r"Input should be a valid boolean"),
    ("qa.types.single=-0.2", r"qa.types: a share is 0 or more, got single \(-0.2\)"),
])
def test_values_are_checked_strictly_a_boolean_is_no_number_and_a_share_no_negative(override, message):
    with pytest.raises(ParamsError, match=message):
        load_params(Path("params/default.yaml"), [override])
    assert load_params(Path("params/default.yaml"), ["rl.learning_rate=1"]).rl.learning_rate == 1.0  # int for float


def test_a_value_a_set_replaced_is_blamed_on_the_set_with_one_line_per_problem():
    """The own-data profile writes eval.models; a --set that replaces it with a bad system is named, not the file's
    line, and the union's other member (a model named by a string) adds no line of its own."""
    with pytest.raises(ParamsError) as caught:
        load_params(Path("params/own-data.yaml"), ["eval.models=[{source: sft, systems: [bogus]}]"])
    assert str(caught.value).splitlines() == [
        "invalid params:",
        "  eval.models.0.systems.0 (from --set eval.models=[{source: sft, systems: [bogus]}]): Input should be "
        "'direct', 'rag', 'agent' or 'sampled', got 'bogus'"]
