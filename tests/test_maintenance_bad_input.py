"""Bad input to maintenance: a typed error before anything is written.

Every case checks, from a fresh connection, that the table's version and the set of objects
under its folder (data, log and trx_id reservations) are exactly what they were before.
Local disk throughout; the cheap cases run on S3 as well.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import ledger
from ledger.maintenance import merge as merging
from tests.conftest import Location

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "v": "INTEGER"}


@pytest.fixture
def local_warehouse(local_location: Location) -> ledger.Warehouse:
    return local_location.connect()


def _events(warehouse: ledger.Warehouse) -> ledger.Table:
    """Two regions of two files each; eu merged once, so it also has tombstoned files."""
    table = warehouse.create_table("events", SCHEMA, primary_key="id", partition_by="region")
    for region, first in (("eu", 0), ("us", 10)):
        table.insert([{"id": first, "region": region, "v": 1}])
        table.insert([{"id": first + 1, "region": region, "v": 2}])
    table.merge({"region": "eu"})
    return table


@pytest.fixture
def events(local_warehouse: ledger.Warehouse) -> ledger.Table:
    return _events(local_warehouse)


def _footprint(location: Location, name: str) -> tuple[int | None, set[str]]:
    warehouse = location.connect()
    keys = {info.key for info in warehouse.store.list(f"{name}/")}
    try:
        version: int | None = warehouse.table(name).version
    except ledger.TableNotFoundError:
        version = None
    return version, keys


@contextmanager
def _writes_nothing(location: Location, name: str = "events") -> Iterator[None]:
    before = _footprint(location, name)
    yield
    version, keys = _footprint(location, name)
    assert version == before[0], "the table's version changed"
    assert keys == before[1], (
        f"objects written: {sorted(keys - before[1])}; deleted: {sorted(before[1] - keys)}"
    )


# --- policies ------------------------------------------------------------------------------------

UNKNOWN_OPTIONS = [
    ({"name": "replacing", "version": "v"}, "version_column"),
    ({"name": "dedup", "dedupkey": ["id"]}, "dedup_key"),
    ({"name": "collapsing", "sign": "v"}, "no option"),
    ({"name": "aggregating", "measures": {"v": "sum"}, "insertonly": True}, "insert_only"),
    ({"name": "custom", "sql": "SELECT * FROM entries", "dialect": "spark"}, "sql"),
    ({"name": "summing"}, "unknown merge policy"),
    ({"measures": {"v": "sum"}}, "unknown merge policy"),
    ("Replacing", "unknown merge policy"),
    (["replacing"], "policy must be"),
    ({"name": "dedup", "dedup_key": ["nope"]}, "nope"),
    ({"name": "replacing", "version_column": "region"}, "version_column"),
    ({"name": "aggregating", "measures": {"v": "avg"}}, "merge function"),
    ({"name": "aggregating", "measures": {"nope": "sum", "v": "sum"}}, "nope"),
    ({"name": "aggregating", "measures": {"v": "sum"}, "insert_only": "yes"}, "insert_only"),
    ({"name": "custom"}, "sql"),
    ({"name": "custom", "sql": "SELEC * FROM entries"}, "parse"),
    ({"name": "custom", "sql": "DELETE FROM entries"}, "SELECT"),
    ({"name": "custom", "sql": "SELECT * FROM other_table"}, "entries"),
]


# Checked before anything is written, whatever the backend: every case locally, and an unknown
# option and a custom query that does not parse on S3 as well.
POLICY_OPTION_CASES = [
    *(("local", policy, mentions) for policy, mentions in UNKNOWN_OPTIONS),
    *(("s3", *UNKNOWN_OPTIONS[i]) for i in (0, 15)),
]


@pytest.mark.parametrize(
    ("location", "policy", "mentions"),
    POLICY_OPTION_CASES,
    ids=[f"{backend}-{policy!r}" for backend, policy, _ in POLICY_OPTION_CASES],
    indirect=["location"],
)
def test_unknown_or_malformed_policy_options_are_refused_at_create_table(
    location, policy, mentions
):
    warehouse = location.connect()
    with _writes_nothing(location), pytest.raises(ledger.InvalidArgumentError, match=mentions):
        warehouse.create_table("events", SCHEMA, primary_key="id", policy=policy)
    assert warehouse.tables() == []


INVALID_FOR_THE_TABLE = [
    # min/max cannot be undone by a delete mark: only on insert_only tables
    ({"v": "INTEGER"}, "id", {"name": "aggregating", "measures": {"v": "min"}}, "insert_only"),
    ({"v": "INTEGER"}, "id", {"name": "aggregating", "measures": {"v": "max"}}, "insert_only"),
    ({"v": "INTEGER"}, None, {"name": "aggregating", "measures": {"v": "sum"}}, "primary key"),
    ({"v": "INTEGER"}, None, {"name": "replacing"}, "primary key"),
    ({"v": "VARCHAR"}, "id", {"name": "aggregating", "measures": {"v": "sum"}}, "numeric"),
    ({"v": "DOUBLE"}, "id", {"name": "aggregating", "measures": {"v": "count"}}, "integer"),
    (
        {"v": "INTEGER", "w": "INTEGER"},
        "id",
        {"name": "aggregating", "measures": {"v": "sum"}},
        "no merge function",
    ),
]


@pytest.mark.parametrize(
    ("columns", "key", "policy", "mentions"),
    INVALID_FOR_THE_TABLE,
    ids=[f"{c}-key={k}-{p}" for c, k, p, _ in INVALID_FOR_THE_TABLE],
)
def test_a_policy_invalid_for_the_table_is_refused_at_create_table(
    local_location, columns, key, policy, mentions
):
    warehouse = local_location.connect()
    with (
        _writes_nothing(local_location),
        pytest.raises(ledger.InvalidArgumentError, match=mentions),
    ):
        warehouse.create_table("events", {"id": "BIGINT", **columns}, key, policy=policy)


@pytest.fixture
def insert_only(local_warehouse: ledger.Warehouse) -> ledger.Table:
    table = local_warehouse.create_table(
        "events",
        {"g": "VARCHAR", "lo": "INTEGER", "hi": "INTEGER"},
        primary_key="g",
        policy={"name": "aggregating", "measures": {"lo": "min", "hi": "max"}, "insert_only": True},
    )
    table.insert([{"g": "x", "lo": 1, "hi": 2}])
    return table


DELETE_MARKS = [
    ("update", lambda t: t.update([{"g": "x", "lo": 0}])),
    ("upsert_existing_key", lambda t: t.upsert([{"g": "x", "lo": 0}])),
    ("delete", lambda t: t.delete(["x"])),
    ("delete_where", lambda t: t.delete_where("lo = 1")),
    ("append_entries", lambda t: t.append_entries([{"g": "x", "lo": 1, "hi": 2, "dml_type": -1}])),
    (
        "transaction_mixing_an_insert_and_a_delete",
        lambda t: _in_one_transaction(t, insert={"g": "y", "lo": 5, "hi": 5}, delete=["x"]),
    ),
]


def _in_one_transaction(table: ledger.Table, insert: dict[str, Any], delete: list[str]) -> None:
    with table.transaction() as tx:
        tx.insert([insert])
        tx.delete(delete)


@pytest.mark.parametrize(
    "operation", [op for _, op in DELETE_MARKS], ids=[n for n, _ in DELETE_MARKS]
)
def test_an_insert_only_table_refuses_every_delete_mark_before_writing(
    insert_only, local_location, operation
):
    with (
        _writes_nothing(local_location),
        pytest.raises(ledger.InvalidArgumentError, match="insert_only"),
    ):
        operation(insert_only)
    insert_only.insert([{"g": "x", "lo": 0, "hi": 9}])  # insertions are still welcome
    insert_only.append_entries([{"g": "y", "lo": 3, "hi": 3, "dml_type": 1}])
    assert insert_only.count() == 2  # one row per group: x (inserted twice) and y


WRONG_SCHEMA = [
    ("SELECT id, region, trx_id, trx_seq, dml_type FROM entries", ledger.UnknownColumnError),
    ("SELECT *, 1 AS extra FROM entries", ledger.UnknownColumnError),
    ("SELECT * EXCLUDE (dml_type) FROM entries", ledger.UnknownColumnError),
    ("SELECT * REPLACE ('many' AS v) FROM entries", ledger.TypeMismatchError),
    ("SELECT * FROM entries WHERE no_such_column = 1", ledger.SchemaError),
]


@pytest.mark.parametrize(("sql", "error"), WRONG_SCHEMA, ids=[q for q, _ in WRONG_SCHEMA])
def test_a_custom_query_with_the_wrong_schema_is_refused_at_creation(local_location, sql, error):
    """docs/merges.md 2.5: create_table checks the query's columns and creates nothing."""
    warehouse = local_location.connect()
    policy = {"name": "custom", "sql": sql}
    with pytest.raises(error):
        warehouse.create_table(
            "events", SCHEMA, primary_key="id", partition_by="region", policy=policy
        )
    assert _footprint(local_location, "events") == (None, set())


