"""Fixtures of the end-to-end tests: the browser's live in browser_support.py, the tiny
Pocket checkpoint (``model_dir``) in tiny_pocket.py."""

from __future__ import annotations

from tests.e2e.browser_support import browser, page, screenshots  # noqa: F401  (pytest fixtures)
from tests.e2e.tiny_pocket import model_dir  # noqa: F401  (a pytest fixture)
