"""The Host header of Starlette's TestClient, for configurations tests build."""

from __future__ import annotations

# TestClient sends ``Host: testserver``; the Host allow-list must name it for
# in-process tests (real servers are reached as 127.0.0.1, which is always allowed).
TEST_HOST = "testserver"