# --- merging a dropped table ---------------------------------------------------------------------


def test_merging_a_table_another_process_dropped_raises_table_dropped(location):
    table = _events(location.connect())
    location.connect().drop_table("events")
    with _writes_nothing(location), pytest.raises(ledger.TableDroppedError, match="dropped"):
        table.merge()


MAINTENANCE_CALLS = [
    ("vacuum", lambda t: t.vacuum(0)),
    ("drop_partitions", lambda t: t.drop_partitions({"region": "us"})),
    (
        "rewrite_partitions",
        lambda t: t.rewrite_partitions({"region": "us"}, "SELECT * FROM entries"),
    ),
]


@pytest.mark.parametrize(
    "operation", [op for _, op in MAINTENANCE_CALLS], ids=[n for n, _ in MAINTENANCE_CALLS]
)
def test_other_maintenance_of_a_dropped_table_raises_table_dropped(
    local_warehouse, local_location, operation
):
    table = _events(local_warehouse)
    local_location.connect().drop_table("events")
    with _writes_nothing(local_location), pytest.raises(ledger.TableDroppedError):
        operation(table)


def test_a_drop_of_the_table_during_a_merge_leaves_no_new_data_files(events, monkeypatch):
    data = {i.key for i in events.store.list("events/_data/")}
    other = ledger.connect(events.store.uri)
    real_commit = merging._commit

    def drop_then_commit(*args: Any, **kwargs: Any) -> Any:
        other.drop_table("events")
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(merging, "_commit", drop_then_commit)
    with pytest.raises(ledger.TableDroppedError):
        events.merge()
    assert {i.key for i in events.store.list("events/_data/")} == data
    with pytest.raises(ledger.TableNotFoundError):
        other.table("events")


