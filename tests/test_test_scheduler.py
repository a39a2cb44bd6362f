"""The test run's scheduler (tests/support/spark_worker.py) when a worker dies: the test it was
running is reported once, its other work goes to the workers left, and a worker started in its
place gets work only once its collection has arrived."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

from tests.support.spark_worker import SparkGroupScheduling

COLLECTION = [f"tests/test_a.py::test_{i}" for i in range(8)]


class FakeWorker:
    """Just what the scheduler calls on a worker."""

    def __init__(self, name: str) -> None:
        self.gateway = types.SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(tmp_path: Path, workers: list[FakeWorker]) -> SparkGroupScheduling:
    config: Any = types.SimpleNamespace(
        option=types.SimpleNamespace(loadscopereorder=True), getvalue={"tx": ["2*popen"]}.get
    )
    scheduler = SparkGroupScheduling(config, None, tmp_path)
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    return scheduler


def test_a_dead_worker_reports_its_test_once_and_the_others_take_its_work(
    tmp_path: Path,
) -> None:
    first, second = FakeWorker("gw0"), FakeWorker("gw1")
    scheduler = _scheduler(tmp_path, [first, second])
    running = COLLECTION[first.sent[0]]

    assert scheduler.remove_node(first) == running
    replacement = FakeWorker("gw2")
    scheduler.add_node(replacement)  # known, not collected yet: no work, no KeyError
    assert scheduler.remove_node(second) == COLLECTION[second.sent[0]]
    assert replacement.sent == []

    scheduler.add_node_collection(replacement, COLLECTION)
    scheduler.schedule()
    done = 0
    while done < len(replacement.sent):  # the replacement runs what it is sent, to the end
        scheduler.mark_test_complete(replacement, replacement.sent[done])
        done += 1
    assert replacement.shutting_down
    sent = [COLLECTION[i] for i in replacement.sent]
    ran_before = {COLLECTION[i] for i in first.sent + second.sent}
    assert running not in sent  # reported failed once, never sent to kill another worker
    assert sorted(sent) == sorted(set(COLLECTION) - {running, COLLECTION[second.sent[0]]})
    assert ran_before - {running, COLLECTION[second.sent[0]]} <= set(sent)
