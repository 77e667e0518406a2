"""``docs/params.md``, generated from the params schema: one row per key, with its default and its description.

The schema (:mod:`searchlab.params`) is the single source: each field's ``description`` is its row's meaning,
each section class's docstring its section's introduction. ``searchlab params-doc`` writes the file,
``searchlab params-doc --check`` (and a test) fails when the committed file is not what the schema gives or when
a key has no description, so no key can go undocumented.

>>> from pydantic import BaseModel, Field
>>> class Example(BaseModel):
...     documented: int = Field(1, description="says what it does")
...     bare: int = 2
>>> undocumented_keys(Example)
['bare']
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from searchlab.params import Params

DOC_PATH = "docs/params.md"  # relative to the project root
DEMO_PROFILE = "params/default.yaml"
COMMAND = "searchlab params-doc"

# Hand-written pages that say more about a section than its rows can (relative to docs/).
SEE_ALSO: dict[str, str] = {
    "corpus": "importing a corpus, and your own semi-structured records: [own-data.md](own-data.md#importing-a-corpus)",
    "index": "the retriever and its indexes: [methods/retrieval.md](methods/retrieval.md)",
    "retriever": "the retriever and its server: [methods/retrieval.md](methods/retrieval.md); serving it to other "
                 "machines: [deploy.md](deploy.md#a-shared-retriever); its benchmarks: "
                 "[results/retrieval.md](results/retrieval.md)",
    "qa": "BMGQ-style question synthesis, filters, demonstrations: [methods/synthesis.md](methods/synthesis.md); "
          "your own labeled questions: [the README](../README.md#your-own-corpus-questions-and-model), its example "
          "profile measured: [results/own-data.md](results/own-data.md)",
    "model": "the tiny model, its tokenizer and pretraining: [methods/sft.md](methods/sft.md); a real pretrained "
             "model: [methods/smollm2.md](methods/smollm2.md)",
    "rollout": "the agent protocol and extractive answers: [methods/agent-protocol.md](methods/agent-protocol.md)",
    "sft": "SFT: [methods/sft.md](methods/sft.md), measured: [results/sft.md](results/sft.md)",
    "rl": "rewards, advantage estimators, curricula and the newer techniques: [methods/rl.md](methods/rl.md), "
          "measured: [results/rl.md](results/rl.md)",
    "selfplay": "search self-play: [methods/selfplay.md](methods/selfplay.md), measured: "
                "[results/selfplay.md](results/selfplay.md)",
    "eval": "systems, metrics, intervals and external benchmark files: [methods/evaluation.md](methods/evaluation.md)",
    "tracking": "MLflow naming and the registry: [reproducibility.md](reproducibility.md)",
}

INTRO = f"""\
# Params: every key

