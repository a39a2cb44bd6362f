"""Write semantics on both backends: what each operation puts in the ledger and what it means."""

from __future__ import annotations

import pyarrow as pa
import pytest

import ledger
from tests.support.ledger_reads import entry_count, sign_sums, visible_rows

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
