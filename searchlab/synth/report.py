"""The datasheet of a synthesis run: what was kept, what was rejected and why, and examples with their evidence."""

from __future__ import annotations

import random
from pathlib import Path

from searchlab.corpus.kb import KB
from searchlab.questions.record import BUCKETS, QUESTION_TYPES, QuestionRecord


def write_datasheet(path: Path, stats: dict, records: list[QuestionRecord], kb: KB, examples: int) -> None:
    """Write ``datasheet.md``: counts by type and difficulty bucket, rejections, retrieval resistance, examples."""
    lines = ["# QA synthesis datasheet", "",
             f"{stats['kept']} questions kept from {stats['candidates']} verified candidates "
             f"({stats['attempts']} attempts): {stats['train']} train, {stats['dev']} dev, "
             f"{stats['heldout']} held out for benchmarks; {stats['demos']} demonstrations.", "",
             f"Held-out answers that also answer a training question: **{stats['heldout_answer_overlap']}**.", "",
             "## Kept questions by type and difficulty", "",
             "| type | " + " | ".join(BUCKETS) + " | total | held out | answer passage in BM25 top 3 |",
             "|---|" + "---|" * (len(BUCKETS) + 3)]
    for t in QUESTION_TYPES:
        row = stats["by_type_bucket"].get(t, {})
        top3 = stats["answer_in_top3"].get(t)
        lines.append(f"| {t} | " + " | ".join(str(row.get(b, 0)) for b in BUCKETS)
                     + f" | {stats['by_type'].get(t, 0)} | {stats['heldout_by_type'].get(t, 0)} | "
                     + ("–" if top3 is None else f"{top3:.1%}") + " |")
    lines += ["", "## Rejections by reason", "", "| reason | count |", "|---|---|"]
    lines += [f"| {reason} | {n} |" for reason, n in sorted(stats["rejected"].items(), key=lambda x: -x[1])]
    lines += ["", "## Examples", ""]
    rng = random.Random(0)
    for t in QUESTION_TYPES:
        of_type = [r for r in records if r.type == t]
        for r in rng.sample(of_type, min(len(of_type), max(1, examples // len(QUESTION_TYPES)))):
            lines += [f"### {t}: {r.question}", "",
                      f"Answer: **{r.answers[0]}** · hops {r.hops} · bucket {r.bucket} · "
                      f"BM25 rank of the answer passage: {r.features['answer_rank'] or 'not in top'}", ""]
            for c in r.constraints:
                matches = f" (alone matches {c['matches']})" if c.get("matches") is not None else ""
                lines.append(f"- {c['label']}: {c['text']}{matches} — `{c['passage']}`: "
                             f"{_quote(kb.passages.get(c['passage'], ''))}")
            lines.append("")
    path.write_text("\n".join(lines) + "\n")


def _quote(contents: str) -> str:
    body = contents.partition("\n")[2]
    return "“" + (body if len(body) <= 160 else body[:157] + "…") + "”"
