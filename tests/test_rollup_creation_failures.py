"""A create_rollup that fails leaves nothing usable behind: no table listed, no data file, the
name free for the next try; whether it fails on bad input (before anything is written), on the
data while the rollup is filled, or on any storage call along the way. Its log stays, as every
dropped table's does: another writer may create the name anew at once, and its log continues
the dropped one's."""

from __future__ import annotations

from typing import Any

import pytest

import ledger
import views
from ledger.errors import LedgerError, TableExistsError, TypeMismatchError, UnknownColumnError
from tests.conftest import Location
from tests.support.failing import FailingStore

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "amount": "BIGINT"}
MEASURES = {"rows": "count", "total": "sum(amount)"}
ROWS = [{"id": 1, "region": "eu", "amount": 3}, {"id": 2, "region": "us", "amount": 4}]


def _base(warehouse: ledger.Warehouse) -> ledger.Table:
    base = warehouse.create_table("sales", SCHEMA, primary_key="id")
    base.insert(ROWS)
    return base


def _listing(warehouse: ledger.Warehouse) -> tuple[list[str], list[str]]:
    """The tables listed, and every data file in the store but the base's."""
    data = [i.key for i in warehouse.store.list("") if "/_data/" in i.key]
    data = [key for key in data if not key.startswith("sales/")]
    return sorted(warehouse.tables()), sorted(data)


def _assert_name_free(warehouse: ledger.Warehouse, name: str) -> None:
    rollup = warehouse.table("sales").create_rollup(name, by="region", measures=MEASURES)
    assert sorted(views.visible(rollup.table).fetchall()) == [("eu", 1, 3), ("us", 1, 4)]


@pytest.mark.parametrize(
    ("by", "measures", "error"),
    [
        ("nope", MEASURES, UnknownColumnError),
        ("region", {"total": "sum(nope)"}, UnknownColumnError),
        ("region", {"total": "avg(amount)"}, LedgerError),
    ],
)
def test_bad_input_creates_nothing(
    warehouse: ledger.Warehouse, by: str, measures: dict[str, str], error: type[Exception]
) -> None:
    base = _base(warehouse)
    before = _listing(warehouse)
    with pytest.raises(error):
        base.create_rollup("r", by=by, measures=measures)
    assert _listing(warehouse) == before
    _assert_name_free(warehouse, "r")


def test_a_name_clash_leaves_the_table_that_holds_the_name_alone(local_location: Location):
    warehouse = local_location.connect()
    base = _base(warehouse)
    before = _listing(warehouse)
    with pytest.raises(TableExistsError):
        base.create_rollup("sales", by="region", measures=MEASURES)
    assert _listing(warehouse) == before
    assert len(warehouse.table("sales").to_arrow()) == 2


def test_a_rollup_that_fails_while_it_is_filled_leaves_no_table_and_no_data(
    warehouse: ledger.Warehouse,
):
    base = _base(warehouse)
    base.insert([{"id": 3, "region": "eu", "amount": 2**62}, {"id": 4, "region": "eu",
                                                               "amount": 2**62}])  # fmt: skip
    before = _listing(warehouse)
    with pytest.raises(TypeMismatchError, match="does not fit"):  # the BIGINT sum overflows
        base.create_rollup("r", by="region", measures=MEASURES, auto_refresh=True)
    assert _listing(warehouse) == before
    assert base.config.get("auto_refresh", []) == []
    base.delete([3, 4])
    _assert_name_free(warehouse, "r")


def test_a_name_whose_earlier_life_was_dropped_stays_dropped(local_location: Location):
    warehouse = local_location.connect()
    base = _base(warehouse)
    warehouse.create_table("r", {"a": "BIGINT"})
    warehouse.drop_table("r")
    before = _listing(warehouse)
    with pytest.raises(UnknownColumnError):
        base.create_rollup("r", by="region", measures={"t": "sum(nope)"})
    base.insert([{"id": 3, "region": "eu", "amount": 2**62}, {"id": 4, "region": "eu",
                                                               "amount": 2**62}])  # fmt: skip
    with pytest.raises(TypeMismatchError, match="does not fit"):
        base.create_rollup("r", by="region", measures=MEASURES)
    assert _listing(warehouse) == before
    base.delete([3, 4])
    _assert_name_free(warehouse, "r")


