"""Resume tokens name their replica: the token's prefix, this replica's id
(``VOXGATE_REPLICA_ID``), and the refusal of a token another replica issued."""

from __future__ import annotations

import re
from contextlib import ExitStack
from pathlib import Path

import pytest

from gateway.config import ConfigError, Settings
from gateway.errors import close_reason
from gateway.replica import default_replica_id
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.haproxy import haproxy_config
from tests.support.sockets import close_code, receive
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
SECRET = "A" * 43  # as long as a real token's secret part
ELSEWHERE = ("that resume token belongs to replica 'gw-b', this is 'gw-a': the load balancer must send each resume "
             "to the replica named before the first '.' of its token (docs/deployment.md)")
UNKNOWN = "no session of this server has that resume token; open a new session"


def refusal(tmp_path: Path, token: str) -> tuple[dict, tuple[int, str], list]:
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake, replica_id="gw-a") as client, \
            client.websocket_connect(f"/v1/dictation?resume={token}&last_seq=0") as ws:
        return receive(ws), close_code(ws), fake.frames


def test_ready_carries_a_token_prefixed_with_the_replica_and_it_resumes_here(tmp_path):
    with dictation_client(tmp_path, replica_id="gw-a") as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect("/v1/dictation?resumable=true"))
        token = receive(first)["resume_token"]
        assert re.fullmatch(r"gw-a\.[A-Za-z0-9_-]{43}", token), token
        first.close()
        store = client.app_state["resume"]
        wait_until(lambda: any(t.away for t in store._live.values()), "the session is held after the drop")
        second = sockets.enter_context(client.websocket_connect(f"/v1/dictation?resume={token}&last_seq=0"))
        ready = receive(second)
        assert ready["resumed"] is True
        assert re.fullmatch(r"gw-a\.[A-Za-z0-9_-]{43}", ready["resume_token"]) and ready["resume_token"] != token
        second.send_json({"type": "end"})
        assert receive(second)["type"] == "closed"


def test_a_token_of_another_replica_is_refused_naming_it_never_a_new_session(tmp_path):
    event, close, frames = refusal(tmp_path, f"gw-b.{SECRET}")
    assert event == {"type": "error", "code": "resume_elsewhere", "message": ELSEWHERE, "retryable": False}
    assert close == (4421, close_reason(ELSEWHERE))
    assert frames == []  # no stream was opened


@pytest.mark.parametrize("token", [
    pytest.param(SECRET, id="no-prefix"),
    pytest.param(f"gw-a.{SECRET}", id="this-replica-never-issued-it"),
    pytest.param(f".{SECRET}", id="empty-prefix"),
    pytest.param(f"{'r' * 64}.{SECRET}", id="prefix-too-long-for-an-id"),
    pytest.param("gw-b.", id="no-secret"),
])
def test_a_token_that_names_no_other_replica_is_unknown_as_before(tmp_path, token):
    event, close, frames = refusal(tmp_path, token)
    assert event == {"type": "error", "code": "resume_unknown", "message": UNKNOWN, "retryable": False}
    assert (close, frames) == ((4404, UNKNOWN), [])


def test_the_replica_id_setting_is_checked_and_named():
    assert Settings.from_env({"VOXGATE_REPLICA_ID": "voxgate-0"}).replica == "voxgate-0"
    for bad in ("a.b", "a b", "r" * 64, "é"):
        with pytest.raises(ConfigError) as info:
            Settings.from_env({"VOXGATE_REPLICA_ID": bad})
        assert str(info.value) == (f"VOXGATE_REPLICA_ID={bad!r} must be 1..63 letters, digits, '-' or '_' "
                                   "(it is the prefix of this replica's resume tokens, which a '.' ends)")


@pytest.mark.parametrize(("hostname", "expected"), [
    ("voxgate-0", "voxgate-0"),  # a StatefulSet pod
    ("Web1.example.com", "web1"),  # the first label of a full name
    ("3f9a2bc1d4e5", "3f9a2bc1d4e5"),  # a container id
    ("odd+name", "odd-name"),
    ("h" * 80, "h" * 63),
    ("", "voxgate"),
    (".", "voxgate"),
])
def test_the_default_id_is_the_host_names_first_label_made_valid(hostname, expected):
    assert default_replica_id(hostname) == expected


def test_unset_the_id_is_this_hosts(monkeypatch):
    monkeypatch.setattr("gateway.replica.socket.gethostname", lambda: "voxgate-1.voxgate-pods.default.svc")
    assert Settings.from_env({}).replica == "voxgate-1"


def test_the_deployment_guide_shows_the_routing_the_replica_tests_run():
    guide = (ROOT / "docs" / "deployment.md").read_text()
    tested = haproxy_config(8000, {"voxgate-0": 8001, "voxgate-1": 8002})
    resumes = tested.split("backend resumes\n", 1)[1]
    for rule, where in (("use_backend resumes if { urlp(resume) -m found }", tested),
                        ("option httpchk GET /health/live", resumes),
                        ("use-server %[urlp(resume),field(1,.)] if TRUE", resumes)):
        assert f"    {rule}\n" in where
        assert re.search(rf"^    {re.escape(rule)}\s", guide, re.MULTILINE), rule
