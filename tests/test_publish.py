"""Publishing views to Delta Lake (views.publish): real Delta tables, read back with deltalake.

Every check compares the Delta table, read back with ``DeltaTable(...).to_pyarrow_table()``,
with ``views.visible`` (or the rollup's totals) at the ledger version the publish recorded.

- First publish, then incremental merges after inserts, updates, deletes, blind duplicates,
  on collapsing, replacing, dedup and key-less tables, with awkward column names; only the
  changed keys are rewritten (deltalake's merge metrics).
- Exactly once: a retry at the same version is a no-op (Delta version unchanged); a crash after
  the Delta commit is recognised by the next publish; a crash before it leaves nothing; racing
  publishers converge.
- A vacuumed ledger history is republished in full; rollups publish their totals.
- Bad input is refused before anything is written; a property test over random writes and
  publishes; a Delta target on S3 (moto, in its own process) through storage_options.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableMerger
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import InvalidArgumentError, SchemaError
from tests.conftest import examples
from tests.support.maintenance import vacuum_now
from views import publish
from views.publish import PublishResult, delta_schema, publish_delta, publish_plan

SCHEMA = {"id": "BIGINT", "account": "VARCHAR", "amount": "DECIMAL(18,2)"}


def row(key: int, account: str, amount: int | str) -> dict[str, Any]:
    return {"id": key, "account": account, "amount": Decimal(amount)}


def create(
    warehouse: ledger.Warehouse, name: str = "payments", *, keyless: bool = False, **kw: Any
) -> ledger.Table:
    return warehouse.create_table(name, SCHEMA, primary_key=None if keyless else "id", **kw)


def canonical(table: pa.Table) -> list[tuple[tuple[str, Any], ...]]:
    """Rows as sorted lists of (column, value), in a stable order: multisets compare equal."""
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def delta_rows(target: str, options: dict[str, str] | None = None) -> list[Any]:
    return canonical(DeltaTable(target, storage_options=options).to_pyarrow_table())


def view_rows(table: ledger.Table, version: int | None = None) -> list[Any]:
    """What a publish at ``version`` must hold: the visible rows (with ``_row_id`` when the
    table has no key)."""
    keyless = not table.primary_key
    rows = views.visible(table, version=version, system_columns=keyless).to_arrow_table()
    return canonical(rows.drop_columns([c for c in ("trx_id", "trx_seq") if keyless]))


def delta_version(target: str) -> int:
    return DeltaTable(target).version()


def recorded(target: str, source: ledger.Table) -> int | None:
    return DeltaTable(target).transaction_version(publish.publish_app_id(source))


@pytest.fixture
def target(tmp_path: Path) -> str:
    return str(tmp_path / "lake" / "payments")


# --- 1. first publish and incremental merges ---------------------------------------------------


def test_first_publish_creates_the_table_and_records_the_version(
    warehouse: ledger.Warehouse, target: str
) -> None:
    table = create(warehouse)
    table.insert([row(1, "alice", "100"), row(2, "bob", "1000.50")])
    table.update([row(2, "bob", "100")])

    result = publish_delta(table, target)

    assert result == PublishResult(
        version=table.version,
        previous=None,
        rows_deleted=0,
        rows_inserted=2,
        full=True,
        skipped=False,
        delta_version=0,
        reason="first publish",
    )
    assert (
        delta_rows(target)
        == view_rows(table)
        == canonical(pa.Table.from_pylist([row(1, "alice", "100.00"), row(2, "bob", "100.00")]))
    )
    delta = DeltaTable(target)
    assert delta.transaction_version(publish.publish_app_id(table)) == table.version
    assert [(f.name, f.type.type) for f in delta.schema().fields] == [
        ("id", "long"),
        ("account", "string"),
        ("amount", "decimal(18,2)"),
    ]
    commit = delta.history(1)[0]
    assert commit["ledger.version"] == table.version
    assert commit["ledger.table"] == "payments"
    assert commit["ledger.source"] == publish.publish_app_id(table)


def test_later_publishes_merge_only_the_changed_keys(local_location: Any, target: str) -> None:
    table = create(local_location.connect())
    table.insert([row(k, f"acct{k % 3}", k) for k in range(20)])
    publish_delta(table, target)
    before = table.version

    table.update([row(3, "moved", "33")])
    table.delete([4, 5])
    table.insert([row(100, "new", "1")])
    result = publish_delta(table, target)

    # Keys 3, 4, 5 lose their rows; 3 and 100 get their current ones; the other 16 are not
    # touched.
    assert (result.rows_deleted, result.rows_inserted) == (3, 2)
    assert (result.version, result.previous, result.full, result.skipped) == (
        table.version,
        before,
        False,
        False,
    )
    assert result.delta_version == 1 == delta_version(target)
    assert delta_rows(target) == view_rows(table)
    assert recorded(target, table) == table.version


def test_blind_duplicates_and_corrections_of_a_collapsing_table(
    local_location: Any, target: str
) -> None:
    table = create(local_location.connect())
    table.insert([row(1, "a", "1"), row(1, "b", "2"), row(2, "c", "3")])  # key 1 twice
    publish_delta(table, target)
    assert delta_rows(target) == view_rows(table)

    table.insert([row(2, "d", "4")])  # another live entry of key 2
    table.append_entries([{**row(2, "d", "4"), "dml_type": -1}])  # cancel it by hand
    table.update([row(1, "e", "5")])  # cancels every live entry of key 1
    publish_delta(table, target)
    assert delta_rows(target) == view_rows(table)
    table.delete([1, 2])
    result = publish_delta(table, target)
    assert delta_rows(target) == view_rows(table) == []
    assert (result.rows_deleted, result.rows_inserted) == (2, 0)


def test_several_rows_per_key_are_all_replaced(
    local_location: Any, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge never pairs one source row with one target row: with every view row doubled
    (two rows per key in the source and in the target), a changed key still ends with exactly
    its current rows."""
    real = publish.publish_plan

    def doubled(source: Any, published: int | None) -> publish.PublishPlan:
        plan = real(source, published)
        return dataclasses.replace(plan, rows=pa.concat_tables([plan.rows, plan.rows]))

    monkeypatch.setattr(publish, "publish_plan", doubled)
    table = create(local_location.connect())
    table.insert([row(k, "a", k) for k in range(5)])
    publish_delta(table, target)
    table.update([row(1, "b", "10"), row(2, "c", "20")])
    table.delete([3])
    result = publish_delta(table, target)

    assert (result.rows_deleted, result.rows_inserted) == (6, 4)
    expected = Counter(view_rows(table) * 2)
    assert Counter(delta_rows(target)) == expected


