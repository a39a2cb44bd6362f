"""Vacuum removes the temporary files of writers killed part-way through a write.

On local disk every write goes through a ``.tmp-<hex>`` file next to its final name (see
ledger/storage/local.py). A writer killed between writing it and linking it into place leaves it
behind; readers ignore it, and vacuum deletes it once it is as old as an orphan must be (older
than both the grace and the transaction timeout, plus the clock-skew margin), so a write still
in progress never loses its temporary file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ledger
from ledger.maintenance import vacuum as vacuuming
from tests.conftest import Location
from tests.support.maintenance import ShiftedClock, set_clock_skew

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "part": "VARCHAR"}


def _table(location: Location) -> ledger.Table:
    warehouse = location.connect()
    table = warehouse.create_table(
        "t", SCHEMA, primary_key="k", partition_by="part", transaction_timeout=1
    )
    table.insert([{"k": 1, "v": 1, "part": "a"}])
    return table


def _folder(location: Location) -> Path:
    return Path(location.uri) / "t"


def _files(location: Location) -> set[str]:
    root = _folder(location)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _plant(path: Path, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"v":1,"t":1')  # a write cut short
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_vacuum_deletes_old_temporary_files_everywhere_in_the_table_and_keeps_young_ones(
    local_location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch)
    table = _table(local_location)
    root = _folder(local_location)
    partition = next(p for p in (root / "_data").iterdir() if p.is_dir())
    old = [
        _plant(root / "_log" / ".tmp-0a1b", 5),
        _plant(root / "_trx" / ".tmp-2c3d", 5),
        _plant(partition / ".tmp-4e5f", 5),
    ]
    young = _plant(root / "_log" / ".tmp-6789", 0)
    before = _files(local_location) - {str(p.relative_to(root)) for p in old}
    version = table.version

    result = table.vacuum(0)
    assert result.temporaries_deleted == 3
    assert not any(p.exists() for p in old)
    assert young.exists()  # as young as a write in progress: kept
    assert _files(local_location) == before
    fresh = local_location.connect().table("t")
    assert (fresh.version, fresh.count()) == (version, 1)

    # Older than the grace but not than the transaction timeout: kept.
    assert table.vacuum(0).temporaries_deleted == 0
    monkeypatch.setattr(vacuuming, "time", ShiftedClock(1.5))
    assert table.vacuum(0).temporaries_deleted == 1
    assert not young.exists()
    assert local_location.connect().table("t").count() == 1


def test_a_long_grace_keeps_temporary_files_as_long(
    local_location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch)
    table = _table(local_location)
    planted = _plant(_folder(local_location) / "_log" / ".tmp-abcd", 5)
    assert table.vacuum(60).temporaries_deleted == 0
    assert planted.exists()
    assert table.vacuum(4).temporaries_deleted == 1
    assert not planted.exists()


# A writer that blocks in the commit's put-if-absent after the temporary log file is written and
# fsynced (just before it is linked to its final name), says so, and waits to be killed.
_KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import ledger

    table = ledger.connect(sys.argv[1]).table("t")
    real_link = os.link

    def link_then_hang(source, target, *args, **kwargs):
        if "/_log/" in target:
            print("linking", flush=True)
            time.sleep(600)
        return real_link(source, target, *args, **kwargs)

    os.link = link_then_hang
    table.insert([{"k": 2, "v": 2, "part": "b"}])
    """
)


def test_a_writer_killed_mid_commit_leaves_a_temporary_log_file_that_vacuum_removes(
    local_location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch)
    table = _table(local_location)
    version = table.version
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, local_location.uri],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "linking"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    log_folder = _folder(local_location) / "_log"
    leftovers = [p.name for p in log_folder.iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1

    fresh = local_location.connect().table("t")
    assert (fresh.version, fresh.count()) == (version, 1)  # the killed commit never landed
    assert table.vacuum(0).temporaries_deleted == 0  # it might still be a write in progress

    monkeypatch.setattr(vacuuming, "time", ShiftedClock(2))
    result = table.vacuum(0)
    assert result.temporaries_deleted == 1
    assert result.orphans_deleted == 1  # the killed transaction's data file
    assert not [p for p in log_folder.iterdir() if p.name.startswith(".tmp-")]
    after = local_location.connect().table("t")
    assert (after.version, after.count()) == (version, 1)
    assert after.insert([{"k": 3, "v": 3, "part": "b"}]).version == version + 1
    assert after.count() == 2
