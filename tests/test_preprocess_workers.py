"""imagenet-preprocess's worker processes: stopped at any moment, a dead one reported, never a hang."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import pytest

from workloads.imagenet_preprocess import ChunkWorkers


def _megabyte(_: object) -> bytes:
    return os.urandom(1 << 20)


def _square(x: int) -> int:
    return x * x


def test_every_task_comes_back_once():
    with ChunkWorkers(3, fn=_square) as workers:
        assert sorted(workers.imap_unordered(list(range(50)))) == [x * x for x in range(50)]


def test_stopping_with_megabyte_results_in_flight_returns_at_once_and_leaves_no_process():
    for take in range(5, 45, 4):  # Pool.terminate() hangs in about 2% of such stops
        workers = ChunkWorkers(8, fn=_megabyte)
        for k, _ in enumerate(workers.imap_unordered(list(range(1000)))):
            if k == take:
                break
        stopping = threading.Thread(target=workers.stop, daemon=True)
        stopping.start()
        stopping.join(60)  # a hang, not a slow stop, is what this catches
        assert not stopping.is_alive(), "stop() hung"
        assert not any(p.is_alive() for p in workers.procs)
    assert not multiprocessing.active_children()


def test_a_worker_that_dies_is_an_error_not_a_hang():
    workers = ChunkWorkers(2, fn=_megabyte)
    results = workers.imap_unordered(list(range(100)))
    next(results)
    os.kill(workers.procs[0].pid, signal.SIGKILL)  # as the kernel does at a memory limit
    with pytest.raises(RuntimeError, match="worker process died"):
        for _ in results:
            pass
    workers.stop()
