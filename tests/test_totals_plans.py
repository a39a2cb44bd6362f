"""Every plan of ``views.totals`` gives the same answer.

The embedded engine picks how to read a snapshot's files for totals: below a size, one weighted
aggregate over every file, which computes the answer itself; above it, files holding insertions
only summed apart, unweighted, and (grand totals) signed entries summed per sign, the signs
weighed on the partial sums; and on signed tables that keep every entry, only the columns the
request reads. Typed files (every column in its own type) are read without ``union_by_name``
except by grouped totals from a size. Hypothesis builds
random ledgers (every policy, several commits so several files, partitions, blind duplicate
keys, updates and deletes, NULLs, NaN and infinities, the smallest BIGINT, DECIMAL, a column
added later) and asks random totals; each plan must answer exactly what the plan of every file
split by role over every column gives (the plan used before the size threshold existed).
Float values are small binary fractions, so their sums are exact in any order.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow.parquet as pq
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.engines.duckdb import scan
from ledger.errors import StaleVersionError
from ledger.reads import totals as total_reads
from tests.conftest import examples
from tests.support.scratch import scratch_dir

SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "x": "BIGINT", "d": "DOUBLE", "m": "DECIMAL(12,2)"}
SMALLEST = -(2**63)

TABLES: dict[str, dict[str, Any]] = {
    "collapsing": {"primary_key": "k", "partition_by": "bucket(2, k)"},
    "collapsing-no-key": {"primary_key": None},
    "replacing": {"primary_key": "k", "policy": {"name": "replacing", "version_column": "x"}},
    "dedup": {"primary_key": "k", "policy": {"name": "dedup", "dedup_key": ["x"]}},
    "aggregating": {
        "primary_key": ["k", "g"],
        "policy": {"name": "aggregating", "measures": {"x": "sum", "d": "sum", "m": "sum"}},
    },
    "custom": {
        "primary_key": "k",
        "policy": {
            "name": "custom",
            "sql": "SELECT * FROM entries QUALIFY row_number() OVER "
            "(PARTITION BY k ORDER BY trx_id DESC, trx_seq DESC) = 1",
        },
    },
}

ROW = st.fixed_dictionaries(
    {
        "k": st.integers(min_value=0, max_value=5),
        "g": st.none() | st.sampled_from(["a", "b"]),
        "x": st.none() | st.sampled_from([SMALLEST, -3, 0, 5]),
        "d": st.none() | st.sampled_from([0.5, -2.25, 1024.0, -0.0, math.nan, math.inf, -math.inf]),
        "m": st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("1234.56")]),
        "late": st.none() | st.integers(min_value=-2, max_value=2),
    }
)
ROWS = st.lists(ROW, min_size=1, max_size=4)
OPERATION = st.one_of(
    st.tuples(st.just("insert"), ROWS),
    st.tuples(st.just("update"), ROWS),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 5), min_size=1, max_size=2)),
    st.tuples(st.just("add_column"), ROWS),
)
REQUEST = st.fixed_dictionaries(
    {
        "by": st.sampled_from([None, "g", ["g", "late"]]),
        "sum": st.lists(st.sampled_from(["x", "d", "m", "late"]), unique=True),
        "avg": st.lists(st.sampled_from(["x", "d", "m"]), unique=True),
        "where": st.sampled_from([None, "x > 0", "g = 'a'", "d IS NULL", "late IS NULL"]),
    }
)


def _rows(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    """One row per key (keyed writes take each key once), cut to ``columns``."""
    return list({r["k"]: {c: r[c] for c in columns} for r in rows}.values())


def _write(table: ledger.Table, kind: str, operation: tuple[str, Any]) -> None:
    action, argument = operation
    columns = [c for c in table.schema if c != "late"] + (
        ["late"] if "late" in table.schema else []
    )
    keyed = tuple(table.primary_key) == ("k",)
    if action == "add_column" and kind != "aggregating":
        rows = _rows(argument, [*columns, "late"])
        if all(row["late"] is None for row in rows):  # a new column needs a typed value
            rows[0]["late"] = 1
        table.insert(rows, evolve_schema=True)
    elif action == "insert" or (kind == "aggregating" and action != "delete"):
        # Blind inserts may repeat a key: duplicates of a key are part of the ledger.
        table.insert([{c: r[c] for c in columns} for r in argument])
    elif action == "update" and keyed:
        with contextlib.suppress(StaleVersionError):  # replacing: a lower version is refused
            table.upsert(_rows(argument, columns))
    elif action == "delete" and keyed:
        table.delete(list(dict.fromkeys(argument)))


def _answer(table: ledger.Table, request: dict[str, Any]) -> list[tuple[Any, ...]]:
    present = set(table.schema)
    by = request["by"]
    if isinstance(by, list) and not set(by) <= present:
        by = "g"
    where = request["where"] if "late" in present or request["where"] != "late IS NULL" else None
    sums = [c for c in request["sum"] if c in present]
    rows = views.totals(table, by=by, sum=sums, avg=request["avg"], where=where).fetchall()
    return sorted((tuple(_comparable(v) for v in row) for row in rows), key=repr)


def _comparable(value: Any) -> Any:
    """NaN equals NaN here; -0.0 and 0.0 stay apart (a sum's sign of zero is part of it)."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else (value, math.copysign(1.0, value))
    return value


def _split_over_every_column() -> Any:
    """The plan before: insertion files always apart, every column read, nothing taken from
    the files' statistics (every non-NULL value counted by a test, every integer widened)."""
    return mock.patch.multiple(
        total_reads,
        SPLIT_FROM_ENTRIES=0,
        GROUPED_BY_NAME_FROM_ENTRIES=0,
        signs_grouped=lambda *_: False,
        schema_read=lambda spec, schema, request: schema,
        proven_facts=lambda *_: scan.ColumnFacts(frozenset(), frozenset()),
    )


PLANS: dict[str, Callable[[], Any]] = {
    "one weighted aggregate": lambda: mock.patch.object(total_reads, "SPLIT_FROM_ENTRIES", 10**12),
    "one weighted aggregate, files read by name": lambda: mock.patch.multiple(
        total_reads, SPLIT_FROM_ENTRIES=10**12, GROUPED_BY_NAME_FROM_ENTRIES=0
    ),
    "one weighted aggregate, typed files read by position": lambda: mock.patch.multiple(
        total_reads, SPLIT_FROM_ENTRIES=10**12, GROUPED_BY_NAME_FROM_ENTRIES=10**12
    ),
    "insertions apart, columns read only": lambda: mock.patch.object(
        total_reads, "SPLIT_FROM_ENTRIES", 0
    ),
    "signs grouped, one aggregate": lambda: mock.patch.multiple(
        total_reads, SPLIT_FROM_ENTRIES=10**12, SIGNS_GROUPED_FROM_ENTRIES=0
    ),
    "signs grouped, insertions apart": lambda: mock.patch.multiple(
        total_reads, SPLIT_FROM_ENTRIES=0, SIGNS_GROUPED_FROM_ENTRIES=0
    ),
}


def _row(k: int, x: int | None, d: float | None) -> dict[str, Any]:
    return {"k": k, "g": "a", "x": x, "d": d, "m": Decimal("0.10"), "late": None}


@settings(max_examples=examples(12), deadline=None)
@example(  # marks in one file, insertions in others: every plan differs
    kind="collapsing",
    operations=[
        ("insert", [_row(1, 5, math.nan), _row(2, None, 0.5)]),
        ("update", [_row(1, 3, 1024.0), _row(2, SMALLEST, -0.0)]),
        ("delete", [2]),
    ],
    requests=[{"by": "g", "sum": ["x", "d", "m"], "avg": ["x", "d", "m"], "where": None}],
)
@given(
    kind=st.sampled_from(sorted(TABLES)),
    operations=st.lists(OPERATION, min_size=1, max_size=5),
    requests=st.lists(REQUEST, min_size=1, max_size=3),
)
def test_every_totals_plan_answers_as_the_split_plan_over_every_column(
    kind: str, operations: list[tuple[str, Any]], requests: list[dict[str, Any]]
) -> None:
    with scratch_dir("totals-plans-") as folder:
        table = ledger.connect(folder).create_table(kind.split("-")[0], SCHEMA, **TABLES[kind])
        if kind == "aggregating":
            operations = [(a, _grouped(r)) if a != "delete" else (a, r) for a, r in operations]
        table.insert([{c: r[c] for c in SCHEMA} for r in operations_rows(operations)])
        for operation in operations:
            _write(table, kind, operation)
        for request in requests:
            with _split_over_every_column():
                expected = _answer(table, request)
            for plan, patched in PLANS.items():
                with patched():
                    assert _answer(table, request) == expected, (plan, request)


def _grouped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows an aggregating table takes: g (part of its key) never NULL, and no smallest
    BIGINT, whose sum measure overflows when the merge function adds two of them."""
    return [
        {**row, "g": row["g"] or "a", "x": -3 if row["x"] == SMALLEST else row["x"]} for row in rows
    ]


def operations_rows(operations: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The first write: every row the operations name, so updates and deletes find keys."""
    return [row for action, argument in operations if action != "delete" for row in argument]


def test_each_data_files_footer_is_read_once_for_both_of_its_uses(tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1}])
    [path] = table.files()
    reads: list[str] = []
    real_metadata, real_schema = pq.read_metadata, pq.read_schema

    def counted(real: Callable[..., Any]) -> Callable[..., Any]:
        def read(where: Any, *args: Any, **kwargs: Any) -> Any:
            reads.append(str(where))
            return real(where, *args, **kwargs)

        return read

    with (
        mock.patch.object(scan.pq, "read_metadata", counted(real_metadata)),
        mock.patch.object(scan.pq, "read_schema", counted(real_schema)),
    ):
        assert scan.file_columns([path]) == {"k", "trx_id", "trx_seq", "dml_type"}
        assert not scan.misread_by_duckdb([path])
        assert scan.file_columns([path]) == {"k", "trx_id", "trx_seq", "dml_type"}
        assert views.totals(table).fetchall() == [(1,)]
    assert reads == [path]


