"""The KB's fact checks and value indexes, and the built-in solvers, on hand-made and real worlds."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from searchlab.corpus.kb import KB
from searchlab.synth.config import SolverParams
from searchlab.synth.generate import Builder
from searchlab.synth.lexicon import fact_label
from searchlab.synth.solvers import Roster, RuleReader


def _write(folder, entities, passages):
    (folder / "kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entities))
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"id": i, "contents": c}) + "\n" for i, c in passages.items()))


def _fact(predicate, value, passage, text, kind="attribute"):
    return {"predicate": predicate, "value": value, "kind": kind, "passage": passage, "text": text}


def test_kb_keeps_only_facts_their_passage_states_and_indexes_values(tmp_path):
    _write(tmp_path, [
        {"id": "a", "type": "person", "name": "Ann Holm", "passages": ["a-0"],
         "facts": [_fact("birth_year", 1901, "a-0", "1901"),
                   _fact("death_year", 1950, "a-0", "1950"),  # the passage does not say so: dropped
                   _fact("born_in", "c", "a-0", "Kelmora", "relation"),
                   _fact("child_of", "zz", "a-0", "Nobody", "relation")]},  # no such entity: dropped
        {"id": "b", "type": "person", "name": "Bo Holm", "passages": ["b-0"],
         "facts": [_fact("birth_year", 1909, "b-0", "1909"), _fact("born_in", "c", "b-0", "Kelmora", "relation")]},
        {"id": "c", "type": "city", "name": "Kelmora", "passages": ["c-0"], "facts": []},
    ], {"a-0": '"Ann Holm"\nAnn Holm was born in 1901 in Kelmora.', "b-0": '"Bo Holm"\nBo Holm (born 1909), Kelmora.',
        "c-0": '"Kelmora"\nKelmora is a town.'})
    kb = KB.load(tmp_path)
    assert set(kb["a"].facts) == {"birth_year", "born_in"}
    assert sorted(kb.matching("born_in", "c")) == ["a", "b"]
    assert kb.in_range("birth_year", 1900, 1905) == ["a"] and kb.range_bounds("birth_year", 1900, None) == (0, 2)
    assert fact_label(kb["a"].one("birth_year")) == "temporal" and fact_label(kb["a"].one("born_in")) == "spatial"
    assert kb.passage_subject["b-0"] == "b" and kb.unique_name("a")


def test_kb_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="kb.jsonl"):
        KB.load(tmp_path)
    _write(tmp_path, [], {"x": '"X"\ny'})
    with pytest.raises(ValueError, match="kb.jsonl: the knowledge base is empty"):
        KB.load(tmp_path)


def _bridges(kb, n=30):
    builder = Builder(kb, random.Random(5))
    return [q for e in list(kb.entities)[:200] if (q := builder.build("bridge", e, e)) is not None][:n]


def test_rule_reader_answers_from_gold_evidence_but_not_from_the_first_hop_alone(kb):
    reader = RuleReader(kb)
    questions = _bridges(kb)
    gold = [reader.answer(q, q.evidence) for q in questions]
    assert sum(a == q.answers[0] for a, q in zip(gold, questions)) >= 0.9 * len(questions)
    first_hop = [reader.answer(q, q.evidence[:1]) for q in questions]
    assert sum(a == q.answers[0] for a, q in zip(first_hop, questions)) <= 0.2 * len(questions)


def test_closed_book_catches_a_leaked_answer_and_otherwise_guesses_a_prior(kb):
    reader = RuleReader(kb)
    q = _bridges(kb, 1)[0]
    leaked = replace(q, question=q.question + f" (hint: {q.answers[0]})")
    assert reader.guess(leaked) == q.answers[0]
    assert reader.guess(q) != q.answers[0] or q.answers[0] == reader._common_value.get(q.slot["predicate"])


def test_roster_reports_rates_per_solver_and_role(kb):
    questions = _bridges(kb, 10)
    roster = Roster([SolverParams(name="cb", role="closed_book"), SolverParams(name="g1", role="gold"),
                     SolverParams(name="shot", role="one_shot", topk=1)], kb)
    rates = roster.pass_rates(questions, [q.evidence[:1] for q in questions])
    for r in rates:
        assert set(r) == {"cb", "g1", "shot", "role:closed_book", "role:gold", "role:one_shot"}
        assert r["role:gold"] == r["g1"] and all(0.0 <= v <= 1.0 for v in r.values())
    assert sum(r["g1"] for r in rates) > sum(r["shot"] for r in rates)
