"""Structured Streaming into a ledger table through ``ledger.spark.stream_sink`` (foreachBatch).

A file source reads one JSON file per micro-batch; each batch commits once, carrying the query's
id and the batch id as its idempotency key. Checked:

- a query stopped after some batches and restarted from its checkpoint (more files added in
  between) loads every row exactly once, under one query id;
- a crash after the ledger commit but before Spark records the batch in its checkpoint (the
  newest ``commits/`` entry deleted after stopping): Spark replays the batch on restart and the
  replay adds nothing, in ``insert`` and in ``upsert`` mode;
- the sink refuses to run outside a stream.

Streaming triggers are slow, so batches are few and ``processAllAvailable()`` drives them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import ledger
import ledger.spark as ls
import views

pytestmark = pytest.mark.spark

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "src": "VARCHAR"}
SPARK_SCHEMA = "k bigint, v bigint, src string"


class Feed:
    """A folder of JSON-lines files, written one by one with increasing modification times (the
    order a file source takes them in)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "input"
        self.dir.mkdir()
        self.files = 0
        self.rows: list[dict[str, Any]] = []

    def add(self, rows: list[dict[str, Any]]) -> None:
        path = self.dir / f"part-{self.files:04d}.json"
        tmp = self.dir / f".part-{self.files:04d}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        stamp = 1_700_000_000 + 10 * self.files
        os.utime(tmp, (stamp, stamp))
        tmp.rename(path)  # the source never sees a half-written file
        self.files += 1
        self.rows += rows


def _events(start: int, count: int, src: str) -> list[dict[str, Any]]:
    return [{"k": k, "v": 10 * k, "src": src} for k in range(start, start + count)]


def _start(spark: Any, feed: Feed, table: ledger.Table, checkpoint: Path, **sink: Any) -> Any:
    stream = (
        spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(feed.dir))
    )
    return (
        stream.writeStream.foreachBatch(ls.stream_sink(table, **sink))
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def _run(spark: Any, feed: Feed, table: ledger.Table, checkpoint: Path, **sink: Any) -> str:
    """Start the query from ``checkpoint``, load every file there is, stop; return its id."""
    query = _start(spark, feed, table, checkpoint, **sink)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    return str(query.id)


def _forget_last_batches(checkpoint: Path, count: int = 1) -> list[int]:
    """Simulate a crash after the ledger commit of the newest ``count`` batches but before Spark
    recorded them: delete their entries (and checksums) under ``commits/``."""
    commits = checkpoint / "commits"
    batches = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    forgotten = batches[-count:]
    for batch in forgotten:
        (commits / str(batch)).unlink()
        crc = commits / f".{batch}.crc"
        if crc.exists():
            crc.unlink()
    return forgotten


def _stream_commits(table: ledger.Table, query_id: str) -> list[int | None]:
    return [c.batch for c in table.refresh().history() if c.app_id == f"stream:{query_id}"]


def _check_loaded_once(table: ledger.Table, rows: list[dict[str, Any]]) -> None:
    """Every row of the feed is in the table exactly once (keys are unique in the feed)."""
    per_key = views.totals(table, by="k", sum="v").fetchall()
    assert sorted(per_key) == sorted((r["k"], 1, r["v"]) for r in rows)
    assert views.totals(table).fetchall() == [(len(rows),)]
    assert table.count() == len(rows)
    visible = views.visible(table).fetchall()
    assert sorted(visible) == sorted((r["k"], r["v"], r["src"]) for r in rows)


def test_stop_and_restart_from_the_checkpoint_loads_every_row_once(
    spark: Any, tmp_path: Path
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("events", SCHEMA, primary_key="k")
    feed = Feed(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    for n in range(4):
        feed.add(_events(3 * n, 3, f"f{n}"))
    # Stopped while batches are left (one file per batch), maybe in the middle of one.
    query = _start(spark, feed, table, checkpoint)
    first = str(query.id)
    deadline = time.monotonic() + 120
    while ls.committed_batch(table, first) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
    done = ls.committed_batch(table, first)
    assert done is not None
    assert _stream_commits(table, first) == list(range(done + 1))

    feed.add(_events(12, 2, "f4"))
    second = _run(spark, feed, table, checkpoint)
    assert second == first  # the id lives in the checkpoint
    _check_loaded_once(table, feed.rows)
    assert ls.committed_batch(table, first) == 4
    assert _stream_commits(table, first) == [0, 1, 2, 3, 4]


def test_a_batch_replayed_after_a_crash_adds_nothing(spark: Any, tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("events", SCHEMA, primary_key="k")
    feed = Feed(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    feed.add(_events(0, 2, "f0"))
    feed.add(_events(2, 3, "f1"))
    query_id = _run(spark, feed, table, checkpoint)
    assert _forget_last_batches(checkpoint) == [1]
    version = table.refresh().version

    # Spark replays batch 1 (its offsets are still logged): the ledger skips it.
    assert _run(spark, feed, table, checkpoint) == query_id
    assert table.refresh().version == version
    _check_loaded_once(table, feed.rows)
    assert (checkpoint / "commits" / "1").exists()  # Spark did run it again

    # The query goes on with new files after the replay.
    feed.add(_events(5, 1, "f2"))
    _run(spark, feed, table, checkpoint)
    _check_loaded_once(table, feed.rows)
    assert _stream_commits(table, query_id) == [0, 1, 2]


def test_upsert_stream_replaces_rows_and_a_replay_adds_nothing(spark: Any, tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("dim", SCHEMA, primary_key="k")
    table.insert([{"k": 1, "v": -1, "src": "seed"}, {"k": 9, "v": -9, "src": "seed"}])
    feed = Feed(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    feed.add([{"k": 1, "v": 10, "src": "f0"}, {"k": 2, "v": 20, "src": "f0"}])
    feed.add([{"k": 2, "v": 21, "src": "f1"}, {"k": 3, "v": 30, "src": "f1"}])
    query_id = _run(spark, feed, table, checkpoint, operation="upsert")
    want = {1: (1, 10, "f0"), 2: (2, 21, "f1"), 3: (3, 30, "f1"), 9: (9, -9, "seed")}
    assert sorted(views.visible(table).fetchall()) == sorted(want.values())
    sums = views.totals(table, by="k", sum="v").fetchall()
    assert sorted(sums) == sorted((k, 1, v) for k, v, _ in want.values())

    assert _forget_last_batches(checkpoint) == [1]
    version = table.refresh().version
    # A field absent from a JSON line is NULL in the stream's schema, so it is upserted as NULL.
    feed.add([{"k": 3, "v": 31}])
    assert _run(spark, feed, table, checkpoint, operation="upsert") == query_id
    want[3] = (3, 31, None)
    assert table.refresh().version == version + 1  # the replay of batch 1 committed nothing
    assert sorted(views.visible(table).fetchall()) == sorted(want.values())
    sums = views.totals(table, by="k", sum="v").fetchall()
    assert sorted(sums) == sorted((k, 1, v) for k, v, _ in want.values())
    assert _stream_commits(table, query_id) == [0, 1, 2]
    assert ls.committed_batch(table, query_id) == 2


def test_the_sink_refuses_a_batch_dataframe(spark: Any, tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("events", SCHEMA, primary_key="k")
    sink = ls.stream_sink(table)
    frame = spark.createDataFrame([(1, 10, "x")], SPARK_SCHEMA)
    with pytest.raises(ledger.InvalidArgumentError, match="foreachBatch"):
        sink(frame, 0)
    assert table.refresh().version == 0
    assert table.count() == 0
    with pytest.raises(ledger.InvalidArgumentError):
        ls.stream_sink(table, operation="delete")
