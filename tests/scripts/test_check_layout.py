"""scripts/check_layout.py on small trees built here: an import cycle is one
whether its imports run or sit under ``if TYPE_CHECKING:``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

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
