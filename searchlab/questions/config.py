"""The question-file entry of the params (``qa.files`` and ``eval.benchmarks`` hold one per file): which file, in
which of the field's formats, and how much of it. The formats are stated here once (:data:`BenchmarkFormat`) and
read by the readers (:mod:`searchlab.questions.formats`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from searchlab.config import Section


# The file shapes the readers of searchlab.questions.formats know (FORMATS there is this list without `auto`)
BenchmarkFormat = Literal["auto", "flashrag", "nq-open", "hotpotqa", "json", "search-r1"]


class QuestionFileParams(Section):
    """A file of labeled questions in one of the field's formats (read by
    :func:`searchlab.questions.formats.load_benchmark`): a benchmark to evaluate on, or training questions."""

    path: str = Field(description="the file, relative to the project root (or absolute); its content enters the "
                                  "fingerprint of the stage that reads it, so editing it reruns that stage")
    format: BenchmarkFormat = Field("auto", description="`flashrag` (JSONL `{id, question, golden_answers, "
                                                        "metadata}`), `nq-open` (JSONL `{question, answer}`), "
                                                        "`hotpotqa` (JSON list of `{_id, question, answer}`), `json` "
                                                        "(JSON list of `{question, answer or answers}`), `search-r1` "
                                                        "(Search-R1's verl rows, JSONL or Parquet), or `auto`: told "
                                                        "from the extension and the first record")
    sample: int | None = Field(None, ge=1, description="a seeded sample of this many questions; null: all")
    seed: int = Field(0, description="seed of the sample")