# --- merge arguments -----------------------------------------------------------------------------

BAD_MERGE_ARGUMENTS = [
    ({"order": "newest"}, "order"),
    ({"order": "DESC"}, "order"),
    ({"order": None}, "order"),
    ({"max_files": 1}, "max_files"),
    ({"max_files": 0}, "max_files"),
    ({"max_files": "10"}, "max_files"),
    ({"max_files": 2.5}, "max_files"),
    ({"max_files": True}, "max_files"),
    ({"min_files": 0}, "min_files"),
    ({"min_files": -1}, "min_files"),
    ({"max_file_size": 0}, "max_file_size"),
    ({"max_file_size": 1.5}, "max_file_size"),
    ({"max_partitions": 0}, "max_partitions"),
    ({"max_partitions": "2"}, "max_partitions"),
    ({"max_partitions": True}, "max_partitions"),
    ({"files": ["_data/region=us/no-such-file.parquet"]}, "not alive"),
    ({"files": "_data/region=us/x.parquet"}, "list"),
    ({"partitions": {"nope": "x"}}, "partition field"),
    ({"partitions": "eu"}, "partition"),
    ({"partitions": [("region", "eu")]}, "partition"),
]


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    BAD_MERGE_ARGUMENTS,
    ids=[",".join(f"{k}={v!r}" for k, v in a.items()) for a, _ in BAD_MERGE_ARGUMENTS],
)
def test_bad_merge_arguments_raise_before_writing(events, local_location, arguments, mentions):
    with (
        _writes_nothing(local_location),
        pytest.raises(ledger.InvalidArgumentError, match=mentions),
    ):
        events.merge(**arguments)


