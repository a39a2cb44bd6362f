"""A partition drop's log entry reports the logical rows it dropped (``deleted`` in its info,
what ``history()`` and ``ledger log`` show): the count ``count()`` gives for those partitions
just before the drop, for every merge policy, before and after merges. The sum of the dropped
files' ``dml_type`` is that count only where merges keep every sign sum (collapsing)."""

from __future__ import annotations

import json
import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"region": "VARCHAR", "k": "BIGINT", "n": "BIGINT", "event_id": "VARCHAR"}
POLICIES: dict[str, Any] = {
    "collapsing": "collapsing",
    "replacing": "replacing",
    "aggregating": {"name": "aggregating", "measures": {"n": "sum"}},
    "dedup": {"name": "dedup", "dedup_key": ["event_id"]},
    "custom": {
        "name": "custom",
        "sql": "SELECT region, k, n, event_id, trx_id, trx_seq, dml_type FROM entries",
    },
}
REGIONS = ["eu", "us"]
ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "region": st.sampled_from(REGIONS),
            "k": st.integers(0, 3),
            "n": st.integers(-2, 2),
            "event_id": st.sampled_from(["e1", "e2", "e3"]),
        }
    ),
    min_size=1,
    max_size=4,
)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), ROWS),
        st.tuples(st.just("upsert"), ROWS),
        st.tuples(st.just("delete"), ROWS),
        st.tuples(st.just("merge"), st.integers(1, 3)),
    ),
    min_size=1,
    max_size=6,
)


def _table(policy: str, location: str | None = None) -> ledger.Table:
    warehouse = ledger.connect(location or tempfile.mkdtemp())
    # Every non-key column of an aggregating table is a measure.
    schema = {c: t for c, t in SCHEMA.items() if policy != "aggregating" or c != "event_id"}
    return warehouse.create_table(
        "t", schema, primary_key=["region", "k"], partition_by="region", policy=POLICIES[policy]
    )


def _apply(table: ledger.Table, operation: tuple[str, Any]) -> None:
    kind, argument = operation
    if kind == "merge":
        table.merge(min_files=argument)
    elif kind == "delete":
        table.delete([(row["region"], row["k"]) for row in argument])
    else:
        columns = list(table.schema)
        # One row per key, in the table's columns.
        latest = {(r["region"], r["k"]): {c: r[c] for c in columns} for r in argument}
        getattr(table, kind)(list(latest.values()))


def _deleted_in_log(table: ledger.Table) -> int:
    [entry] = [h for h in table.history() if h.version == table.version]
    assert entry.operation == "drop_partitions"
    return entry.deleted


@settings(max_examples=examples(25), deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)), operations=OPERATIONS, region=st.sampled_from(REGIONS)
)
def test_a_drop_reports_the_rows_count_gives_for_its_partitions(policy, operations, region):
    table = _table(policy)
    for operation in operations:
        _apply(table, operation)
    partition = {"region": region}
    before = table.count(partitions=partition)
    total = table.count()
    if table.drop_partitions(partition).version is None:
        assert before == 0
        return
    assert _deleted_in_log(table) == before
    if policy != "dedup":  # a repeat of an event in another partition is counted in each
        assert table.count() == total - before


def test_a_replacing_table_reports_rows_not_the_sum_of_its_entries():
    table = _table("replacing")
    table.insert([{"region": "eu", "k": 1, "n": 1, "event_id": "e1"}])
    table.insert([{"region": "eu", "k": 1, "n": 2, "event_id": "e2"}])  # replaces the first
    table.insert([{"region": "eu", "k": 2, "n": 3, "event_id": "e3"}])
    assert table.count() == 2
    table.drop_partitions({"region": "eu"})
    assert _deleted_in_log(table) == 2 and table.count() == 0


def test_ledger_log_shows_the_rows_dropped():
    from click.testing import CliRunner

    from ledger.cli.app import cli

    location = tempfile.mkdtemp()
    table = _table("aggregating", location)
    for n in (1, 2, 3):
        table.insert([{"region": "us", "k": 7, "n": n}])  # one group
    table.drop_partitions({"region": "us"})
    shown = CliRunner().invoke(cli, ["-w", location, "log", "t", "--wide", "--json"])
    assert shown.exit_code == 0, shown.output
    newest = json.loads(shown.output)[0]
    assert (newest["operation"], newest["deleted"]) == ("drop_partitions", 1)
