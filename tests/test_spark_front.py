"""The Spark front (``ledger.spark``) speaks the embedded API: its verbs take the keyword
arguments of the ``Table`` verbs and ``views`` functions they mirror, and mean the same."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import ledger
import ledger.spark as ls
import views

# Spark verb -> the embedded function it mirrors.
MIRRORS: dict[str, Callable[..., Any]] = {
    "insert": ledger.Table.insert,
    "append_entries": ledger.Table.append_entries,
    "upsert": ledger.Table.upsert,
    "update": ledger.Table.update,
    "delete": ledger.Table.delete,
    "merge": ledger.Table.merge,
    "visible": views.visible,
    "totals": views.totals,
    "history": views.history,
    "changes": views.changes,
    "publish_delta": views.publish_delta,
}
# The embedded API's own arguments that have no meaning on Spark: a DuckDB connection, and
# deltalake's storage options (delta-spark takes the session's Hadoop settings).
EMBEDDED_ONLY = {"con", "storage_options"}
# Arguments a Table verb takes through **kw and passes to Table.retrying.
RETRYING = {"retries", "app_id", "batch"}


def _keywords(function: Callable[..., Any]) -> set[str]:
    parameters = inspect.signature(function).parameters.values()
    return {
        p.name
        for p in parameters
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
    }


@pytest.mark.parametrize("verb", sorted(MIRRORS))
def test_each_spark_verb_takes_the_arguments_of_the_embedded_one(verb: str) -> None:
    embedded = MIRRORS[verb]
    wanted = _keywords(embedded) - EMBEDDED_ONLY
    if verb in ("upsert", "update", "delete"):
        wanted |= RETRYING
    spark_verb = getattr(ls, verb)
    parameters = inspect.signature(spark_verb).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        # Passed on whole to the embedded code (merge: the options of Table.merge).
        assert verb == "merge", f"ledger.spark.{verb} takes **kwargs: name its arguments"
        return
    # The first argument is the table or transaction written or read, named as each side names it.
    got = _keywords(spark_verb)
    first = next(iter(inspect.signature(spark_verb).parameters))
    missing = sorted(wanted - got - {"data", "keys", "table", "source", "self"} - {first})
    assert not missing, f"ledger.spark.{verb} lacks {missing}"


@pytest.mark.spark
def test_an_idempotent_spark_insert_commits_its_batch_once(spark: Any, tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "v": "VARCHAR"}, primary_key="k"
    )
    frame = spark.createDataFrame(pa.table({"k": [1, 2], "v": ["a", "b"]}).to_pandas())
    first = ls.insert(table, frame, app_id="loader", batch=7)
    again = ls.insert(table, frame, app_id="loader", batch=7)
    assert first.version is not None and again.version is None
    assert table.count() == 2
    with (
        pytest.raises(ledger.InvalidArgumentError, match="app_id and batch"),
        table.transaction() as tx,
    ):
        ls.upsert(tx, frame, app_id="loader", batch=8)
    assert table.count() == 2  # nothing written


@pytest.mark.spark
def test_spark_views_prune_partitions_as_the_embedded_views_do(spark: Any, tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "day": "VARCHAR", "v": "BIGINT"},
        primary_key="k",
        partition_by=["day"],
    )
    table.insert([{"k": i, "day": f"d{i % 2}", "v": i} for i in range(6)])
    table.upsert([{"k": 1, "day": "d1", "v": 10}])
    wanted = {"day": "d1"}
    embedded = views.visible(table, partitions=wanted).to_arrow_table().sort_by("k")
    on_spark = ls.visible(table, partitions=wanted).toPandas().sort_values("k")
    assert on_spark["k"].tolist() == embedded["k"].to_pylist() == [1, 3, 5]
    assert on_spark["v"].tolist() == embedded["v"].to_pylist()
    totals = ls.totals(table, sum="v", partitions=wanted).toPandas()
    assert totals["sum_v"].tolist() == [10 + 3 + 5]


def test_spark_partition_restricted_views_follow_keys_into_other_partitions(
    spark: Any, tmp_path: Any
) -> None:
    # Keyed apart from its partition column: a key written again into another partition
    # moves its row there, on Spark as in the embedded views.
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "day": "VARCHAR", "v": "BIGINT"},
        primary_key="k",
        partition_by=["day"],
        policy="replacing",
    )
    table.insert([{"k": i, "day": f"d{i % 2}", "v": i} for i in range(6)])
    table.insert([{"k": 2, "day": "d1", "v": 20}, {"k": 3, "day": "d0", "v": 30}])
    for day in ("d0", "d1"):
        wanted = {"day": day}
        embedded = views.visible(table, partitions=wanted).order("k").fetchall()
        whole = [r for r in views.visible(table).order("k").fetchall() if r[1] == day]
        on_spark = ls.visible(table, partitions=wanted).toPandas().sort_values("k")
        assert embedded == whole
        assert list(on_spark.itertuples(index=False, name=None)) == whole
        totals = ls.totals(table, sum="v", partitions=wanted).toPandas()
        assert totals["count"].tolist() == [len(whole)]
        assert totals["sum_v"].tolist() == [sum(r[2] for r in whole)]


def test_spark_refuses_the_partition_restrictions_only_the_embedded_views_filter(
    spark: Any, tmp_path: Any
) -> None:
    # Partitioned by a measure: a group's row takes its partition from all of its entries.
    policy = {"name": "aggregating", "measures": {"v": "sum", "day": "max"}, "insert_only": True}
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "v": "BIGINT", "day": "VARCHAR"},
        "k",
        partition_by="day",
        policy=policy,
    )
    table.insert([{"k": 1, "v": 1, "day": "d0"}, {"k": 1, "v": 2, "day": "d1"}])
    assert views.visible(table, partitions={"day": "d1"}).fetchall() == [(1, 3, "d1")]
    with pytest.raises(ledger.InvalidArgumentError, match="only the embedded views"):
        ls.visible(table, partitions={"day": "d1"})