def test_merging_files_that_are_not_alive_raises_before_writing(events, local_location):
    state = events.snapshot().state
    tombstoned = sorted(p for p, m in state.files.items() if not m.alive)
    alive = [m.path for m in events.snapshot().markers({"region": "us"})]
    assert len(tombstoned) == 2 and len(alive) == 2
    for files in ([tombstoned[0]], [*alive, tombstoned[1]], [events.prefix + alive[0]]):
        with (
            _writes_nothing(local_location),
            pytest.raises(ledger.InvalidArgumentError, match="not alive"),
        ):
            events.merge(files=files)
    with (
        _writes_nothing(local_location),
        pytest.raises(ledger.InvalidArgumentError, match="not both"),
    ):
        events.merge({"region": "us"}, files=alive)


# --- vacuum --------------------------------------------------------------------------------------

BAD_GRACE = [
    -1,
    -0.001,
    dt.timedelta(seconds=-1),
    "7d",
    None,
    True,
    [3600],
    float("nan"),
    float("inf"),
]


@pytest.mark.parametrize("grace", BAD_GRACE, ids=repr)
def test_bad_vacuum_grace_raises_before_deleting_anything(events, local_location, grace):
    with _writes_nothing(local_location), pytest.raises(ledger.InvalidArgumentError, match="grace"):
        events.vacuum(grace)


def test_bad_vacuum_grace_on_each_backend(location):
    table = _events(location.connect())
    with _writes_nothing(location), pytest.raises(ledger.InvalidArgumentError, match="negative"):
        table.vacuum(dt.timedelta(days=-7))


# --- drop_partitions -----------------------------------------------------------------------------

BAD_DROPS = [
    ({"nope": "x"}, None, ledger.InvalidArgumentError, "partition field"),
    ({"region": "eu"}, "region = 'eu'", ledger.InvalidArgumentError, "not both"),
    (None, None, ledger.InvalidArgumentError, "name the partitions"),
    (None, "region >>= 'eu'", ledger.InvalidPredicateError, "parse"),
    (None, "nope = 'eu'", ledger.InvalidPredicateError, "nope"),
    (None, "v = 1", ledger.InvalidPredicateError, "partition fields"),
    (None, "region IN (SELECT 'eu')", ledger.InvalidPredicateError, "subquery"),
    (None, "region = 'eu'; DROP TABLE events", ledger.InvalidPredicateError, "predicate"),
    (None, "", ledger.InvalidPredicateError, "predicate"),
    (None, 42, ledger.InvalidPredicateError, "predicate"),
    ("eu", None, ledger.InvalidArgumentError, "partition"),
    ([("region", "eu")], None, ledger.InvalidArgumentError, "partition"),
]


@pytest.mark.parametrize(
    ("partitions", "where", "error", "mentions"),
    BAD_DROPS,
    ids=[f"partitions={p!r},where={w!r}" for p, w, _, _ in BAD_DROPS],
)
def test_bad_drop_partitions_raise_before_writing(
    events, local_location, partitions, where, error, mentions
):
    count = events.count()
    with _writes_nothing(local_location), pytest.raises(error, match=mentions):
        events.drop_partitions(partitions, where=where)
    assert events.count() == count


def test_bad_drop_partitions_on_each_backend(location):
    table = _events(location.connect())
    with _writes_nothing(location), pytest.raises(ledger.InvalidPredicateError, match="nope"):
        table.drop_partitions(where="nope = 'eu'")