<!-- Generated from the params schema (searchlab/params.py and the section modules it composes: each field's
description, each section's docstring) by `{COMMAND}`: edit the schema, then run it. `{COMMAND} --check` and
tests/test_params_doc.py fail when this file is stale or a key has no description. -->

A params file (`params/default.yaml`, the embedded demo; `params/smoke.yaml`, a seconds-scale profile for tests;
their siblings) is YAML with one section per stage plus `tracking` and `runtime`. It may give any subset of keys:
the rest take the defaults below. With `extends: OTHER.yaml` (a path relative to the file) it starts from that
file instead and states only its differences: its sections are merged key by key into the other's, its lists and
values replace the other's whole. `extends: schema` (or no `extends:`) starts from the schema's defaults below.
A key written `!delete` removes what the file it extends sets there: an entry the child does not want
(`qa.files.geo: !delete`, `eval.benchmarks.geo-test: !delete`), or a setting, which then takes the schema's
default; `--set qa.files.geo=!delete` does the same for one run, and a `!delete` of a key no file above sets is an
error. Write it in block style (`geo: !delete` on a line of its own): inside `{...}` YAML reads the comma after it as
part of the tag. To drop an entry of a list, write the list without it (a list is replaced whole). An unknown or ill-typed key is an error that names it (with its file and line)
before anything runs. Only a stage's own sections enter its fingerprint, so changing `index` reruns `index` and
what depends on it, never `corpus`; keys marked *execution* say how a stage runs, not what it computes, and enter
no fingerprint. `searchlab run --set KEY=VALUE` (repeatable; `KEY` dotted, e.g. `--set rl.steps=10`, `VALUE`
read as YAML) overrides a key of the file for one run.

A default is the schema's; where the demo profile (`{DEMO_PROFILE}`) sets another value, it follows as
"(demo: ...)". In a key, `NAME` stands for a name of your choosing (`eval.benchmarks.NAME.path`) and `[]` for
each entry of a list (`qa.solvers[].role`).
"""


@dataclass(frozen=True)
class Key:
    """One params key: its dotted path, its field, and where its value lives."""

    path: str  # dotted, from the top (``rl.reward.metric``, ``eval.benchmarks.NAME.path``, ``qa.solvers[].role``)
    field: FieldInfo
    model: type[BaseModel] | None  # the section class of a key whose value is one
    concrete: bool  # the path leads to one value of the defaults (no NAME or [] on the way)


def iter_keys(schema: type[BaseModel] = Params, prefix: str = "", concrete: bool = True) -> Iterator[Key]:
    """Every key of ``schema`` in definition order, each section before its keys, into the sections of dict and
    list values too (``NAME`` and ``[]`` in their paths)."""
    for name, field in schema.model_fields.items():
        path = f"{prefix}{name}"
        section = field.annotation if _is_model(field.annotation) else None
        yield Key(path, field, section, concrete)
        if section is not None:
            yield from iter_keys(section, path + ".", concrete)
            continue
        for model, joint in _models_inside(field.annotation):
            yield from iter_keys(model, path + joint, False)


def undocumented_keys(schema: type[BaseModel] = Params) -> list[str]:
    """The dotted keys of ``schema`` (sections included) that have no description."""
    return [key.path for key in iter_keys(schema) if not (key.field.description or "").strip()]


def render_params_doc(demo: BaseModel | None = None, schema: type[BaseModel] = Params) -> str:
    """The markdown of ``docs/params.md``: the introduction, an overview of the sections, then per section its
    docstring and a ``| key | default | meaning |`` table; ``demo`` (the demo profile's params) adds its values
    where they differ from the defaults."""
    defaults = schema()
    out = [INTRO, "| section | what it sets |", "|---|---|"]
    for name, field in schema.model_fields.items():
        out.append(f"| [`{name}`](#{name}) | {_cell(field.description)} |")
    for name, field in schema.model_fields.items():
        section = field.annotation
        out += ["", f"## `{name}`", ""]
        if _is_model(section) and section.__doc__:
            out += [_markdown(inspect.cleandoc(section.__doc__)), ""]
        if name in SEE_ALSO:
            out += [f"More: {SEE_ALSO[name]}.", ""]
        out += ["| key | default | meaning |", "|---|---|---|"]
        for key in iter_keys(section, f"{name}.") if _is_model(section) else ():
            out.append(_row(key, name, defaults, demo))
    return "\n".join(out) + "\n"


def _row(key: Key, section: str, defaults: BaseModel, demo: BaseModel | None) -> str:
    short = key.path[len(section) + 1:]
    if key.model is not None:
        default = "section"
    elif key.concrete:
        value = _lookup(defaults, key.path)
        default = f"`{_cell(inline(value))}`"
        if demo is not None:
            shown = _lookup(demo, key.path)
            if _plain(shown) != _plain(value):
                default += f" (demo: `{_cell(inline(shown))}`)"
    elif key.field.is_required():
        default = "(required)"
    else:
        default = f"`{_cell(inline(key.field.get_default(call_default_factory=True)))}`"
    meaning = _markdown((key.field.description or "").strip())
    choices = _choices(key.field.annotation)
    if choices:
        values, many = choices
        if not all(re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", meaning) for v in values):
            meaning += f" ({'any' if many else 'one'} of {', '.join(f'`{v}`' for v in values)})"
    if isinstance(key.field.json_schema_extra, dict) and key.field.json_schema_extra.get("execution"):
        meaning += " (*execution*)"
    return f"| `{short}` | {default} | {_cell(meaning)} |"


def inline(value: Any) -> str:
    """A value as compact YAML flow text: ``null``, ``true``, ``[a, b]``, ``{k: v}``; a section inside a list or
    dict gives only the keys it sets to other than their defaults."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        plain = value and not re.search(r"[\s,\[\]{}:#&*!|>'\"%@`]", value) and yaml.safe_load(value) == value
        return value if plain else json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{inline(k)}: {inline(v)}" for k, v in value.items()) + "}"
    return inline(str(value))


def _lookup(params: BaseModel, path: str) -> Any:
    value: Any = params
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _plain(value: Any) -> Any:
    """A value as JSON data, for comparing a demo value with a default."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _models_inside(annotation: Any) -> Iterator[tuple[type[BaseModel], str]]:
    """The section classes held in a dict (path joint ``.NAME.``) or list (``[].``) annotation, also in unions."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict and len(args) == 2:
        joint, inner = ".NAME.", args[1]
    elif origin is list and args:
        joint, inner = "[].", args[0]
    else:
        for arg in args:  # a union: str | list[...], X | None
            yield from _models_inside(arg)
        return
    for arg in get_args(inner) if get_origin(inner) is not None else (inner,):  # list[str | Model]: a union inside
        if _is_model(arg):
            yield arg, joint


def _choices(annotation: Any) -> tuple[list[str], bool] | None:
    """The values of a Literal annotation, ``(values, False)``, or of a list of them, ``(values, True)``; None for
    any other type (``str | list[...]``, dicts keyed by a Literal)."""
    if get_origin(annotation) is Literal:
        return [str(v) for v in get_args(annotation)], False
    if get_origin(annotation) is list:
        inner = get_args(annotation)
        if inner and get_origin(inner[0]) is Literal:
            return [str(v) for v in get_args(inner[0])], True
        return None
    literals = [a for a in get_args(annotation) if get_origin(a) is Literal]
    others = [a for a in get_args(annotation) if get_origin(a) is not Literal and a is not type(None)]
    if literals and not others:  # Literal[...] | None
        return [str(v) for lit in literals for v in get_args(lit)], False
    return None


def _markdown(text: str) -> str:
    """reST markup of the docstrings (````code````, ``:func:`x```) as markdown; a bare ``<tag>`` as code."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = re.sub(r"(<[a-z/][^<>\s]*>)", r"`\1`", parts[i])
    return "`".join(parts)


def _cell(text: str | None) -> str:
    """Text that fits one table cell: one line, pipes escaped."""
    return " ".join((text or "").split()).replace("|", "\\|")
