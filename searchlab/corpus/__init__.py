"""The corpus stage: a synthetic encyclopedia, or an imported real corpus, as ``corpus.jsonl``.

Outputs (in ``out_dir``), all in the formats the field uses:

- ``corpus.jsonl``: one passage a line, ``{"id": "...", "contents": "\\"Title\\"\\ntext"}`` (Search-R1/FlashRAG);
- ``kb.jsonl`` (synthetic world and ``records`` imports): one entity a line with its facts,
  each pointing at the passage that states it (see :mod:`searchlab.corpus.world` and
  :mod:`searchlab.corpus.records`);
- ``queries.jsonl`` and ``qrels.tsv`` (BEIR imports only), in BEIR form.

>>> from searchlab.params import CorpusParams
>>> build_corpus(CorpusParams(), root=Path("."), out_dir=Path("/tmp/empty"))  # doctest: +SKIP
{'entities': 1000, 'passages': 3254, 'facts': 6415, 'skipped': 0}
"""

from __future__ import annotations

from pathlib import Path

from searchlab.corpus.importers import (
    import_beir,
    import_jsonl,
    import_parquet,
    split_contents,
)
from searchlab.corpus.records import import_records
from searchlab.corpus.world import generate_world
from searchlab.params import CorpusParams

__all__ = ["build_corpus", "generate_world", "import_beir", "import_jsonl", "import_parquet", "import_records",
           "split_contents"]

_IMPORTERS = {"jsonl": import_jsonl, "parquet": import_parquet, "beir": import_beir}


def build_corpus(params: CorpusParams, root: Path, out_dir: Path) -> dict[str, int]:
    """Fill the empty folder ``out_dir`` with the corpus ``params`` describes; return counts.

    Synthetic: ``{"entities", "passages", "facts", "skipped"}``; records: the same
    plus ``"missing_references"``. Other imports: ``{"passages", "skipped"}``
    (BEIR adds ``"queries"`` and ``"qrels"``).
    A relative ``params.path`` is taken from ``root`` (the repo root). Raises
    ``FileNotFoundError`` for a missing path, ``ValueError`` for an unreadable
    or empty corpus, and :class:`~searchlab.jsonl.RecordError` (a ``ValueError``
    naming file and line) for a malformed record when ``on_error`` is ``"fail"``.
    """
    out_dir = Path(out_dir)
    if params.source == "synthetic":
        return generate_world(params.world, out_dir)
    path = Path(params.path)
    if not path.is_absolute():
        path = Path(root) / path
    if params.source == "records":
        return import_records(path, out_dir, params.records, params.on_error)
    return _IMPORTERS[params.source](path, out_dir, params.on_error)
