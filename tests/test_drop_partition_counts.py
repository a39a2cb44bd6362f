"""A partition drop's log entry never reports a wrong row count. ``entries_removed`` (the
entries of the dropped files) is always recorded; ``deleted`` (the logical rows dropped, what
``history()`` and ``ledger log`` show) is recorded where the log alone knows it, and is then the
count ``count()`` gives for those partitions just before the drop, for every merge policy,
before and after merges. The sum of the dropped files' ``dml_type`` is that count only where
merges keep every sign sum (collapsing, custom); on replacing tables it is known once the
dropped files' rows are visible as they are (after a full merge, say), and on aggregating and
dedup tables (and replacing ones otherwise) it is left out rather than guessed. No data is
read: the drop stays log-only."""

from __future__ import annotations

import json
import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.reads.counts import count_from_log
from tests.conftest import examples
from tests.support.maintenance import run_once_before

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


def _drop_record(table: ledger.Table) -> ledger.table.CommitRecord:
    [entry] = [h for h in table.history() if h.version == table.version]
    assert entry.operation == "drop_partitions"
    return entry


def _deleted_in_log(table: ledger.Table) -> int | None:
    return _drop_record(table).deleted


def _files(table: ledger.Table, region: str) -> list[Any]:
    return [m for m in table.snapshot().markers() if m.partition["region"] == region]


def _entries(table: ledger.Table, region: str) -> int:
    return sum(m.rows for m in _files(table, region))


@settings(max_examples=examples(25), deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    operations=OPERATIONS,
    region=st.sampled_from(REGIONS),
    merged_first=st.booleans(),
)
def test_a_drop_reports_the_rows_count_gives_for_its_partitions(
    policy, operations, region, merged_first
):
    table = _table(policy)
    for operation in operations:
        _apply(table, operation)
    if merged_first:
        table.merge(min_files=1)  # a full merge: every file's rows are visible as they are
    partition = {"region": region}
    before = table.count(partitions=partition)
    entries = _entries(table, region)
    known = count_from_log(table.snapshot(), _files(table, region))
    total = table.count()
    if table.drop_partitions(partition).version is None:
        assert before == 0
        return
    record = _drop_record(table)
    assert record.entries_removed == entries
    assert record.deleted == (None if known is None else before)
    if policy in ("collapsing", "custom"):
        assert record.deleted == before  # the log knows these counts
    if policy != "dedup":  # a repeat of an event in another partition is counted in each
        assert table.count() == total - before


def test_a_replacing_table_reports_rows_not_the_sum_of_its_entries():
    table = _table("replacing")
    table.insert([{"region": "eu", "k": 1, "n": 1, "event_id": "e1"}])
    table.insert([{"region": "eu", "k": 1, "n": 2, "event_id": "e2"}])  # replaces the first
    table.insert([{"region": "eu", "k": 2, "n": 3, "event_id": "e3"}])
    table.insert([{"region": "us", "k": 1, "n": 1, "event_id": "e1"}])
    table.insert([{"region": "us", "k": 1, "n": 2, "event_id": "e2"}])
    assert table.count(partitions={"region": "eu"}) == 2
    table.drop_partitions({"region": "eu"})
    # Three entries, two rows: the log alone cannot tell, so no count is recorded.
    record = _drop_record(table)
    assert (record.deleted, record.entries_removed) == (None, 3)
    table.merge(min_files=1)  # us: one entry per key, in one file
    table.drop_partitions({"region": "us"})
    record = _drop_record(table)
    assert (record.deleted, record.entries_removed) == (1, 1) and table.count() == 0


