"""A partitioned append makes every data file, and every folder entry naming one, durable
before its log commit: each file's fsync starts as soon as the file is written, and the
write waits for all of them (and for its folders') before the commit."""

from __future__ import annotations

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
