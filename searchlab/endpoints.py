"""Which params reach outside the process: endpoint URLs, secret-bearing keys, remote code; and what a request changes.

Some params decide where data and credentials go: a solver's ``url`` with its
``api_key_env`` sends that environment variable's value to that URL,
``retriever.url`` sends every query out, ``tracking.mlflow_uri`` every metric.
A run requested by someone else (a Prefect deployment run) may use the params
that whoever served it chose, but must not point them elsewhere.
:func:`untrusted_changes` lists what a requested :class:`Params` introduces or
changes among those keys compared with the served one.

A key is guarded by its name, so that a key added to the schema later is covered
without a list to maintain: ``url``, ``uri``, ``*_url``, ``*_uri`` (endpoints),
``*_env`` (names an environment variable whose value is sent somewhere, e.g.
``api_key_env``) and ``trust_remote_code`` (runs code that comes with a model).

>>> untrusted_changes(load_params("params/default.yaml", ["retriever.url=http://x"]),
...                   load_params("params/default.yaml"))  # doctest: +SKIP
["retriever.url: 'http://x' (served: not set)"]
"""

from __future__ import annotations

from typing import Any

from searchlab.params import Params


def is_guarded(key: str) -> bool:
    """Whether a params key (its last part) is an endpoint, names a secret, or lets a model run its own code."""
    return key in ("url", "uri", "trust_remote_code") or key.endswith(("_url", "_uri", "_env"))


def guarded_values(params: Params) -> dict[str, Any]:
    """Every guarded key that is set (not None, not False), as ``dotted.key: value``.

    Entries of a list are named by their ``name`` where they have one
    (``qa.solvers[gpt].url``), so reordering a list changes nothing; by position otherwise.
    """
    found: dict[str, Any] = {}
    _collect(params.model_dump(mode="json"), "", found)
    return found


def untrusted_changes(requested: Params, served: Params) -> list[str]:
    """What ``requested`` sets among the guarded keys that ``served`` does not hold with the same value.

    Unsetting a guarded key (a solver removed, a URL set to null) is no change:
    it sends nothing anywhere. Each entry reads ``key: requested value (served: value)``.
    """
    allowed = guarded_values(served)
    return [f"{key}: {value!r} (served: {allowed[key]!r})" if key in allowed else
            f"{key}: {value!r} (served: not set)"
            for key, value in guarded_values(requested).items() if allowed.get(key, _MISSING) != value]


_MISSING = object()


def _collect(value: Any, prefix: str, found: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if is_guarded(str(key)):
                if item not in (None, False, "", {}, []):
                    found[name] = item
            else:
                _collect(item, name, found)
    elif isinstance(value, list):
        labels = [item.get("name") if isinstance(item, dict) else None for item in value]
        for position, (item, label) in enumerate(zip(value, labels)):
            # a name shared by two entries would let one hide the other: those go by position
            unique = isinstance(label, str) and labels.count(label) == 1
            _collect(item, f"{prefix}[{label if unique else position}]", found)
