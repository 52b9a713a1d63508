"""Every file and module the docs and the docstrings name exists.

The user docs (docs/, README.md) and the docstrings and comments of the code
name files (``gateway/dictation/session.py``, ``docs/audio.md``) and modules
(``engines.asr.tuning``); a module that is moved or split leaves them pointing
at nothing. bench/RESULTS.md is a dated record and may name what has gone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "engines", "auth", "bench", "scripts")
# A path inside the repository: a top-level folder, then at least one more part.
PATH = re.compile(r"(?<![\w/.-])((?:gateway|engines|auth|bench|scripts|tests|docs)/[\w/.-]*\w)")
MODULE = re.compile(r"(?<![\w.])((?:gateway|engines|auth)(?:\.[a-z_]\w*)+)")
URL_PATHS = ("auth/me", "auth/session", "auth/ticket")  # routes under /v1/, not files


def comments_and_docstrings(path: Path) -> str:
    source = path.read_text()
    texts = [node_doc for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
             and (node_doc := ast.get_docstring(node, clean=False))]
    texts += [line[line.index("#"):] for line in source.splitlines() if "#" in line]
    return "\n".join(texts)


def sources() -> dict[Path, str]:
    out = {path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out[path] = comments_and_docstrings(path)
    return out


def path_exists(where: Path, name: str) -> bool:
    if name.startswith(URL_PATHS):
        return True
    # a bare module path (``engines/asr/framing``) or a link relative to the doc that holds it
    return any(p.exists() for p in (ROOT / name, ROOT / f"{name}.py", where.parent / name))


def module_exists(dotted: str) -> bool:
    """True when the longest module prefix of the dotted name exists here and the
    next part, if any, is defined or imported in it (``gateway.config.Settings``)."""
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:length])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            break
    else:
        return False
    if length == len(parts):
        return True
    name = re.escape(parts[length])
    defined = rf"^\s*(?:(?:async\s+)?def|class)\s+{name}\b|^\s*{name}\s*[:=]|^\s*(?:from|import)\s.*\b{name}\b"
    return re.search(defined, module.read_text(), re.M) is not None


def test_named_files_and_modules_exist():
    missing = []
    for path, text in sources().items():
        where = path.relative_to(ROOT)
        missing += [f"{where}: {name}" for name in PATH.findall(text) if not path_exists(path, name)]
        missing += [f"{where}: {name}" for name in MODULE.findall(text)
                    if not name.endswith((".md", ".py")) and not module_exists(name)]
    assert missing == [], "references to files or modules that do not exist:\n" + "\n".join(missing)


def test_the_check_finds_a_stale_reference(tmp_path):
    doc = tmp_path / "stale.md"
    doc.write_text("See gateway/asr_client.py and engines.asr.client for the details.")
    text = doc.read_text()
    assert [n for n in PATH.findall(text) if not path_exists(doc, n)] == ["gateway/asr_client.py"]
    assert [n for n in MODULE.findall(text) if not module_exists(n)] == ["engines.asr.client"]


LINK = re.compile(r"\]\(([^)#\s]*\.md)?#([^)\s]+)\)")


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in path.read_text().splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_links_to_sections_find_their_heading():
    broken = []
    for doc in [ROOT / "README.md", ROOT / "bench" / "RESULTS.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target, anchor in LINK.findall(doc.read_text()):
            linked = (doc.parent / target).resolve() if target else doc
            if not linked.is_file() or anchor not in heading_anchors(linked):
                broken.append(f"{doc.relative_to(ROOT)}: {target}#{anchor}")
    assert broken == [], "links to sections that do not exist:\n" + "\n".join(broken)
