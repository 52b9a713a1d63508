from __future__ import annotations

import logging

import pytest

from gateway.logging_setup import RedactingFilter, redact


@pytest.mark.parametrize("line, expected", [
    ('127.0.0.1:5 - "GET /v1/tts?api_key=abc123&voice=x HTTP/1.1" 101', '127.0.0.1:5 - "GET /v1/tts?api_key=***&voice=x HTTP/1.1" 101'),
    ("GET /v1/dictation?ticket=T0k3n", "GET /v1/dictation?ticket=***"),
    ("/?pin=123456", "/?pin=***"),
    ("headers: {'authorization': 'Bearer sk-1'}", "headers: {'authorization': '***'}"),
    ("X-Voxgate-Pin: 654321", "X-Voxgate-Pin: ***"),
    ("nothing secret here", "nothing secret here"),
])
def test_redact(line, expected):
    assert redact(line) == expected


def test_filter_rewrites_formatted_records():
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s"', ("1.2.3.4", "GET", "/x?api_key=s3cr3t"), None)
    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == '1.2.3.4 - "GET /x?api_key=***"'