def test_ledger_log_shows_the_rows_dropped():
    from click.testing import CliRunner

    from ledger.cli.app import cli

    location = tempfile.mkdtemp()
    table = _table("replacing", location)
    for n in (1, 2, 3):
        table.insert([{"region": "us", "k": 7, "n": n, "event_id": "e1"}])  # one row
    table.merge(min_files=1)
    table.drop_partitions({"region": "us"})
    shown = CliRunner().invoke(cli, ["-w", location, "log", "t", "--wide", "--json"])
    assert shown.exit_code == 0, shown.output
    newest = json.loads(shown.output)[0]
    assert (newest["operation"], newest["deleted"], newest["entries_removed"]) == (
        "drop_partitions",
        1,
        1,
    )


def test_a_drop_racing_a_merge_reports_the_rows_of_the_files_it_dropped(monkeypatch):
    """The count is taken from the state the drop commits on: a merge landing between the
    drop's first read and its commit changes the files dropped, and the count follows them."""
    location = tempfile.mkdtemp()
    table = _table("replacing", location)
    for n in (1, 2, 3):
        table.insert([{"region": "eu", "k": 1, "n": n, "event_id": "e1"}])  # one row, 3 entries
    other = ledger.connect(location).table("t")
    raced = run_once_before(monkeypatch, table.handle, "commit", lambda: other.merge(min_files=2))
    dropped = table.drop_partitions({"region": "eu"})
    assert raced[0].version is not None and dropped.version == raced[0].version + 1
    record = _drop_record(table)
    assert (record.deleted, record.entries_removed, dropped.entries_removed) == (1, 1, 1)
    assert table.count() == 0


def test_a_drop_racing_an_append_to_its_partition_counts_the_appended_rows(monkeypatch):
    location = tempfile.mkdtemp()
    table = _table("collapsing", location)
    table.insert([{"region": "eu", "k": 1, "n": 1, "event_id": "e1"}])
    other = ledger.connect(location).table("t")
    row = {"region": "eu", "k": 2, "n": 1, "event_id": "e2"}
    run_once_before(monkeypatch, table.handle, "commit", lambda: other.insert([row]))
    table.drop_partitions({"region": "eu"})
    record = _drop_record(table)
    assert (record.deleted, record.entries_removed) == (2, 2)
    assert table.count() == 0


def test_ledger_log_shows_the_entries_of_a_drop_whose_rows_are_unknown(monkeypatch):
    from click.testing import CliRunner

    from ledger.cli import output
    from ledger.cli.app import cli

    location = tempfile.mkdtemp()
    table = _table("replacing", location)
    for n in (1, 2):
        table.insert([{"region": "eu", "k": 1, "n": n, "event_id": "e1"}])
    table.drop_partitions({"region": "eu"})
    shown = CliRunner().invoke(cli, ["-w", location, "log", "t", "--wide", "--json"])
    assert shown.exit_code == 0, shown.output
    newest = json.loads(shown.output)[0]
    assert (newest["deleted"], newest["entries_removed"]) == (None, 2)
    # One line per commit on an 80-column terminal: the drop removed 2 entries, rows unknown.
    monkeypatch.setattr(output, "chosen_format", lambda asked: asked or output.TABLE)
    narrow = CliRunner().invoke(cli, ["-w", location, "log", "t"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    [line] = [text for text in narrow.output.splitlines() if "drop_partitions" in text]
    assert "-2 entries" in line


def test_a_drop_records_no_rows_when_a_key_lives_on_in_another_partition(tmp_path) -> None:
    """A replacing table keyed apart from its partition column: k=1 written again in 'us'
    hides its row in 'eu', so the dropped 'eu' file's rows are not visible as they are."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"region": "VARCHAR", "k": "BIGINT", "n": "BIGINT"},
        primary_key="k",
        partition_by="region",
        policy="replacing",
    )
    table.insert([{"region": "eu", "k": 1, "n": 1}])
    table.insert([{"region": "us", "k": 1, "n": 2}])
    table.merge()
    assert table.count() == 1
    table.drop_partitions({"region": "eu"})
    assert table.count() == 1
    last = table.history()[-1]
    assert (last.deleted, last.entries_removed) == (None, 1)
