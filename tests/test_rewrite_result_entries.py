"""A partition rewrite commits only entries a writer could have made.

Its query may drop entries and change values; it may not count an entry twice, renumber one,
leave a delete mark with no insertion to cancel (negating an insertion makes one), or return
values the table's columns cannot hold. Each refusal is typed and leaves the table exactly as it
was (version and objects); every accepted rewrite leaves ``views.visible``, ``views.totals``
and ``count()`` as an oracle computes them over the rewritten entries, and agreeing with each
other wherever no key is left with two live insertions (as a blind re-insert leaves it: dropping
a mark alone is allowed, and brings its insertion back).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import Location, examples

SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "v": "BIGINT"}


def _table(root: Any, name: str = "r") -> ledger.Table:
    """Ten keys over two partitions; key 2 updated once (a mark and a new insertion in a later
    file of partition 'a')."""
    table = ledger.connect(str(root)).create_table(name, SCHEMA, primary_key="k", partition_by="g")
    table.insert([{"k": i, "g": "ab"[i % 2], "v": i} for i in range(10)])
    table.update([{"k": 2, "g": "a", "v": 20}])
    return table


def _footprint(root: Any) -> tuple[int, set[str]]:
    """The table's version and every object under its folder, from a fresh connection."""
    warehouse = ledger.connect(str(root))
    return warehouse.table("r").version, {i.key for i in warehouse.store.list("r/")}


def _consistent(table: ledger.Table) -> None:
    """The visible rows, the exact totals and ``count()`` tell the same story."""
    table = table.refresh()
    rows = views.visible(table).fetchall()
    keys = [r[0] for r in rows]
    assert len(keys) == len(set(keys)), f"a key is visible twice: {rows}"
    assert table.count() == len(rows)
    by_group: dict[str, list[int]] = {}
    for _, g, v in rows:
        by_group.setdefault(g, [0, 0])
        by_group[g][0] += 1
        by_group[g][1] += v
    totals = views.totals(table, by="g", sum="v").fetchall()
    assert sorted((g, n, s) for g, n, s in totals if n) == sorted(
        (g, n, s) for g, (n, s) in by_group.items()
    )


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT * FROM entries UNION ALL SELECT * FROM entries", ledger.SchemaError),
        (
            "SELECT * REPLACE (-dml_type AS dml_type) FROM entries",
            ledger.UnmatchedDeleteMarkError,
        ),
        # The update's mark stays, the insertion it cancels goes.
        (
            "SELECT * FROM entries WHERE dml_type = -1 OR k <> 2 OR v <> 2",
            ledger.UnmatchedDeleteMarkError,
        ),
        # The mark's values no longer match its insertion's.
        ("SELECT * REPLACE (v + dml_type + 1 AS v) FROM entries", ledger.UnmatchedDeleteMarkError),
        ("SELECT * REPLACE (trx_seq + 1000 AS trx_seq) FROM entries", ledger.SchemaError),
        ("SELECT * REPLACE (trx_id - 1 AS trx_id) FROM entries", ledger.SchemaError),
    ],
)
def test_entries_no_writer_could_make_are_refused(tmp_path: Any, sql: str, error: type) -> None:
    table = _table(tmp_path)
    before = _footprint(tmp_path)
    with pytest.raises(error):
        table.rewrite_partitions({"g": "a"}, sql)
    assert _footprint(tmp_path) == before
    _consistent(table)


def test_a_value_the_column_cannot_hold_is_a_type_mismatch_naming_it(tmp_path: Any) -> None:
    table = _table(tmp_path)
    before = _footprint(tmp_path)
    with pytest.raises(ledger.TypeMismatchError, match="column 'v'"):
        table.rewrite_partitions({"g": "a"}, "SELECT * REPLACE (v + 0.5 AS v) FROM entries")
    assert _footprint(tmp_path) == before


def test_whole_keys_purged_and_values_redacted_are_accepted(tmp_path: Any) -> None:
    table = _table(tmp_path)
    table.rewrite_partitions({"g": "a"}, "SELECT * FROM entries WHERE k <> 2")
    table.rewrite_partitions({"g": "a"}, "SELECT * REPLACE (v * 10 AS v) FROM entries")
    _consistent(table)
    assert sorted(views.visible(table.refresh()).fetchall())[:2] == [(0, "a", 0), (1, "b", 1)]


# One edit per entry of partition 'a' (in (trx_id, trx_seq) order): keep, drop, repeat, negate.
EDITS = st.lists(st.sampled_from(["keep", "drop", "twice", "negate"]), min_size=7, max_size=7)
Entry = tuple[int, int, int, int, str, int]  # trx_id, trx_seq, dml_type, k, g, v


