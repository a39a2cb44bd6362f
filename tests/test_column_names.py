"""Column names: names engines cannot tell apart are refused before anything is written; every
other name (quotes, dots, spaces, unicode, long) works, quoted, through every read and write."""

from __future__ import annotations

import re
import string
import tempfile
import time
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.log.entries import LogFile
from ledger.schema import TableSchema
from tests.conftest import examples

CLASHING_SCHEMAS = [
    ({"a": "BIGINT", "A": "INTEGER"}, "'a' and 'A' differ only in case"),
    ({"id": "BIGINT", "TRX_ID": "INTEGER"}, "'TRX_ID' is reserved .* 'trx_id'"),
    ({"id": "BIGINT", "Trx_Seq": "INTEGER"}, "'Trx_Seq' is reserved .* 'trx_seq'"),
    ({"id": "BIGINT", "DML_TYPE": "INTEGER"}, "'DML_TYPE' is reserved .* 'dml_type'"),
    ({"id": "BIGINT", "_ROW_ID": "INTEGER"}, "'_ROW_ID' is reserved .* '_row_id'"),
    ({"id": "BIGINT", "__LEDGER_x": "INTEGER"}, "'__LEDGER_x' starts with '__ledger'"),
    # The change feed adds these beside the table's columns: a user column would shadow them.
    ({"id": "BIGINT", "_change_type": "VARCHAR"}, "'_change_type' is the name of a change feed"),
    ({"id": "BIGINT", "_Commit_Version": "INTEGER"}, "'_Commit_Version' is the name of a change"),
    ({"id": "BIGINT", "_COMMIT_TIMESTAMP": "TIMESTAMP"}, "the name of a change feed column"),
    # Spark compares names with Java's equalsIgnoreCase: one-character case mappings count.
    ({"id": "BIGINT", "é": "INTEGER", "É": "INTEGER"}, "'é' and 'É' differ only in case"),
    ({"id": "BIGINT", "ß": "INTEGER", "ẞ": "INTEGER"}, "'ß' and 'ẞ' differ only in case"),
    ({"id": "BIGINT", "k": "INTEGER", "\u212a": "INTEGER"}, "differ only in case"),
    ([("id", "BIGINT"), ("v", "INTEGER"), ("v", "BIGINT")], "'v' is given twice"),
    ({"id": "BIGINT", "": "INTEGER"}, "non-empty"),
    ({"id": "BIGINT", "a\x00b": "INTEGER"}, "NUL"),
]

# Distinct to DuckDB, Spark, Parquet and Delta alike, so they are accepted.
DISTINCT_NAMES = [
    ("Straße", "STRASSE"),  # a two-character upper case is not a one-character mapping
    ("\u00e9", "e\u0301"),  # composed and decomposed accents are different names to engines
    ("a.b", "a_b"),
    ('we"ird', "we'ird"),
    ("sp ace", " lead"),
    ("x" * 300, "y" * 300),
]


def _table_keys(location: Any) -> list[str]:
    store = location.connect().store
    return [i.key for i in store.list("")]


# The names are checked before the store is touched: every case locally, one on S3 (that nothing
# reaches an object store either).
@pytest.mark.parametrize(
    ("location", "schema", "message"),
    [("local", *case) for case in CLASHING_SCHEMAS] + [("s3", *CLASHING_SCHEMAS[0])],
    indirect=["location"],
)
def test_create_table_refuses_names_engines_cannot_tell_apart(location, schema, message):
    warehouse = location.connect()
    with pytest.raises(ledger.SchemaError, match=message) as raised:
        warehouse.create_table("t", schema)
    assert isinstance(raised.value, ledger.LedgerError)
    assert isinstance(raised.value, ValueError)
    assert _table_keys(location) == []
    assert warehouse.tables() == []


@pytest.mark.parametrize("pair", DISTINCT_NAMES)
def test_names_distinct_to_every_engine_work_quoted(warehouse, pair):
    first, second = pair
    table = warehouse.create_table(
        "t", {"id": "BIGINT", first: "INTEGER", second: "INTEGER"}, primary_key="id"
    )
    table.insert([{"id": 1, first: 10, second: 20}, {"id": 2, first: 30, second: 40}])
    table.update([{"id": 1, first: 11, second: 21}])
    table.delete([2])
    assert sorted(views.visible(table).fetchall()) == [(1, 11, 21)]
    totals = views.totals(table, sum=[first, second]).fetchall()
    assert totals == [(1, 11, 21)]
    table.merge(min_files=1)
    assert sorted(views.visible(table).fetchall()) == [(1, 11, 21)]
    assert views.totals(table, sum=[first, second]).fetchall() == [(1, 11, 21)]


