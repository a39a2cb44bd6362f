"""Processes forked after a write, and databases let go while other threads read.

A forked process has none of its parent's threads: writes there must not wait on the parent's
pools. Closing a table or warehouse must not fail the reads other threads are running."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import ledger
import views

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _table(path: Path) -> ledger.Table:
    warehouse = ledger.connect(str(path))
    table = warehouse.create_table(
        "t", {"k": "BIGINT", "v": "DOUBLE"}, primary_key="k", partition_by=["bucket(4, k)"]
    )
    table.insert([{"k": k, "v": float(k)} for k in range(40)])
    table.upsert([{"k": k, "v": -1.0} for k in range(0, 40, 3)])  # marks and insertions
    return table


def _in_forked_child(action: object) -> int:
    """Run ``action`` in a forked child; its exit status (0: it returned), or -1 when it had not
    finished after 60 s (a write waiting on threads that do not exist in the child)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        try:
            action()  # type: ignore[operator]
            os._exit(0)
        except BaseException:
            os._exit(1)
    for _ in range(600):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        threading.Event().wait(0.1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return -1


def test_a_forked_process_writes_after_its_parent_wrote(tmp_path: Path) -> None:
    table = _table(tmp_path)

    def child_writes() -> None:
        child = ledger.connect(str(tmp_path)).table("t")
        child.upsert([{"k": k, "v": 7.0} for k in range(0, 40, 2)])
        child.insert([{"k": k, "v": 1.0} for k in range(100, 120)])

    assert _in_forked_child(child_writes) == 0
    fresh = ledger.connect(str(tmp_path)).table("t")
    got = {r["k"]: r["v"] for r in views.visible(fresh).fetchdf().to_dict("records")}
    want = {k: (7.0 if k % 2 == 0 else -1.0 if k % 3 == 0 else float(k)) for k in range(40)}
    want.update({k: 1.0 for k in range(100, 120)})
    assert got == want
    table.insert([{"k": 200, "v": 2.0}])  # the parent's own pools still work
    assert fresh.count() == 61


def test_closing_lets_other_threads_finish_their_reads(tmp_path: Path) -> None:
    table = _table(tmp_path)
    want = views.totals(table, sum="v").fetchall()
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                assert views.totals(table, sum="v").fetchall() == want
        except BaseException as e:  # reported by the test
            errors.append(e)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        for _ in range(30):
            with ledger.connect(str(tmp_path)).table("t") as other:
                relation = views.visible(other)
            assert len(relation.fetchall()) == 40  # a relation returned before close still runs
            table.close()
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert errors == []