def _entries(root: Any) -> list[Entry]:
    """Every entry of the table (every file is alive: nothing merged yet), in entry order."""
    files = f"{root}/r/**/*.parquet"
    query = f"SELECT trx_id, trx_seq, dml_type, k, g, v FROM read_parquet('{files}') ORDER BY 1, 2"
    rows = duckdb.sql(query).fetchall()
    return [(int(t), int(s), int(d), int(k), str(g), int(v)) for t, s, d, k, g, v in rows]


def _edit_sql(entries: list[Entry], edits: list[str]) -> str:
    def pairs(kind: str) -> str:
        chosen = [
            f"({e[0]}, {e[1]})" for e, edit in zip(entries, edits, strict=True) if edit == kind
        ]
        return ", ".join(chosen) or "(-1, -1)"

    return (
        f"SELECT * REPLACE (CASE WHEN (trx_id, trx_seq) IN ({pairs('negate')}) THEN -dml_type "
        f"ELSE dml_type END AS dml_type) FROM entries "
        f"WHERE (trx_id, trx_seq) NOT IN ({pairs('drop')}) "
        f"UNION ALL SELECT * FROM entries WHERE (trx_id, trx_seq) IN ({pairs('twice')})"
    )


def _oracle(entries: list[Entry]) -> tuple[list[Any], int, list[Any]] | type:
    """What the views must show over ``entries``, or the error refusing them: a mark with no
    insertion of its values to cancel. Visible: each key with a positive sign sum, as its
    newest insertion; count and totals: sums of signs (and of sign times value)."""
    signs: dict[tuple[int, str, int], int] = {}
    for _, _, dml, k, g, v in entries:
        signs[(k, g, v)] = signs.get((k, g, v), 0) + dml
    if any(n < 0 for n in signs.values()):
        return ledger.UnmatchedDeleteMarkError
    by_key: dict[int, list[Entry]] = {}
    for e in entries:
        by_key.setdefault(e[3], []).append(e)
    visible = [
        max(e for e in es if e[2] == 1)[3:] for es in by_key.values() if sum(e[2] for e in es) > 0
    ]
    totals: dict[str, list[int]] = {}
    for _, _, dml, _, g, v in entries:
        totals.setdefault(g, [0, 0])
        totals[g][0] += dml
        totals[g][1] += dml * v
    return (
        sorted(visible),
        sum(e[2] for e in entries),
        sorted((g, n, t) for g, (n, t) in totals.items() if n),
    )


@settings(max_examples=examples(12))
@given(edits=EDITS)
def test_every_accepted_rewrite_keeps_the_views_in_step(
    tmp_path_factory: Any, edits: list[str]
) -> None:
    root = tmp_path_factory.mktemp("w")
    table = _table(root)
    entries = _entries(root)
    of_a = [e for e in entries if e[4] == "a"]
    assert len(of_a) == 7  # five insertions, then the update's mark and insertion
    edited = [e for e in entries if e[4] == "b"]
    for entry, edit in zip(of_a, edits, strict=True):
        if edit != "drop":
            edited.append((*entry[:2], -entry[2] if edit == "negate" else entry[2], *entry[3:]))
    expected = ledger.SchemaError if "twice" in edits else _oracle(edited)
    before = _footprint(root)
    if isinstance(expected, type):
        with pytest.raises(expected):
            table.rewrite_partitions({"g": "a"}, _edit_sql(of_a, edits))
        assert _footprint(root) == before
        expected = _oracle(entries)
    else:
        table.rewrite_partitions({"g": "a"}, _edit_sql(of_a, edits))
    table = table.refresh()
    visible, count, totals = expected
    assert sorted(views.visible(table).fetchall()) == visible
    assert table.count() == count
    assert sorted(r for r in views.totals(table, by="g", sum="v").fetchall() if r[1]) == totals
    if count == len(visible):  # no key inserted twice without a mark: the three agree
        _consistent(table)


def test_the_checks_read_the_files_on_each_backend(location: Location) -> None:
    """The entry checks read the rewritten and the other alive files: on S3 too."""
    warehouse = location.connect()
    table = warehouse.create_table("r", SCHEMA, primary_key="k", partition_by="g")
    table.insert([{"k": i, "g": "ab"[i % 2], "v": i} for i in range(4)])
    table.update([{"k": 2, "g": "a", "v": 20}])

    def footprint() -> tuple[int, set[str]]:
        fresh = location.connect()
        return fresh.table("r").version, {i.key for i in fresh.store.list("r/")}

    before = footprint()
    with pytest.raises(ledger.UnmatchedDeleteMarkError):
        table.rewrite_partitions({"g": "a"}, "SELECT * FROM entries WHERE dml_type = -1 OR v <> 2")
    with pytest.raises(ledger.SchemaError, match="repeated"):
        table.rewrite_partitions(
            {"g": "a"}, "SELECT * FROM entries UNION ALL SELECT * FROM entries"
        )
    assert footprint() == before
    table.rewrite_partitions({"g": "a"}, "SELECT * REPLACE (v * 10 AS v) FROM entries")
    _consistent(table)