def _creating(store: FailingStore, fail_at: int | None, name: str, auto_refresh: bool) -> Any:
    """create_rollup through ``store``, its ``fail_at``-th call (from here on) failing."""
    base = ledger.Warehouse(store).table("sales")
    start = store.counter.calls
    store.counter.fail_at = None if fail_at is None else start + fail_at
    try:
        base.create_rollup(name, by="region", measures=MEASURES, auto_refresh=auto_refresh)
    finally:
        store.counter.fail_at = None
    return store.counter.log[start:]


@pytest.mark.parametrize("auto_refresh", [False, True])
def test_a_failing_storage_call_anywhere_in_the_creation_leaves_nothing(
    local_location: Location, auto_refresh: bool
) -> None:
    warehouse = local_location.connect()
    _base(warehouse)
    calls = _creating(FailingStore(warehouse.store, None), None, "probe", auto_refresh)
    warehouse.drop_table("probe")
    assert len(calls) >= 5, calls
    for n in range(1, len(calls) + 1):
        name = f"r{n}"
        before = _listing(warehouse)
        auto_before = warehouse.table("sales").config.get("auto_refresh", [])
        store = FailingStore(warehouse.store, None)
        try:
            _creating(store, n, name, auto_refresh)
        except Exception:
            assert store.counter.failed
            where = f"failure at call {n} ({calls[n - 1]})"
            assert _listing(warehouse) == before, where
            assert warehouse.table("sales").config.get("auto_refresh", []) == auto_before, where
        else:  # the library retried past the fault: the rollup is whole
            assert name in warehouse.tables()
            warehouse.drop_table(name)
        _assert_name_free(warehouse, name)
        warehouse.drop_table(name)


def test_an_auto_refresh_whose_sum_overflows_is_logged_and_the_write_stands(
    local_location: Location, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = local_location.connect()
    base = _base(warehouse)
    rollup = base.create_rollup("r", by="region", measures=MEASURES, auto_refresh=True)
    big = [{"id": 3, "region": "eu", "amount": 2**62}, {"id": 4, "region": "eu", "amount": 2**62}]
    base.insert(big)  # committed; the refresh fails on the sum and is logged
    assert len(base.to_arrow()) == 4
    assert "does not fit" in caplog.text
    with pytest.raises(TypeMismatchError):
        rollup.refresh()
    base.delete([4])
    rollup.refresh()
    assert sorted(views.visible(rollup.table).fetchall()) == [("eu", 2, 3 + 2**62), ("us", 1, 4)]


def test_a_table_created_under_the_name_while_a_failed_creation_cleans_up_is_kept(
    local_location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the failed rollup is dropped, its name is free: a table another writer creates
    under it right then (a retry, say) keeps its committed rows."""
    from ledger import lifecycle

    warehouse = local_location.connect()
    base = _base(warehouse)
    base.insert([{"id": 3, "region": "eu", "amount": 2**62}, {"id": 4, "region": "eu",
                                                               "amount": 2**62}])  # fmt: skip
    drop = lifecycle.drop_table

    def drop_then_another_writer_creates(store: Any, name: str, **options: Any) -> None:
        drop(store, name, **options)
        other = ledger.Warehouse(store).create_table(name, {"k": "BIGINT"}, primary_key="k")
        other.insert([{"k": 7}])

    monkeypatch.setattr(lifecycle, "drop_table", drop_then_another_writer_creates)
    with pytest.raises(TypeMismatchError, match="does not fit"):
        base.create_rollup("r", by="region", measures=MEASURES)
    monkeypatch.undo()
    assert views.visible(warehouse.table("r")).fetchall() == [(7,)]
