"""Which params are endpoints or secret-bearing, and what a requested params object changes among them."""

from __future__ import annotations

import pytest

from searchlab.endpoints import guarded_values, is_guarded, untrusted_changes
from searchlab.params import load_params
from tests.conftest import REPO

DEFAULT = REPO / "params/default.yaml"
OPENAI = ("qa.solvers=[{name: gold-reader, role: gold}, {name: gpt, role: closed_book, backend: openai, model: m, "
          "url: 'http://127.0.0.1:8001/v1', api_key_env: OPENAI_API_KEY}]")


def _params(*overrides: str):
    return load_params(DEFAULT, list(overrides))


@pytest.mark.parametrize("key, guarded", [
    ("url", True), ("prefect_api_url", True), ("mlflow_uri", True), ("api_key_env", True),
    ("trust_remote_code", True), ("model", False), ("host", False), ("environment", False), ("path", False),
])
def test_keys_are_guarded_by_name(key, guarded):
    assert is_guarded(key) is guarded


def test_the_shipped_params_files_set_no_guarded_key():
    assert guarded_values(_params()) == {}
    assert guarded_values(load_params(REPO / "params/smoke.yaml")) == {}


def test_list_entries_go_by_name_and_only_set_values_count():
    assert guarded_values(_params(OPENAI, "retriever.url=null", "model.trust_remote_code=true")) == {
        "qa.solvers[gpt].url": "http://127.0.0.1:8001/v1", "qa.solvers[gpt].api_key_env": "OPENAI_API_KEY",
        "model.trust_remote_code": True}


@pytest.mark.parametrize("override, change", [
    ("retriever.url=http://evil.example/retrieve", "retriever.url: 'http://evil.example/retrieve' (served: not set)"),
    ("tracking.mlflow_uri=http://evil.example", "tracking.mlflow_uri: 'http://evil.example' (served: not set)"),
    ("runtime.prefect_api_url=http://evil.example/api",
     "runtime.prefect_api_url: 'http://evil.example/api' (served: not set)"),
    ("model.trust_remote_code=true", "model.trust_remote_code: True (served: not set)"),
])
def test_a_request_may_not_introduce_an_endpoint_or_remote_code(override, change):
    assert untrusted_changes(_params(override), _params()) == [change]


def test_a_request_may_not_point_a_served_key_elsewhere_or_send_another_secret():
    served = _params(OPENAI)
    other_url = OPENAI.replace("127.0.0.1:8001", "evil.example")
    assert untrusted_changes(_params(other_url), served) == [
        "qa.solvers[gpt].url: 'http://evil.example/v1' (served: 'http://127.0.0.1:8001/v1')"]
    other_secret = OPENAI.replace("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY")
    assert untrusted_changes(_params(other_secret), served) == [
        "qa.solvers[gpt].api_key_env: 'AWS_SECRET_ACCESS_KEY' (served: 'OPENAI_API_KEY')"]
    # the served endpoint under another solver's name is a new pairing too
    renamed = OPENAI.replace("name: gpt", "name: gpt2")
    assert len(untrusted_changes(_params(renamed), served)) == 2


def test_what_the_served_params_hold_may_be_kept_reordered_removed_or_varied_elsewhere():
    served = _params(OPENAI, "retriever.url=http://127.0.0.1:8000/retrieve")
    assert untrusted_changes(served, served) == []
    reordered = ("qa.solvers=[{name: gpt, role: closed_book, backend: openai, model: other-model, "
                 "url: 'http://127.0.0.1:8001/v1', api_key_env: OPENAI_API_KEY, temperature: 0.7}, "
                 "{name: gold-reader, role: gold}]")
    assert untrusted_changes(_params(reordered, "retriever.url=http://127.0.0.1:8000/retrieve",
                                     "corpus.world.seed=5"), served) == []
    assert untrusted_changes(_params(), served) == []  # no solver endpoint, the local index: nothing sent anywhere
