"""The Deepgram front's query parameters (params.py): a bad one on /v1/listen or
/v1/speak gets Deepgram's ``Error`` message naming it, then close 4400."""

from __future__ import annotations

import pytest

from tests.gateway.helpers import dictation_client, tts_client
from tests.support.sockets import close_code, receive

APPS = {"/v1/listen": dictation_client, "/v1/speak": tts_client}


@pytest.mark.parametrize(("path", "query", "message"), [
    ("/v1/listen", "encoding=opus", ("encoding: 'opus' is not supported; use linear16, mulaw or alaw (this gateway "
                                     "decodes no containers or compressed audio)")),
    ("/v1/listen", "channels=2", "channels: 2 is not supported; send mono audio (channels=1)"),
    ("/v1/listen", "sample_rate=4000", "sample_rate: '4000' must be between 8000 and 48000"),
    ("/v1/listen", "interim_results=maybe", "interim_results: 'maybe' is not a boolean (use true or false)"),
    ("/v1/listen", "endpointing=soon", "endpointing: 'soon' is not an integer"),
    ("/v1/listen", "language=english!", "language: 'english!' is not a BCP-47 language tag"),
    ("/v1/speak", "encoding=mp3", ("encoding: 'mp3' is not supported; use linear16, mulaw or alaw (this gateway "
                                   "decodes no containers or compressed audio)")),
    ("/v1/speak", "container=wav", "container: 'wav' is not supported on the socket; use container=none"),
    ("/v1/speak", "sample_rate=99", "sample_rate: '99' must be between 8000 and 48000"),
])
def test_a_bad_query_gets_an_error_message_and_close_4400(tmp_path, path, query, message):
    with APPS[path](tmp_path) as client, client.websocket_connect(f"{path}?{query}") as ws:
        assert receive(ws) == {"type": "Error", "variant": "bad_request", "description": message,
                               "code": "bad_request"}
        assert close_code(ws) == (4400, message)
