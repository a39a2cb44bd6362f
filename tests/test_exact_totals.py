"""Totals are exact and do not move with merges.

SUM/COUNT/AVG over DECIMAL and DOUBLE columns, for random writes and merges of random file
subsets, equal an oracle computed in Python with ``decimal.Decimal`` over a plain dictionary of
the visible rows, before and after every merge. The average of a DECIMAL(p, s) column is a
DECIMAL(38, s + 4) rounded half away from zero (docs/views.md); DOUBLE values are drawn from
numbers whose sums are exact in any order, so the DOUBLE answers must be equal too.
"""

from __future__ import annotations

import functools
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

import ledger
import views
from ledger.sql.decimals import average_scale, decimal_average
from tests.conftest import Location, examples
from tests.support.scratch import scratch_dir

SCHEMA = {"k": "BIGINT", "d": "DECIMAL(12,2)", "x": "DOUBLE"}
KEYS = st.integers(0, 4)
DECIMALS = st.none() | st.sampled_from(
    [Decimal("0.10"), Decimal("-0.30"), Decimal("0.01"), Decimal("-2.50"), Decimal("1234.57")]
)
DOUBLES = st.none() | st.sampled_from([0.5, -2.25, 1024.0, 0.0, 3.0])
ROWS = st.lists(
    st.fixed_dictionaries({"k": KEYS, "d": DECIMALS, "x": DOUBLES}),
    min_size=1,
    max_size=3,
    unique_by=lambda r: r["k"],
)
OPERATIONS = st.one_of(
    st.tuples(st.just("upsert"), ROWS),
    st.tuples(st.just("delete"), st.lists(KEYS, min_size=1, max_size=2, unique=True)),
    st.tuples(st.just("merge"), st.lists(st.integers(0, 30), max_size=4, unique=True)),
)


def expected_totals(rows: list[dict[str, Any]]) -> tuple[Any, ...]:
    """(count, sum_d, avg_d, sum_x, avg_x) of the visible rows, computed with Decimal."""
    decimals = [r["d"] for r in rows if r["d"] is not None]
    doubles = [Decimal(r["x"]) for r in rows if r["x"] is not None]
    sum_d = sum(decimals, Decimal("0.00")) if decimals else None
    avg_d = (
        (sum_d / len(decimals)).quantize(Decimal("0.000001"), ROUND_HALF_UP)
        if sum_d is not None
        else None
    )
    sum_x = float(sum(doubles)) if doubles else None
    avg_x = sum_x / len(doubles) if sum_x is not None else None
    return (len(rows), sum_d, avg_d, sum_x, avg_x)


def _totals(table: ledger.Table) -> tuple[Any, ...]:
    (row,) = views.totals(table, sum=["d", "x"], avg=["d", "x"]).fetchall()
    count, sum_d, sum_x, avg_d, avg_x = row
    return (count, sum_d, avg_d, sum_x, avg_x)


def _merge_some(table: ledger.Table, picks: list[int]) -> None:
    alive = [m.path for m in table.snapshot().markers()]
    picked = sorted({alive[i % len(alive)] for i in picks}) if alive else []
    if picked:
        table.merge(files=picked, min_files=1)


@pytest.mark.parametrize("policy", ["collapsing", "replacing"])
@settings(max_examples=examples(10), deadline=None)
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=7))
def test_totals_equal_the_decimal_oracle_at_every_merge_state(
    policy: str, operations: list[tuple[str, Any]]
) -> None:
    with scratch_dir("totals-") as root:
        table = ledger.connect(str(root)).create_table("t", SCHEMA, primary_key="k", policy=policy)
        visible: dict[int, dict[str, Any]] = {}
        for kind, argument in operations:
            if kind == "merge":
                _merge_some(table, argument)
            elif kind == "upsert":
                table.upsert(argument)
                visible.update({row["k"]: row for row in argument})
            else:
                table.delete(argument)
                for key in argument:
                    visible.pop(key, None)
            if visible:
                got, want = _totals(table), expected_totals(list(visible.values()))
                assert got == want, (kind, got, want)
                assert str(got[2]) == str(want[2])  # the same scale, not only the same value


def test_a_decimal_average_is_a_decimal_rounded_half_away_from_zero(
    local_location: Location,
) -> None:
    table = local_location.connect().create_table("t", SCHEMA, primary_key="k")
    table.insert([{"k": 1, "d": Decimal("0.01")}, {"k": 2, "d": Decimal("0.01")}])
    table.insert([{"k": 3, "d": Decimal("0.00")}, {"k": 4, "d": None}])
    table.insert([{"k": 5, "d": Decimal("-0.10")}, {"k": 6, "d": Decimal("-0.10")}])
    relation = views.totals(table, by="d", avg="d")
    assert str(relation.types[-1]) == "DECIMAL(38,6)"
    (average,) = views.totals(table, avg="d", count=False).fetchall()[0]
    assert average == Decimal("-0.036000")  # -0.18 / 5
    table.delete([5, 6])
    (average,) = views.totals(table, avg="d", count=False).fetchall()[0]
    assert str(average) == "0.006667"  # 0.02 / 3 = 0.0066666..., rounded up
    table.update([{"k": 1, "d": Decimal("-0.01")}, {"k": 2, "d": Decimal("-0.01")}])
    (average,) = views.totals(table, avg="d", count=False).fetchall()[0]
    assert str(average) == "-0.006667"
    table.merge(min_files=1)
    assert views.totals(table, avg="d", count=False).fetchall() == [(Decimal("-0.006667"),)]


