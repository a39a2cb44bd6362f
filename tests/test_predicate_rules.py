"""One rule for every call taking a SQL predicate: reads (``to_arrow``, ``views.rows``,
``views.totals``, ``ledger show --where``), ``delete_where`` and the partition picks of
``drop_partitions``/``rewrite_partitions``. Each accepts the same predicates and matches the same
rows (column names without case, as the engines compare them), and refuses the same ones alike:
an unknown name, a value that is no condition, a predicate that fails on the rows (with the
engine's reason, never another one)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import ledger
import views
from ledger.cli.app import cli

ROWS = [
    {"id": 1, "Name": "x", "é": 1, "s": "a"},
    {"id": 2, "Name": "y", "é": 2, "s": "b"},
    {"id": 3, "Name": "x", "é": 3, "s": "7"},
]


def _warehouse(tmp_path: Path) -> Path:
    """A warehouse holding table ``t`` of ROWS, partitioned by ``Name``."""
    schema = {"id": "BIGINT", "Name": "VARCHAR", "é": "BIGINT", "s": "VARCHAR"}
    table = ledger.connect(str(tmp_path)).create_table(
        "t", schema, primary_key="id", partition_by="Name"
    )
    table.insert(ROWS)
    return tmp_path


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One warehouse for the calls that write nothing (a transaction's delete_where is
    aborted), and for refusals, which write nothing either (each test checks it)."""
    return _warehouse(tmp_path_factory.mktemp("shared"))


def _t(warehouse: Path) -> ledger.Table:
    return ledger.connect(str(warehouse)).table("t")


def _to_arrow(warehouse: Path, where: str) -> int:
    return int(_t(warehouse).to_arrow(where=where).num_rows)


def _rows(warehouse: Path, where: str) -> int:
    return int(views.rows(_t(warehouse), where=where).num_rows)


def _totals(warehouse: Path, where: str) -> int:
    [(count,)] = views.totals(_t(warehouse), count=True, where=where).fetchall()
    return int(count)


def _show(warehouse: Path, where: str) -> int:
    args = ["-w", str(warehouse), "show", "t", "--where", where, "--json"]
    outcome = CliRunner().invoke(cli, args)
    if outcome.exit_code:
        if "PredicateError" in outcome.stderr or "PredicateColumnError" in outcome.stderr:
            raise ledger.InvalidPredicateError(outcome.stderr)
        raise AssertionError(outcome.stderr)
    return len(json.loads(outcome.stdout))


def _delete_where(warehouse: Path, where: str) -> int:
    tx = _t(warehouse).transaction()
    try:
        return tx.delete_where(where)
    finally:
        tx.abort()


def _drop_partitions(warehouse: Path, where: str) -> int:
    table = _t(warehouse)
    before = table.count()
    table.drop_partitions(where=where)
    return before - table.count()


def _rewrite_partitions(warehouse: Path, where: str) -> int:
    table = _t(warehouse)
    before = table.count()
    table.rewrite_partitions(sql="SELECT * FROM entries WHERE false", where=where)
    return before - table.count()


READS_AND_DELETES: dict[str, Callable[[Path, str], int]] = {
    "to_arrow": _to_arrow,
    "views.rows": _rows,
    "views.totals": _totals,
    "ledger show": _show,
    "delete_where": _delete_where,
}
PARTITION_PICKS: dict[str, Callable[[Path, str], int]] = {
    "drop_partitions": _drop_partitions,
    "rewrite_partitions": _rewrite_partitions,
}
EVERY_CALL = {**READS_AND_DELETES, **PARTITION_PICKS}


# Names in the table's spelling and in other case, quoted or not; Name is also the partition
# field, so the partition picks read the same predicates.
SAME_ROWS = [
    ("Name = 'x'", 2),
    ("NAME = 'x'", 2),
    ("\"name\" = 'x'", 2),
    ("nAmE <> 'x'", 1),
]


@pytest.mark.parametrize(("where", "matched"), SAME_ROWS)
@pytest.mark.parametrize("call", list(READS_AND_DELETES))
def test_every_read_and_delete_reads_names_without_case(
    shared: Path, call: str, where: str, matched: int
):
    assert READS_AND_DELETES[call](shared, where) == matched


@pytest.mark.parametrize(("where", "matched"), SAME_ROWS[1:3])
@pytest.mark.parametrize("call", list(PARTITION_PICKS))
def test_every_partition_pick_reads_names_without_case(
    tmp_path: Path, call: str, where: str, matched: int
):
    assert PARTITION_PICKS[call](_warehouse(tmp_path), where) == matched


@pytest.mark.parametrize(
    ("where", "matched"),
    [("S = 'a'", 1), ("É > 1 AND ID <> 2 AND \"S\" <> 'b'", 1)],
)
@pytest.mark.parametrize("call", list(READS_AND_DELETES))
def test_reads_and_deletes_match_alike(shared: Path, call: str, where: str, matched: int):
    assert READS_AND_DELETES[call](shared, where) == matched


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("Nme = 'x'", "not one of the table's (columns|partition fields); did you mean 'Name'"),
        ("t.Name = 'x'", "without a table name"),
        ("length(Name)", "not a condition"),  # a number, not true or false
    ],
)
@pytest.mark.parametrize("call", list(EVERY_CALL))
def test_every_call_refuses_alike(shared: Path, call: str, where: str, reason: str):
    warehouse = shared
    with pytest.raises(ledger.InvalidPredicateError, match=reason):
        EVERY_CALL[call](warehouse, where)
    assert _t(warehouse).count() == len(ROWS)


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("error('boom')", "boom"),
        ("s::INTEGER = 7", "Could not convert"),
        ("id // (id - 2) = 1", "Division by zero"),
    ],
)
@pytest.mark.parametrize("call", list(READS_AND_DELETES))
def test_a_predicate_failing_on_the_rows_gives_the_engine_reason(
    shared: Path, call: str, where: str, reason: str
):
    warehouse = shared
    # views.totals returns a lazy relation: its failure is DuckDB's own, raised by the fetch.
    refused = (
        (ledger.InvalidPredicateError, duckdb.Error)
        if call == "views.totals"
        else (ledger.InvalidPredicateError)
    )
    with pytest.raises(refused, match=reason) as caught:
        READS_AND_DELETES[call](warehouse, where)
    assert "not a condition" not in str(caught.value)
    assert _t(warehouse).count() == len(ROWS)


@pytest.mark.parametrize("call", list(PARTITION_PICKS))
def test_a_partition_pick_failing_on_the_values_gives_the_engine_reason(shared: Path, call: str):
    warehouse = shared
    with pytest.raises(ledger.InvalidPredicateError, match="boom") as caught:
        PARTITION_PICKS[call](warehouse, "error('boom')")
    assert "not a condition" not in str(caught.value)
    assert _t(warehouse).count() == len(ROWS)
