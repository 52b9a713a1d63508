"""scripts/check_layout.py on small trees built here: an import cycle is one
whether its imports run or sit under ``if TYPE_CHECKING:``; a module over 300
lines passes only with a "Longer than 300 lines: why" note in its docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_layout.py"


def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layout", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_closed_by_a_type_checking_import_is_reported(tmp_path):
    root = tree(tmp_path, {
        "gateway/__init__.py": "",
        "gateway/supervisor.py": "from gateway.stream import Stream\n",
        "gateway/stream.py": ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                              "    from gateway.supervisor import Supervisor\n\nclass Stream: ...\n"),
    })
    assert checker().problems_in(root) == ["import cycle: gateway.stream -> gateway.supervisor -> gateway.stream"]


def test_a_type_checking_import_that_closes_no_cycle_passes(tmp_path):
    root = tree(tmp_path, {
        "gateway/__init__.py": "",
        "gateway/owner.py": "from typing import Protocol\n\nclass Owner(Protocol): ...\n",
        "gateway/stream.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from gateway.owner import Owner\n",
        "gateway/supervisor.py": "from gateway.stream import Stream\n",
    })
    assert checker().problems_in(root) == []


def long_module(docstring: str | None, lines: int) -> str:
    head = f'"""{docstring}"""\n' if docstring is not None else ""
    body = lines - len(head.splitlines())
    return head + "".join(f"x{i} = {i}\n" for i in range(body))


def test_a_module_of_300_lines_passes(tmp_path):
    root = tree(tmp_path, {"engines/__init__.py": "", "engines/batch.py": long_module(None, 300)})
    assert checker().problems_in(root) == []


def test_a_long_module_without_a_note_is_named_with_its_line_count(tmp_path):
    root = tree(tmp_path, {"engines/__init__.py": "", "engines/batch.py": long_module("Batch stepping.", 301)})
    assert checker().problems_in(root) == [
        ("engines/batch.py has 301 lines (at most 300: split it at its second concept, or say why in its "
         "module docstring with a sentence starting 'Longer than 300 lines: ...')")]


@pytest.mark.parametrize("docstring", [
    "Longer than 300 lines on purpose: the four tasks share one queue.",
    "Batch stepping.\n\nLonger than 300 lines: the tables take ~125.\n",
    "Batch stepping. Longer than 300 lines: the tables take ~125.",
])
def test_a_long_module_whose_docstring_says_why_passes(tmp_path, docstring):
    root = tree(tmp_path, {"auth/__init__.py": "", "auth/store.py": long_module(docstring, 320)})
    assert checker().problems_in(root) == []


@pytest.mark.parametrize("source", [
    long_module("Longer than 300 lines.", 320),                       # no reason given
    long_module("Batch stepping, not longer than 300 lines: x.", 320),  # not a sentence of its own
    "# Longer than 300 lines on purpose: a comment is not the docstring.\n" + long_module(None, 319),
    long_module(None, 319) + '"""Longer than 300 lines: a string after the code is no docstring."""\n',
])
def test_a_long_module_without_the_exact_note_fails(tmp_path, source):
    root = tree(tmp_path, {"gateway/__init__.py": "", "gateway/big.py": source})
    (problem,) = checker().problems_in(root)
    assert problem.startswith("gateway/big.py has 320 lines (at most 300: ")