def _written(location: Any, table: ledger.Table) -> tuple[int, list[str]]:
    fresh = location.connect().table(table.name)
    store = location.connect().store
    return fresh.version, sorted(i.key for i in store.list(table.prefix + "_data/"))


EVOLUTIONS = [
    ([{"id": 2, "V": 1}], "'v' and 'V' differ only in case"),
    ([{"id": 2, "Trx_Id": 1}], "'Trx_Id' is reserved"),
    ([{"id": 2, "_Row_Id": 1}], "'_Row_Id' is reserved"),
    ([{"id": 2, "__Ledger_n": 1}], "starts with '__ledger'"),
    ([{"id": 2, "_commit_version": 98}], "name of a change feed column"),
    ([{"id": 2, "Ü": 1, "ü": 2}], "'Ü' and 'ü', which differ only in case"),
    (pa.table({"id": [2], "v": [1], "V": [2]}), "'v' and 'V', which differ only in case"),
    (pa.table([[2], [1], [2]], names=["id", "v", "v"]), "column 'v' twice"),
    (pd.DataFrame([[2, 1, 2]], columns=["id", "v", "v"]), "column 'v' twice"),
    (pd.DataFrame([[2, 1, 2]], columns=["id", "w", "W"]), "'w' and 'W'"),
]


@pytest.mark.parametrize("operation", ["insert", "upsert"])
@pytest.mark.parametrize(("data", "message"), EVOLUTIONS)
def test_schema_evolution_refuses_clashing_names_before_writing(
    local_location, operation, data, message
):
    warehouse = local_location.connect()
    table = warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    table.insert([{"id": 1, "v": 5}])
    before = _written(local_location, table)
    with pytest.raises(ledger.SchemaError, match=message):
        getattr(table, operation)(data, evolve_schema=True)
    assert _written(local_location, table) == before
    fresh = local_location.connect().table("t")
    assert fresh.schema == {"id": "BIGINT", "v": "INTEGER"}
    assert sorted(views.visible(fresh).fetchall()) == [(1, 5)]


def test_schema_evolution_refuses_clashing_names_on_s3(location):
    table = location.connect().create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    table.insert([{"id": 1, "v": 5}])
    before = _written(location, table)
    with pytest.raises(ledger.SchemaError, match="'v' and 'V'"):
        table.upsert([{"id": 1, "V": 6}], evolve_schema=True)
    assert _written(location, table) == before


def test_a_case_variant_of_a_column_is_unknown_and_the_error_names_the_spelling(warehouse):
    table = warehouse.create_table("t", {"id": "BIGINT", "Amount": "INTEGER"}, primary_key="id")
    with pytest.raises(ledger.UnknownColumnError, match="'amount' -> 'Amount'"):
        table.insert([{"id": 1, "amount": 5}])
    assert table.refresh().version == 0


ROLLUP_CLASHES = [
    (["user"], {"USER": "count"}, ledger.InvalidArgumentError, "compared without case"),
    (["user"], {"n": "count", "N": "sum(secs)"}, ledger.InvalidArgumentError, "without case"),
    (["user"], {"ÉTÉ": "count", "été": "sum(secs)"}, ledger.InvalidArgumentError, "case"),
    (["user"], {"Trx_Id": "count"}, ledger.SchemaError, "reserved"),
    (["user"], {"n": "count", "DML_TYPE": "sum(secs)"}, ledger.SchemaError, "reserved"),
]


@pytest.mark.parametrize(("by", "measures", "error", "message"), ROLLUP_CLASHES)
def test_create_rollup_refuses_clashing_names_before_writing(
    local_location, by, measures, error, message
):
    warehouse = local_location.connect()
    base = warehouse.create_table("events", {"user": "VARCHAR", "secs": "BIGINT"})
    base.insert([{"user": "a", "secs": 3}])
    with pytest.raises(error, match=message):
        base.create_rollup("daily", by=by, measures=measures)
    assert warehouse.tables() == ["events"]
    assert not any(k.startswith("daily/") for k in _table_keys(local_location))
    assert local_location.connect().table("events").version == base.version


def _break_schema(location: Any, table: ledger.Table, schema: dict[str, str]) -> None:
    """Commit, as another tool might have, a schema whose names engines cannot tell apart."""
    state = table.handle.latest_state()
    entry = LogFile(
        state.version + 1,
        max(int(time.time() * 1000), state.timestamp_ms + 1),
        "insert",
        TableSchema.from_json(schema),
        trx_id=state.max_trx_id + 1,
    )
    assert location.connect().store.put_if_absent(
        table.handle.log.commit_key(entry.version), entry.to_jsonl()
    )


