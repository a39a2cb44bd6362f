"""Each query both engines share is one tree of ``ledger.sql``: rendered for DuckDB and for
Spark, run on both over the same random entries, the answers agree with each other and with a
plain Python oracle.

The trees: live entries, the visible row and the marks of given keys (signed and replacing
semantics), stale versions and key problems of read-modify-write, a rollup's group deltas (a
refresh and a rebuild), and change entries (written files stamped with their commit, replaced
files netted). Entries hold duplicates of a key, marks of rows never inserted, NULL keys, NULL
values, NaN and -0.0, DECIMAL values and NULL versions.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from ledger.engines.duckdb.session import connect
from ledger.sql.changes import replaced_entries, written_entries
from ledger.sql.dialects import DIALECTS, Dialect
from ledger.sql.live import expanded, latest_entries, latest_live_rows, live_entries, rows_of_keys
from ledger.sql.names import COMMIT_TIMESTAMP, COMMIT_VERSION, DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql.rmw import key_problems, stale_versions
from ledger.sql.rollups import RollupMeasure, group_deltas
from ledger.sql.trees import descending, render
from tests.conftest import examples

pytestmark = pytest.mark.spark

ENTRIES = pa.schema(
    [
        ("k", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("v", pa.int64()),
        ("d", pa.decimal128(9, 2)),
        (TRX_ID, pa.int64()),
        (TRX_SEQ, pa.int32()),
        (DML_TYPE, pa.int8()),
    ]
)
VALUES = ["k", "f", "s", "v", "d"]
FLOATS = ["f"]
KEYS = st.none() | st.integers(min_value=0, max_value=3)
FLOAT_VALUES = st.none() | st.sampled_from([0.0, -0.0, 1.5, math.nan])
ROW = st.fixed_dictionaries(
    {
        "k": KEYS,
        "f": FLOAT_VALUES,
        "s": st.none() | st.sampled_from(["a", "b"]),
        "v": st.none() | st.integers(min_value=0, max_value=3),
        "d": st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("99.99")]),
        TRX_ID: st.integers(min_value=1, max_value=4),
        DML_TYPE: st.sampled_from([1, 1, -1]),
    }
)
# Duplicates of a key and of whole value tuples are common with so few values: a few entries
# are drawn and repeated to make them commoner still.
ROWS = st.lists(ROW, min_size=1, max_size=8).flatmap(
    lambda rows: st.lists(st.sampled_from(rows), min_size=len(rows), max_size=len(rows) + 4)
)
# Each example costs Spark a job or two: few in the everyday run, hundreds under `make test-deep`.
SPARK_SETTINGS = settings(max_examples=examples(8), deadline=None)

Build = Callable[[Mapping[str, str], Dialect], exp.Expr]


def _entries(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The rows as entries; each its own ``trx_seq`` so that the ledger order has no ties."""
    numbered = [{**row, TRX_SEQ: i} for i, row in enumerate(rows)]
    return pa.Table.from_pylist(numbered, schema=ENTRIES)


# --- running one tree on both engines ------------------------------------------------------------


def _on_duckdb(build: Build, relations: Mapping[str, pa.Table]) -> list[dict[str, Any]]:
    with closing(connect()) as con:
        names = {}
        for role, table in relations.items():
            names[role] = f"shared_{role}"
            con.register(names[role], table)
        return list(
            con.sql(render(build(names, DIALECTS["duckdb"]), DIALECTS["duckdb"]))
            .to_arrow_table()
            .to_pylist()
        )


def _on_spark(spark: Any, build: Build, relations: Mapping[str, pa.Table]) -> list[dict[str, Any]]:
    from ledger.engines.spark.query import arrow_frame, bind_relations, run
    from ledger.engines.spark.session import to_arrow

    frames = {role: arrow_frame(spark, table) for role, table in relations.items()}
    names = bind_relations(frames)
    query = render(build(names, DIALECTS["spark"]), DIALECTS["spark"])
    return list(to_arrow(run(spark, query)).to_pylist())


