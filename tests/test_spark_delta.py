"""Publishing to Delta Lake through delta-spark (``ledger.spark.publish_delta``).

The Delta Lake jars come from `make jars` (jvm/pom.xml) and go on the session's classpath through
`spark.jars`; where they were not fetched, these tests skip with a message naming that target.
Every check reads the Delta table back with both delta-spark and deltalake (delta-rs) and
compares it with ``views.visible`` at the ledger version the publish recorded: same rows, same
row count, same sums. The `deltalake` writer is tested in full in tests/test_publish.py; here
the two writers also continue each other's publishes and produce tables either reader reads
identically.
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import ledger
import ledger.spark as ls
import views
from ledger.engines.spark import jars, publish
from ledger.engines.spark.convert import arrow_schema
from ledger.engines.spark.publish import delta_available
from views.publish import publish_plan

pytestmark = pytest.mark.spark

SCHEMA = {"id": "BIGINT", "account": "VARCHAR", "amount": "DECIMAL(18,2)", "x": "DOUBLE"}


@pytest.fixture
def delta_spark(spark: Any) -> Any:
    if not delta_available(spark):
        pytest.skip(jars.missing_message("delta"))
    return spark


def row(key: int, account: str, amount: str, x: float = 0.0) -> dict[str, Any]:
    return {"id": key, "account": account, "amount": Decimal(amount), "x": x}


def canonical(rows: list[dict[str, Any]]) -> list[tuple[tuple[str, Any], ...]]:
    """Rows as sorted (column, value) tuples in a stable order: multisets compare equal."""
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


def view_rows(table: ledger.Table, version: int | None = None) -> list[Any]:
    keyless = not table.primary_key
    rows = views.visible(table, version=version, system_columns=keyless).to_arrow_table()
    return canonical(rows.drop_columns([c for c in ("trx_id", "trx_seq") if keyless]).to_pylist())


def read_by_delta_rs(target: str) -> list[Any]:
    return canonical(DeltaTable(target).to_pyarrow_table().to_pylist())


def read_by_delta_spark(spark: Any, target: str) -> list[Any]:
    return canonical(spark.read.format("delta").load(target).toArrow().to_pylist())


def assert_published(spark: Any, target: str, table: ledger.Table, version: int) -> None:
    """Both readers see exactly the view at ``version``, the Delta table records it, and the
    view's totals count and sum those rows. Spark reads the table back in one job (each Spark
    job costs 0.2-1 s): its rows equal the view's, so its own sum and count of them would only
    check Spark."""
    expected = view_rows(table, version)
    by_rs = DeltaTable(target)
    assert canonical(by_rs.to_pyarrow_table().to_pylist()) == expected
    assert read_by_delta_spark(spark, target) == expected
    assert by_rs.transaction_version(views.publish.publish_app_id(table)) == version
    published = [dict(pairs) for pairs in expected]
    if published and "amount" in published[0]:
        totals = views.totals(table, sum="amount", version=version).to_arrow_table().to_pylist()
        assert totals[0]["count"] == len(published)
        assert totals[0]["sum_amount"] == sum((r["amount"] for r in published), Decimal(0))


def test_publishes_follow_inserts_updates_deletes_and_merges(delta_spark, tmp_path):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    table.insert([row(k, f"a{k}", f"{k}.25", k / 3) for k in range(20)])
    target = str(tmp_path / "delta")

    first = ls.publish_delta(table, target, spark=delta_spark)
    assert first.full and not first.skipped and first.previous is None
    assert (first.version, first.delta_version) == (table.version, 0)
    assert_published(delta_spark, target, table, first.version)

    table.update([row(1, "changed", "100.10", 1.5)])
    table.delete([2, 3])
    table.upsert([row(4, "upserted", "4.44"), row(50, "new", "50.05")])
    second = ls.publish_delta(table, target, spark=delta_spark)
    assert not second.full and second.previous == first.version
    assert (second.rows_deleted, second.rows_inserted) == (5, 3)  # keys 1-4 and 50; 1, 4, 50
    assert second.delta_version == 1
    assert_published(delta_spark, target, table, second.version)

    # A ledger merge changes no visible row: the publish records the new version all the same.
    table.merge()
    third = ls.publish_delta(table, target, spark=delta_spark)
    assert not third.skipped and third.version == table.version > second.version
    assert third.delta_version == 2
    assert_published(delta_spark, target, table, third.version)

    again = ls.publish_delta(table, target, spark=delta_spark)
    assert again.skipped and again.version == third.version
    assert DeltaTable(target).version() == 2


def test_a_retried_publish_is_a_no_op_in_delta_itself(delta_spark, tmp_path):
    """A publisher that crashed after its Delta commit and retries with the plan it had made
    (before reading the recorded version back) commits nothing: Delta's own application
    transaction check skips the write, full or merge."""
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    table.insert([row(k, "a", "1.00") for k in range(5)])
    target = str(tmp_path / "delta")

    full = publish_plan(table, None)
    assert publish.delta_publish(delta_spark, target, full) == 0
    assert publish.delta_publish(delta_spark, target, full) == 0
    assert_published(delta_spark, target, table, full.version)

    table.update([row(1, "b", "2.00")])
    table.insert([row(9, "c", "3.00")])
    merge = publish_plan(table, full.version)
    assert not merge.full
    assert publish.delta_publish(delta_spark, target, merge) == 1
    assert publish.delta_publish(delta_spark, target, merge) == 1
    assert_published(delta_spark, target, table, merge.version)
    assert read_by_delta_rs(target).count(canonical([row(9, "c", "3.00")])[0]) == 1


def test_either_writer_continues_the_others_publishes(delta_spark, tmp_path):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    table.insert([row(k, "a", f"{k}.00") for k in range(6)])
    by_rs, by_spark = str(tmp_path / "rs"), str(tmp_path / "spark")
    views.publish_delta(table, by_rs)
    ls.publish_delta(table, by_spark, spark=delta_spark)

    table.update([row(0, "b", "7.00")])
    table.delete([5])
    assert ls.publish_delta(table, by_rs, spark=delta_spark).previous == 1  # Spark after delta-rs
    assert views.publish_delta(table, by_spark).previous == 1  # delta-rs after Spark
    for target in (by_rs, by_spark):
        assert_published(delta_spark, target, table, table.version)
    assert views.publish_delta(table, by_rs).skipped
    assert ls.publish_delta(table, by_spark, spark=delta_spark).skipped


def test_both_writers_write_every_type_and_awkward_name_the_same(delta_spark, tmp_path):
    schema = {
        "Key_Col": "VARCHAR",
        'quo"te': "BIGINT",
        "back`tick": "INTEGER",
        "select": "SMALLINT",
        "tiny": "TINYINT",
        "ok": "BOOLEAN",
        "f": "FLOAT",
        "d": "DOUBLE",
        "blob": "BLOB",
        "day": "DATE",
        "at": "TIMESTAMP",
        "at_utc": "TIMESTAMPTZ",
        "money": "DECIMAL(38,6)",
    }
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "types", schema, primary_key=["Key_Col", 'quo"te']
    )

    def values(key: str, n: int) -> dict[str, Any]:
        return {
            "Key_Col": key,
            'quo"te': n,
            "back`tick": n * 2,
            "select": n,
            "tiny": n % 100,
            "ok": n % 2 == 0,
            "f": n + 0.5,
            "d": n / 3,
            "blob": bytes([n % 256]),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=n),
            "at": dt.datetime(2026, 1, 1, 12, 30, 15, 123456),
            "at_utc": dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC),
            "money": Decimal("12345678901234567890.123456"),
        }

    table.insert([values("a_b", 1), values("c", 2), values("c", 3)])
    by_rs, by_spark = str(tmp_path / "rs"), str(tmp_path / "spark")
    views.publish_delta(table, by_rs)
    ls.publish_delta(table, by_spark, spark=delta_spark)
    table.update([{**values("c", 2), "back`tick": 99}])
    table.delete([("a_b", 1)])
    views.publish_delta(table, by_rs)
    ls.publish_delta(table, by_spark, spark=delta_spark)

    assert DeltaTable(by_spark).schema().to_arrow() == DeltaTable(by_rs).schema().to_arrow()
    expected = view_rows(table)
    for target in (by_rs, by_spark):
        assert read_by_delta_rs(target) == expected
        assert read_by_delta_spark(delta_spark, target) == read_by_delta_spark(delta_spark, by_rs)


DELTA_SPARK_REFUSED_NAMES = ["Key Col", "a,b", "x=y"]


def test_names_delta_spark_cannot_write_are_refused_before_writing(delta_spark, tmp_path):
    # The refusal comes before any Spark job, so each name is checked on a table of its own; the
    # read back (a Spark job per table) is done once, on a table holding all of the names.
    warehouse = ledger.connect(str(tmp_path / "wh"))
    for number, name in enumerate(DELTA_SPARK_REFUSED_NAMES):
        table = warehouse.create_table(
            f"t{number}", {name: "BIGINT", "v": "DOUBLE"}, primary_key=name
        )
        table.insert([{name: 1, "v": 1.0}])
        target = str(tmp_path / f"delta{number}")
        with pytest.raises(ledger.SchemaError, match=r"views\.publish_delta"):
            ls.publish_delta(table, target, spark=delta_spark)
        assert not os.path.exists(target)
    # deltalake writes such names, and Spark reads what it wrote.
    schema = {**dict.fromkeys(DELTA_SPARK_REFUSED_NAMES, "BIGINT"), "v": "DOUBLE"}
    every = warehouse.create_table("every", schema, primary_key=DELTA_SPARK_REFUSED_NAMES[0])
    every.insert([{**dict.fromkeys(DELTA_SPARK_REFUSED_NAMES, 1), "v": 1.0}])
    target = str(tmp_path / "delta")
    views.publish_delta(every, target)
    assert read_by_delta_spark(delta_spark, target) == view_rows(every)


def test_a_table_without_a_key_is_matched_on_its_row_ids(delta_spark, tmp_path):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA)
    table.insert([row(1, "a", "1.00"), row(1, "a", "1.00"), row(2, "b", "2.00")])
    target = str(tmp_path / "delta")
    ls.publish_delta(table, target, spark=delta_spark)
    table.delete_where("account = 'b'")
    table.insert([row(1, "a", "1.00")])
    result = ls.publish_delta(table, target, spark=delta_spark)
    assert not result.full
    assert_published(delta_spark, target, table, table.version)
    assert len(read_by_delta_rs(target)) == 3


def test_targets_holding_another_source_or_other_columns_are_refused_before_writing(
    delta_spark, tmp_path
):
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("t", SCHEMA, primary_key="id")
    table.insert([row(1, "a", "1.00")])
    other = warehouse.create_table("other", SCHEMA, primary_key="id")
    other.insert([row(2, "b", "2.00")])
    theirs = str(tmp_path / "theirs")
    ls.publish_delta(other, theirs, spark=delta_spark)

    with pytest.raises(ledger.InvalidArgumentError, match="holds no publish of ledger table 't'"):
        ls.publish_delta(table, theirs, spark=delta_spark)
    assert DeltaTable(theirs).version() == 0 and read_by_delta_rs(theirs) == view_rows(other)

    # A new column of the source is added to the target (as with deltalake), then merged.
    other.insert([{**row(3, "c", "3.00"), "note": "new column"}], evolve_schema=True)
    ls.publish_delta(other, theirs, spark=delta_spark)
    assert_published(delta_spark, theirs, other, other.version)
    assert {"note"} <= set(DeltaTable(theirs).schema().to_arrow().names)
    other.update([{"id": 2, "note": "now noted"}])
    ls.publish_delta(other, theirs, spark=delta_spark)
    assert_published(delta_spark, theirs, other, other.version)
    # A new target takes the evolved view, readable by both engines.
    evolved = str(tmp_path / "evolved")
    ls.publish_delta(other, evolved, spark=delta_spark)
    assert_published(delta_spark, evolved, other, other.version)
    assert {"note"} <= set(DeltaTable(evolved).schema().to_arrow().names)


def test_rows_of_every_shape_survive_the_arrow_to_spark_hand_over(delta_spark):
    """The plan's Arrow rows become a DataFrame with the same schema, also when empty."""
    rows = pa.table(
        {"a": pa.array([], pa.decimal128(38, 6)), "b": pa.array([], pa.timestamp("us"))}
    )
    frame = publish._frame(delta_spark, rows)
    assert arrow_schema(frame) == rows.schema
    assert frame.count() == 0
