"""Answers kept per statement (ledger/engines/duckdb/kept_results.py): the third and later calls
of a view on an unchanged table read a kept answer, which must be the answer the statement gives,
in the same DuckDB and Arrow types, after every write; what is kept stays within its bound; a
caller's connection keeps nothing; a statement that fails on the rows still fails when read."""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings

import ledger
import views
from ledger.engines.duckdb import kept_results
from ledger.engines.duckdb.session import connect
from ledger.reads import visible as visible_reads
from tests.conftest import examples
from tests.support.view_oracle import InPlaceTable, assert_same_rows
from tests.test_totals_statistics import ARROW, REQUESTS, SCHEMA, _apply, ledgers

CALLS = 4  # the first runs lazily, the second keeps the answer, the later ones read it


@pytest.fixture(autouse=True)
def nothing_kept() -> None:
    kept_results.kept_results().clear()


@settings(max_examples=examples(10), deadline=None)
@given(operations=ledgers(), request=REQUESTS)
def test_repeated_calls_answer_as_an_in_place_table_after_every_write(
    operations: list[tuple[str, Any]], request: dict[str, Any]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k")
        oracle = InPlaceTable(ARROW, ["k"])
        for operation in operations:
            _apply(table, oracle, operation)
            want = oracle.totals(
                request["by"], request["sums"], request["avgs"], where=request["where"]
            )
            for _ in range(CALLS):
                got = views.totals(
                    table,
                    by=list(request["by"]) or None,
                    sum=request["sums"],
                    avg=request["avgs"],
                    where=request["where"],
                ).fetchall()
                assert_same_rows(got, want, len(request["by"]), str(request))
                visible = oracle.visible()
                assert_same_rows(views.visible(table).fetchall(), visible, 1, "visible")
                read = [tuple(row.values()) for row in table.to_arrow().to_pylist()]
                assert_same_rows(read, visible, 1, "to_arrow")
        assert kept_results.kept_results().kept_bytes > 0  # later calls did read kept answers


TYPES = {
    "k": "BIGINT",
    "big": "BIGINT",
    "amount": "DECIMAL(12,2)",
    "at": "TIMESTAMPTZ",
    "day": "DATE",
    "name": "VARCHAR",
    "ratio": "DOUBLE",
}
ROWS = [
    {
        "k": k,
        "big": 2**62 + k,
        "amount": Decimal("1.25") * k,
        "at": datetime(2026, 11, 2, k, tzinfo=UTC),
        "day": date(2026, 11, k + 1),
        "name": f"n{k}",
        "ratio": k / 3,
    }
    for k in range(6)
]


def _views(table: ledger.Table) -> dict[str, Any]:
    return {
        "visible": lambda: views.visible(table),
        "totals_by": lambda: views.totals(table, by="day", sum=["big", "amount"], avg="ratio"),
        "grand": lambda: views.totals(table, sum=["big", "amount"], avg=["big", "amount"]),
    }


def test_a_kept_answer_has_the_statement_s_types_in_duckdb_arrow_and_python() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS)
        table.update([{"k": 2, "big": -(2**62), "amount": Decimal("-3.50")}])
        for name, view in _views(table).items():
            first = view()
            types, arrow, rows = first.types, first.to_arrow_table(), sorted(first.fetchall())
            for _ in range(CALLS - 1):
                later = view()
                assert later.types == types, name
                assert later.to_arrow_table().schema == arrow.schema, name
                # in any order (DuckDB's threads); HUGEINT sums come back as int, not Decimal
                assert sorted(later.fetchall()) == rows, name
        assert kept_results.kept_results().kept_bytes > 0


def test_a_commit_is_seen_at_once() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS)
        for _ in range(CALLS):
            assert views.totals(table, sum="big").fetchall() == [(6, 6 * 2**62 + 15)]
        table.delete([(0,)])
        assert views.totals(table, sum="big").fetchall() == [(5, 5 * 2**62 + 15)]
        assert len(table.to_arrow()) == 5


def test_kept_answers_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = kept_results.KeptResults(limit=4000, largest=3000, seen=8)
    monkeypatch.setattr(kept_results, "_KEPT", kept)
    with tempfile.TemporaryDirectory() as root:
        warehouse = ledger.connect(root)
        for number in range(4):
            table = warehouse.create_table(f"t{number}", TYPES, primary_key="k")
            table.insert(ROWS)
            for _ in range(CALLS):
                assert len(views.visible(table).fetchall()) == 6
                assert kept.kept_bytes <= 4000
        assert kept.kept_bytes > 0
        many = warehouse.create_table("many", TYPES, primary_key="k")
        many.insert([{**ROWS[0], "k": k, "name": "x" * 100} for k in range(100)])
        before = kept.kept_bytes
        for _ in range(CALLS):  # larger than the largest answer kept: run every time
            assert len(views.visible(many).fetchall()) == 100
        assert kept.kept_bytes == before