def _both(spark: Any, build: Build, relations: Mapping[str, pa.Table]) -> tuple[Any, Any]:
    """The answer of ``build`` on DuckDB and on Spark, as comparable sorted rows."""
    return _rows(_on_duckdb(build, relations)), _rows(_on_spark(spark, build, relations))


def _rows(records: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(sorted((k, _comparable(v)) for k, v in r.items())) for r in records), key=repr
    )


def _comparable(value: Any) -> Any:
    """A value both engines and the oracle spell alike: NaN as one value, -0.0 apart from 0.0,
    instants as microseconds since the epoch, numbers of any type by their value."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("nan",)
        return (value, math.copysign(1.0, value))
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return round(aware.timestamp() * 1_000_000)
    if isinstance(value, Decimal):
        return ("decimal", str(value.normalize()) if value else "0")
    return value


def _group(value: Any) -> Any:
    """How SQL groups a value: NaN with NaN; -0.0 with 0.0 (the trees keep those apart with a
    flag where it matters)."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else value + 0.0
    return value


# --- live entries, visible rows and marks --------------------------------------------------------


def _live_oracle(
    entries: pa.Table, keys: set[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Signed semantics in place: per value tuple (-0.0 apart from 0.0) the net sign and the
    latest insertion; a key's visible row is its live tuple inserted last."""
    net: dict[tuple[Any, ...], int] = defaultdict(int)
    latest: dict[tuple[Any, ...], tuple[int, int]] = {}
    shown: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in entries.to_pylist():
        if row["k"] not in keys:
            continue
        group = tuple(_comparable(row[c]) for c in VALUES)
        net[group] += row[DML_TYPE]
        shown.setdefault(group, {c: row[c] for c in VALUES})
        if row[DML_TYPE] == 1:
            latest[group] = max(latest.get(group, (0, -1)), (row[TRX_ID], row[TRX_SEQ]))
    live = [g for g, n in net.items() if n > 0]
    visible: dict[Any, tuple[Any, ...]] = {}
    for group in live:
        key = shown[group]["k"]
        if key not in visible or latest[group] > latest[visible[key]]:
            visible[key] = group
    marks = [shown[g] for g in live for _ in range(net[g])]
    return [shown[g] for g in visible.values()], marks


def _replacing_oracle(entries: pa.Table, keys: set[int]) -> list[dict[str, Any]]:
    """Replacing semantics by version ``v`` (NULL lowest), then the ledger order: a key's
    latest entry, if it is an insertion."""
    latest: dict[Any, dict[str, Any]] = {}
    for row in entries.to_pylist():
        if row["k"] not in keys:
            continue
        rank = (row["v"] is not None, row["v"] or 0, row[TRX_ID], row[TRX_SEQ])
        current = latest.get(row["k"])
        if current is None or rank > current["rank"]:
            latest[row["k"]] = {**row, "rank": rank}
    return [{c: r[c] for c in VALUES} for r in latest.values() if r[DML_TYPE] == 1]


def _live_trees(replacing: bool) -> tuple[Build, Build]:
    """The trees of a read-modify-write read: the visible row and the marks of given keys,
    each over the live entries of the keys' entries."""

    def live(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        touched = exp.paren(rows_of_keys(names["entries"], names["keys"], ["k"]), copy=False)
        if replacing:
            order = descending(["v", TRX_ID, TRX_SEQ])
            return exp.paren(latest_entries(touched, ["k"], VALUES, order, dialect), copy=False)
        query = live_entries(VALUES, FLOATS, dialect, net_type=dialect.count_type)
        return exp.paren(query.from_(touched), copy=False)

    floats = [] if replacing else FLOATS

    def visible(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        return latest_live_rows(live(names, dialect), ["k"], VALUES, floats)

    def marks(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        return expanded(live(names, dialect), VALUES, floats)

    return visible, marks


@SPARK_SETTINGS
@given(
    rows=ROWS,
    keys=st.sets(st.integers(min_value=0, max_value=3), min_size=1),
    replacing=st.booleans(),
)
def test_live_rows_and_marks_agree_on_both_engines_and_with_the_oracle(
    spark: Any, rows: list[dict[str, Any]], keys: set[int], replacing: bool
) -> None:
    entries = _entries(rows)
    relations = {"entries": entries, "keys": pa.table({"k": pa.array(sorted(keys), pa.int64())})}
    visible, marks = _live_trees(replacing)
    if replacing:
        expected_visible = expected_marks = _replacing_oracle(entries, keys)
    else:
        expected_visible, expected_marks = _live_oracle(entries, keys)
    if replacing:
        # Known: DuckDB picks a key's latest entry through a top-1 shortcut that drops the sign
        # of a zero, so a replacing table's -0.0 reads as 0.0 there (a signed table's does not).
        expected_visible = expected_marks = _zeros_unsigned(expected_visible)
    on_duckdb, on_spark = _both(spark, visible, relations)
    if replacing:
        on_duckdb, on_spark = _rows(_zeros_unsigned(on_duckdb)), _rows(_zeros_unsigned(on_spark))
    assert on_duckdb == on_spark == _rows(expected_visible)
    on_duckdb, on_spark = _both(spark, marks, relations)
    if replacing:
        on_duckdb, on_spark = _rows(_zeros_unsigned(on_duckdb)), _rows(_zeros_unsigned(on_spark))
    assert on_duckdb == on_spark == _rows(expected_marks)


def _zeros_unsigned(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows (dicts, or the sorted pairs :func:`_rows` gives) with -0.0 as 0.0."""
    out = []
    for row in rows:
        items = row.items() if isinstance(row, Mapping) else row
        out.append({k: (0.0, 1.0) if v == (-0.0, -1.0) else _unsigned(v) for k, v in items})
    return out


def _unsigned(value: Any) -> Any:
    return 0.0 if isinstance(value, float) and value == 0 else value


# --- the checks of read-modify-write -------------------------------------------------------------


@SPARK_SETTINGS
@given(
    rows=ROWS,
    given_rows=st.lists(
        st.fixed_dictionaries({"k": KEYS, "v": st.none() | st.integers(min_value=0, max_value=3)}),
        min_size=1,
        max_size=6,
    ),
)
def test_stale_versions_and_key_problems_agree_on_both_engines_and_with_the_oracle(
    spark: Any, rows: list[dict[str, Any]], given_rows: list[dict[str, Any]]
) -> None:
    entries = _entries(rows)
    given_table = pa.Table.from_pylist(
        given_rows, schema=pa.schema([("k", pa.int64()), ("v", pa.int64())])
    )
    relations = {"entries": entries, "rows": given_table}

    def stale(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        order = descending(["v", TRX_ID, TRX_SEQ])
        return stale_versions(names["entries"], names["rows"], ["k"], "v", order)

    latest = {r["k"]: r["v"] for r in _latest_by_version(entries)}
    expected = [
        {"k": r["k"], "given": r["v"], "current": latest[r["k"]]}
        for r in given_rows
        if r["k"] in latest
        and latest[r["k"]] is not None
        and (r["v"] is None or r["v"] < latest[r["k"]])
    ]
    on_duckdb, on_spark = _both(spark, stale, relations)
    assert on_duckdb == on_spark == _rows(expected)

    def problems(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        return key_problems(names["rows"], ["k"], 100)

    counts = Counter(r["k"] for r in given_rows)
    expected_problems = [
        {"k": k, "__ledger_n": n, "__ledger_null": k is None}
        for k, n in counts.items()
        if k is None or n > 1
    ]
    on_duckdb, on_spark = _both(spark, problems, relations)
    assert on_duckdb == on_spark == _rows(expected_problems)


def _latest_by_version(entries: pa.Table) -> list[dict[str, Any]]:
    """Each non-NULL key's latest entry by version (NULL lowest), then the ledger order."""
    latest: dict[Any, dict[str, Any]] = {}
    for row in entries.to_pylist():
        rank = (row["v"] is not None, row["v"] or 0, row[TRX_ID], row[TRX_SEQ])
        if row["k"] is not None and (row["k"] not in latest or rank > latest[row["k"]]["rank"]):
            latest[row["k"]] = {**row, "rank": rank}
    return list(latest.values())


# --- rollup deltas -------------------------------------------------------------------------------

MEASURES = [
    RollupMeasure("rows", "count", None),
    RollupMeasure("named", "count", "s"),
    RollupMeasure("versions", "sum", "v"),
    RollupMeasure("amount", "sum", "d"),
]
MEASURE_TYPES = {
    "rows": "BIGINT",
    "named": "BIGINT",
    "versions": "BIGINT",
    "amount": "DECIMAL(38, 2)",
}
HELD = pa.schema(
    [
        ("k", pa.int64()),
        ("s", pa.string()),
        ("rows", pa.int64()),
        ("named", pa.int64()),
        ("versions", pa.int64()),
        ("amount", pa.decimal128(38, 2)),
        (DML_TYPE, pa.int8()),
    ]
)
HELD_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "k": KEYS,
            "s": st.none() | st.sampled_from(["a", "b"]),
            "rows": st.integers(min_value=-2, max_value=3),
            "named": st.integers(min_value=0, max_value=2),
            "versions": st.integers(min_value=-3, max_value=3),
            "amount": st.sampled_from([Decimal("0.00"), Decimal("1.10"), Decimal("-2.50")]),
            DML_TYPE: st.sampled_from([1, -1]),
        }
    ),
    max_size=5,
)


def _deltas_oracle(entries: pa.Table, held: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    totals: dict[tuple[Any, Any], dict[str, Any]] = defaultdict(
        lambda: {"rows": 0, "named": 0, "versions": 0, "amount": Decimal(0)}
    )
    for row in entries.to_pylist():
        sign, group = row[DML_TYPE], totals[(row["k"], row["s"])]
        group["rows"] += sign
        group["named"] += 0 if row["s"] is None else sign
        group["versions"] += sign * (row["v"] or 0)
        group["amount"] += sign * (row["d"] or 0)
    for row in held or []:
        group = totals[(row["k"], row["s"])]
        for name in ("rows", "named", "versions", "amount"):
            group[name] -= row[DML_TYPE] * row[name]
    return [
        {"k": k, "s": s, **measures}
        for (k, s), measures in totals.items()
        if any(value != 0 for value in measures.values())
    ]


@SPARK_SETTINGS
@given(rows=ROWS, held=st.none() | HELD_ROWS)
def test_rollup_deltas_agree_on_both_engines_and_with_the_oracle(
    spark: Any, rows: list[dict[str, Any]], held: list[dict[str, Any]] | None
) -> None:
    entries = _entries(rows)
    relations = {"changes": entries}
    if held is not None:
        relations["held"] = pa.Table.from_pylist(held, schema=HELD)

    def deltas(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        return group_deltas(
            ["k", "s"], MEASURES, MEASURE_TYPES, names["changes"], names.get("held")
        )

    on_duckdb, on_spark = _both(spark, deltas, relations)
    assert on_duckdb == on_spark == _rows(_deltas_oracle(entries, held))


# --- change entries ------------------------------------------------------------------------------

COMMITS = pa.schema(
    [
        (TRX_ID, pa.int64()),
        (COMMIT_VERSION, pa.int64()),
        (COMMIT_TIMESTAMP, pa.timestamp("ms", "UTC")),
    ]
)
VERSION, STAMP_MS = 9, 1_764_000_000_123


def _replaced_oracle(entries: pa.Table) -> list[dict[str, Any]]:
    """Per value tuple: the net sign, the greatest trx_id and trx_seq; each tuple as many
    times as its net sign says, with that sign."""
    values = list(VALUES)
    net: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in entries.to_pylist():
        group = tuple(_group(row[c]) for c in values)
        found = net.setdefault(
            group, {**{c: row[c] for c in values}, TRX_ID: 0, TRX_SEQ: 0, "net": 0}
        )
        found[TRX_ID] = max(found[TRX_ID], row[TRX_ID])
        found[TRX_SEQ] = max(found[TRX_SEQ], row[TRX_SEQ])
        found["net"] += row[DML_TYPE]
    stamp = dt.datetime.fromtimestamp(STAMP_MS / 1000, dt.UTC)
    out = []
    for found in net.values():
        n = found.pop("net")
        for _ in range(abs(n)):
            out.append(
                {
                    **found,
                    DML_TYPE: 1 if n > 0 else -1,
                    COMMIT_VERSION: VERSION,
                    COMMIT_TIMESTAMP: stamp,
                }
            )
    return out


@SPARK_SETTINGS
@given(rows=ROWS)
def test_change_entries_agree_on_both_engines_and_with_the_oracle(
    spark: Any, rows: list[dict[str, Any]]
) -> None:
    # -0.0 and 0.0 group together here (a change entry shows either): left out of the values.
    rows = [{**r, "f": 0.0 if r["f"] == 0 else r["f"]} for r in rows]
    entries = _entries(rows)
    columns = ENTRIES.names
    trx_ids = sorted(set(entries.column(TRX_ID).to_pylist()))
    stamps = {trx: (10 + trx, STAMP_MS + trx) for trx in trx_ids[1:]}  # the first is not stamped
    commits = pa.table(
        {
            TRX_ID: pa.array(list(stamps), pa.int64()),
            COMMIT_VERSION: pa.array([v for v, _ in stamps.values()], pa.int64()),
            COMMIT_TIMESTAMP: pa.array(
                [ms for _, ms in stamps.values()], pa.timestamp("ms", "UTC")
            ),
        },
        schema=COMMITS,
    )
    relations = {"entries": entries, "commits": commits}

    def written(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        return written_entries(names["entries"], names["commits"], columns)

    expected_written = [
        {
            **row,
            COMMIT_VERSION: stamps[row[TRX_ID]][0],
            COMMIT_TIMESTAMP: dt.datetime.fromtimestamp(stamps[row[TRX_ID]][1] / 1000, dt.UTC),
        }
        for row in entries.to_pylist()
        if row[TRX_ID] in stamps
    ]
    on_duckdb, on_spark = _both(spark, written, relations)
    assert on_duckdb == on_spark == _rows(expected_written)

    def replaced(names: Mapping[str, str], dialect: Dialect) -> exp.Expr:
        return replaced_entries(names["entries"], columns, VERSION, STAMP_MS, dialect)

    on_duckdb, on_spark = _both(spark, replaced, {"entries": entries})
    assert on_duckdb == on_spark == _rows(_replaced_oracle(entries))


def test_every_shared_tree_renders_for_both_dialects() -> None:
    """Rendering alone (no engine): the trees above give text in each dialect."""
    names = {"entries": "e", "keys": "k", "rows": "r", "changes": "c", "held": "h", "commits": "m"}
    builds: list[Build] = [
        *_live_trees(False),
        *_live_trees(True),
        lambda n, d: group_deltas(["k"], MEASURES, MEASURE_TYPES, n["changes"], n["held"]),
        lambda n, d: replaced_entries(n["entries"], ENTRIES.names, 1, 0, d),
        lambda n, d: written_entries(n["entries"], n["commits"], ENTRIES.names),
        lambda n, d: key_problems(n["rows"], ["k"], 3),
    ]
    for build in builds:
        for dialect in DIALECTS.values():
            text = render(build(names, dialect), dialect)
            assert text.startswith("SELECT"), text


@pytest.mark.parametrize("verb", ["delete", "update"])
def test_a_spark_correction_of_a_negative_zero_cancels_it(
    spark: Any, tmp_path: Any, verb: str
) -> None:
    """The marks a Spark delete or update writes carry the -0.0 they cancel (Spark turns -0.0
    into 0.0 where it groups, and its atan2 drops the sign of a zero): the row is gone on both
    engines, not left live beside a mark of 0.0."""
    import ledger
    import ledger.spark as ls
    import views

    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "x": "DOUBLE"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": -0.0}, {"k": 2, "x": 0.0}])
    if verb == "delete":
        ls.delete(table, spark.createDataFrame([(1,), (2,)], "k bigint"))
        expected: list[tuple[Any, ...]] = []
    else:
        ls.update(table, spark.createDataFrame([(1, 5.0), (2, 6.0)], "k bigint, x double"))
        expected = [(1, 5.0), (2, 6.0)]
    assert sorted(views.visible(table).fetchall()) == expected
    assert sorted(tuple(r) for r in ls.visible(table, spark=spark).collect()) == expected
    assert views.totals(table).fetchall() == [(len(expected),)]
