"""The voice upload reads its form like every upload route: a body the multipart
parser cannot use is a 400 naming the problem, never a 500."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.gateway.helpers import LOOPBACK, tts_app


@pytest.mark.parametrize("body", [b"not a multipart body", b"--b\r\nContent-Disposition: form-data\r\n\r\nx"])
def test_a_malformed_form_is_a_bad_request(tmp_path, body):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client:
        r = client.post("/v1/voices", content=body, headers={"content-type": "multipart/form-data; boundary=b"})
    assert r.status_code == 400
    assert r.json()["code"] == "bad_request"
    assert r.json()["detail"].startswith("the multipart body cannot be parsed: ")


def test_too_many_fields_is_a_bad_request(tmp_path):
    fields = {f"f{i}": "x" for i in range(9)}
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client:
        r = client.post("/v1/voices", data=fields, files={"file": ("a.wav", b"RIFF", "audio/wav")})
    assert (r.status_code, r.json()["code"]) == (400, "bad_request")
    assert r.json()["detail"].startswith("the multipart body cannot be parsed: ")


def test_a_field_the_form_does_not_define_is_refused(tmp_path):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client:
        r = client.post("/v1/voices", data={"id": "mine", "language": "de"},
                        files={"file": ("a.wav", b"RIFF", "audio/wav")})
    assert (r.status_code, r.json()) == (400, {"code": "bad_request", "detail": "language: not a field of this form; "
                                                                               "the fields are: id, file, engine, "
                                                                               "ref_text"})
