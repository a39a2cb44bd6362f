"""Write semantics on both backends: what each operation puts in the ledger and what it means."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

import ledger
import views
from ledger.errors import StaleVersionError
from ledger.schema import ROW_ID
from tests.support.arrow_data import rows
from tests.support.engines import Engine
from tests.support.engines import sorted_rows as norm
from tests.support.ledger_reads import entry_count, sign_sums, visible_rows
from tests.support.twins import (
    SCHEMA as TWIN_SCHEMA,
)
from tests.support.twins import (
    assert_entry_order,
    assert_same_meaning,
    footprint,
    on_both,
    raw,
    raw_tuples,
    same_commit,
    totals,
    twins,
    visible,
)

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(18,2)"}


@pytest.fixture
def accounts(warehouse: ledger.Warehouse) -> ledger.Table:
    return warehouse.create_table("accounts", SCHEMA, primary_key=["id"])


def _entries(table: ledger.Table) -> list[tuple]:
    return table.scan().order("id, trx_id, trx_seq").fetchall()


def test_update_appends_a_delete_mark_with_the_old_values_then_the_new_row(accounts):
    first = accounts.insert([{"id": 1, "name": "alice", "amount": 100}])
    second = accounts.update([{"id": 1, "amount": 90}])
    rows = _entries(accounts)
    from decimal import Decimal

    assert rows == [
        (1, "alice", Decimal("100.00"), first.trx_id, 0, 1),
        (1, "alice", Decimal("100.00"), second.trx_id, 0, -1),
        (1, "alice", Decimal("90.00"), second.trx_id, 1, 1),
    ]
    assert second.trx_id > first.trx_id
    assert (second.inserted, second.deleted) == (1, 1)
    total = accounts.scan().aggregate("sum(dml_type * amount)").fetchall()[0][0]
    assert total == Decimal("90.00")


def test_upsert_inserts_new_keys_and_keeps_columns_absent_from_the_data(accounts):
    accounts.insert([{"id": 1, "name": "alice", "amount": 100}])
    accounts.upsert([{"id": 1, "amount": 5}, {"id": 2, "amount": 7}])
    from decimal import Decimal

    assert visible_rows(accounts) == [(1, "alice", Decimal("5.00")), (2, None, Decimal("7.00"))]


def test_delete_cancels_every_live_entry_of_the_key_including_duplicate_loads(accounts):
    batch = [{"id": 1, "name": "a", "amount": 1}, {"id": 2, "name": "b", "amount": 2}]
    accounts.insert(batch)
    accounts.insert(batch)  # loaded twice by mistake
    assert sign_sums(accounts) == {(1,): 2, (2,): 2}
    info = accounts.delete([1, 99])  # 99 does not exist: ignored
    assert info.deleted == 2
    assert sign_sums(accounts) == {(2,): 2}
    assert accounts.count() == 2


def test_delete_where_marks_only_matching_rows(accounts):
    accounts.insert([{"id": i, "name": "n", "amount": i} for i in range(10)])
    info = accounts.delete_where("amount >= 5 AND name = 'n'")
    assert info.deleted == 5
    assert [r[0] for r in visible_rows(accounts)] == [0, 1, 2, 3, 4]


def test_update_of_a_missing_key_writes_nothing(accounts, location):
    accounts.insert([{"id": 1, "name": "a", "amount": 1}])
    before = (accounts.version, entry_count(accounts))
    with pytest.raises(ledger.KeyNotFoundError, match="upsert"):
        accounts.update([{"id": 1, "amount": 2}, {"id": 2, "amount": 3}])
    fresh = location.connect().table("accounts")
    assert (fresh.version, entry_count(fresh)) == before


def test_append_entries_lets_callers_write_their_own_opposite_entries(accounts):
    accounts.insert([{"id": 1, "name": "deposit", "amount": 100}])
    accounts.append_entries(
        [
            {"id": 1, "name": "deposit", "amount": 100, "dml_type": -1},
            {"id": 1, "name": "deposit", "amount": 10, "dml_type": 1},
        ]
    )
    from decimal import Decimal

    assert visible_rows(accounts) == [(1, "deposit", Decimal("10.00"))]
    with pytest.raises(ledger.TypeMismatchError):
        accounts.append_entries([{"id": 2, "name": "x", "amount": 1, "dml_type": 2}])


def test_a_transaction_commits_everything_under_one_trx_id_or_nothing(accounts):
    with accounts.transaction() as tx:
        tx.insert([{"id": 1, "name": "a", "amount": 1}])
        tx.update([{"id": 1, "amount": 2}])  # sees its own insert
        tx.insert([{"id": 2, "name": "b", "amount": 3}])
        tx.delete([2])
    trx_ids = {r[3] for r in _entries(accounts)}
    assert trx_ids == {tx.trx_id}
    from decimal import Decimal

    assert visible_rows(accounts) == [(1, "a", Decimal("2.00"))]
    version = accounts.version
    with pytest.raises(ZeroDivisionError), accounts.transaction() as tx:
        tx.insert([{"id": 3, "name": "c", "amount": 1}])
        1 / 0  # noqa: B018
    assert accounts.refresh().version == version
    assert [r[0] for r in visible_rows(accounts)] == [1]
    with pytest.raises(ledger.TransactionClosedError):
        tx.insert([{"id": 4, "name": "d", "amount": 1}])


def test_idempotent_appends_load_a_batch_exactly_once(accounts):
    rows = [{"id": 1, "name": "a", "amount": 1}]
    first = accounts.insert(rows, app_id="stream-1", batch=7)
    replay = accounts.insert(rows, app_id="stream-1", batch=7)
    older = accounts.insert(rows, app_id="stream-1", batch=3)
    other_app = accounts.insert(rows, app_id="stream-2", batch=7)
    assert first.version is not None and other_app.version is not None
    assert replay.version is None and older.version is None
    assert sign_sums(accounts) == {(1,): 2}
    assert [(h.app_id, h.batch) for h in accounts.history() if h.app_id] == [
        ("stream-1", 7),
        ("stream-2", 7),
    ]


def test_idempotency_holds_across_a_race_between_two_handles(accounts, location):
    other = location.connect().table("accounts")
    rows = [{"id": 1, "name": "a", "amount": 1}]
    with accounts.transaction(app_id="job", batch=1) as slow:
        slow.insert(rows)
        other.insert(rows, app_id="job", batch=1)  # commits first
    assert slow.commit_info is not None and slow.commit_info.version is None
    assert sign_sums(accounts) == {(1,): 1}


def test_schema_evolution_adds_nullable_columns_and_widens_only(warehouse):
    table = warehouse.create_table("events", {"id": "INTEGER", "x": "FLOAT"}, primary_key="id")
    table.insert([{"id": 1, "x": 1.5}])
    with pytest.raises(ledger.UnknownColumnError, match="evolve_schema"):
        table.insert([{"id": 2, "x": 1.0, "extra": "e"}])
    table.insert([{"id": 2, "x": 2.0, "extra": "e"}], evolve_schema=True)
    fits = pa.table({"id": pa.array([3], pa.int64()), "x": pa.array([3.0], pa.float64())})
    table.insert(fits, evolve_schema=True)  # 64-bit data whose values fit: no widening
    assert table.schema == {"id": "INTEGER", "x": "FLOAT", "extra": "VARCHAR"}
    wide = pa.table({"id": pa.array([2**40], pa.int64()), "x": pa.array([1e300], pa.float64())})
    table.insert(wide, evolve_schema=True)
    assert table.schema == {"id": "BIGINT", "x": "DOUBLE", "extra": "VARCHAR"}
    assert sorted(visible_rows(table)) == [
        (1, 1.5, None),
        (2, 2.0, "e"),
        (3, 3.0, None),
        (2**40, 1e300, None),
    ]
    with pytest.raises(ledger.SchemaError, match="cannot change"):
        table.insert(pa.table({"id": [4], "extra": pa.array([1], pa.int64())}), evolve_schema=True)


def test_tables_without_a_primary_key_get_row_ids_so_any_entry_can_be_cancelled(warehouse):
    table = warehouse.create_table("log", {"msg": "VARCHAR", "level": "INTEGER"})
    table.insert([{"msg": "a", "level": 1}, {"msg": "a", "level": 1}])
    rows = table.scan().fetchall()
    row_ids = [r[2] for r in rows]
    assert len(set(row_ids)) == 2
    table.delete([row_ids[0]])
    assert table.count() == 1
    table.update([{"_row_id": row_ids[1], "level": 5}])
    assert visible_rows(table) == [("a", 5, row_ids[1])]
    with pytest.raises(ledger.InvalidArgumentError, match="primary key"):
        table.upsert([{"msg": "b", "level": 2}])
    table.delete_where("level = 5")
    assert table.count() == 0


def test_append_entries_without_a_key_mixes_marks_and_new_insertions(warehouse):
    events = warehouse.create_table("events", {"kind": "VARCHAR", "n": "BIGINT"})
    events.insert([{"kind": "click", "n": 1}, {"kind": "view", "n": 2}])
    (row_id,) = [r[1] for r in events.scan().project("kind, _row_id").fetchall() if r[0] == "view"]
    # a correction: cancel one entry by its _row_id, insert its replacement (new id generated)
    events.append_entries(
        [
            {"kind": "view", "n": 2, "_row_id": row_id, "dml_type": -1},
            {"kind": "view", "n": 3, "_row_id": None, "dml_type": 1},
        ]
    )
    rows = sorted(r[:2] for r in visible_rows(events))
    assert rows == [("click", 1), ("view", 3)]
    with pytest.raises(ledger.MissingKeyError):
        events.append_entries([{"kind": "view", "n": 3, "_row_id": None, "dml_type": -1}])


def test_insert_streams_a_record_batch_reader_in_bounded_files(warehouse, monkeypatch):
    from ledger import transaction

    monkeypatch.setattr(transaction, "STREAM_CHUNK_ROWS", 1000)
    table = warehouse.create_table("stream", {"id": "BIGINT", "v": "DOUBLE"}, primary_key="id")

    def batches():
        for start in range(0, 5000, 500):
            yield pa.record_batch(
                {"id": pa.array(range(start, start + 500), pa.int64()), "v": pa.array([1.0] * 500)}
            )

    schema = pa.schema([("id", pa.int64()), ("v", pa.float64())])
    info = table.insert(pa.RecordBatchReader.from_batches(schema, batches()))
    assert info.inserted == 5000
    assert table.count() == 5000
    assert len(table.files()) == 5  # one file per 1000-row chunk: memory stays bounded


def test_pandas_input(accounts):
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"id": [1, 2], "name": ["a", "b"], "amount": [1.5, 2.25]})
    accounts.insert(frame)
    assert accounts.count() == 2
    from decimal import Decimal

    assert visible_rows(accounts) == [(1, "a", Decimal("1.50")), (2, "b", Decimal("2.25"))]


def test_count_answers_from_the_log_without_opening_data_files(accounts, location):
    accounts.insert([{"id": i, "name": "x", "amount": i} for i in range(5)])
    accounts.delete([0, 1])
    store = location.connect().store
    for path in accounts.snapshot().markers():
        store.delete(accounts.prefix + path.path)  # count must not need them
    assert location.connect().table("accounts").count() == 3


def test_a_replayed_batch_in_a_transaction_is_a_no_op_even_after_concurrent_writes(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}], app_id="job", batch=1)
    other = ledger.connect(str(tmp_path)).table("t")
    with table.transaction(app_id="job", batch=2) as tx:
        tx.upsert([{"id": 1}])
        other.upsert([{"id": 1}], app_id="job", batch=2)  # the same batch lands first
    assert tx.commit_info is not None and tx.commit_info.version is None
    assert sign_sums(table) == {(1,): 1}


def test_evolving_the_schema_widens_only_columns_whose_values_need_it(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "INTEGER", "qty": "SMALLINT", "price": "FLOAT"}, primary_key="id"
    )
    table.insert([{"id": 1, "qty": 2, "price": 1.5, "note": "n"}], evolve_schema=True)
    assert table.schema == {"id": "INTEGER", "qty": "SMALLINT", "price": "FLOAT", "note": "VARCHAR"}
    table.insert([{"id": 2, "qty": 2**20, "price": 1.5}], evolve_schema=True)
    assert table.schema["qty"] == "BIGINT" and table.schema["id"] == "INTEGER"


def test_empty_writes_are_no_ops(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    assert table.insert([]).version is None
    assert table.upsert([]).version is None
    assert table.update([]).version is None
    assert table.delete([]).version is None
    assert table.version == 0


# =============================================================================================
# Writes through each engine equal the reference writes of the embedded API on a twin table
# (tests/support/twins.py): visible rows, totals, raw entries, commits and entry order.
# =============================================================================================

TEMPORAL = {"k": "VARCHAR", "day": "DATE", "ts": "TIMESTAMP", "tz": "TIMESTAMPTZ", "x": "BIGINT"}
TEMPORAL_TYPES = {
    "day": pa.date32(),
    "ts": pa.timestamp("us"),
    "tz": pa.timestamp("us", tz="UTC"),
    "k": pa.string(),
}


@pytest.mark.engines
def test_collapsing_writes_equal_the_reference_writes(engine: Engine, tmp_path: Any) -> None:
    s, e = twins(tmp_path, primary_key="k")
    # A blind insert naming key 2 twice: the later row of the input is the visible one.
    first = rows(
        "k g x d",
        (1, "a", 10, Decimal("1.50")),
        (2, "a", 20, Decimal("2.00")),
        (3, "b", 30, None),
        (2, "b", 21, Decimal("2.10")),
        (4, None, 40, Decimal("-4.00")),
    )
    same_commit(on_both(engine, s, e, "insert", first))
    assert (2, "b", 21, 2.1) in visible(s)
    # Upsert with partial columns (d kept from the visible row; NULL for the new key 5): key 2
    # has two live entries, both marked.
    same_commit(on_both(engine, s, e, "upsert", rows("k x", (2, 22), (5, 50))))
    same_commit(on_both(engine, s, e, "update", rows("k g", (3, "a"), (1, None))))
    # A missing key (9) is ignored by delete.
    same_commit(on_both(engine, s, e, "delete", rows("k", (4,), (9,))))
    entries = rows(
        "k g x d dml_type",
        (5, None, 50, None, -1),  # cancels the visible row of 5 exactly
        (5, "c", 55, Decimal("5.55"), 1),
        (6, "c", 60, None, 1),
    )
    same_commit(on_both(engine, s, e, "append_entries", entries))
    assert_same_meaning(s, e)
    assert visible(s) == norm(
        [
            (1, None, 10, 1.5),
            (2, "b", 22, 2.1),
            (3, "a", 30, None),
            (5, "c", 55, 5.55),
            (6, "c", 60, None),
        ]
    )
    columns = [*TWIN_SCHEMA, "trx_id", "dml_type"]
    assert raw_tuples(raw(s), columns) == raw_tuples(raw(e), columns)
    assert_entry_order(s, read_modify_write={2, 3})
    assert s.count() == e.count() == 5


@pytest.mark.engines
def test_inserts_without_primary_key_get_the_reference_row_ids(
    engine: Engine, tmp_path: Any
) -> None:
    """Generated _row_id on Spark inserts: the same ids as the embedded engine gives."""
    s, e = twins(tmp_path, primary_key=None)
    data = rows("g x", ("a", 1), ("b", 2), ("a", 3))
    same_commit(on_both(engine, s, e, "insert", data))
    assert visible(s, system_columns=True) == visible(e, system_columns=True)


@pytest.mark.engines
def test_update_and_delete_by_row_id_equal_the_reference(engine: Engine, tmp_path: Any) -> None:
    s, e = twins(tmp_path, primary_key=None)
    data = rows("g x d", ("a", 1, Decimal("1.00")), ("b", 2, None), ("a", 3, Decimal("3.00")))
    s.insert(data)
    e.insert(data)
    ids = sorted(
        r[ROW_ID] for r in views.visible(s, system_columns=True).to_arrow_table().to_pylist()
    )
    assert ids == sorted(r[ROW_ID] for r in raw(e))
    # Partial update: g and d are kept from the visible row.
    same_commit(on_both(engine, s, e, "update", rows(f"{ROW_ID} x", (ids[0], 100), (ids[1], 200))))
    # Delete takes row ids; extra columns are ignored.
    same_commit(on_both(engine, s, e, "delete", rows(f"{ROW_ID} x", (ids[2], 0))))
    assert visible(s, system_columns=True) == visible(e, system_columns=True)
    assert visible(s) == norm([(None, "a", 100, 1.0), (None, "b", 200, None)])
    assert_same_meaning(s, e)
    assert_entry_order(s, read_modify_write={2})


@pytest.mark.parametrize("version_column", [None, "v"])
@pytest.mark.engines
def test_replacing_writes_equal_the_reference(
    engine: Engine, tmp_path: Any, version_column: str | None
) -> None:
    schema = {**TWIN_SCHEMA, "v": "BIGINT"}
    s, e = twins(
        tmp_path,
        schema,
        primary_key="k",
        policy={"name": "replacing", "version_column": version_column},
    )
    data = rows("k g x v", (1, "a", 10, 5), (2, "a", 20, 5), (3, "b", 30, 5))
    s.insert(data)
    e.insert(data)
    if version_column is not None:
        # A lower (or NULL) version is refused on both engines before anything is written:
        # the mark of the old row would outrank the new row and hide the key.
        versions = (s.version, e.version)
        for stale in (rows("k x v", (2, 21, 1)), rows("k x v", (1, 11, None))):
            with pytest.raises(StaleVersionError):
                engine.write(s, "upsert", stale)
            with pytest.raises(StaleVersionError):
                e.upsert(stale)
        assert (s.refresh().version, e.refresh().version) == versions
    # Key 1 gets a higher version, key 2 the same one (the later write wins), key 4 is new.
    same_commit(on_both(engine, s, e, "upsert", rows("k x v", (1, 11, 6), (2, 21, 5), (4, 40, 1))))
    if version_column is None:
        same_commit(on_both(engine, s, e, "delete", rows("k", (4,))))
    else:
        same_commit(on_both(engine, s, e, "update", rows("k g", (3, "c"))))
    assert visible(s) == visible(e)
    assert (1, "a", 11, None, 6) in visible(s)
    assert totals(s, by="g", sum="x") == totals(e, by="g", sum="x")
    columns = [*schema, "trx_id", "dml_type"]
    assert raw_tuples(raw(s), columns) == raw_tuples(raw(e), columns)
    assert_entry_order(s, read_modify_write={2, 3})


@pytest.mark.engines
def test_partitioned_writes_land_in_the_reference_partitions(engine: Engine, tmp_path: Any) -> None:
    """A two-column key (text and date) and partitions by month(ts), a non-key column: an upsert
    moving a row to another month leaves its delete mark in the old month, on both engines."""
    s, e = twins(tmp_path, TEMPORAL, primary_key=["k", "day"], partition_by="month(ts)")
    utc = dt.UTC
    first = rows(
        "k day ts tz x",
        (
            "a",
            dt.date(2026, 1, 1),
            dt.datetime(2026, 1, 31, 23, 30),
            dt.datetime(2026, 1, 1, 12, tzinfo=utc),
            1,
        ),
        ("a", dt.date(2026, 1, 2), dt.datetime(2026, 2, 1, 0, 30), None, 2),
        (
            "b",
            dt.date(2026, 1, 1),
            dt.datetime(2026, 1, 15),
            dt.datetime(2026, 1, 3, tzinfo=utc),
            3,
        ),
        types=TEMPORAL_TYPES,
    )
    same_commit(on_both(engine, s, e, "insert", first))
    moved = rows(
        "k day ts x", ("a", dt.date(2026, 1, 1), dt.datetime(2026, 3, 1), 10), types=TEMPORAL_TYPES
    )
    same_commit(on_both(engine, s, e, "upsert", moved))
    gone = rows(
        "k day", ("b", dt.date(2026, 1, 1)), ("b", dt.date(2026, 1, 2)), types=TEMPORAL_TYPES
    )
    same_commit(on_both(engine, s, e, "delete", gone))
    assert visible(s) == visible(e)
    assert totals(s, by="k", sum="x") == totals(e, by="k", sum="x")

    def layout(t: ledger.Table) -> dict[tuple[str, int], tuple[int, int]]:
        """Entries and their sign sum per (partition, trx_id); Spark may cut files otherwise."""
        out: dict[tuple[str, int], tuple[int, int]] = defaultdict(lambda: (0, 0))
        for m in t.snapshot().markers():
            where = (repr(sorted(m.partition.items())), m.trx_min)
            out[where] = (out[where][0] + m.rows, out[where][1] + m.dml_sum)
        return dict(out)

    assert layout(s) == layout(e)
    assert layout(s)[("[('ts_month', '2026-01')]", 2)] == (1, -1)  # the mark stayed in January
    for month in ("2026-01", "2026-02", "2026-03"):
        assert s.count(partitions={"ts_month": month}) == e.count(partitions={"ts_month": month})
    assert_entry_order(s, read_modify_write={2})


@pytest.mark.engines
def test_a_mark_may_cancel_an_insertion_of_the_same_input(engine: Engine, tmp_path: Any) -> None:
    s, e = twins(tmp_path, primary_key="k")
    on_both(engine, s, e, "insert", rows("k g x", (1, "a", 1)))
    entries = rows(
        "k g x dml_type", (2, "b", 2, 1), (2, "b", 2, -1), (1, "a", 1, -1), (3, "c", 3, 1)
    )
    same_commit(on_both(engine, s, e, "append_entries", entries))
    assert visible(s) == visible(e) == norm([(3, "c", 3, None)])
    assert s.count() == e.count() == 1


@pytest.mark.engines
def test_a_replayed_app_batch_in_a_transaction_writes_nothing(
    engine: Engine, tmp_path: Any
) -> None:
    (table, _) = twins(tmp_path, primary_key="k")
    with table.transaction(app_id="nightly", batch=7) as tx:
        engine.write(tx, "insert", rows("k x", (1, 1), (2, 2)))
        engine.write(tx, "upsert", rows("k x", (2, 22)))
    assert tx.commit_info is not None and tx.commit_info.version == 1
    before = footprint(table)
    for batch in (7, 3):
        with table.transaction(app_id="nightly", batch=batch) as again:
            assert engine.write(again, "insert", rows("k x", (3, 3))) == 0
            assert engine.write(again, "upsert", rows("k x", (1, 11))) == 0
            # Replays do no work at all, not even checking keys.
            assert engine.write(again, "update", rows("k x", (99, 9))) == 0
        assert again.commit_info is not None and again.commit_info.version is None
        assert footprint(table) == before
    assert visible(table) == norm([(1, None, 1, None), (2, None, 22, None)])


@pytest.mark.engines
def test_evolve_schema_widens_a_column_like_the_reference(engine: Engine, tmp_path: Any) -> None:
    s, e = twins(tmp_path, {"k": "BIGINT", "i": "INTEGER"}, primary_key="k")
    data = rows("k i", (1, 2**40), types={"i": pa.int64()})
    e.insert(data, evolve_schema=True)
    engine.write(s, "insert", data, evolve_schema=True)
    assert s.refresh().schema == e.refresh().schema == {"k": "BIGINT", "i": "BIGINT"}
    assert visible(s) == visible(e)
