"""Bad input: a clear, typed error before anything is written (both backends)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import ledger
from ledger.errors import (
    DuplicateKeyError,
    InvalidArgumentError,
    KeyNotFoundError,
    MissingKeyError,
    SchemaError,
    TypeMismatchError,
    UnknownColumnError,
    UnmatchedDeleteMarkError,
)
from ledger.schema import ROW_ID
from tests.support.arrow_data import rows
from tests.support.engines import Engine
from tests.support.ledger_reads import entry_count

SCHEMA = {"id": "BIGINT", "day": "DATE", "amount": "DOUBLE", "tag": "VARCHAR", "n": "INTEGER"}


@pytest.fixture
def table(warehouse: ledger.Warehouse) -> ledger.Table:
    t = warehouse.create_table("t", SCHEMA, primary_key=["id"])
    t.insert([{"id": 1, "day": dt.date(2026, 1, 1), "amount": 1.0, "tag": "a", "n": 1}])
    return t


def _data_files(location, table: ledger.Table) -> list[str]:
    store = location.connect().store
    return [i.key for i in store.list(table.prefix + "_data/")]


BAD_WRITES = [
    ("insert", [{"id": 2, "amount": "12,5"}], ledger.TypeMismatchError, "amount"),
    ("insert", [{"id": 2, "n": 2**40}], ledger.TypeMismatchError, "n"),
    ("insert", [{"id": 2, "n": 1.5}], ledger.TypeMismatchError, "n"),
    ("insert", [{"id": 2, "day": "01/02/2026"}], ledger.TypeMismatchError, "day"),
    ("insert", [{"id": None, "amount": 1.0}], ledger.MissingKeyError, "id"),
    ("insert", [{"amount": 1.0}], ledger.MissingKeyError, "id"),
    ("insert", [{"id": 2, "colour": "red"}], ledger.UnknownColumnError, "colour"),
    ("insert", [{"id": 2, "trx_id": 5}], ledger.SchemaError, "trx_id"),
    ("insert", pa.table({"id": pa.array(["x"])}), ledger.TypeMismatchError, "id"),
    (
        "insert",
        pa.table({"id": [2], "n": pa.array([2**40], pa.int64())}),
        ledger.TypeMismatchError,
        "n",
    ),
    ("insert", "not data", ledger.SourceNotFoundError, "not data"),
    ("upsert", [{"id": 2, "n": 1}, {"id": 2, "n": 2}], ledger.DuplicateKeyError, "more than once"),
    ("update", [{"id": 1, "amount": "x"}], ledger.TypeMismatchError, "amount"),
    ("delete_where", "no_such_column > 1", ledger.InvalidPredicateError, "no_such_column"),
    ("delete_where", "1=1; DROP TABLE t", ledger.InvalidPredicateError, "predicate"),
    ("delete_where", "id IN (SELECT 1)", ledger.InvalidPredicateError, "subquery"),
    ("append_entries", [{"id": 2, "n": 1}], ledger.SchemaError, "dml_type"),
    ("append_entries", [{"id": 2, "n": 1, "dml_type": 0}], ledger.TypeMismatchError, "dml_type"),
    ("insert", object(), ledger.TypeMismatchError, "pandas DataFrame"),
    ("insert", {"id": 2, "amount": 1.0}, ledger.InvalidArgumentError, "list of values"),
    ("upsert", {"id": 2, "amount": 1.0}, ledger.InvalidArgumentError, "list of values"),
]


# The checks do not depend on the backend: every bad write runs locally, and one of each
# operation on S3 as well.
S3_BAD_WRITES = [BAD_WRITES[i] for i in (0, 11, 12, 13, 17)]
assert sorted({w[0] for w in S3_BAD_WRITES}) == sorted({w[0] for w in BAD_WRITES})
BAD_WRITE_CASES = [("local", *w) for w in BAD_WRITES] + [("s3", *w) for w in S3_BAD_WRITES]


@pytest.mark.parametrize(
    ("location", "operation", "data", "error", "mentions"), BAD_WRITE_CASES, indirect=["location"]
)
def test_bad_writes_raise_typed_errors_and_write_nothing(
    table, location, operation, data, error, mentions
):
    files_before = _data_files(location, table)
    version = table.version
    with pytest.raises(error, match=mentions) as raised:
        getattr(table, operation)(data)
    assert isinstance(raised.value, ledger.LedgerError)
    assert _data_files(location, table) == files_before
    fresh = location.connect().table("t")
    assert fresh.version == version
    assert entry_count(fresh) == 1


def test_errors_inherit_matching_builtins():
    assert issubclass(ledger.TableNotFoundError, KeyError)
    assert issubclass(ledger.KeyNotFoundError, KeyError)
    assert issubclass(ledger.SchemaError, ValueError)
    assert issubclass(ledger.StorageError, OSError)


@pytest.mark.parametrize(
    ("kwargs", "error", "mentions"),
    [
        ({"schema": {"a": "NOTATYPE"}}, ledger.SchemaError, "NOTATYPE"),
        ({"schema": {}}, ledger.SchemaError, "at least one column"),
        ({"schema": {"dml_type": "INTEGER"}}, ledger.SchemaError, "reserved"),
        ({"schema": {"a": "INTEGER"}, "primary_key": ["b"]}, ledger.SchemaError, "unknown column"),
        ({"schema": {"a": "DOUBLE"}, "primary_key": ["a"]}, ledger.SchemaError, "floating"),
        (
            {"schema": {"a": "INTEGER"}, "partition_by": ["day(a)"]},
            ledger.InvalidArgumentError,
            "DATE",
        ),
        (
            {"schema": {"a": "INTEGER"}, "partition_by": ["bucket(0, a)"]},
            ledger.InvalidArgumentError,
            "positive",
        ),
        (
            {"schema": {"a": "INTEGER"}, "partition_by": ["frobnicate(a)"]},
            ledger.InvalidArgumentError,
            "cannot parse",
        ),
        ({"schema": {"a": "INTEGER"}, "sort_by": ["zz"]}, ledger.SchemaError, "zz"),
        (
            {"schema": {"a": "INTEGER"}, "policy": "shredding"},
            ledger.InvalidArgumentError,
            "policy",
        ),
        (
            {"schema": {"a": "INTEGER"}, "checkpoint_interval": 0},
            ledger.InvalidArgumentError,
            "checkpoint",
        ),
    ],
)
def test_bad_table_definitions(warehouse, kwargs, error, mentions):
    with pytest.raises(error, match=mentions):
        warehouse.create_table("bad", **kwargs)
    assert "bad" not in warehouse.tables()


@pytest.mark.parametrize("name", ["", "../x", "a/b", "has space", "x" * 200, ".hidden"])
def test_bad_table_names(warehouse, name):
    with pytest.raises(ledger.InvalidArgumentError, match="table name"):
        warehouse.create_table(name, {"a": "INTEGER"})


def test_catalog_errors(warehouse):
    warehouse.create_table("t", {"a": "INTEGER"})
    with pytest.raises(ledger.TableExistsError):
        warehouse.create_table("t", {"a": "INTEGER"})
    with pytest.raises(ledger.TableNotFoundError):
        warehouse.table("missing")
    warehouse.drop_table("t")
    with pytest.raises(ledger.TableNotFoundError):
        warehouse.table("t")
    with pytest.raises(ledger.TableNotFoundError):
        warehouse.drop_table("t")
    assert warehouse.tables() == []


def test_a_handle_on_a_dropped_table_cannot_commit(warehouse, location):
    table = warehouse.create_table("t", {"a": "INTEGER"}, primary_key="a")
    table.insert([{"a": 1}])
    location.connect().drop_table("t")
    with pytest.raises(ledger.TableDroppedError):
        table.insert([{"a": 2}])
    again = warehouse.create_table("t", {"b": "VARCHAR"})
    assert again.count() == 0 and again.schema == {"b": "VARCHAR"}
    with pytest.raises(ledger.TableDroppedError):
        table.insert([{"a": 3}])
    assert warehouse.tables() == ["t"]
    assert warehouse.table("t").count() == 0


@pytest.mark.parametrize("operation", ["insert", "append_entries"])
@pytest.mark.parametrize("ahead", [0, 1, 2**30])
def test_an_inserted_row_id_the_table_has_not_generated_is_refused(tmp_path, operation, ahead):
    # Generated ids are (trx_id << 32) + n; a given id at or past the next one to be generated
    # would collide with a later row's, so one row's delete would remove two.
    table = ledger.connect(str(tmp_path)).create_table("u", {"v": "BIGINT"}, primary_key=None)
    table.insert([{"v": 1}])
    (existing,) = [r[1] for r in table.scan().fetchall()]
    version, files = table.version, table.files()
    row = {"v": 2, "_row_id": ((existing >> 32) + 1 + ahead) << 32}
    if operation == "append_entries":
        row["dml_type"] = 1
    with pytest.raises(ledger.InvalidArgumentError, match="not generated by this table yet"):
        getattr(table, operation)([row])
    assert (table.version, table.files()) == (version, files)
    # An id the table did generate may be given again (a blind duplicate of that row).
    getattr(table, operation)([{**row, "_row_id": existing}])
    table.insert([{"v": 3}])
    assert sorted(r[0] for r in table.scan().fetchall()) == [1, 2, 3]
    assert len({r[1] for r in table.scan().fetchall()}) == 2


# --- the same bad inputs as typed Arrow tables, on every engine -------------------------------

ENGINE_SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "x": "BIGINT", "d": "DECIMAL(10,2)"}


def _footprint(table: ledger.Table) -> tuple[int, frozenset[str]]:
    """The latest log version and every object under the table's ``_data/``."""
    keys = frozenset(o.key for o in table.store.list(f"{table.prefix}_data/"))
    return table.refresh().version, keys