def test_a_caller_s_connection_keeps_nothing() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS)
        with connect() as con:
            for _ in range(CALLS):
                assert views.totals(table, sum="big", con=con).fetchall() == [(6, 6 * 2**62 + 15)]
        assert kept_results.kept_results().kept_bytes == 0


def test_a_predicate_failing_on_the_rows_still_fails_when_read() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS)
        for _ in range(CALLS):
            relation = views.totals(table, sum="big", where="name::INTEGER = 1")
            with pytest.raises(duckdb.Error):
                relation.fetchall()
        assert kept_results.kept_results().kept_bytes == 0


@pytest.mark.parametrize("calls", [1, 2, CALLS])
def test_a_file_changed_under_its_name_is_read_again(calls: int) -> None:
    """Data files are never rewritten in place; if one is anyway (a restore, a copy), its size
    or modification time differs and the answer kept for the old one is not used."""
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS[:3])
        other = ledger.connect(root + "/other").create_table("t", TYPES, primary_key="k")
        other.insert(ROWS)
        for _ in range(calls):
            assert len(views.visible(table).fetchall()) == 3
        [target] = _files(table)
        [source] = _files(other)
        with open(source, "rb") as new, open(target, "wb") as old:
            old.write(new.read())
        assert len(views.visible(table).fetchall()) == 6


def _files(table: ledger.Table) -> list[str]:
    with connect() as con:
        _, params = visible_reads.visible_statement(table.snapshot(), con)
    return [path for paths in params.values() for path in paths]


def test_threads_share_kept_answers() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS)
        want = sorted(views.visible(table).fetchall())

        def calls() -> list[Any]:
            return [sorted(views.visible(table).fetchall()) for _ in range(CALLS)]

        with ThreadPoolExecutor(4) as pool:
            answers = [answer for done in pool.map(lambda _: calls(), range(4)) for answer in done]
        assert answers == [want] * (4 * CALLS)
        assert kept_results.kept_results().kept_bytes > 0


@pytest.mark.parametrize(
    "where",
    [
        "at <= now()",
        "at <= CURRENT_TIMESTAMP",
        "at::DATE <= current_date",
        "at <= get_current_timestamp()",
        "age(at) > INTERVAL 1 SECOND",
        "random() < 2",
    ],
)
def test_a_statement_reading_the_clock_or_chance_is_run_at_every_call(where: str) -> None:
    """``where="at > now() - INTERVAL 1 HOUR"`` over unchanged files answers otherwise as time
    goes by: such a statement is never answered from a kept one."""
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        table.insert(ROWS)
        for _ in range(CALLS):
            assert len(views.rows(table, where=where)) == len(ROWS)
            assert len(views.visible(table).fetchall()) == len(ROWS)
            views.totals(table, sum="big", where=where).fetchall()
        # Only the statement without a condition (the visible rows) is kept.
        kept = kept_results.kept_results()
        assert all(not kept_results.changes_between_runs(text) for text, _ in list(kept._answers))
        assert kept_results.changes_between_runs(f"SELECT * FROM x WHERE {where}")


def test_a_key_holds_no_list_of_files_and_large_tables_keep_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kept answer's key is the statement and a digest of its files, whatever their number
    (a tiny totals answer must not pin a list of thousands of paths); files larger in all than
    an answer kept are read lazily at every call, so a caller filtering a large table's view
    is never made to read all of it at once."""
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", TYPES, primary_key="k")
        for row in ROWS:
            table.insert([row])  # a file per row
        for _ in range(CALLS):
            views.totals(table, sum="big").fetchall()
        kept = kept_results.kept_results()
        [(text, digest)] = list(kept._answers)
        assert isinstance(digest, bytes) and len(digest) == 20
        assert not any(path in text for path in _files(table))
        kept.clear()
        monkeypatch.setattr(kept_results, "LARGEST_KEPT_BYTES", sum(map(_size, _files(table))) - 1)
        for _ in range(CALLS):
            assert len(views.visible(table).fetchall()) == len(ROWS)
            views.totals(table, sum="big").fetchall()
        assert kept.kept_bytes == 0 and not kept._seen


def _size(path: str) -> int:
    return os.stat(path).st_size
