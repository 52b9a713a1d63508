"""Checks the layering rules of DESIGN.md on the source tree (run by .ci/run).

- ``engines`` and ``auth`` never import ``gateway``; ``engines.asr`` (its own
  process) imports nothing from ``gateway`` or ``auth``;
- no import cycles between modules, imports under ``if TYPE_CHECKING:``
  included: an annotation-only import still ties the two modules together (the
  cycle is in the design, whether Python runs it or not);
- no module of ``gateway`` or ``auth`` is longer than 400 lines.

Exit status 1 with one line per violation.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "engines", "auth")
MAX_LINES = 400
FORBIDDEN = {"engines": ("gateway",), "auth": ("gateway", "engines"), "engines.asr": ("gateway", "auth")}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` imports, anywhere in it (resolved to modules, not names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m.split(".")[0] in PACKAGES and m in known and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := walk(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := walk(start)) is not None:
            return cycle
    return None


def problems_in(root: Path) -> list[str]:
    """One line per violation in the tree at ``root``."""
    files = {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}
    known = set(files)
    graph = {name: imports_of(path, name, known) for name, path in files.items()}
    problems = []
    for name, deps in sorted(graph.items()):
        for prefix, banned in FORBIDDEN.items():
            if name == prefix or name.startswith(prefix + "."):
                problems += [f"{name} imports {dep} ({prefix} must not import {dep.split('.')[0]})"
                             for dep in sorted(deps) if dep.split(".")[0] in banned]
    # A package's __init__ importing its own submodules is how packages expose names;
    # only cycles between distinct modules matter.
    pruned = {n: {d for d in deps if not d.startswith(n + ".")} for n, deps in graph.items()}
    cycle = find_cycle(pruned)
    if cycle:
        problems.append("import cycle: " + " -> ".join(cycle))
    for name, path in sorted(files.items()):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if name.split(".")[0] in ("gateway", "auth") and lines > MAX_LINES:
            problems.append(f"{path.relative_to(root)} has {lines} lines (at most {MAX_LINES}; split it)")
    return problems


def main() -> int:
    problems = problems_in(ROOT)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
