"""Custom vocabulary on /v1/dictation: terms on connect (``terms``) and mid-stream
(``config``) reach the recognizer as its context, in order with the audio, and a
restarted recognizer is given the latest; bad terms are refused naming the limit."""

from __future__ import annotations

import pytest

from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive


def prompts(fake: FakeSidecar) -> list[tuple[str, str]]:
    return [(h["op"], h["prompt"]) for h, _ in fake.frames if h["op"] in ("open", "configure")]


def test_terms_on_connect_open_the_stream_with_them_as_context(tmp_path):
    fake = FakeSidecar()
    url = "/v1/dictation?terms=ComfyUI,Siobhan%20Kelly&terms=Llanelli"
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(url) as ws:
        receive(ws)
        assert prompts(fake) == [("open", "ComfyUI, Siobhan Kelly, Llanelli.")]


def test_a_config_message_changes_the_terms_in_order_with_the_audio(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?terms=ComfyUI") as ws:
        receive(ws)
        ws.send_bytes(b"\0\0" * 160)
        ws.send_json({"type": "config", "terms": ["Siobhan", "  Zyxel  "]})
        ws.send_bytes(b"\0\0" * 160)
        ws.send_json({"type": "config", "terms": []})
        ws.send_json({"type": "end"})
        assert receive(ws)["type"] == "closed"
        stream = fake.frames[0][0]["stream"]
        assert fake.ops(stream) == ["open", "audio", "configure", "audio", "configure", "end"]
        assert prompts(fake) == [("open", "ComfyUI."), ("configure", "Siobhan, Zyxel."), ("configure", "")]


def test_a_restarted_recognizer_is_given_the_latest_terms(tmp_path):
    from gateway.dictation.replay import open_header

    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?terms=ComfyUI") as ws:
        receive(ws)
        ws.send_json({"type": "config", "terms": ["Siobhan"]})
        ws.send_json({"type": "probe"})  # answered after the config was handled
        assert receive(ws)["code"] == "bad_message"
        assert open_header(fake.the_stream())["prompt"] == "Siobhan."
        ws.send_json({"type": "end"})
        receive(ws)


def test_a_config_reset_context_reaches_the_recognizer_and_keeps_the_terms_unless_it_gives_new_ones(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?terms=ComfyUI") as ws:
        receive(ws)
        ws.send_json({"type": "config", "reset_context": True})
        ws.send_json({"type": "config", "terms": ["Zyxel"], "reset_context": True})
        ws.send_json({"type": "config", "terms": ["Llanelli"]})
        ws.send_json({"type": "end"})
        assert receive(ws)["type"] == "closed"
    ops = [(h["prompt"], h.get("reset_context", False)) for h, _ in fake.frames if h["op"] == "configure"]
    assert ops == [("ComfyUI.", True), ("Zyxel.", True), ("Llanelli.", False)]


@pytest.mark.parametrize(("message", "error"), [
    ({"type": "config"}, "config: give terms (a list of strings; [] clears them) or reset_context: true"),
    ({"type": "config", "reset_context": "yes"}, "config.reset_context must be true or false"),
    ({"type": "config", "terms": "ComfyUI"}, "config.terms must be a list of strings"),
    ({"type": "config", "terms": ["ComfyUI", 3]}, "config.terms: every term must be a string"),
    ({"type": "config", "terms": [" "]}, "config.terms: a term is empty"),
    ({"type": "config", "terms": ["x" * 51]}, f"config.terms: '{'x' * 20}'... is 51 characters; a term holds at most 50"),
    ({"type": "config", "terms": ["ok", "launch🚀"]},
     "config.terms: 'launch🚀' holds '🚀'; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ({"type": "config", "terms": ["<|endoftext|>"]},
     "config.terms: '<|endoftext|>' holds '<'; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ({"type": "config", "terms": [f"t{n}" for n in range(51)]}, "config.terms: more than 50 terms"),
])
def test_bad_terms_in_a_config_are_refused_by_name_and_the_session_goes_on(tmp_path, message, error):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_json(message)
        assert receive(ws) == {"type": "error", "code": "bad_message", "message": error, "retryable": False}
        ws.send_json({"type": "end"})
        assert receive(ws)["type"] == "closed"
    assert prompts(fake) == [("open", "")]


@pytest.mark.parametrize(("query", "reason"), [
    ("terms=Comfy%3CUI", "terms: 'Comfy<UI' holds '<'; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ("terms=a,,b", "terms: a term is empty"),
    ("terms=" + ",".join(f"t{n}" for n in range(51)), "terms: more than 50 terms"),
])
def test_bad_terms_on_connect_close_4400_naming_the_limit(tmp_path, query, reason):
    with dictation_client(tmp_path) as client, client.websocket_connect(f"/v1/dictation?{query}") as ws:
        assert receive(ws) == {"type": "error", "code": "bad_request", "message": reason, "retryable": False}
        assert close_code(ws) == (4400, reason)