def test_a_table_whose_log_holds_clashing_names_opens_and_refuses_use_with_a_typed_error(
    location,
):
    warehouse = location.connect()
    table = warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    table.insert([{"id": 1, "v": 5}])
    _break_schema(location, table, {"id": "BIGINT", "v": "INTEGER", "V": "BIGINT"})

    opened = location.connect().table("t")  # opening never fails: the log is readable
    assert opened.schema == {"id": "BIGINT", "v": "INTEGER", "V": "BIGINT"}
    assert opened.count() == 1  # answered from the log alone
    assert len(opened.files()) == 1  # the data stays reachable for any Parquet reader
    version, files = _written(location, opened)
    uses = [
        lambda: opened.scan().fetchall(),
        lambda: views.visible(opened).fetchall(),
        lambda: views.totals(opened, sum="v").fetchall(),
        lambda: opened.insert([{"id": 2, "v": 1}]),
        lambda: opened.update([{"id": 1, "v": 6}]),
        lambda: opened.delete([1]),
        lambda: opened.merge(min_files=1),
    ]
    for use in uses:
        with pytest.raises(ledger.SchemaError, match="'v' and 'V' differ only in case"):
            use()
    assert _written(location, opened) == (version, files)


# --- property: any name is either refused at create or round-trips --------------------------

_UNICODE_CASES = "éÉßẞüÜ\u0131İΣ\u03c3ςǅǆ\u212a\u0301中"  # dotless i, sigmas, Kelvin sign
_NAME_ALPHABET = st.sampled_from(
    string.ascii_letters + string.digits + " ._-\"'`$,;=()[]{}" + _UNICODE_CASES
)
_NAMES = st.text(_NAME_ALPHABET, min_size=1, max_size=12)
_REFUSED_NAMES = st.sampled_from(
    ["", "a\x00", "TRX_ID", "Trx_Seq", "DML_TYPE", "_Row_Id", "__Ledger"]
)
# One name in five is one of the always-refused kinds; the rest are random.
_SOME_NAME = st.integers(0, 4).flatmap(lambda i: _REFUSED_NAMES if i == 0 else _NAMES)


def _engines_equal(a: str, b: str) -> bool:
    """Java's String.equalsIgnoreCase, which Spark compares names with: character by character,
    equal, or equal upper cases, or equal lower cases of the upper cases, all with one-character
    mappings (Java maps "İ" to "i"; Python's full lower case adds a combining dot)."""

    def upper(c: str) -> str:
        return c.upper() if len(c.upper()) == 1 else c

    def lower(c: str) -> str:
        return "i" if c == "İ" else c.lower() if len(c.lower()) == 1 else c

    return len(a) == len(b) and all(
        x == y or upper(x) == upper(y) or lower(upper(x)) == lower(upper(y))
        for x, y in zip(a, b, strict=True)
    )


def _acceptable(names: list[str]) -> bool:
    reserved = ["trx_id", "trx_seq", "dml_type", "_row_id"]
    for i, name in enumerate(names):
        if not name or "\x00" in name:
            return False
        if any(_engines_equal(name, r) for r in reserved):
            return False
        if len(name) >= 8 and _engines_equal(name[:8], "__ledger"):
            return False
        if any(_engines_equal(name, other) for other in names[:i]):
            return False
    return True


@settings(max_examples=examples(20))
@given(
    names=st.lists(_SOME_NAME, min_size=1, max_size=3),
    values=st.lists(st.integers(-1000, 1000), min_size=3, max_size=3),
)
def test_any_names_are_refused_at_create_or_round_trip(names, values):
    columns = ["key", *names]
    with tempfile.TemporaryDirectory() as root:
        warehouse = ledger.connect(root)
        schema = [(c, "BIGINT") for c in columns]
        event("refused" if not _acceptable(columns) else "accepted")
        if not _acceptable(columns):
            with pytest.raises(ledger.SchemaError):
                warehouse.create_table("t", schema, primary_key="key")
            assert warehouse.tables() == []
            return
        table = warehouse.create_table("t", schema, primary_key="key")
        model: dict[int, list[int]] = {}
        for key, value in enumerate(values):
            row = [value + i for i in range(len(names))]
            model[key] = row
            table.insert([{"key": key, **dict(zip(names, row, strict=True))}])
        model[0] = [v * 2 for v in model[0]]
        table.update([{"key": 0, **dict(zip(names, model[0], strict=True))}])
        del model[1]
        table.delete([1])
        for _ in range(2):  # before and after a merge
            got = {r[0]: list(r[1:]) for r in views.visible(table).fetchall()}
            assert got == model
            sums = views.totals(table, sum=names).fetchall()
            expected = (len(model), *(sum(r[i] for r in model.values()) for i in range(len(names))))
            assert sums == [expected]
            table.merge(min_files=1)


