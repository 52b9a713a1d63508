"""Fixtures of the auth tests; the harness itself lives in auth_harness.py."""

from __future__ import annotations

from tests.auth.auth_harness import harness, leak_guard, real_harness  # noqa: F401  (pytest fixtures)