@pytest.mark.spark
def test_spark_averages_decimals_as_the_embedded_engine_does(spark: Any, tmp_path: Any) -> None:
    import ledger.spark as ls

    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="k")
    table.insert([{"k": k, "d": Decimal(f"{k}.01") * (-1) ** k, "x": 0.5 * k} for k in range(7)])
    table.update([{"k": 3, "d": Decimal("0.07")}])
    table.delete([4])
    embedded = views.totals(table, sum=["d", "x"], avg=["d", "x"]).fetchall()
    on_spark = [tuple(r) for r in ls.totals(table, sum=["d", "x"], avg=["d", "x"]).collect()]
    assert on_spark == embedded
    assert embedded[0][3] == Decimal("0.346667")  # 2.08 / 6


def test_a_visible_zero_keeps_its_sign_through_updates_and_merges(location: Location) -> None:
    """SQL compares -0.0 equal to 0.0: grouping entries by value must still keep them apart, or
    the visible row (and what an update keeps) takes whichever zero was written first."""
    table = location.connect().create_table(
        "t", {"k": "BIGINT", "x": "DOUBLE", "n": "BIGINT"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": -0.0, "n": 0}, {"k": 2, "x": 0.0, "n": 0}])
    table.update([{"k": 1, "x": 0.0}, {"k": 2, "x": -0.0}])
    table.update([{"k": 1, "n": 1}, {"k": 2, "n": 1}])  # x kept from the visible row

    def signs() -> list[tuple[int, float, int]]:
        rows = sorted(views.visible(table).fetchall())
        return [(k, math.copysign(1.0, x), n) for k, x, n in rows]

    assert signs() == [(1, 1.0, 1), (2, -1.0, 1)]
    by_age = sorted(table.snapshot().markers(), key=lambda m: m.trx_min)
    table.merge(files=[m.path for m in by_age[1:]], min_files=1)  # marks with their insertions
    assert signs() == [(1, 1.0, 1), (2, -1.0, 1)]
    table.merge(min_files=1)
    assert signs() == [(1, 1.0, 1), (2, -1.0, 1)]
    (row,) = views.totals(table, sum="x", avg="x").fetchall()
    assert row == (2, 0.0, 0.0) and math.copysign(1.0, row[1]) == 1.0


@pytest.mark.spark
def test_spark_shows_a_visible_zero_with_its_sign_as_duckdb_does(spark: Any, tmp_path: Any) -> None:
    import ledger.spark as ls

    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "x": "DOUBLE", "n": "BIGINT"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": -0.0, "n": 0}, {"k": 2, "x": 0.0, "n": 0}])
    table.update([{"k": 1, "x": 0.0}, {"k": 2, "x": -0.0}])
    table.update([{"k": 1, "n": 1}, {"k": 2, "n": 1}])

    def signs(rows: list[tuple[Any, ...]]) -> list[tuple[int, float, int]]:
        return [(k, math.copysign(1.0, x), n) for k, x, n in sorted(rows)]

    on_spark = signs([tuple(r) for r in ls.visible(table).collect()])
    assert signs(views.visible(table).fetchall()) == [(1, 1.0, 1), (2, -1.0, 1)]
    # Both engines render one tree: a visible 0.0 stays 0.0, a visible -0.0 stays -0.0.
    assert on_spark == [(1, 1.0, 1), (2, -1.0, 1)]


@functools.cache
def _duckdb() -> duckdb.DuckDBPyConnection:
    """One connection for every example: each evaluates one expression, and opening a
    connection per example cost about as much as planning and running it."""
    return duckdb.connect()


@settings(max_examples=examples(30), deadline=None)
@given(
    units=st.integers(-(10**12), 10**12),
    count=st.integers(-50, 50).filter(lambda n: n != 0),
    scale=st.integers(0, 4),
)
def test_the_decimal_average_is_the_quotient_rounded_half_away_from_zero_for_any_signs(
    units: int, count: int, scale: int
) -> None:
    # Sign-weighted counts are negative where marks outnumber insertions (dedup's views drop
    # insertions the ledger still sums): the quotient must keep its sign and its rounding.
    total = Decimal(units).scaleb(-scale)
    total_sql = exp.cast(
        exp.Literal.string(str(total)), exp.DataType.build(f"DECIMAL(38, {scale})")
    )
    average = decimal_average(
        total_sql, exp.Literal.number(count), scale, exp.DataType.build("HUGEINT")
    )
    [(got,)] = (
        _duckdb().sql(f"SELECT {exp.select(average).sql('duckdb')[len('SELECT ') :]}").fetchall()
    )
    quantum = Decimal(1).scaleb(-average_scale(scale))
    want = (abs(total) / abs(count)).quantize(quantum, ROUND_HALF_UP)
    want = want if (total < 0) == (count < 0) or want == 0 else -want
    assert got == want, (total, count)
