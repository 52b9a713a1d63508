"""Checks the layering rules of DESIGN.md on the source tree (run by .ci/run).

- ``engines`` and ``auth`` never import ``gateway``; ``engines.asr`` (its own
  process) imports nothing from ``gateway`` or ``auth``;
- no import cycles between modules, imports under ``if TYPE_CHECKING:``
  included: an annotation-only import still ties the two modules together (the
  cycle is in the design, whether Python runs it or not);
- no module of ``gateway``, ``engines`` or ``auth`` is longer than 300 lines,
  unless its module docstring says why in a sentence that starts
  "Longer than 300 lines" and gives the reason after a colon
  ("Longer than 300 lines on purpose: the four tasks share one queue.").

Exit status 1 with one line per violation.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "engines", "auth")
MAX_LINES = 300
# The note's sentence starts the docstring, a line or follows another sentence;
# a colon and the reason come before the sentence ends.
LENGTH_NOTE = re.compile(r"(?:\A|\n|[.!?]\s)\s*Longer than 300 lines\b[^.:]*:\s*\S")
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


def says_why_it_is_long(source: str) -> bool:
    """Whether the module docstring of ``source`` carries the "Longer than 300 lines: why" note."""
    docstring = ast.get_docstring(ast.parse(source), clean=True)
    return docstring is not None and LENGTH_NOTE.search(docstring) is not None


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
    for _, path in sorted(files.items()):
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_LINES and not says_why_it_is_long(source):
            problems.append(f"{path.relative_to(root).as_posix()} has {lines} lines (at most {MAX_LINES}: "
                            "split it at its second concept, or say why in its module docstring "
                            "with a sentence starting 'Longer than 300 lines: ...')")
    return problems


def main() -> int:
    problems = problems_in(ROOT)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
