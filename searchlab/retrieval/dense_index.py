"""Build the dense index: every docstore row encoded and stored in a FAISS inner-product index.

Layout of ``dense/``: ``index.faiss`` (``IndexFlatIP`` over unit vectors, so scores
are cosine similarities and search is exact; FAISS row ``i`` is docstore row ``i``)
and ``meta.json`` (encoder, dimension, count, max_length) so search encodes
queries with the same model.
"""

from __future__ import annotations

import json
from pathlib import Path

from searchlab.params import DenseIndexParams
from searchlab.progress import counter
from searchlab.retrieval.docstore import DocStore
from searchlab.retrieval.encoders import encode, load_encoder

INDEX_FILE = "index.faiss"
META_FILE = "meta.json"
CHUNK = 4096  # documents handed to the encoder at once (it sorts each chunk by length to pad less)


def build_dense_index(docstore: DocStore, out_dir: Path, params: DenseIndexParams) -> dict:
    """Encode all documents of ``docstore`` with ``params.encoder`` into ``out_dir``; return its meta."""
    import faiss

    out_dir.mkdir(parents=True, exist_ok=True)
    model = load_encoder(params.encoder, max_length=params.max_length)
    dim = model.get_embedding_dimension()
    index = faiss.IndexFlatIP(dim)
    n = len(docstore)
    with counter(total=n, desc="dense index", unit="doc") as bar:
        for start in range(0, n, CHUNK):
            texts = [contents for _, contents in docstore.get_many(range(start, min(start + CHUNK, n)))]
            index.add(encode(model, texts, params.batch_size))
            bar.update(len(texts))
    faiss.write_index(index, str(out_dir / INDEX_FILE))
    meta = {
        "encoder": params.encoder,
        "dim": int(dim),
        "documents": int(index.ntotal),
        "max_length": params.max_length,
        "metric": "inner_product_of_unit_vectors",
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return meta
