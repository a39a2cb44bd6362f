"""The totals statement is made once per table state and request (ledger/reads/totals.py):
repeated calls on an unchanged table reuse it, every commit (and a new column) makes a new one,
the plan thresholds and the request are part of what it is kept by, and reads restricted to
partitions make theirs anew. Repeated calls after every write of random ledgers answer as plain
SQL over a table updated in place."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.reads import totals as total_reads
from tests.conftest import examples
from tests.support.view_oracle import InPlaceTable, assert_same_rows
from tests.test_totals_statistics import ARROW, REQUESTS, SCHEMA, _apply, ledgers

ROWS = [{"k": k, "g": "ab"[k % 2], "x": k, "i": 1, "d": k / 4, "m": None} for k in range(8)]


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the statements made anew (not reused)."""
    calls: list[int] = []
    make: Callable[..., Any] = total_reads._statement

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return make(*args, **kwargs)

    monkeypatch.setattr(total_reads, "_statement", counted)
    return calls


def _totals(table: ledger.Table, **request: Any) -> list[tuple[Any, ...]]:
    return sorted(views.totals(table, **request).fetchall(), key=repr)


def test_a_statement_is_made_once_per_state_and_again_after_a_commit(made: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k")
        table.insert(ROWS)
        table.update([{"k": 3, "x": 30}])
        first = _totals(table, by="g", sum="x")
        assert first == [("a", 4, 12), ("b", 4, 43)]
        assert _totals(table, by="g", sum="x") == first
        assert len(made) == 1
        table.delete([(5,)])
        assert _totals(table, by="g", sum="x") == [("a", 4, 12), ("b", 3, 38)]
        assert len(made) == 2
        assert _totals(table, by="g", sum="x", where="x > 6") == [("b", 2, 37)]
        assert len(made) == 3  # the request is part of the key
        with mock.patch.multiple(total_reads, SPLIT_FROM_ENTRIES=0, SIGNS_GROUPED_FROM_ENTRIES=0):
            assert _totals(table, by="g", sum="x") == [("a", 4, 12), ("b", 3, 38)]
            assert _totals(table, sum="x") == [(7, 50)]
        assert len(made) == 5  # so are the plan thresholds
        older = table.snapshot(version=2)
        assert sorted(views.totals(older, sum="x").fetchall()) == [(8, 55)]
        assert sorted(views.totals(older, sum="x").fetchall()) == [(8, 55)]
        assert len(made) == 6  # an older version is a state of its own, kept while it lives


def test_a_new_column_makes_a_new_statement(made: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k")
        table.insert(ROWS)
        assert _totals(table, sum="x") == [(8, 28)]
        table.insert([{**ROWS[0], "k": 8, "extra": 5}], evolve_schema=True)
        assert _totals(table, sum="x") == [(9, 28)]
        assert _totals(table, sum=["x", "extra"]) == [(9, 28, 5)]
        assert len(made) == 3


def test_reads_of_chosen_partitions_make_their_statement_each_time(made: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k", partition_by="g")
        table.insert(ROWS)
        assert _totals(table, sum="x") == [(8, 28)]
        for _ in range(2):
            assert _totals(table, sum="x", partitions={"g": "a"}) == [(4, 12)]
            assert _totals(table, sum="x", partitions={"g": "b"}) == [(4, 16)]
        assert len(made) == 5


@settings(max_examples=examples(10), deadline=None)
@given(operations=ledgers(), requests=st.lists(REQUESTS, min_size=1, max_size=2))
def test_repeated_calls_answer_as_plain_sql_after_every_write(
    operations: list[tuple[str, Any]], requests: list[dict[str, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k")
        oracle = InPlaceTable(ARROW, ["k"])
        for operation in operations:
            _apply(table, oracle, operation)
            for request in requests:
                want = oracle.totals(
                    request["by"], request["sums"], request["avgs"], where=request["where"]
                )
                for _ in range(2):
                    got = views.totals(
                        table,
                        by=list(request["by"]) or None,
                        sum=request["sums"],
                        avg=request["avgs"],
                        where=request["where"],
                    ).fetchall()
                    assert_same_rows(got, want, len(request["by"]), str(request))