# --- per-sign sums are for integers only ---------------------------------------------------------


def test_grand_totals_of_doubles_and_wide_decimals_never_sum_insertions_and_marks_apart(
    tmp_path: Path,
) -> None:
    """1e308 updated twice to itself is entries +,-,+,-,+ of 1e308: summed per sign they make
    inf - inf = NaN; 6e37 updated to 6e37 - 1 in DECIMAL(38,0) makes an insertions' sum of 39
    digits. Weighted entry by entry, both answer the visible row's value."""
    warehouse = ledger.connect(str(tmp_path / "wh"))
    doubles = warehouse.create_table("d", {"k": "BIGINT", "f": "DOUBLE"}, primary_key="k")
    doubles.insert([{"k": 1, "f": 1e308}])
    doubles.update([{"k": 1, "f": 1e308}])
    doubles.update([{"k": 1, "f": 1e308}])
    wide = warehouse.create_table("w", {"k": "BIGINT", "x": "DECIMAL(38,0)"}, primary_key="k")
    near = Decimal(6 * 10**37)
    wide.insert([{"k": 1, "x": near}])
    wide.update([{"k": 1, "x": near - 1}])
    with mock.patch.object(total_reads, "SIGNS_GROUPED_FROM_ENTRIES", 0):
        assert views.totals(doubles, sum="f", avg="f").fetchall() == [(1, 1e308, 1e308)]
        assert views.totals(wide, sum="x").fetchall() == [(1, near - 1)]
