"""What a client is told when an engine cannot serve it, and what the server's
log is told instead.

An engine's status detail and hint say how to fix it on the server: file paths
under the data dir, shell commands, package names. A client (a key holder, a
PIN guest, an anonymous caller, on every front) gets one sentence naming the
engine and its state; the detail and hint stay in GET /v1/engines for admins
(gateway/engine_view.py), in the local CLI, and in the server's log, written
once per change of an engine's status (``EngineLog``), not once per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from engines.base import EngineState, EngineStatus
from gateway.errors import Unavailable

log = logging.getLogger("voxgate.engines")

ASR_ENGINE = "asr"
ENGINE_NAMES = {"pocket": "Pocket TTS", "piper": "Piper", "omnivoice": "OmniVoice", ASR_ENGINE: "Speech recognition",
                "tts": "The TTS engine"}
STATE_WORDS = {EngineState.MISSING: "not installed", EngineState.FAILED: "failed to load"}
WATCH_INTERVAL_S = 5.0  # how soon a status that changes after start-up reaches the log


def engine_name(engine_id: str) -> str:
    return ENGINE_NAMES.get(engine_id, f"engine {engine_id[:40]}")


def unavailable_message(engine_id: str, state: EngineState | None) -> str:
    """The sentence any client gets: the engine, its state, and where an admin reads why."""
    words = STATE_WORDS.get(state, "not running") if state is not None else "not running"
    return (f"{engine_name(engine_id)} is not available on this gateway ({words}); "
            "an admin can see why at GET /v1/engines")


def engine_unavailable(engine_id: str, state: EngineState | None) -> Unavailable:
    """The ``engine_unavailable`` error for ``engine_id`` in ``state`` (no path, no command)."""
    return Unavailable(unavailable_message(engine_id, state),
                       extra={"state": state.value} if state is not None else None)


class EngineLog:
    """Writes an engine's detail and hint to the log when its status changes to
    missing or failed (WARNING), and a line when it is ready again (INFO).
    Runs on the event loop only."""

    def __init__(self) -> None:
        self._last: dict[str, EngineStatus] = {}

    def observe(self, name: str, status: EngineStatus) -> None:
        last = self._last.get(name)
        if status.state is EngineState.LOADING or status == last:
            return
        self._last[name] = status
        if status.state in STATE_WORDS:
            fix = f"; to fix it: {status.hint}" if status.hint else ""
            log.warning("engine %s is not available (%s): %s%s", name, status.state.value,
                        status.detail or "(no detail)", fix)
        elif last is not None and last.state is not EngineState.READY:
            log.info("engine %s is %s again", name, status.state.value)

    def observe_all(self, statuses: Mapping[str, EngineStatus]) -> None:
        for name, status in statuses.items():
            self.observe(name, status)

    async def watch(self, statuses: Callable[[], Mapping[str, EngineStatus]],
                    interval_s: float = WATCH_INTERVAL_S) -> None:
        """Observe ``statuses()`` every ``interval_s`` until cancelled."""
        while True:
            self.observe_all(statuses())
            await asyncio.sleep(interval_s)
