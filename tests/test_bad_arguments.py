"""Arguments of the wrong type, or integers the log cannot hold, raise a typed error (a
LedgerError that is also the matching builtin) saying what was wrong, before anything is
written: no key in the warehouse changes."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import ledger
import views

T = ledger.Table
W = ledger.Warehouse
Case = tuple[str, Callable[[W, T], Any], type[ledger.LedgerError], str]

SCHEMA = {"a": "BIGINT", "b": "VARCHAR", "v": "INTEGER"}
ROW = {"a": 2, "b": "y", "v": 1}
BIG = 2**70


def _create(**kwargs: Any) -> Callable[[W, T], Any]:
    arguments = {"schema": {"a": "BIGINT"}, **kwargs}
    return lambda wh, t: wh.create_table("u", **arguments)


BAD_ARGUMENTS: list[Case] = [
    # keys of a composite primary key
    ("key too short", lambda wh, t: t.delete([(1,)]), ledger.InvalidArgumentError, "key \\(1,\\)"),
    (
        "key too long",
        lambda wh, t: t.delete([(1, "x", 3)]),
        ledger.InvalidArgumentError,
        "2 values",
    ),
    ("scalar key", lambda wh, t: t.delete([1]), ledger.InvalidArgumentError, "\\['a', 'b'\\]"),
    # data
    (
        "arrow duplicate names",
        lambda wh, t: t.insert(pa.table([[2], ["y"], [2]], names=["a", "b", "b"])),
        ledger.SchemaError,
        "column 'b' twice",
    ),
    # create_table
    ("timeout inf", _create(transaction_timeout=math.inf), ledger.InvalidArgumentError, "inf"),
    ("timeout nan", _create(transaction_timeout=math.nan), ledger.InvalidArgumentError, "nan"),
    ("timeout negative", _create(transaction_timeout=-1), ledger.InvalidArgumentError, "-1"),
    ("timeout bool", _create(transaction_timeout=True), ledger.InvalidArgumentError, "bool"),
    ("timeout text", _create(transaction_timeout="60"), ledger.InvalidArgumentError, "str"),
    ("timeout huge", _create(transaction_timeout=1e30), ledger.InvalidArgumentError, "finite"),
    ("checkpoint bool", _create(checkpoint_interval=True), ledger.InvalidArgumentError, "bool"),
    ("checkpoint 2**70", _create(checkpoint_interval=BIG), ledger.InvalidArgumentError, "64-bit"),
    ("checkpoint float", _create(checkpoint_interval=2.0), ledger.InvalidArgumentError, "float"),
    ("checkpoint 0", _create(checkpoint_interval=0), ledger.InvalidArgumentError, "between 1"),
    ("primary_key int", _create(primary_key=5), ledger.InvalidArgumentError, "primary_key"),
    ("primary_key [int]", _create(primary_key=[5]), ledger.InvalidArgumentError, "primary_key"),
    ("primary_key bytes", _create(primary_key=b"a"), ledger.InvalidArgumentError, "primary_key"),
    ("partition_by int", _create(partition_by=5), ledger.InvalidArgumentError, "partition_by"),
    ("sort_by int", _create(sort_by=5), ledger.InvalidArgumentError, "sort_by"),
    (
        "bucket 2**70",
        _create(partition_by=f"bucket({BIG}, a)"),
        ledger.InvalidArgumentError,
        "bucket count",
    ),
    ("bucket ²", _create(partition_by="bucket(², a)"), ledger.InvalidArgumentError, "bucket"),
    ("schema int", _create(schema=5), ledger.SchemaError, "cannot be int"),
    ("schema None", _create(schema=None), ledger.SchemaError, "cannot be NoneType"),
    ("schema type int", _create(schema={"a": 5}), ledger.SchemaError, "SQL type names"),
    ("schema name int", _create(schema={5: "BIGINT"}), ledger.SchemaError, "SQL type names"),
    ("schema pair", _create(schema=[("a",)]), ledger.SchemaError, "not a \\(column, type\\)"),
    ("policy int", _create(policy=5), ledger.InvalidArgumentError, "policy"),
    ("table name int", lambda wh, t: wh.create_table(5, SCHEMA), ledger.InvalidArgumentError, "5"),
    # versions and timestamps, on tables and views
    ("scan version text", lambda wh, t: t.scan(version="1"), ledger.InvalidArgumentError, "str"),
    ("scan version float", lambda wh, t: t.scan(version=1.0), ledger.InvalidArgumentError, "float"),
    ("scan version bool", lambda wh, t: t.scan(version=True), ledger.InvalidArgumentError, "bool"),
    ("scan version -1", lambda wh, t: t.scan(version=-1), ledger.InvalidArgumentError, "-1"),
    ("count version 2**70", lambda wh, t: t.count(version=BIG), ledger.InvalidArgumentError, "64"),
    (
        "visible version text",
        lambda wh, t: views.visible(t, version="1"),
        ledger.InvalidArgumentError,
        "version must be a whole number",
    ),
    (
        "totals version 2**70",
        lambda wh, t: views.totals(t, version=BIG),
        ledger.InvalidArgumentError,
        "64-bit",
    ),
    (
        "history timestamp date",
        lambda wh, t: views.history(t, (1, "x"), timestamp=dt.date(2026, 1, 1)),
        ledger.InvalidArgumentError,
        "datetime or epoch milliseconds",
    ),
    (
        "scan timestamp text",
        lambda wh, t: t.scan(timestamp="2026"),
        ledger.InvalidArgumentError,
        "str",
    ),
    (
        "scan timestamp inf",
        lambda wh, t: t.files(timestamp=math.inf),
        ledger.InvalidArgumentError,
        "inf",
    ),
    (
        "scan timestamp 2**70",
        lambda wh, t: t.scan(timestamp=BIG),
        ledger.InvalidArgumentError,
        "64",
    ),
    (
        "changes since text",
        lambda wh, t: views.changes(t, "0"),
        ledger.InvalidArgumentError,
        "since",
    ),
    # idempotency tokens
    (
        "batch 2**70",
        lambda wh, t: t.insert([ROW], app_id="x", batch=BIG),
        ledger.InvalidArgumentError,
        "64",
    ),
    (
        "batch -1",
        lambda wh, t: t.insert([ROW], app_id="x", batch=-1),
        ledger.InvalidArgumentError,
        "-1",
    ),
    (
        "batch bool",
        lambda wh, t: t.upsert([ROW], app_id="x", batch=True),
        ledger.InvalidArgumentError,
        "bool",
    ),
    (
        "batch text",
        lambda wh, t: t.append_entries([ROW], app_id="x", batch="1"),
        ledger.InvalidArgumentError,
        "str",
    ),
    (
        "app_id int",
        lambda wh, t: t.insert([ROW], app_id=5, batch=1),
        ledger.InvalidArgumentError,
        "app_id",
    ),
    (
        "app_id empty",
        lambda wh, t: t.insert([ROW], app_id="", batch=1),
        ledger.InvalidArgumentError,
        "app_id",
    ),
    (
        "batch alone",
        lambda wh, t: t.insert([ROW], batch=1),
        ledger.InvalidArgumentError,
        "together",
    ),
    # flags and other arguments
    (
        "evolve_schema text",
        lambda wh, t: t.insert([ROW], evolve_schema="yes"),
        ledger.InvalidArgumentError,
        "evolve_schema",
    ),
    (
        "purge text",
        lambda wh, t: wh.drop_table("t", purge="no"),
        ledger.InvalidArgumentError,
        "purge",
    ),
    ("totals by int", lambda wh, t: views.totals(t, by=5), ledger.InvalidArgumentError, "by"),
    (
        "rollup by int",
        lambda wh, t: t.create_rollup("r", by=5, measures={"n": "count"}),
        ledger.InvalidArgumentError,
        "by",
    ),
    ("connect int", lambda wh, t: ledger.connect(5), ledger.InvalidArgumentError, "location"),
]

BUILTINS = {ledger.InvalidArgumentError: ValueError, ledger.SchemaError: ValueError}


def _keys(warehouse: W) -> list[tuple[str, int]]:
    return sorted((i.key, i.size) for i in warehouse.store.list(""))


def _run_bad(location: Any, case: Case) -> None:
    _, call, error, message = case
    warehouse = location.connect()
    table = warehouse.create_table("t", SCHEMA, primary_key=["a", "b"])
    table.insert([{"a": 1, "b": "x", "v": 1}])
    before = _keys(warehouse)
    with pytest.raises(error, match=message) as raised:
        relation = call(warehouse, table)
        if hasattr(relation, "fetchall"):
            relation.fetchall()
    assert isinstance(raised.value, ledger.LedgerError)
    assert isinstance(raised.value, BUILTINS[error])
    assert _keys(warehouse) == before
    reopened = location.connect().table("t")
    assert reopened.version == 1
    assert views.visible(reopened).fetchall() == [(1, "x", 1)]


@pytest.mark.parametrize("case", BAD_ARGUMENTS, ids=[c[0] for c in BAD_ARGUMENTS])
def test_bad_arguments_raise_typed_errors_and_write_nothing(local_location, case):
    _run_bad(local_location, case)


ON_S3 = ["key too short", "timeout inf", "batch 2**70", "scan version text", "purge text"]


@pytest.mark.parametrize("location", ["s3"], indirect=True)
@pytest.mark.parametrize("name", ON_S3)
def test_bad_arguments_on_s3(location, name):
    _run_bad(location, next(c for c in BAD_ARGUMENTS if c[0] == name))


@pytest.mark.spark
def test_spark_reads_check_versions_and_timestamps_the_same_way(spark, local_location):
    import ledger.spark as ls

    warehouse = local_location.connect()
    table = warehouse.create_table("t", SCHEMA, primary_key=["a", "b"])
    table.insert([{"a": 1, "b": "x", "v": 1}])
    before = _keys(warehouse)
    bad_reads = [
        (lambda: ls.read(table, version="1", spark=spark), "version must be a whole number"),
        (lambda: ls.visible(table, version=BIG, spark=spark), "64-bit"),
        (lambda: ls.totals(table, timestamp=math.inf, spark=spark), "datetime or epoch"),
        (lambda: ls.visible(table, timestamp=dt.date(2026, 1, 1), spark=spark), "datetime"),
    ]
    for read, message in bad_reads:
        with pytest.raises(ledger.InvalidArgumentError, match=message):
            read()
    assert _keys(warehouse) == before


MORE_BAD_ARGUMENTS: list[Case] = [
    ("merge files int", lambda wh, t: t.merge(files=5), ledger.InvalidArgumentError, "files"),
    (
        "merge files text",
        lambda wh, t: t.merge(files="a.parquet"),
        ledger.InvalidArgumentError,
        "files",
    ),
    (
        "merge progress text",
        lambda wh, t: t.merge(progress="no"),
        ledger.InvalidArgumentError,
        "progress",
    ),
    ("retrying int", lambda wh, t: t.retrying(5), ledger.InvalidArgumentError, "function"),
]


@pytest.mark.parametrize("case", MORE_BAD_ARGUMENTS, ids=[c[0] for c in MORE_BAD_ARGUMENTS])
def test_bad_maintenance_arguments(local_location, case):
    _run_bad(local_location, case)