@pytest.fixture(scope="module")
def bad_input_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ledger.Table]:
    """Tables the bad inputs below are refused by: shared, since nothing is ever written."""
    wh = ledger.connect(str(tmp_path_factory.mktemp("bad") / "wh"))
    keyed = wh.create_table(
        "keyed", {**ENGINE_SCHEMA, "i": "INTEGER", "f": "FLOAT"}, primary_key="k"
    )
    keyed.insert(rows("k g x", (1, "a", 1), (2, "b", 2)))
    no_key = wh.create_table("no_key", ENGINE_SCHEMA, primary_key=None)
    no_key.insert(rows("g x", ("a", 1), ("b", 2)))
    insert_only = wh.create_table(
        "insert_only",
        {"k": "BIGINT", "x": "BIGINT", "s": "VARCHAR"},
        primary_key="k",
        policy={
            "name": "aggregating",
            "measures": {"x": "sum", "s": "max"},
            "insert_only": True,
        },
    )
    insert_only.insert(rows("k x s", (1, 5, "z")))
    return {"keyed": keyed, "no_key": no_key, "insert_only": insert_only}


BAD_INPUT = [
    # (id, table, operation, data, error)
    (
        "unknown-column",
        "keyed",
        "insert",
        rows("k x zzz", (7, 1, 1), types={"zzz": pa.int64()}),
        UnknownColumnError,
    ),
    (
        "unknown-column-upsert",
        "keyed",
        "upsert",
        rows("k zzz", (1, 1), types={"zzz": pa.int64()}),
        UnknownColumnError,
    ),
    (
        "unparsable-string-into-bigint",
        "keyed",
        "insert",
        rows("k x", (7, "seven"), types={"x": pa.string()}),
        TypeMismatchError,
    ),
    ("missing-key-column", "keyed", "insert", rows("g x", ("a", 1)), MissingKeyError),
    ("null-key-insert", "keyed", "insert", rows("k x", (7, 1), (None, 2)), MissingKeyError),
    ("null-key-upsert", "keyed", "upsert", rows("k x", (None, 2)), MissingKeyError),
    ("null-key-delete", "keyed", "delete", rows("k", (None,)), MissingKeyError),
    ("duplicate-keys-upsert", "keyed", "upsert", rows("k x", (1, 5), (1, 6)), DuplicateKeyError),
    ("update-missing-key", "keyed", "update", rows("k x", (1, 5), (99, 6)), KeyNotFoundError),
    (
        "bigint-too-large-for-integer",
        "keyed",
        "insert",
        rows("k i", (7, 1), (8, 2**40), types={"i": pa.int64()}),
        TypeMismatchError,
    ),
    (
        "decimal-rounded",
        "keyed",
        "insert",
        rows("k d", (7, Decimal("1.234")), types={"d": pa.decimal128(12, 3)}),
        TypeMismatchError,
    ),
    (
        "double-rounded-into-decimal",
        "keyed",
        "insert",
        rows("k d", (7, 1.234), types={"d": pa.float64()}),
        TypeMismatchError,
    ),
    (
        "double-overflows-float",
        "keyed",
        "insert",
        rows("k f", (7, 1e300), types={"f": pa.float64()}),
        TypeMismatchError,
    ),
    ("system-column-in-insert", "keyed", "insert", rows("k x dml_type", (7, 1, 1)), SchemaError),
    (
        "dml-type-2",
        "keyed",
        "append_entries",
        rows("k x dml_type", (7, 1, 1), (8, 1, 2)),
        TypeMismatchError,
    ),
    ("dml-type-0", "keyed", "append_entries", rows("k x dml_type", (7, 1, 0)), TypeMismatchError),
    (
        "dml-type-null",
        "keyed",
        "append_entries",
        rows("k x dml_type", (7, 1, None)),
        TypeMismatchError,
    ),
    ("dml-type-missing", "keyed", "append_entries", rows("k x", (7, 1)), SchemaError),
    ("upsert-without-key", "no_key", "upsert", rows("g x", ("a", 1)), InvalidArgumentError),
    ("update-without-row-id", "no_key", "update", rows("g x", ("a", 1)), MissingKeyError),
    ("row-id-on-keyed-table", "keyed", "update", rows(f"k {ROW_ID} x", (1, 1, 1)), SchemaError),
    (
        "mark-without-row-id",
        "no_key",
        "append_entries",
        rows(f"{ROW_ID} g x dml_type", (None, "c", 3, 1), (None, "a", 1, -1)),
        MissingKeyError,
    ),
    (
        "mark-into-insert-only",
        "insert_only",
        "append_entries",
        rows("k x s dml_type", (1, 5, "z", -1)),
        InvalidArgumentError,
    ),
    (
        "mark-of-no-entry",
        "keyed",
        "append_entries",
        rows("k g x dml_type", (9, "a", 1, -1)),
        UnmatchedDeleteMarkError,
    ),
    (
        "mark-with-other-values",
        "keyed",
        "append_entries",
        rows("k g x dml_type", (1, "a", 2, -1), (3, "a", 2, 1)),
        UnmatchedDeleteMarkError,
    ),
    (
        "one-entry-marked-twice",
        "keyed",
        "append_entries",
        rows("k g x dml_type", (1, "a", 1, -1), (1, "a", 1, -1)),
        UnmatchedDeleteMarkError,
    ),
    (
        "mark-of-an-unknown-row-id",
        "no_key",
        "append_entries",
        rows(f"{ROW_ID} g x dml_type", (12345, "a", 1, -1)),
        UnmatchedDeleteMarkError,
    ),
    ("update-of-insert-only", "insert_only", "update", rows("k x", (1, 6)), InvalidArgumentError),
    ("delete-of-insert-only", "insert_only", "delete", rows("k", (1,)), InvalidArgumentError),
]


@pytest.mark.engines
@pytest.mark.parametrize(
    ("table_name", "operation", "data", "error"), [pytest.param(*c[1:], id=c[0]) for c in BAD_INPUT]
)
def test_bad_input_raises_the_typed_error_and_writes_nothing_on_every_engine(
    engine: Engine,
    bad_input_tables: dict[str, ledger.Table],
    table_name: str,
    operation: str,
    data: pa.Table,
    error: type[Exception],
) -> None:
    table = bad_input_tables[table_name]
    before = _footprint(table)
    with pytest.raises(error):
        engine.write(table, operation, data)
    assert _footprint(table) == before, f"a refused {engine} write left a commit or data files"


def test_dates_beyond_year_9999_are_refused_before_writing(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"day": "DATE", "v": "INTEGER"}, primary_key="day"
    )
    far = pa.table({"day": pa.array([3_000_000], pa.int32()).cast(pa.date32()), "v": [1]})
    with pytest.raises(ledger.TypeMismatchError, match="day"):
        table.insert(far)
    assert not list(tmp_path.rglob("*.parquet"))
