"""The Wyoming listener: describe, ping, trust, idle close, broken framing,
the start-up refusal, and its life inside the app's lifespan."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest
from starlette.testclient import TestClient
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.ping import Ping

from gateway.app import create_app
from gateway.config import ConfigError, Settings
from gateway.fronts.wyoming import server as server_module
from gateway.fronts.wyoming.trust import client_allowed, refuse_wyoming_bind
from gateway.fronts.wyoming.zeroconf import announce, announce_address
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.fronts.wyoming.harness import connect, read, wyoming_server
from tests.support.fake_sidecar import FakeSidecar
from tests.support.listeners import FakeListener


async def test_describe_lists_the_asr_model_and_every_voice(tmp_path):
    tts = {"pocket": FakeTtsEngine(), "piper": FakeTtsEngine(engine_id="piper", builtin=("en_US-joe-medium",))}
    async with wyoming_server(tmp_path, tts=tts, asr=FakeSidecar(), tts_engine="piper") as server, \
            connect(server) as client:
        await client.write_event(Describe().event())
        event = await read(client)
    info = Info.from_event(event)  # the wyoming package parses it
    (asr,) = info.asr
    assert (asr.name, asr.installed, asr.supports_transcript_streaming, asr.requires_external_vad) == \
        ("voxgate-asr", True, True, False)
    assert [(m.name, m.languages) for m in asr.models] == [("tiny.en", ["en"])]
    assert [(p.name, p.supports_synthesize_streaming, [v.name for v in p.voices]) for p in info.tts] == [
        ("voxgate-piper", True, ["en_US-joe-medium"]),  # the default engine first
        ("voxgate-pocket", True, ["alba", "marius"])]
    assert info.tts[0].voices[0].languages == ["en"]
    assert event.data["wake"] == [] and event.data["handle"] == []


async def test_describe_names_a_local_asr_model_by_its_last_component(tmp_path):
    asr = FakeSidecar()
    asr.model_name = f"{tmp_path}/models/whisper-small-ct2"
    async with wyoming_server(tmp_path, asr=asr) as server, connect(server) as client:
        await client.write_event(Describe().event())
        event = await read(client)
    (model,) = Info.from_event(event).asr[0].models
    assert (model.name, model.description) == ("whisper-small-ct2", "Whisper whisper-small-ct2")
    assert str(tmp_path) not in repr(event.data)


async def test_ping_is_answered_and_unknown_events_are_ignored(tmp_path):
    async with wyoming_server(tmp_path) as server, connect(server) as client:
        from wyoming.event import Event

        await client.write_event(Event("detect", {"names": ["ok_nabu"]}))
        await client.write_event(Ping(text="p1").event())
        event = await read(client)
    assert (event.type, event.data) == ("pong", {"text": "p1"})


async def test_broken_framing_gets_an_error_and_the_connection_ends(tmp_path):
    async with wyoming_server(tmp_path) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"this is not json\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 5)
        rest = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    assert line.startswith(b'{"type": "error"')
    assert rest == b'{"text": "the event header is not valid JSON", "code": "bad_message"}'


async def test_an_idle_connection_is_closed(tmp_path):
    async with wyoming_server(tmp_path, idle_timeout_s=1) as server, connect(server) as client:
        assert await read(client) is None


async def test_a_client_outside_the_trusted_networks_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(server_module, "client_allowed", lambda settings, host: False)
    async with wyoming_server(tmp_path) as server, connect(server) as client:
        await client.write_event(Ping().event())
        event = await read(client)
        closed = await read(client)
    assert (event.type, event.data) == ("error", {
        "text": "this Wyoming server serves loopback and VOXGATE_TRUSTED_NETWORKS clients only; 127.0.0.1 is neither",
        "code": "loopback_required"})
    assert closed is None


def test_clients_are_allowed_from_loopback_and_trusted_networks_only():
    settings = Settings(trusted_networks=(ipaddress.ip_network("192.168.1.0/24"),
                                          ipaddress.ip_network("fd00::/8")))
    allowed = {host: client_allowed(settings, host) for host in (
        "127.0.0.1", "::1", "192.168.1.20", "::ffff:192.168.1.20", "fd00::5", "192.168.2.1", "10.0.0.1", "x")}
    assert allowed == {"127.0.0.1": True, "::1": True, "192.168.1.20": True, "::ffff:192.168.1.20": True,
                       "fd00::5": True, "192.168.2.1": False, "10.0.0.1": False, "x": False}


def test_a_public_wyoming_bind_needs_trusted_networks():
    assert refuse_wyoming_bind(Settings(wyoming_uri="tcp://127.0.0.1:10300")) is None
    assert refuse_wyoming_bind(Settings()) is None
    trusted = Settings(wyoming_uri="tcp://0.0.0.0:10300", trusted_networks=(ipaddress.ip_network("10.0.0.0/8"),))
    assert refuse_wyoming_bind(trusted) is None
    message = refuse_wyoming_bind(Settings(wyoming_uri="tcp://0.0.0.0:10300"))
    assert message is not None
    assert message.startswith("the Wyoming listener tcp://0.0.0.0:10300 is not on a loopback address, and Wyoming "
                              "has no authentication")
    assert "VOXGATE_TRUSTED_NETWORKS" in message and "tcp://127.0.0.1:10300" in message


@pytest.mark.parametrize(("raw", "error"), [
    ("http://127.0.0.1:10300", ("VOXGATE_WYOMING_URI='http://127.0.0.1:10300' must be tcp://HOST:PORT "
                               "(the only Wyoming transport served)")),
    ("tcp://127.0.0.1", "VOXGATE_WYOMING_URI='tcp://127.0.0.1' must be tcp://HOST:PORT"),
    ("tcp://127.0.0.1:port", "VOXGATE_WYOMING_URI='tcp://127.0.0.1:port' has port 'port', which is not an integer"),
    ("tcp://127.0.0.1:70000", "VOXGATE_WYOMING_URI='tcp://127.0.0.1:70000' has port 70000, out of range (0..65535)"),
])
def test_a_bad_wyoming_uri_is_named(raw, error):
    with pytest.raises(ConfigError, match=f"^{error.replace('(', '[(]').replace(')', '[)]')}$"):
        Settings.from_env({"VOXGATE_WYOMING_URI": raw})


def test_wyoming_addresses_parse_ipv6_brackets():
    assert Settings.from_env({"VOXGATE_WYOMING_URI": "tcp://[::1]:10300"}).wyoming_address == ("::1", 10300)


async def test_zeroconf_never_announces_a_loopback_listener(caplog):
    def lan() -> str:
        return "192.0.2.7"

    assert announce_address("127.0.0.1", lan) is None and announce_address("::1", lan) is None
    assert announce_address("192.168.1.5", lan) == "192.168.1.5"
    assert announce_address("0.0.0.0", lan) == "192.0.2.7"  # a wildcard bind announces the app's LAN address
    assert await announce("127.0.0.1", 10300, lan) is None
    assert "Wyoming zeroconf: not announcing 127.0.0.1:10300" in caplog.text


def test_the_app_lifespan_starts_and_stops_the_listener(tmp_path):
    settings = Settings(engines=(), data_dir=tmp_path, wyoming_uri="tcp://127.0.0.1:0", tts_engine="pocket")
    app = create_app(settings, tts_engines={"pocket": FakeTtsEngine()}, share_listener=FakeListener())

    async def describe(port: int) -> Info:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            return Info.from_event(await asyncio.wait_for(client.read_event(), 10))

    with TestClient(app) as client:
        wyoming = client.app_state["wyoming"]
        info = asyncio.run(describe(wyoming.port))
        assert [p.name for p in info.tts] == ["voxgate-pocket"]
        assert info.asr == []
    with pytest.raises(OSError):  # the port is closed with the app
        asyncio.run(describe(wyoming.port))


def test_a_taken_port_stops_the_start_with_the_os_error(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings(engines=(), data_dir=tmp_path, wyoming_uri=f"tcp://127.0.0.1:{port}", tts_engine="pocket")
        app = create_app(settings, tts_engines={}, share_listener=FakeListener())
        with pytest.raises(OSError, match="address already in use"), TestClient(app):
            pass