def test_replacing_tables(local_location: Any, target: str) -> None:
    warehouse = local_location.connect()
    table = create(warehouse, policy={"name": "replacing"})
    table.insert([row(1, "a", "1"), row(2, "b", "2")])
    publish_delta(table, target)
    table.insert([row(1, "replaced", "9")])  # a replacement needs no delete mark
    table.delete([2])
    result = publish_delta(table, target)
    assert delta_rows(target) == view_rows(table)
    assert (result.rows_deleted, result.rows_inserted) == (2, 1)


def test_a_table_without_a_key_is_matched_on_its_row_ids(local_location: Any, target: str) -> None:
    table = create(local_location.connect(), keyless=True)
    table.insert([row(1, "a", "1"), row(1, "a", "1"), row(2, "b", "2")])  # equal rows twice
    publish_delta(table, target)
    ids = views.visible(table, system_columns=True).to_arrow_table()
    published = DeltaTable(target).to_pyarrow_table()
    assert "_row_id" in published.column_names
    assert sorted(published.column("_row_id").to_pylist()) == sorted(
        ids.column("_row_id").to_pylist()
    )

    first, _, third = sorted(ids.column("_row_id").to_pylist())
    table.update([{"_row_id": first, "amount": Decimal(7)}])
    table.delete([third])
    result = publish_delta(table, target)
    assert (result.rows_deleted, result.rows_inserted) == (2, 1)
    assert delta_rows(target) == view_rows(table)
    assert len(delta_rows(target)) == 2  # the untouched copy of the equal rows is kept


