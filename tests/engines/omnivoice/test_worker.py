"""The model's worker thread: order, the bounded queue, skipped cancelled jobs, idle callbacks."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import pytest

from engines.omnivoice.worker import GenerationWorker


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_jobs_run_one_at_a_time_in_order() -> None:
    worker = GenerationWorker(max_jobs=8, tick_s=0.01)
    worker.start()
    seen: list[int] = []
    futures = [worker.submit(lambda n=n: seen.append(n) or n * 10) for n in range(5)]
    assert [f.result(10) for f in futures] == [0, 10, 20, 30, 40]
    assert seen == [0, 1, 2, 3, 4]
    worker.close()


def test_a_full_queue_refuses_and_a_cancelled_job_never_runs(gate: threading.Event) -> None:
    worker = GenerationWorker(max_jobs=2, tick_s=0.01)
    worker.start()
    running = threading.Event()
    ran: list[str] = []

    def hold() -> str:
        running.set()
        assert gate.wait(10)
        return "held"

    first = worker.submit(hold)
    assert running.wait(10)
    second = worker.submit(lambda: ran.append("second"))
    third = worker.submit(lambda: ran.append("third"))
    with pytest.raises(queue.Full):
        worker.submit(lambda: ran.append("fourth"))
    assert second.cancel()
    gate.set()
    assert first.result(10) == "held"
    third.result(10)
    assert ran == ["third"]
    worker.close()


def test_an_exception_reaches_the_caller_and_the_worker_goes_on() -> None:
    worker = GenerationWorker(max_jobs=4, tick_s=0.01)
    worker.start()
    failing = worker.submit(lambda: 1 / 0)
    after = worker.submit(lambda: "still here")
    with pytest.raises(ZeroDivisionError):
        failing.result(10)
    assert after.result(10) == "still here"
    worker.close()


def test_idle_callback_runs_once_per_idle_spell() -> None:
    calls: list[int] = []
    idle = threading.Event()

    def on_idle() -> bool:
        calls.append(1)
        idle.set()
        return True

    worker = GenerationWorker(max_jobs=4, idle_s=0.05, on_idle=on_idle, tick_s=0.01)
    worker.start()
    assert not idle.wait(0.2)  # nothing ran yet: nothing to unload
    worker.submit(lambda: None).result(10)
    assert idle.wait(10)
    idle.clear()
    assert not idle.wait(0.2)  # still idle, but already unloaded
    assert calls == [1]
    worker.submit(lambda: None).result(10)
    assert idle.wait(10)
    assert calls == [1, 1]
    worker.close()


def test_an_idle_callback_that_declines_is_asked_again() -> None:
    answers = [False, False, True]
    asked = threading.Event()

    def on_idle() -> bool:
        answer = answers.pop(0)
        if answer:
            asked.set()
        return answer

    worker = GenerationWorker(max_jobs=4, idle_s=0.02, on_idle=on_idle, tick_s=0.01)
    worker.start()
    worker.submit(lambda: None).result(10)
    assert asked.wait(10)
    assert answers == []
    worker.close()


def test_close_cancels_what_is_queued_and_refuses_more(gate: threading.Event) -> None:
    worker = GenerationWorker(max_jobs=4, tick_s=0.01)
    worker.start()
    running = threading.Event()
    first = worker.submit(lambda: running.set() or gate.wait(10))
    assert running.wait(10)
    queued = worker.submit(lambda: "never")
    closer = threading.Thread(target=worker.close)
    closer.start()
    gate.set()
    closer.join(10)
    assert first.result(10) is True
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(lambda: None)
