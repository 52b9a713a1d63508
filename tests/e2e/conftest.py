"""Fixtures of the browser tests; they live in browser_support.py."""

from __future__ import annotations

from tests.e2e.browser_support import browser, page, screenshots  # noqa: F401  (pytest fixtures)
