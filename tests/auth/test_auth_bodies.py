"""The credential exchange reads its small bodies with a bound: a huge or endless
body is refused after the first chunk past 4 KiB, and JSON nested too deeply is
a 400 like any other unusable body."""

from __future__ import annotations

import pytest

from auth import AuthConfig, AuthState
from tests.auth.auth_harness import KEY, REMOTE, build_test_app
from tests.support.asgi import post_chunks, repeat

CHUNK = b"x" * 65536
TOO_LARGE = {"detail": "request body is larger than 4096 bytes", "code": "too_large"}


def _state() -> AuthState:
    return AuthState(AuthConfig(server_mode=True, api_key=KEY))


@pytest.mark.parametrize("path", ["/v1/auth/session", "/v1/auth/ticket"])
async def test_a_chunked_body_is_refused_at_its_first_chunk_past_the_limit(path: str) -> None:
    state = _state()
    reply = await post_chunks(build_test_app(state), path, repeat(CHUNK, 256), state={"auth": state},
                              headers={"Authorization": f"Bearer {KEY}"}, client=REMOTE)
    assert (reply.status, reply.json(), reply.chunks_read) == (413, TOO_LARGE, 1)


@pytest.mark.parametrize("path", ["/v1/auth/session", "/v1/auth/ticket"])
async def test_a_declared_length_over_the_limit_is_refused_before_reading(path: str) -> None:
    state = _state()
    reply = await post_chunks(build_test_app(state), path, repeat(CHUNK, 160), state={"auth": state},
                              headers={"Authorization": f"Bearer {KEY}", "Content-Length": str(160 * 65536)},
                              client=REMOTE)
    assert (reply.status, reply.json(), reply.chunks_read) == (
        413, {"detail": "request body of 10485760 bytes; the limit is 4096", "code": "too_large"}, 0)


@pytest.mark.parametrize("path", ["/v1/auth/session", "/v1/auth/ticket"])
async def test_json_nested_too_deeply_is_a_400(path: str) -> None:
    state = _state()
    nested = b"[" * 2000 + b"]" * 2000  # 4000 bytes, under the size limit
    reply = await post_chunks(build_test_app(state), path, [nested], state={"auth": state},
                              headers={"Authorization": f"Bearer {KEY}"}, client=REMOTE)
    assert (reply.status, reply.json()) == (400, {"detail": "body is nested too deeply", "code": "bad_request"})
