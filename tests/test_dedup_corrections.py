"""A dedup table whose dedup key does not tell loads apart (an event id) drops a row written
again for a key as a repeat of its first load: an update would keep the delete mark and drop the
new row, and the key's row would vanish. Such tables refuse updates and upserts of existing keys
before writing; inserts of new keys and deletes keep working, and a plain dedup table (the
default dedup key) is corrected as any other."""

from __future__ import annotations

from typing import Any

import pytest

import ledger
import views

SCHEMA = {"id": "BIGINT", "score": "BIGINT"}
EVENT_IDS = {"name": "dedup", "dedup_key": ["id"]}


def _table(tmp_path: Any, policy: dict[str, Any]) -> ledger.Table:
    table = ledger.connect(str(tmp_path)).create_table(
        "ev", SCHEMA, primary_key="id", policy=policy
    )
    table.insert([{"id": 1, "score": 5}, {"id": 2, "score": 7}])
    return table


@pytest.mark.parametrize(
    "correct",
    [
        lambda t: t.update([{"id": 1, "score": 6}]),
        lambda t: t.upsert([{"id": 1, "score": 6}, {"id": 3, "score": 1}]),
        lambda t: t.upsert([{"id": 2}]),
    ],
    ids=["update", "upsert", "partial-upsert"],
)
def test_a_correction_of_an_event_id_table_is_refused_before_writing(tmp_path, correct):
    table = _table(tmp_path, EVENT_IDS)
    with pytest.raises(ledger.InvalidArgumentError, match="dedup key"):
        correct(table)
    assert table.version == 1
    assert sorted(views.visible(table).fetchall()) == [(1, 5), (2, 7)]


def test_an_event_id_table_takes_new_keys_and_deletes(tmp_path):
    table = _table(tmp_path, EVENT_IDS)
    table.upsert([{"id": 3, "score": 1}])
    table.delete([2])
    table.insert([{"id": 1, "score": 5}])  # a second load of event 1: a repeat
    assert sorted(views.visible(table).fetchall()) == [(1, 5), (3, 1)]
    assert table.count() == 2
    table.merge()
    assert sorted(views.visible(table).fetchall()) == [(1, 5), (3, 1)]


def test_a_dedup_table_with_its_default_key_is_corrected(tmp_path):
    table = _table(tmp_path, {"name": "dedup"})
    table.update([{"id": 1, "score": 6}])
    table.upsert([{"id": 2, "score": 8}])
    assert sorted(views.visible(table).fetchall()) == [(1, 6), (2, 8)]


@pytest.mark.spark
def test_spark_refuses_a_correction_of_an_event_id_table(spark, tmp_path):
    import ledger.spark as ls

    table = _table(tmp_path, EVENT_IDS)
    frame = spark.createDataFrame([(1, 6)], "id long, score long")
    with pytest.raises(ledger.InvalidArgumentError, match="dedup key"):
        ls.upsert(table, frame)
    assert table.version == 1
    ls.upsert(table, spark.createDataFrame([(4, 2)], "id long, score long"))
    assert sorted(views.visible(table).fetchall()) == [(1, 5), (2, 7), (4, 2)]
