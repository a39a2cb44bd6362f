"""Partition values of any length work: a value whose escaped path segment would be too long for
a file system (255 bytes per segment) or an S3 key (1024 bytes) is hashed into the path, and
its exact value is kept in the file marker, where every read takes it from."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.partitioning import PATH_LIMIT, SEGMENT_LIMIT
from tests.conftest import Location, examples
from tests.support.ledger_reads import visible_rows

LINUX_SEGMENT_BYTES = 255
S3_KEY_BYTES = 1024


def _data_keys(table: ledger.Table) -> list[str]:
    return [info.key for info in table.store.list(table.prefix + "_data/")]


def _check_keys(table: ledger.Table) -> None:
    for key in _data_keys(table):
        assert len(key.encode()) <= S3_KEY_BYTES
        assert all(len(segment.encode()) <= LINUX_SEGMENT_BYTES for segment in key.split("/"))


@pytest.mark.parametrize(
    "value",
    ["x" * 300, "é" * 50, "☃" * 90, "/" * 100, "a" * (SEGMENT_LIMIT - 2), "%" * 70],
)
def test_long_partition_values_are_written_and_read_back_exactly(
    location: Location, value: str
) -> None:
    warehouse = location.connect()
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "p": "VARCHAR"}, primary_key="id", partition_by="p"
    )
    table.insert([{"id": 1, "p": "short"}, {"id": 2, "p": value}, {"id": 3, "p": value + "!"}])
    table.upsert([{"id": 2, "p": value + "?"}])
    _check_keys(table)
    fresh = location.connect().table("t")
    assert visible_rows(fresh) == [(1, "short"), (2, value + "?"), (3, value + "!")]
    assert fresh.count(partitions={"p": value + "!"}) == 1
    assert fresh.count(partitions={"p": value}) == 0
    assert {m.partition["p"] for m in fresh.snapshot().markers()} == {
        "short",
        value,
        value + "!",
        value + "?",
    }
    fresh.merge(min_files=1)
    assert visible_rows(location.connect().table("t")) == [
        (1, "short"),
        (2, value + "?"),
        (3, value + "!"),
    ]


def test_many_long_partition_columns_fit_an_s3_key(location: Location) -> None:
    columns = {f"part_column_number_{i}": "VARCHAR" for i in range(4)}
    table = location.connect().create_table(
        "t", {"id": "BIGINT", **columns}, primary_key="id", partition_by=list(columns)
    )
    rows = [{"id": i, **{c: f"{c}-{i}-" + "ü" * 120 for c in columns}} for i in range(3)]
    table.insert(rows)
    _check_keys(table)
    assert sum(len(k.encode()) for k in _data_keys(table)) > 0
    got = sorted(location.connect().table("t").snapshot().scan().fetchall())
    assert [row[: 1 + len(columns)] for row in got] == [
        (r["id"], *(r[c] for c in columns)) for r in rows
    ]


def test_partition_columns_whose_names_cannot_fit_a_path_are_refused_before_any_write(
    location: Location,
) -> None:
    warehouse = location.connect()
    columns = {("c" * 120) + str(i): "VARCHAR" for i in range(4)}
    with pytest.raises(ledger.InvalidArgumentError, match="partition paths longer"):
        warehouse.create_table(
            "t", {"id": "BIGINT", **columns}, primary_key="id", partition_by=list(columns)
        )
    assert list(warehouse.store.list("t/")) == []
    assert isinstance(ledger.InvalidArgumentError("x"), ValueError)


def _property_values() -> Any:
    lengths = st.sampled_from([0, 1, 20, 60, 100, 140, 199, 200, 201, 260, 400])
    return lengths.flatmap(lambda n: st.text(min_size=n, max_size=n))


@settings(max_examples=examples(12))
@given(values=st.lists(_property_values(), min_size=1, max_size=4, unique=True))
def test_any_unicode_partition_values_round_trip(tmp_path_factory: Any, values: list[str]) -> None:
    root = tmp_path_factory.mktemp("warehouse")
    warehouse = ledger.connect(str(root))
    table = warehouse.create_table(
        "t",
        {"id": "BIGINT", "p": "VARCHAR", "q": "VARCHAR"},
        primary_key="id",
        partition_by=["p", "q"],
    )
    rows = [{"id": i, "p": v, "q": v[::-1]} for i, v in enumerate(values)]
    table.insert(rows)
    _check_keys(table)
    fresh = ledger.connect(str(root)).table("t")
    assert visible_rows(fresh) == [(r["id"], r["p"], r["q"]) for r in rows]
    for row in rows:
        assert fresh.count(partitions={"p": row["p"], "q": row["q"]}) == 1
    assert len(_data_keys(fresh)) == len(values)
    assert max(len(k.encode()) for k in _data_keys(fresh)) <= PATH_LIMIT + 100


def test_spark_writes_long_partition_values_to_the_same_paths(spark: Any, tmp_path: Any) -> None:
    import ledger.spark as ls

    value = "é" * 50 + "x" * 150
    warehouse = ledger.connect(str(tmp_path / "warehouse"))
    schema = {"id": "BIGINT", "p": "VARCHAR"}
    by_spark = warehouse.create_table("s", schema, primary_key="id", partition_by="p")
    embedded = warehouse.create_table("e", schema, primary_key="id", partition_by="p")
    rows = [{"id": 1, "p": value}, {"id": 2, "p": "short"}]
    ls.insert(by_spark, spark.createDataFrame(rows, "id BIGINT, p STRING"))
    ls.upsert(by_spark, spark.createDataFrame([{"id": 1, "p": value + "!"}], "id BIGINT, p STRING"))
    embedded.insert(rows)
    embedded.upsert([{"id": 1, "p": value + "!"}])
    _check_keys(by_spark)
    assert visible_rows(by_spark) == visible_rows(embedded) == [(1, value + "!"), (2, "short")]

    def folders(table: ledger.Table) -> set[str]:
        return {m.path.rsplit("/", 1)[0] for m in table.snapshot().markers()}

    assert folders(by_spark) == folders(embedded)
