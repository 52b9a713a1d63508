"""Fixtures shared by every test layer."""

from __future__ import annotations

import pytest

from tests.support import net


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return net.free_port()
