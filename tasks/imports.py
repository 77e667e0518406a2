"""The project code a stage runs, derived from its imports: what its fingerprint and its DVC dependencies cover.

A stage's code is its own module (where its ``build`` function lives) and every
project module that module imports, directly or through others, at the top of a
file or inside a function (many imports are deferred to keep the CLI fast), with
the ``__init__.py`` of each package on the way (they run on import). A string
that names a project module counts too: that is how code starts one in a child
process (``python -m searchlab.retrieval.build_worker``, the training jobs under
``accelerate launch``). Nothing is listed by hand, so an edit of any code a
stage uses makes it stale.

The stage contract's own machinery (:data:`MACHINERY`) is left out: it decides
*whether* a stage runs, not what the stage writes. So are the section modules that
the params composite (:data:`COMPOSITE`) imports only to compose ``Params``
(``searchlab/rl/config.py``, ...): a stage's code covers a section's module when
the stage's own code imports it, and the values of every section the stage reads
enter its fingerprint as params. A description edit in the rl config therefore
makes rl and what reads rl stale, nothing upstream.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

PROJECT_PACKAGES = ("searchlab", "tasks")
MACHINERY = frozenset({"tasks.stage", "tasks.locking", "tasks.outputs", "tasks.resources", "tasks.run",
                       "tasks.registry"})
COMPOSITE = "searchlab.params"  # composes every section: its imports of section modules (*.config) are not followed


def module_file(name: str) -> Path | None:
    """The source file of module ``name`` (a package's ``__init__.py``), or None if there is no such module.

    Found on disk from the top-level package's folder, without importing anything below it (``find_spec`` of a
    submodule imports its parents, and some of them load torch).
    """
    top, _, rest = name.partition(".")
    folder = _package_folder(top)
    if folder is None:
        return None
    base = folder.joinpath(*rest.split(".")) if rest else folder
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def _package_folder(top: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin).parent if spec is not None and spec.origin and spec.origin.endswith("__init__.py") else None


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


@cache
def direct_imports(name: str, path: Path, packages: frozenset[str] = frozenset(PROJECT_PACKAGES)) -> set[str]:
    """The absolute names of the modules that module ``name`` (source ``path``) imports anywhere in its code, and of
    the modules of ``packages`` its string constants name (modules it runs as ``python -m``).

    ``from package import thing`` counts ``package.thing`` when that is a module, else ``package``.
    """
    package = name if _is_package(path) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if module_file(sub) is not None else base)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.partition(".")[0] in packages and node.value.replace(".", "").isidentifier()
              and module_file(node.value) is not None):
            found.add(node.value)
    return found


@cache
def project_modules(root_module: str) -> tuple[str, ...]:
    """Every project module that ``root_module`` runs when imported and called, itself included, sorted.

    Project modules are those of :data:`PROJECT_PACKAGES` and of ``root_module``'s own top-level package.
    """
    packages = frozenset({*PROJECT_PACKAGES, root_module.partition(".")[0]})
    seen: set[str] = set()
    todo = [root_module]
    while todo:
        name = todo.pop()
        if name in seen or name.partition(".")[0] not in packages or (name in MACHINERY and name != root_module):
            continue
        path = module_file(name)
        if path is None:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages' __init__.py run first
        imports = direct_imports(name, path, packages)
        if name == COMPOSITE:
            imports = {m for m in imports if not m.endswith(".config") or m == "searchlab.config"}
        todo += imports
    return tuple(sorted(seen))
