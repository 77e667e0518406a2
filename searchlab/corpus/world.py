"""The synthetic world as files: ``corpus.jsonl`` (passages) and ``kb.jsonl`` (entities and facts).

:func:`generate_world` draws the entity graph (:mod:`~searchlab.corpus.entities`),
renders each entity into passages (:mod:`~searchlab.corpus.render`) and streams
both files to disk, one entity at a time.

Ids: entity ``e<i>`` is the i-th entity in corpus order; its passages are
``e<i>-0``, ``e<i>-1``, ... in section order (overview first). Both files list
entities in the same order, so ``corpus.jsonl`` is sorted by entity.

``kb.jsonl``, one line per entity::

    {"id": "e17", "type": "person", "subtype": "female", "name": "Selina Holm",
     "passages": ["e17-0", "e17-1", "e17-2", "e17-3"],
     "facts": [{"predicate": "birth_year", "value": 1843, "kind": "attribute",
                "passage": "e17-0", "text": "1843"},
               {"predicate": "born_in", "value": "e4", "kind": "relation",
                "passage": "e17-1", "text": "Kelmora"}, ...]}

``text`` is the exact string the passage contains for the fact (the related
entity's name, "1,234,567" for a count), so a question generator can quote it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from searchlab.corpus.entities import Entity, build_world
from searchlab.corpus.render import render
from searchlab.params import WorldParams
from searchlab.progress import track

_SUBTYPE = {"f": "female", "m": "male"}


def generate_world(params: WorldParams, out_dir: Path) -> dict[str, int]:
    """Write ``out_dir/corpus.jsonl`` and ``out_dir/kb.jsonl`` for ``params``; return counts.

    Same params give byte-identical files. Returns
    ``{"entities": ..., "passages": ..., "facts": ..., "skipped": 0}``.
    """
    world = build_world(params)
    # Text variation has its own stream, so tuning templates never changes the world's facts.
    rng = random.Random(f"{params.seed}/render")
    passages = facts = 0
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    with open(out_dir / "corpus.jsonl", "w", encoding="utf-8") as corpus, \
            open(out_dir / "kb.jsonl", "w", encoding="utf-8") as kb:
        for e in track(world.entities, total=len(world.entities), desc="world: passages", unit="entity"):
            head = f'"{e.name}"\n'
            ids, lines, kb_facts = [], [], []
            for k, (text, stated) in enumerate(render(e, rng)):
                pid = f"{e.id}-{k}"
                ids.append(pid)
                lines.append(dumps({"id": pid, "contents": head + text}))
                kb_facts.extend(_fact(predicate, value, surface, pid) for predicate, value, surface in stated)
            lines.append("")
            corpus.write("\n".join(lines))
            kb.write(dumps({"id": e.id, "type": e.type, "subtype": _SUBTYPE.get(e.kind, e.kind), "name": e.name,
                            "passages": ids, "facts": kb_facts}))
            kb.write("\n")
            passages += len(ids)
            facts += len(kb_facts)
    return {"entities": len(world.entities), "passages": passages, "facts": facts, "skipped": 0}


def _fact(predicate: str, value, surface: str, passage: str) -> dict:
    if isinstance(value, Entity):
        return {"predicate": predicate, "value": value.id, "kind": "relation", "passage": passage, "text": surface}
    return {"predicate": predicate, "value": value, "kind": "attribute", "passage": passage, "text": surface}
