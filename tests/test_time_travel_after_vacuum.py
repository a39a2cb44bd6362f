"""Time travel to before a table's first commit, after vacuum deleted the files of its early
versions: the refusal names the oldest version that can still be read, not the empty create,
in the library's error and in the ``ledger`` command's message."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ledger

ROOT = Path(__file__).resolve().parent.parent
BEFORE_CREATION = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
AT_START = ("--at", "2000-01-01T00:00:00Z")


def _orders(warehouse: Path, *, vacuumed: bool) -> ledger.Table:
    """Versions 1-4 insert one file each, a merge rewrites them into one; with ``vacuumed``
    the four files are deleted, so versions 1-4 can no longer be read."""
    orders = ledger.connect(str(warehouse)).create_table(
        "orders", {"order_id": "VARCHAR", "amount": "BIGINT"}, primary_key="order_id"
    )
    for n in range(1, 5):
        orders.insert([{"order_id": f"o-{n}", "amount": n}])
    orders.merge()
    if vacuumed:
        # Commit times step at least a millisecond per commit, so after six quick commits the
        # merge's tombstones can be stamped ahead of the clock: vacuum(0) expires them a few
        # milliseconds later.
        deadline = time.monotonic() + 30
        while orders.vacuum(0).data_files_deleted == 0:
            assert time.monotonic() < deadline, "vacuum(0) deleted none of the merged files"
            time.sleep(0.05)
    return orders.refresh()


def _readable(table: ledger.Table, version: int) -> bool:
    try:
        table.snapshot(version).files()
    except ledger.SnapshotNotFoundError:
        return False
    return True


def _oldest_of_the_readable_run(table: ledger.Table) -> int:
    """The plain answer: walk down from the latest version while every version reads."""
    oldest = table.version
    while oldest > 0 and _readable(table, oldest - 1):
        oldest -= 1
    return oldest


def test_the_library_names_the_oldest_readable_version_after_vacuum(tmp_path: Path) -> None:
    orders = _orders(tmp_path / "wh", vacuumed=True)
    oldest = _oldest_of_the_readable_run(orders)
    assert oldest > 1 and not _readable(orders, 1)
    with pytest.raises(ledger.SnapshotNotFoundError) as refused:
        orders.snapshot(timestamp=BEFORE_CREATION)
    message = str(refused.value)
    assert f"its oldest readable version is {oldest}:" in message
    assert f"versions 1-{oldest - 1} can no longer be read" in message
    assert "version 0" not in message
    assert orders.snapshot(oldest).count() == 4  # the advice leads to the data


def test_without_vacuum_the_oldest_commit_is_still_named(tmp_path: Path) -> None:
    orders = _orders(tmp_path / "wh", vacuumed=False)
    with pytest.raises(ledger.SnapshotNotFoundError, match="oldest readable commit is version 0"):
        orders.snapshot(timestamp=BEFORE_CREATION)


def test_the_command_names_the_oldest_readable_version_after_vacuum(tmp_path: Path) -> None:
    orders = _orders(tmp_path / "wh", vacuumed=True)
    oldest = _oldest_of_the_readable_run(orders)
    result = subprocess.run(
        [sys.executable, "-m", "ledger", "-w", str(tmp_path / "wh"), "show", "orders", *AT_START],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0 and result.stdout == ""
    assert f"its oldest readable version is {oldest}:" in result.stderr
    assert f"versions 1-{oldest - 1} can no longer be read" in result.stderr
