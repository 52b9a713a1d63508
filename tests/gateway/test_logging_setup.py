from __future__ import annotations

import logging

import pytest

from auth.redact import SecretFilter, redact_secrets
from gateway.logging_setup import configure_logging


@pytest.mark.parametrize(("line", "expected"), [
    ('127.0.0.1:5 - "GET /v1/tts?api_key=abc123&voice=x HTTP/1.1" 101', '127.0.0.1:5 - "GET /v1/tts?api_key=***&voice=x HTTP/1.1" 101'),
    ("GET /v1/dictation?ticket=T0k3n", "GET /v1/dictation?ticket=***"),
    ("/?pin=123456", "/?pin=***"),
    ("headers: {'authorization': 'Bearer sk-1'}", "headers: {'authorization': '***'}"),
    ("X-Voxgate-Pin: 654321", "X-Voxgate-Pin: ***"),
    ("nothing secret here", "nothing secret here"),
])
def test_redact_secrets(line, expected):
    assert redact_secrets(line) == expected


def test_filter_rewrites_formatted_records():
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s"', ("1.2.3.4", "GET", "/x?api_key=s3cr3t"), None)
    assert SecretFilter().filter(record) is True
    assert record.getMessage() == '1.2.3.4 - "GET /x?api_key=***"'


def test_server_logging_redacts_uvicorn_access_lines(capsys):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("info")
        logging.getLogger("uvicorn.access").info('%s - "%s %s"', "203.0.113.5:1", "GET", "/v1/tts?ticket=vgt_abc")
        err = capsys.readouterr().err
    finally:
        root.handlers[:], level = saved[0], saved[1]
        root.setLevel(level)
    assert "vgt_abc" not in err
    assert 'uvicorn.access: 203.0.113.5:1 - "GET /v1/tts?ticket=***"' in err
