"""The project's structure in figures: packages, largest modules, long functions, functions of many parameters.

    python bench/structure.py                 # this checkout
    python bench/structure.py --repo DIR      # another checkout (e.g. a `git worktree` of an older commit)

Counts the Python files of the project's own packages (``searchlab``, ``tasks``, ``flows``) with the standard
library's ``ast``: a function's length is its lines from ``def`` (decorators excluded) to its last statement,
docstring included; its parameters are every named parameter except ``self`` and ``cls`` (``*args`` and
``**kwargs`` count one each). Nested functions and methods count as functions of their own.

Output: stdout only: one summary line, the packages, the largest modules, then the long functions and
those of many parameters, one per line with its path:line; writes no file.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("searchlab", "tasks", "flows")


@dataclass(frozen=True)
class Function:
    where: str  # path:line
    name: str
    lines: int
    parameters: int


def functions_of(path: Path, root: Path) -> list[Function]:
    """Every function and method defined in one file, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            named = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "cls")]
            count = len(named) + (args.vararg is not None) + (args.kwarg is not None)
            found.append(Function(f"{path.relative_to(root)}:{node.lineno}", node.name,
                                  node.end_lineno - node.lineno + 1, count))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--long", type=int, default=60, help="a function longer than this many lines is listed")
    parser.add_argument("--many", type=int, default=8, help="a function of more parameters than this is listed")
    parser.add_argument("--top", type=int, default=10, help="how many of the largest modules to list")
    args = parser.parse_args()
    root = args.repo.resolve()

    files = sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))
    packages = sorted({str(p.parent.relative_to(root)) for p in files if (p.parent / "__init__.py").exists()})
    sizes = sorted(((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(root))) for p in files),
                   reverse=True)
    functions = [f for p in files for f in functions_of(p, root)]
    long = sorted((f for f in functions if f.lines > args.long), key=lambda f: -f.lines)
    many = sorted((f for f in functions if f.parameters > args.many), key=lambda f: -f.parameters)

    print(f"{root}: {len(packages)} packages, {len(files)} modules, {sum(s for s, _ in sizes):,} lines, "
          f"{len(functions)} functions")
    print(f"packages: {', '.join(packages)}")
    print(f"largest modules: " + ", ".join(f"{name} {size}" for size, name in sizes[:args.top]))
    print(f"functions over {args.long} lines: {len(long)}")
    for f in long:
        print(f"  {f.lines:4d} lines  {f.name}  {f.where}")
    print(f"functions with more than {args.many} parameters: {len(many)}")
    for f in many:
        print(f"  {f.parameters:4d} params {f.name}  {f.where}")


if __name__ == "__main__":
    main()
