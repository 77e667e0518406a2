"""Audit a sample of synthesized questions against the KB by brute force (run by hand, not a test).

    python bench/qa_audit.py                 # 50 questions sampled from data/qa (train, dev and held out)
    python bench/qa_audit.py --n 200 --data data

For each sampled question it re-derives, scanning every entity rather than using
the generator's indexes: whether the answer is unique in the KB (a chain's steps
each have one value; a comparison's values differ; exactly one entity satisfies
all of an oblique question's cues), and whether every constraint is matched to a
passage that is its subject's and states its value.

Output: stdout only: the sample's size and types, then the share whose answer is unique and the share whose
constraints each match a passage; writes no file.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from searchlab.corpus.kb import KB, passage_states
from searchlab.questions.record import QuestionRecord, read_questions


def _satisfies(kb: KB, entity, c: dict) -> bool:
    for f in entity.facts.get(c["predicate"], ()):
        if c["op"] == "eq" and f.value == c["value"]:
            return True
        if c["op"] == "range" and f.numeric and (c["low"] is None or f.value >= c["low"]) and (
                c["high"] is None or f.value < c["high"]):
            return True
        if c["op"] == "via" and f.relation and any(g.value == c["via"]["value"]
                                                     for g in kb[f.value].facts.get(c["via"]["predicate"], ())):
            return True
    return False


def unique_answer(kb: KB, q: QuestionRecord) -> bool:
    """Re-derive the question's answer from the KB by scanning, and check it is the only one."""
    cs = q.constraints
    if q.type == "oblique":
        target = kb[q.answer_entity]
        found = [e.id for e in kb.entities.values() if e.type == target.type and all(_satisfies(kb, e, c) for c in cs)]
        return found == [target.id]
    if q.type == "compare":
        a, b = (kb[e].facts[q.compare["predicate"]] for e in q.compare["options"])
        if len(a) != 1 or len(b) != 1 or a[0].value == b[0].value:
            return False
        larger = q.compare["options"][0] if a[0].value > b[0].value else q.compare["options"][1]
        smaller = q.compare["options"][1] if larger == q.compare["options"][0] else q.compare["options"][0]
        return kb[larger if q.compare["direction"] == "max" else smaller].name == q.answers[0]
    named = [e for e in kb.entities.values() if e.name == kb[q.mentions[0]].name]
    if len(named) != 1:
        return False
    entity = named[0]
    for c in cs:
        facts = entity.facts.get(c["predicate"], [])
        if len(facts) != 1 or facts[0].value != c["value"]:
            return False
        entity = kb[c["value"]] if facts[0].relation and c is not cs[-1] else entity
    return kb.value_text(facts[0]) == q.answers[0]


def matched(kb: KB, q: QuestionRecord) -> bool:
    checks = [(c["subject"], c["passage"], c["value_text"]) for c in q.constraints]
    checks += [(c["via"]["subject"], c["via"]["passage"], c["via"]["value_text"]) for c in q.constraints if c["via"]]
    return all(passage_states(kb.passages.get(p), kb[s].name, text) for s, p, text in checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    kb = KB.load(args.data / "corpus")
    kept = [r for name in ("train.jsonl", "dev.jsonl", "heldout.jsonl")
            for r in read_questions(args.data / "qa" / name)]
    sample = random.Random(args.seed).sample(kept, min(args.n, len(kept)))
    unique = sum(unique_answer(kb, q) for q in sample)
    evidence = sum(matched(kb, q) for q in sample)
    types = sorted({q.type for q in sample})
    by_type = ", ".join(f"{t} {sum(q.type == t for q in sample)}" for t in types)
    print(f"sample of {len(sample)} kept questions ({by_type}):")
    print(f"  answer unique in the KB (brute-force scan): {unique}/{len(sample)} = {unique / len(sample):.0%}")
    print(f"  every constraint matched to a passage that states it: {evidence}/{len(sample)} = "
          f"{evidence / len(sample):.0%}")


if __name__ == "__main__":
    main()
