"""A blind insert on an object store reserves its trx_id at the same time as it lists the
reservations, and writes its rows meanwhile (docs/format.md 6.1). The id sent ahead is kept
only when it is free and no reservation is above it; otherwise it is given back, the rows
written with it are deleted, and the insert runs again reserving after the listing. Whichever
storage call fails, the table reads as before or after.
"""

from __future__ import annotations

from typing import Any

import pytest

import ledger
from ledger.trx_ids import reservation_body, reservation_key, reservation_prefix
from tests.conftest import Location
from tests.support.failing import FailingStore
from tests.support.lost_responses import MUTATING, LateFailingStore
from tests.test_faults import (
    OPERATIONS,
    attempt,
    check_after_fault,
    create_base,
    sweep,
)

SCHEMA = {"id": "BIGINT", "v": "VARCHAR"}


def _rows(*ids: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"v{i}"} for i in ids]


def _reserved(table: ledger.Table) -> list[int]:
    prefix = reservation_prefix(table.prefix)
    return [int(info.key[len(prefix) :]) for info in table.store.list(prefix)]


def _data_files(table: ledger.Table) -> set[str]:
    return {
        info.key[len(table.prefix) :]
        for info in table.store.list(table.prefix + "_data/")
        if info.key.endswith(".parquet")
    }


def _check(table: ledger.Table, ids: list[int]) -> None:
    """Every row once, and no data file that no commit references (the rows written with an
    id that was given back are deleted)."""
    fresh = ledger.Warehouse(table.store).table(table.name)
    assert sorted(r[0] for r in fresh.scan().select("id").fetchall()) == sorted(ids)
    assert _data_files(fresh) == {m.path for m in fresh.snapshot().markers()}


def test_an_id_held_by_a_running_transaction_is_not_taken(s3_location: Location) -> None:
    writer = s3_location.connect().create_table("events", SCHEMA, primary_key="id")
    writer.insert(_rows(1))  # version 1, trx_id 1: the held state
    other = s3_location.connect().table("events")
    running = other.transaction()  # reserves trx_id 2, the id the writer sends ahead
    assert running.trx_id == 2
    info = writer.insert(_rows(2))
    assert (info.version, info.trx_id) == (2, 3)
    running.insert(_rows(3))
    assert running.commit().trx_id == 2
    _check(writer, [1, 2, 3])
    assert 2 in _reserved(writer)  # the running transaction's reservation was left alone


def test_an_id_below_a_running_transactions_is_given_back(s3_location: Location) -> None:
    """The id sent ahead is free, but a running transaction holds a higher one: a new id must
    be above every running transaction's, so the one sent ahead is given back."""
    writer = s3_location.connect().create_table("events", SCHEMA, primary_key="id")
    writer.insert(_rows(1))
    writer.store.reserve(reservation_key(writer.prefix, 3), reservation_body(1))
    info = writer.insert(_rows(2))
    assert (info.version, info.trx_id) == (2, 4)
    assert 2 not in _reserved(writer)
    _check(writer, [1, 2])
    assert writer.insert(_rows(5)).trx_id == 5  # and the next insert reserves ahead again


def test_writers_taking_turns(s3_location: Location) -> None:
    """Each writer's held state misses the other's last commit, so the id it would send ahead
    is taken: every row still lands once, with ids in commit order."""
    first = s3_location.connect().create_table("events", SCHEMA, primary_key="id")
    second = s3_location.connect().table("events")
    infos = [(first if n % 2 else second).insert(_rows(n)) for n in range(1, 9)]
    assert [i.version for i in infos] == list(range(1, 9))
    trx_ids = [i.trx_id for i in infos]
    assert trx_ids == sorted(set(trx_ids))
    _check(first, list(range(1, 9)))


@pytest.mark.parametrize("layout", ["plain", "partitioned"])
def test_a_fault_at_any_storage_call_of_an_insert_on_s3(s3_location: Location, layout: str) -> None:
    calls = sweep(s3_location, layout, OPERATIONS["insert"])
    assert any(c.startswith("put_if_absent ") and "/_trx/" in c for c in calls), calls
    assert any(c.startswith("put_if_absent ") and "/_log/" in c for c in calls), calls


def test_a_write_of_an_insert_on_s3_that_lands_but_reports_failure(
    s3_location: Location,
) -> None:
    """Every write of the insert in turn takes effect and then raises: the reservation sent
    ahead, the data file and the commit."""
    warehouse = s3_location.connect()
    create_base(warehouse, "clean", "partitioned")
    counted = FailingStore(warehouse.store, fail_at=None)
    assert attempt(counted, "clean", OPERATIONS["insert"]) is None
    writes = [n for n, call in enumerate(counted.counter.log, 1) if call.startswith(MUTATING)]
    assert len(writes) >= 3, counted.counter.log
    for n in writes:
        name = f"late{n}"
        create_base(warehouse, name, "partitioned")
        failing = LateFailingStore(warehouse.store, fail_at=n)
        error = attempt(failing, name, OPERATIONS["insert"])
        assert failing.counter.failed, f"call {n} was not reached: {failing.counter.log}"
        check_after_fault(warehouse, name, OPERATIONS["insert"], failing, error, ambiguous=True)