def test_dedup_tables_whose_repeats_cross_keys(local_location: Any, target: str) -> None:
    """With a dedup key other than the key, a later entry of key 2 repeating an entry of key 1
    is dropped; dropping key 1's partition brings key 2's back, although only key 1's
    entries changed: such a publish is full."""
    warehouse = local_location.connect()
    table = warehouse.create_table(
        "events",
        {"k": "BIGINT", "event": "BIGINT", "day": "DATE"},
        primary_key="k",
        partition_by="day",
        policy={"name": "dedup", "dedup_key": ["event"]},
    )
    day1, day2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
    table.insert([{"k": 1, "event": 10, "day": day1}])
    publish_delta(table, target)
    table.insert([{"k": 2, "event": 10, "day": day2}, {"k": 3, "event": 11, "day": day2}])
    result = publish_delta(table, target)
    assert not result.full
    assert delta_rows(target) == view_rows(table)
    assert {dict(r)["k"] for r in delta_rows(target)} == {1, 3}  # key 2 is a repeat

    table.drop_partitions({"day": day1})
    result = publish_delta(table, target)
    assert result.full and "dedup key" in result.reason
    assert delta_rows(target) == view_rows(table)
    assert {dict(r)["k"] for r in delta_rows(target)} == {2, 3}


def test_every_column_type_and_awkward_names_round_trip(local_location: Any, target: str) -> None:
    schema = {
        "Key Col": "VARCHAR",
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
    table = local_location.connect().create_table(
        "types", schema, primary_key=["Key Col", 'quo"te']
    )

    def values(key: str, n: int) -> dict[str, Any]:
        return {
            "Key Col": key,
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

    table.insert([values("a b", 1), values("c", 2), values("c", 3)])
    publish_delta(table, target)
    assert [t for _, t in delta_schema(pa.schema(DeltaTable(target).schema().to_arrow()))] == [
        "string",
        "long",
        "integer",
        "short",
        "byte",
        "boolean",
        "float",
        "double",
        "binary",
        "date",
        "timestamp_ntz",
        "timestamp",
        "decimal(38,6)",
    ]
    table.update([{**values("c", 2), "back`tick": 99}])
    table.delete([("a b", 1)])
    result = publish_delta(table, target)
    assert (result.rows_deleted, result.rows_inserted) == (2, 1)
    assert delta_rows(target) == view_rows(table)


# --- 2. exactly once ---------------------------------------------------------------------------


def test_a_publish_at_a_version_already_published_is_a_no_op(
    local_location: Any, target: str
) -> None:
    table = create(local_location.connect())
    table.insert([row(1, "a", "1")])
    publish_delta(table, target)
    table.insert([row(2, "b", "2")])
    first = publish_delta(table, target)
    version = delta_version(target)

    again = publish_delta(table, target)
    assert again.skipped and not again.full
    assert (again.version, again.previous, again.delta_version) == (
        first.version,
        first.version,
        None,
    )
    assert (again.rows_deleted, again.rows_inserted) == (0, 0)
    assert "already holds" in again.reason
    assert delta_version(target) == version
    # Through a fresh handle too: the version is read from the Delta table, not remembered.
    assert publish_delta(local_location.connect().table("payments"), target).skipped
    assert delta_version(target) == version


def test_only_ledger_merges_since_the_last_publish_record_the_new_version(
    local_location: Any, target: str
) -> None:
    table = create(local_location.connect())
    table.insert([row(1, "a", "1")])
    table.insert([row(2, "b", "2")])
    publish_delta(table, target)
    rows = delta_rows(target)
    assert table.merge(min_files=1).version is not None
    result = publish_delta(table, target)
    # delta-rs commits nothing for a merge that changes no row; the version is still recorded.
    assert not result.skipped and (result.rows_deleted, result.rows_inserted) == (0, 0)
    assert recorded(target, table) == table.version == result.version
    assert delta_rows(target) == rows
    assert publish_delta(table, target).skipped


def test_a_crash_after_the_delta_commit_is_recognised_by_the_next_publish(
    local_location: Any, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create(local_location.connect())
    table.insert([row(1, "a", "1"), row(2, "b", "2")])
    publish_delta(table, target)
    table.update([row(1, "c", "3")])
    real = TableMerger.execute

    def commit_then_crash(self: TableMerger) -> dict[str, Any]:
        real(self)
        raise RuntimeError("crashed after the commit")

    monkeypatch.setattr(TableMerger, "execute", commit_then_crash)
    with pytest.raises(RuntimeError, match="after the commit"):
        publish_delta(table, target)
    monkeypatch.undo()
    version = delta_version(target)
    assert version == 1

    result = publish_delta(table, target)
    assert result.skipped
    assert delta_version(target) == version
    assert delta_rows(target) == view_rows(table)


def test_a_crash_before_the_delta_commit_leaves_the_table_as_it_was(
    local_location: Any, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create(local_location.connect())
    table.insert([row(1, "a", "1")])
    publish_delta(table, target)
    before = delta_rows(target)
    table.update([row(1, "c", "3")])

    def crash(self: TableMerger) -> dict[str, Any]:
        raise RuntimeError("crashed before the commit")

    monkeypatch.setattr(TableMerger, "execute", crash)
    with pytest.raises(RuntimeError, match="crashed before the commit"):
        publish_delta(table, target)
    monkeypatch.undo()
    assert delta_rows(target) == before and delta_version(target) == 0

    result = publish_delta(table, target)
    assert not result.skipped and result.previous == 1
    assert delta_rows(target) == view_rows(table)


def test_a_crash_after_the_creating_commit_is_recognised_too(
    local_location: Any, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deltalake

    table = create(local_location.connect())
    table.insert([row(1, "a", "1")])

    def write_then_crash(*args: Any, **kwargs: Any) -> None:
        write_deltalake(*args, **kwargs)
        raise RuntimeError("crashed after the commit")

    monkeypatch.setattr(deltalake, "write_deltalake", write_then_crash)
    with pytest.raises(RuntimeError, match="crashed after the commit"):
        publish_delta(table, target)
    monkeypatch.undo()
    result = publish_delta(table, target)
    assert result.skipped and result.version == table.version
    assert delta_version(target) == 0
    assert delta_rows(target) == view_rows(table)


def test_racing_publishers_converge(
    local_location: Any,
    target: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three publishers plan from the same recorded version (a barrier holds each one's first
    plan until all have one): one commits, the other two lose the Delta commit race, start
    again from the version it recorded, and find nothing left to do. Round 0 races to create
    the Delta table."""
    warehouse = local_location.connect()
    table = create(warehouse)
    table.insert([row(k, "a", k) for k in range(10)])
    real = publish.publish_plan
    for round_ in range(3):
        if round_:
            table.update([row(round_, "b", "100"), row(round_ + 5, "c", "200")])
            table.insert([row(50 + round_, "d", "1")])
        barrier = threading.Barrier(3, timeout=60)
        planned = threading.local()

        def plan_together(
            source: Any,
            published: int | None,
            barrier: threading.Barrier = barrier,
            planned: threading.local = planned,
        ) -> publish.PublishPlan:
            plan = real(source, published)
            if not getattr(planned, "once", False):
                planned.once = True
                barrier.wait()
            return plan

        monkeypatch.setattr(publish, "publish_plan", plan_together)
        results: list[PublishResult] = []
        errors: list[BaseException] = []

        def run(results: list[Any] = results, errors: list[Any] = errors) -> None:
            try:
                results.append(publish_delta(warehouse.table("payments"), target))
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        caplog.clear()
        with caplog.at_level("INFO", logger="views.publish"):
            threads = [threading.Thread(target=run) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert not errors, errors
        assert sorted(r.skipped for r in results) == [False, True, True], results
        assert sum("lost a commit race" in r.getMessage() for r in caplog.records) == 2
        assert delta_version(target) == round_
        assert delta_rows(target) == view_rows(table)
        assert recorded(target, table) == table.version


# --- 3. vacuumed history, rollups --------------------------------------------------------------


def test_a_vacuumed_history_is_republished_in_full(local_location: Any, target: str) -> None:
    table = create(local_location.connect())
    table.insert([row(k, "a", k) for k in range(4)])
    first = publish_delta(table, target)
    table.update([row(0, "b", "10")])
    table.insert([row(9, "c", "9")])
    table.merge(min_files=1)
    assert vacuum_now(table).data_files_deleted > 0

    result = publish_delta(table, target)
    assert result.full and not result.skipped
    assert result.previous == first.version and result.version == table.version
    assert (result.rows_deleted, result.rows_inserted) == (4, 5)
    assert "republished in full" in result.reason and "vacuum" in result.reason
    assert delta_rows(target) == view_rows(table)
    assert recorded(target, table) == table.version
    assert DeltaTable(target).history(1)[0]["ledger.full"] is True

    # And incremental publishes go on from there.
    table.delete([1])
    after = publish_delta(table, target)
    assert not after.full and (after.rows_deleted, after.rows_inserted) == (1, 0)
    assert delta_rows(target) == view_rows(table)


def rollup_expected(base: ledger.Table, version: int) -> list[Any]:
    totals = views.totals(base, by="account", sum="amount", version=version).to_arrow_table()
    return canonical(
        pa.table(
            {
                "account": totals.column("account"),
                "n": totals.column("count"),
                "total": totals.column("sum_amount").cast(pa.decimal128(38, 2)),
            }
        )
    )


def test_a_rollup_publishes_its_totals_at_its_watermark(local_location: Any, target: str) -> None:
    warehouse = local_location.connect()
    base = create(warehouse)
    base.insert([row(1, "alice", "10"), row(2, "alice", "5"), row(3, "bob", "7")])
    rollup = base.create_rollup(
        "per_account", by="account", measures={"n": "count", "total": "sum(amount)"}
    )

    result = publish_delta(rollup, target)
    assert result.full and result.base_version == rollup.watermark == base.version
    assert result.version == rollup.table.version
    assert delta_rows(target) == rollup_expected(base, base.version)

    base.update([row(3, "carol", "8")])  # bob's only row moves: bob's group is gone
    base.insert([row(4, "alice", "1")])
    # Not refreshed: the rollup has not changed, so there is nothing to publish.
    assert publish_delta(rollup, target).skipped
    rollup.refresh()
    result = publish_delta(rollup, target)
    assert not result.full and result.base_version == base.version
    assert (result.rows_deleted, result.rows_inserted) == (2, 2)  # alice changed, bob gone, carol
    assert delta_rows(target) == rollup_expected(base, base.version)
    assert "bob" not in str(delta_rows(target))
    assert DeltaTable(target).history(1)[0]["ledger.baseVersion"] == base.version


# --- 4. bad input: refused before anything is written -----------------------------------------


def test_sources_that_are_not_tables_or_rollups_are_refused(
    local_location: Any, target: str
) -> None:
    table = create(local_location.connect())
    table.insert([row(1, "a", "1")])
    for wrong in (views.visible(table), table.snapshot(), "payments", None):
        with pytest.raises(InvalidArgumentError, match="publish a ledger Table or Rollup"):
            publish_delta(wrong, target)  # type: ignore[arg-type]
    for bad_target in (None, 3, ""):
        with pytest.raises(InvalidArgumentError, match="target must be"):
            publish_delta(table, bad_target)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="storage_options"):
        publish_delta(table, target, storage_options={"AWS_REGION": 1})  # type: ignore[dict-item]
    assert not os.path.exists(target)


def test_a_target_with_another_schema_or_source_is_refused(
    local_location: Any, tmp_path: Path
) -> None:
    warehouse = local_location.connect()
    table = create(warehouse)
    table.insert([row(1, "a", "1")])
    other = create(warehouse, "other")
    other.insert([row(2, "b", "2")])

    foreign = str(tmp_path / "foreign")  # written by another tool: no publish recorded
    write_deltalake(foreign, pa.table({"id": [1], "account": ["x"]}))
    with pytest.raises(InvalidArgumentError, match="holds no publish of ledger table 'payments'"):
        publish_delta(table, foreign)

    theirs = str(tmp_path / "theirs")  # a publish of another table with the same columns
    publish_delta(other, theirs)
    with pytest.raises(InvalidArgumentError, match="'other'"):
        publish_delta(table, theirs)
    assert delta_rows(theirs) == view_rows(other) and delta_version(theirs) == 0

    # The same name dropped and created again is another source (another uuid).
    ours = str(tmp_path / "ours")
    publish_delta(table, ours)
    warehouse.drop_table("payments")
    again = create(warehouse)
    again.insert([row(5, "e", "5")])
    with pytest.raises(InvalidArgumentError, match="holds no publish"):
        publish_delta(again, ours)

    # A new column of the source is added to the target (tests/test_publish_evolution.py).
    other.insert([{**row(3, "c", "3"), "note": "new column"}], evolve_schema=True)
    publish_delta(other, theirs)
    assert delta_rows(theirs) == view_rows(other)
    assert delta_version(foreign) == 0 and delta_version(ours) == 0


@pytest.mark.parametrize(
    "data_type",
    [
        pa.uint8(),
        pa.uint32(),
        pa.uint64(),
        pa.time64("us"),
        pa.timestamp("ns"),
        pa.timestamp("us", "Europe/Paris"),
        pa.decimal256(40, 2),
        pa.list_(pa.int64()),
        pa.float16(),
    ],
)
def test_column_types_delta_cannot_hold_are_refused_clearly(data_type: pa.DataType) -> None:
    with pytest.raises(SchemaError, match=r"'c' is .* which Delta Lake cannot hold"):
        delta_schema(pa.schema([("c", data_type)]))


# --- 5. the engine-neutral plan ----------------------------------------------------------------


def test_the_plan_names_the_changed_keys_and_renders_merge_conditions(
    local_location: Any,
) -> None:
    table = local_location.connect().create_table(
        "t", {"my key": "BIGINT", "b`q": "VARCHAR"}, primary_key="my key"
    )
    table.insert([{"my key": k, "b`q": "x"} for k in range(5)])
    first = publish_plan(table, None)
    assert first.full and first.rows.num_rows == 5 and first.changed_keys.num_rows == 0
    assert publish_plan(table, table.version).up_to_date
    since = table.version
    table.update([{"my key": 3, "b`q": "y"}])
    table.insert([{"my key": 7, "b`q": "z"}])
    table.merge(min_files=1)  # merges add no changed key

    plan = publish_plan(table, since)
    assert not plan.full and plan.version == table.version and plan.previous == since
    assert sorted(plan.changed_keys.column("my key").to_pylist()) == [3, 7]
    assert canonical(plan.rows) == canonical(
        pa.Table.from_pylist([{"my key": 3, "b`q": "y"}, {"my key": 7, "b`q": "z"}])
    )
    source = plan.merge_source()
    assert source.column(publish.ACTION).to_pylist() == ["delete", "delete", "insert", "insert"]
    assert plan.merge_condition("spark") == (
        "`target`.`my key` = `source`.`my key` AND `source`.`__ledger_action` = 'delete'"
    )
    assert plan.merge_condition() == (
        '"target"."my key" = "source"."my key" AND "source"."__ledger_action" = \'delete\''
    )
    assert plan.insert_values("spark") == {
        "`my key`": "`source`.`my key`",
        "`b``q`": "`source`.`b``q`",
    }
    assert plan.insert_condition("spark") == "`source`.`__ledger_action` = 'insert'"
    with pytest.raises(InvalidArgumentError, match="unknown Delta writer"):
        plan.merge_condition("oracle")


# --- 6. the property: the Delta table is always the view at the published version -------------

PAIRS = st.lists(st.tuples(st.integers(0, 5), st.integers(-50, 50)), min_size=1, max_size=3)
UNIQUE_PAIRS = st.lists(
    st.tuples(st.integers(0, 5), st.integers(-50, 50)),
    min_size=1,
    max_size=3,
    unique_by=lambda p: p[0],
)
WRITE = st.one_of(
    st.tuples(st.just("insert"), PAIRS),  # blind: keys may repeat (several live entries)
    st.tuples(st.just("upsert"), UNIQUE_PAIRS),
    st.tuples(st.just("delete"), UNIQUE_PAIRS),
    st.tuples(st.just("merge"), st.just([])),
    st.tuples(st.just("merge and vacuum"), st.just([])),
)
# Writes in rounds, each followed by a publish: the first is full, the later ones incremental
# (or full again when a vacuum took the changes away, or no-ops after an empty round).
ROUNDS = st.lists(st.lists(WRITE, max_size=3), min_size=2, max_size=4)


def apply_step(table: ledger.Table, action: str, pairs: list[tuple[int, int]]) -> None:
    keyless = not table.primary_key
    if action == "insert":
        table.insert([row(k, f"a{v % 3}", v) for k, v in pairs])
    elif action in ("upsert", "delete") and keyless:
        # Rows are named by their _row_id: pick existing ones by position.
        visible = views.visible(table, system_columns=True).to_arrow_table()
        ids = sorted(visible.column("_row_id").to_pylist())
        picked = {ids[k % len(ids)]: v for k, v in pairs} if ids else {}
        if picked and action == "delete":
            table.delete(list(picked))
        elif picked:
            table.update([{"_row_id": i, "amount": Decimal(v)} for i, v in picked.items()])
    elif action == "upsert":
        table.upsert([row(k, f"u{v % 3}", v) for k, v in pairs])
    elif action == "delete":
        table.delete([k for k, _ in pairs])
    elif action == "merge":
        table.merge(min_files=1)
    elif action == "merge and vacuum":
        table.merge(min_files=1)
        vacuum_now(table)  # the changes since the last publish may be gone


@settings(max_examples=examples(10))
@given(kind=st.sampled_from(["collapsing", "replacing", "keyless"]), rounds=ROUNDS)
def test_the_delta_table_always_equals_the_view_at_the_published_version(
    kind: str, rounds: list[list[tuple[str, list[tuple[int, int]]]]]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        warehouse = ledger.connect(os.path.join(root, "wh"))
        table = create(
            warehouse,
            keyless=kind == "keyless",
            policy={"name": "replacing"} if kind == "replacing" else None,
        )
        target = os.path.join(root, "lake")
        published: int | None = None
        for writes in rounds:
            for action, pairs in writes:
                apply_step(table, action, pairs)
            result = publish_delta(table, target)
            assert result.version == table.refresh().version
            assert result.previous == published
            assert result.skipped == (published == result.version)
            published = result.version
            assert recorded(target, table) == published
            assert delta_rows(target) == view_rows(table, published)


# --- 7. a Delta target on S3 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_process() -> Iterator[str]:
    """moto's S3 server in its own process: deltalake holds the GIL while it waits for some
    requests, so a server thread in this process (tests.conftest's) would never answer it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_delta_target_on_s3_through_storage_options(
    moto_process: str, local_location: Any
) -> None:
    import boto3

    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    boto3.client(
        "s3",
        endpoint_url=moto_process,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    options = {
        "AWS_ENDPOINT_URL": moto_process,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    target = f"s3://{bucket}/payments"
    table = create(local_location.connect())
    table.insert([row(1, "a", "1"), row(2, "b", "2")])
    assert publish_delta(table, target, storage_options=options).full
    table.update([row(1, "c", "3")])
    result = publish_delta(table, target, storage_options=options)
    assert (result.rows_deleted, result.rows_inserted, result.delta_version) == (1, 1, 1)
    assert delta_rows(target, options) == view_rows(table)
    assert publish_delta(table, target, storage_options=options).skipped
    assert publish.published_version(target, table, storage_options=options) == table.version
