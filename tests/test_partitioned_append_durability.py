"""A partitioned append makes every data file, and every folder entry naming one, durable
before its log commit: each file's fsync starts as soon as the file is written, and the
write waits for all of them (and for its folders') before the commit."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

import ledger


def test_every_partition_file_and_folder_is_fsynced_before_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "user_id": "BIGINT"},
        primary_key="id",
        partition_by="bucket(8, user_id)",
    )
    monkeypatch.setattr(os, "fsync", spy)
    table.insert([{"id": i, "user_id": i * 7} for i in range(2_000)])
    files = [str(tmp_path / "t" / marker.path) for marker in table.snapshot().markers()]
    assert len(files) == 8
    commit_sync = max(i for i, path in enumerate(synced) if "/_log/" in path)
    for path in files:
        assert synced.index(path) < commit_sync
        folder = os.path.dirname(path)
        # The folder's entry for the file is flushed after the file was created.
        assert folder in synced[:commit_sync]


def test_each_folder_is_fsynced_only_once_it_holds_every_file_of_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder's fsync makes durable the entries it holds at that moment: each partition
    folder is flushed after every file the commit names in it was created (a new table's
    folders and a later write's alike), and so is each folder above a new one."""
    listed_at_sync: dict[str, list[set[str]]] = {}
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.isdir(path):
            listed_at_sync.setdefault(path, []).append(set(os.listdir(path)))
        real_fsync(fd)

    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "user_id": "BIGINT", "day": "DATE"},
        primary_key="id",
        partition_by=["day", "bucket(4, user_id)"],
    )
    monkeypatch.setattr(os, "fsync", spy)
    seen: set[str] = set()
    for start in (0, 3_000):  # new folders, then the same folders again
        listed_at_sync.clear()
        rows = [
            {"id": i, "user_id": i * 7, "day": dt.date(2024, 1, 1 + i % 3)}
            for i in range(start, start + 3_000)
        ]
        table.insert(rows)
        files = {str(tmp_path / "t" / marker.path) for marker in table.snapshot().markers()} - seen
        seen |= files
        assert len(files) == 12
        for path in files:
            folder, name = os.path.split(path)
            assert any(name in listed for listed in listed_at_sync.get(folder, []))
            # Every fsync of a folder of this write came after all of its files were created.
            assert all(name in listed for listed in listed_at_sync[folder])
        if start == 0:  # each day's new folder is named by a flushed entry of its parent
            for path in files:
                day_folder = os.path.dirname(os.path.dirname(path))
                parent, name = os.path.split(day_folder)
                assert any(name in listed for listed in listed_at_sync.get(parent, []))
