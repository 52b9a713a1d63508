"""DeadlinePool: most urgent job first, bounded waiting jobs, cancel before run, close."""

from __future__ import annotations

import threading

import pytest

from engines.piper.pool import DeadlinePool, PoolClosed, PoolFull


def test_jobs_run_earliest_deadline_first():
    pool = DeadlinePool(threads=1, max_jobs=10)
    gate, order = threading.Event(), []
    try:
        blocker = pool.submit(gate.wait, deadline=0.0)
        futures = [pool.submit(lambda d=d: order.append(d), deadline=d) for d in (5.0, 1.0, 3.0, 2.0)]
        gate.set()
        blocker.result(5)
        for future in futures:
            future.result(5)
        assert order == [1.0, 2.0, 3.0, 5.0]
    finally:
        pool.close()


def test_equal_deadlines_keep_submission_order():
    pool = DeadlinePool(threads=1)
    gate, order = threading.Event(), []
    try:
        pool.submit(gate.wait, deadline=0.0)
        futures = [pool.submit(lambda i=i: order.append(i), deadline=1.0) for i in range(5)]
        gate.set()
        for future in futures:
            future.result(5)
        assert order == [0, 1, 2, 3, 4]
    finally:
        pool.close()


def test_waiting_jobs_are_bounded():
    pool = DeadlinePool(threads=1, max_jobs=2)
    gate = threading.Event()
    try:
        running = pool.submit(gate.wait, deadline=0.0)
        while pool.busy == 0:  # the first job is taken by the worker, no longer waiting
            threading.Event().wait(0.001)
        pool.submit(lambda: None, deadline=1.0)
        pool.submit(lambda: None, deadline=1.0)
        with pytest.raises(PoolFull, match=r"^2 Piper jobs are waiting \(the limit is 2\)$"):
            pool.submit(lambda: None, deadline=1.0)
        gate.set()
        running.result(5)
    finally:
        pool.close()


def test_a_job_cancelled_while_waiting_never_runs():
    pool = DeadlinePool(threads=1)
    gate, ran = threading.Event(), []
    try:
        pool.submit(gate.wait, deadline=0.0)
        victim = pool.submit(lambda: ran.append("victim"), deadline=1.0)
        after = pool.submit(lambda: ran.append("after"), deadline=2.0)
        assert victim.cancel()
        gate.set()
        after.result(5)
        assert ran == ["after"]
    finally:
        pool.close()


def test_exceptions_reach_the_waiter():
    pool = DeadlinePool(threads=1)
    try:
        future = pool.submit(lambda: 1 / 0, deadline=0.0)
        with pytest.raises(ZeroDivisionError):
            future.result(5)
        assert pool.submit(lambda: 7, deadline=0.0).result(5) == 7  # the worker survived
    finally:
        pool.close()


def test_at_most_threads_jobs_run_at_once_and_that_many_do():
    pool = DeadlinePool(threads=2)
    lock, gate = threading.Lock(), threading.Event()
    running, peak = [0], [0]
    both = threading.Barrier(2, timeout=5)

    def job() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        both.wait()  # two jobs must be running together for this to pass
        gate.wait(5)
        with lock:
            running[0] -= 1

    try:
        futures = [pool.submit(job, deadline=float(i)) for i in range(2)]
        extra = [pool.submit(lambda: None, deadline=10.0) for _ in range(3)]
        gate.set()
        for future in futures + extra:
            future.result(5)
        assert peak[0] == 2
    finally:
        pool.close()


def test_close_cancels_waiting_jobs_and_refuses_new_ones():
    pool = DeadlinePool(threads=1)
    gate = threading.Event()
    running = pool.submit(gate.wait, deadline=0.0)
    waiting = pool.submit(lambda: None, deadline=1.0)
    while pool.busy == 0:
        threading.Event().wait(0.001)
    closer = threading.Thread(target=pool.close)
    closer.start()
    for _ in range(5000):  # close() cancels the waiting job at once, then waits for the running one
        if waiting.cancelled():
            break
        threading.Event().wait(0.001)
    gate.set()
    closer.join(5)
    assert running.result(5) is True
    assert waiting.cancelled()
    with pytest.raises(PoolClosed):
        pool.submit(lambda: None, deadline=0.0)


@pytest.mark.parametrize(("threads", "max_jobs", "message"), [
    (0, 1, "threads: must be at least 1, got 0"), (1, 0, "max_jobs: must be at least 1, got 0")])
def test_bad_sizes_are_refused(threads, max_jobs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        DeadlinePool(threads=threads, max_jobs=max_jobs)