def test_drop_partitions_of_an_unpartitioned_table_is_refused(local_warehouse, local_location):
    table = local_warehouse.create_table("events", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    for partitions, where in (({"id": "1"}, None), (None, "id = '1'")):
        with (
            _writes_nothing(local_location),
            pytest.raises(ledger.InvalidArgumentError, match="not partitioned"),
        ):
            table.drop_partitions(partitions, where=where)


# --- rewrite_partitions --------------------------------------------------------------------------

BAD_REWRITES = [
    ({"region": "us"}, "SELECT *, 1 AS extra FROM entries", ledger.UnknownColumnError, "extra"),
    ({"region": "us"}, "SELECT * EXCLUDE (v) FROM entries", ledger.UnknownColumnError, "'v'"),
    (
        {"region": "us"},
        "SELECT * REPLACE (CAST(v AS VARCHAR) || 'x' AS v) FROM entries",
        ledger.TypeMismatchError,
        "'v'",
    ),
    ({"region": "us"}, "SELEC * FROM entries", ledger.UnsafeSqlError, "rewrite"),
    ({"region": "us"}, "SELECT * FROM other_table", ledger.UnsafeSqlError, "other_table"),
    ({"region": "us"}, "", ledger.InvalidArgumentError, "query"),
    ({"region": "us"}, None, ledger.InvalidArgumentError, "query"),
    ({"nope": "x"}, "SELECT * FROM entries", ledger.InvalidArgumentError, "partition field"),
]


@pytest.mark.parametrize(
    ("partitions", "sql", "error", "mentions"),
    BAD_REWRITES,
    ids=[f"partitions={p!r},sql={q!r}" for p, q, _, _ in BAD_REWRITES],
)
def test_bad_rewrites_raise_before_writing_and_the_schema_never_grows(
    events, local_location, partitions, sql, error, mentions
):
    schema = events.schema
    with _writes_nothing(local_location), pytest.raises(error, match=mentions):
        events.rewrite_partitions(partitions, sql)
    assert events.refresh().schema == schema


def test_a_rewrite_growing_the_schema_is_refused_on_each_backend(location):
    table = _events(location.connect())
    with _writes_nothing(location), pytest.raises(ledger.UnknownColumnError, match="extra"):
        table.rewrite_partitions({"region": "us"}, "SELECT *, 'x' AS extra FROM entries")
    assert table.refresh().schema == SCHEMA


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("SELECT * REPLACE (DATE '2026-03-03' AS day) FROM entries", "moves rows out of partition"),
        ("SELECT * REPLACE (NULL::DATE AS day) FROM entries", "moves rows out of partition"),
        ("SELECT * REPLACE (trx_id + 5 AS trx_id) FROM entries", "trx_id above"),
        ("SELECT * REPLACE (5::TINYINT AS dml_type) FROM entries", "dml_type other than"),
        ("SELECT * REPLACE (NULL::TINYINT AS dml_type) FROM entries", "dml_type other than"),
        ("SELECT * REPLACE (NULL::INTEGER AS trx_seq) FROM entries", "NULL trx_seq"),
    ],
)
def test_a_rewrite_making_entries_no_writer_could_make_is_refused(tmp_path, sql, problem):
    import datetime as dt

    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "day": "DATE", "v": "VARCHAR"}, primary_key="id", partition_by="day"
    )
    table.insert([{"id": 1, "day": dt.date(2026, 1, 1), "v": "a"}])
    table.insert([{"id": 2, "day": dt.date(2026, 1, 2), "v": "b"}])
    version, files = table.version, sorted(table.files())
    with pytest.raises(ledger.SchemaError, match=problem):
        table.rewrite_partitions({"day": "2026-01-01"}, sql)
    assert (table.version, sorted(table.files())) == (version, files)
    assert table.count(partitions={"day": "2026-01-01"}) == 1
    # Changing values inside the partition is what a rewrite is for.
    table.rewrite_partitions({"day": "2026-01-01"}, "SELECT * REPLACE ('x' AS v) FROM entries")
    assert sorted(r[2] for r in table.scan().fetchall()) == ["b", "x"]