# --- Spark: the same rule on the DataFrame paths --------------------------------------------


@pytest.mark.spark
def test_spark_writes_and_reads_refuse_clashing_names(spark, local_location):
    import ledger.spark as ls

    warehouse = local_location.connect()
    table = warehouse.create_table("t", {"id": "BIGINT", "v": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1, "v": 5}])
    before = _written(local_location, table)
    frames = {
        "columns 'v' and 'V'": spark.createDataFrame([(2, 1, 2)], "id bigint, v bigint, V bigint"),
        "column 'v' twice": spark.createDataFrame(
            [(2, 1, 2)], "id bigint, v bigint, w bigint"
        ).toDF("id", "v", "v"),
        "columns 'é' and 'É'": spark.createDataFrame(
            [(2, 1, 2)], "id bigint, `é` bigint, `É` bigint"
        ),
    }
    for message, frame in frames.items():
        for write in (ls.insert, ls.upsert):
            with pytest.raises(ledger.SchemaError, match=message):
                write(table, frame, evolve_schema=True)
    with pytest.raises(ledger.SchemaError, match="'Trx_Id' is reserved"):
        ls.insert(
            table,
            spark.createDataFrame([(2, 1)], "id bigint, Trx_Id bigint"),
            evolve_schema=True,
        )
    assert _written(local_location, table) == before

    _break_schema(local_location, table, {"id": "BIGINT", "v": "BIGINT", "V": "BIGINT"})
    broken = local_location.connect().table("t")
    for use in (lambda: ls.read(broken, spark=spark), lambda: ls.visible(broken, spark=spark)):
        with pytest.raises(ledger.SchemaError, match="'v' and 'V' differ only in case"):
            use()


@pytest.mark.parametrize("key", [".", ".x", "a.b", "[0]"])
def test_a_key_named_like_a_field_path_is_written_sorted_and_checked(tmp_path, key):
    """Arrow reads a name starting with "." as a nested field path: sorting the written entries
    and finding duplicate keys must still take the name as given."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {key: "BIGINT", "a": "BIGINT"}, primary_key=key, partition_by=None
    )
    table.insert([{key: 2, "a": 20}, {key: 1, "a": 10}])
    table.upsert([{key: 1, "a": 11}, {key: 3, "a": 30}])
    with pytest.raises(ledger.DuplicateKeyError, match=re.escape(repr(key))):
        table.upsert([{key: 1, "a": 12}, {key: 1, "a": 13}])
    table.delete([2])
    table.merge(min_files=1)
    assert sorted(views.visible(table).fetchall()) == [(1, 11), (3, 30)]


@pytest.mark.spark
def test_spark_writes_and_merges_columns_named_with_dots_and_backticks(spark, local_location):
    # PySpark resolves mapInArrow's input columns by name, which fails on these names: the
    # engine hands them over by position.
    import pyspark.sql.types as T

    import ledger.spark as ls

    key, value = 'select `k`"', "Wert é.x"
    table = local_location.connect().create_table(
        "odd", {key: "VARCHAR", value: "DOUBLE"}, primary_key=key
    )
    schema = T.StructType(
        [T.StructField(key, T.StringType()), T.StructField(value, T.DoubleType())]
    )
    ls.insert(table, spark.createDataFrame([("a", 1.0), ("b", 2.0), ("c", 3.0)], schema))
    ls.delete(table, spark.createDataFrame([("a",)], T.StructType([schema[0]])))
    ls.upsert(table, spark.createDataFrame([("b", 20.0), ("d", 4.0)], schema))
    assert sorted(views.visible(table).fetchall()) == [("b", 20.0), ("c", 3.0), ("d", 4.0)]
    ls.merge(table, spark=spark, min_files=1)
    assert sorted(views.visible(table).fetchall()) == [("b", 20.0), ("c", 3.0), ("d", 4.0)]
    assert sorted(tuple(r) for r in ls.visible(table).collect()) == [
        ("b", 20.0),
        ("c", 3.0),
        ("d", 4.0),
    ]
