"""Foreign names under a table's ``_trx/`` and ``_log/`` folders (files and folders no writer
makes) are ignored: writes, reads, merges and vacuum keep working and give the same answers."""

from __future__ import annotations

import os
from typing import Any

import pytest

import ledger
import views

ARABIC_DIGITS = "".join(chr(0x0660 + int(d)) for d in "00000000000000000007")

FOREIGN_RESERVATIONS = [
    "99999999999999999999",  # above every 64-bit integer
    "09223372036854775807",  # the largest 64-bit integer: no generated _row_id can hold it
    "00000000004294967296",  # 2**32: the high half of a _row_id would overflow
    "-0000000000000000005",
    "-5",
    "0001",  # leading zeros, but not the 20 digits reservations have
    "000000000000000000001",  # 21 digits
    "not-a-number",
    ARABIC_DIGITS,  # digits to str.isdigit, not to the format
    "²",
    "ünïcode",
]

FOREIGN_LOG_NAMES = [
    "99999999999999999999.jsonl",
    "99999999999999999999.checkpoint.jsonl",
    "01000000000000000000.jsonl",  # fits 64 bits, but follows no version of the log
    "00000000000000000999.jsonl",
    "00000000000000000998.checkpoint.jsonl",
    "18446744073709551616.jsonl",
    "-0000000000000000001.jsonl",
    "1.jsonl",
    "000000000000000000003.jsonl",  # 21 digits
    ARABIC_DIGITS + ".jsonl",
    "notes.txt",
    "ünïcode.jsonl",
    "00000000000000000001.jsonl.bak",
]


def _scatter(location: Any, table: ledger.Table, names: list[str], folder: str) -> None:
    store = location.connect().store
    for name in names:
        store.put(f"{table.prefix}{folder}/{name}", b"not ours\n")


def _occupy_with_directory(location: Any, key: str) -> None:
    """Make a "directory" named ``key``: a real one on local disk, a key below it on S3."""
    store = location.connect().store
    if location.backend == "local":
        os.makedirs(os.path.join(store.root, *key.split("/"), "inner"))
        with open(os.path.join(store.root, *key.split("/"), "inner", "file"), "wb") as f:
            f.write(b"kept")
    else:
        store.put(key + "/inner/file", b"kept")


def _visible(table: ledger.Table) -> dict[Any, Any]:
    return {r[0]: r[1:] for r in views.visible(table).fetchall()}


@pytest.mark.parametrize("primary_key", [["id"], None])
def test_foreign_names_never_stop_a_table(location, primary_key):
    warehouse = location.connect()
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "v": "BIGINT"}, primary_key=primary_key, checkpoint_interval=3
    )
    table.insert([{"id": 1, "v": 10}, {"id": 2, "v": 20}])
    _scatter(location, table, FOREIGN_RESERVATIONS, "_trx")
    _scatter(location, table, FOREIGN_LOG_NAMES, "_log")
    next_version = table.version + 1
    _occupy_with_directory(location, table.handle.log.commit_key(next_version))
    _occupy_with_directory(location, f"{table.prefix}_trx/{3:020d}")

    model = {1: (10,), 2: (20,)}
    table = location.connect().table("t")
    table.insert([{"id": 3, "v": 30}])
    model[3] = (30,)
    assert table.version == next_version
    if primary_key:
        table.upsert([{"id": 1, "v": 11}, {"id": 4, "v": 40}])
        table.update([{"id": 2, "v": 21}])
        table.delete([3])
        model.update({1: (11,), 4: (40,), 2: (21,)})
        del model[3]
    else:
        table.delete_where("id = 3")
        del model[3]
    assert {r[0]: r[1:] for r in views.visible(table).fetchall()} == model
    trx_ids = [r[0] for r in table.scan().aggregate("max(trx_id)").fetchall()]
    assert trx_ids[0] < 100  # no foreign name pushed the ids up

    table.merge(min_files=1)
    table.vacuum(0)
    for reopened in (table, location.connect().table("t")):
        assert _visible(reopened) == model
        total = views.totals(reopened, sum="v").fetchall()
        assert total == [(len(model), sum(v for (v,) in model.values()))]
        assert reopened.count() == len(model)
    table.insert([{"id": 5, "v": 50}])
    model[5] = (50,)
    assert _visible(location.connect().table("t")) == model
    history = [c.version for c in location.connect().table("t").history()]
    assert history == sorted(history)


def test_a_directory_named_like_the_next_version_is_kept_aside(location):
    table = location.connect().create_table("t", {"id": "BIGINT"}, primary_key="id")
    key = table.handle.log.commit_key(1)
    _occupy_with_directory(location, key)
    table.insert([{"id": 1}])
    assert table.version == 1
    store = location.connect().store
    kept = [i.key for i in store.list(table.prefix + "_log/") if i.key.endswith("/inner/file")]
    assert len(kept) == 1
    assert store.get(kept[0]) == b"kept"
    assert _visible(location.connect().table("t")) == {1: ()}
