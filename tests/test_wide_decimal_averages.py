"""Averages and sums of DECIMAL columns of every precision and scale up to 38.

A DECIMAL(p, s) average is a DECIMAL(38, s + min(4, 38 - p)) rounded half away from zero
(docs/views.md), equal to Python's ``decimal`` over the visible rows, for random types, values,
updates, deletes and merges; a sum beyond 38 digits is a typed error.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import TotalOverflowError
from ledger.sql.decimals import average_scale
from tests.conftest import Location, examples
from tests.support.scratch import scratch_dir

EXACT = Context(prec=100)
# At most this many entries are written per example: values stay small enough that no sum of
# them (marks included) exceeds 38 digits.
MOST_ENTRIES = 64


@st.composite
def decimal_types(draw: Any) -> tuple[int, int]:
    precision = draw(st.integers(1, 38) | st.sampled_from([38, 37, 35, 34]))
    return precision, draw(st.integers(0, precision) | st.sampled_from([0, precision]))


def values_of(precision: int, scale: int) -> st.SearchStrategy[Decimal | None]:
    largest = min(10**precision - 1, 10**38 // MOST_ENTRIES)
    units = st.integers(-largest, largest) | st.sampled_from([largest, -largest, 1, -1, 0])
    return st.none() | units.map(lambda u: Decimal(u).scaleb(-scale, EXACT))


def expected(values: list[Decimal | None], precision: int, scale: int) -> tuple[Any, Any]:
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    total = Decimal(0)
    for value in present:
        total = EXACT.add(total, value)  # the default context keeps 28 digits only
    quantum = Decimal(1).scaleb(-average_scale(scale, precision))
    average = EXACT.divide(total, Decimal(len(present))).quantize(quantum, ROUND_HALF_UP, EXACT)
    # A SQL DECIMAL has no negative zero: an average rounding to zero from below (-1/3 at
    # scale 0) is 0, as the sum of opposite values is.
    return total, average.copy_abs() if average.is_zero() else average


@pytest.mark.parametrize("policy", ["collapsing", "replacing"])
@settings(max_examples=examples(12), deadline=None)
@given(data=st.data(), decimal_type=decimal_types())
def test_sums_and_averages_of_any_decimal_type_equal_the_decimal_oracle(
    policy: str, data: Any, decimal_type: tuple[int, int]
) -> None:
    precision, scale = decimal_type
    values = values_of(precision, scale)
    rows = st.lists(
        st.fixed_dictionaries({"k": st.integers(0, 5), "d": values}),
        min_size=1,
        max_size=4,
        unique_by=lambda r: r["k"],
    )
    steps = data.draw(
        st.lists(
            st.tuples(st.just("upsert"), rows)
            | st.tuples(st.just("delete"), st.lists(st.integers(0, 5), min_size=1, max_size=3))
            | st.tuples(st.just("merge"), st.none()),
            min_size=1,
            max_size=6,
        )
    )
    schema = {"k": "BIGINT", "d": f"DECIMAL({precision},{scale})"}
    with scratch_dir("wide-decimals-") as root:
        table = ledger.connect(str(root)).create_table("t", schema, primary_key="k", policy=policy)
        visible: dict[int, Decimal | None] = {}
        for kind, argument in steps:
            if kind == "upsert":
                table.upsert(argument)
                visible.update({r["k"]: r["d"] for r in argument})
            elif kind == "delete":
                table.delete(sorted(set(argument)))
                for key in argument:
                    visible.pop(key, None)
            elif table.snapshot().markers():
                table.merge(min_files=1)
            if not visible:
                continue
            (got,) = views.totals(table, sum="d", avg="d", count=False).fetchall()
            want = expected(list(visible.values()), precision, scale)
            assert got == want, (kind, got, want)
            assert str(got[1]) == str(want[1])  # the stated scale, not only the value


def test_an_average_rounding_to_zero_from_below_is_zero(local_location: Location) -> None:
    table = ledger.connect(local_location.uri).create_table(
        "t", {"k": "BIGINT", "d": "DECIMAL(38,0)"}, primary_key="k"
    )
    table.insert([{"k": 1, "d": 1}, {"k": 2, "d": -1}, {"k": 3, "d": -1}])
    ((average,),) = views.totals(table, avg="d", count=False).fetchall()
    oracle = expected([Decimal(1), Decimal(-1), Decimal(-1)], 38, 0)[1]
    assert (str(average), str(oracle)) == ("0", "0")  # -1/3 at scale 0: no negative zero


def test_the_average_of_a_decimal_38_18_keeps_every_digit(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "t", {"k": "BIGINT", "amount": "DECIMAL(38,18)"}, primary_key="k"
    )
    largest = Decimal("99999999999999999999.999999999999999999")
    table.insert(
        [{"k": 1, "amount": largest}, {"k": 2, "amount": Decimal("-0.000000000000000001")}]
    )
    relation = views.totals(table, avg="amount", count=False)
    assert str(relation.types[0]) == "DECIMAL(38,18)"
    assert relation.fetchall() == [(Decimal("49999999999999999999.999999999999999999"),)]
    table.delete([2])
    assert views.totals(table, avg="amount", count=False).fetchall() == [(largest,)]


def test_a_decimal_sum_beyond_38_digits_is_a_typed_error(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "t", {"k": "BIGINT", "amount": "DECIMAL(38,18)"}, primary_key="k"
    )
    big = Decimal("60000000000000000000")
    table.insert([{"k": 1, "amount": big}, {"k": 2, "amount": big}])
    for asked in ({"sum": "amount"}, {"avg": "amount"}):
        with pytest.raises(TotalOverflowError, match=r"'amount'.*smaller scale"):
            views.totals(table, **asked)
    table.update([{"k": 2, "amount": Decimal(1)}])
    # The corrected value still counts in the entries' sum until a merge cancels it.
    table.merge(min_files=1)
    (row,) = views.totals(table, sum="amount", avg="amount", count=False).fetchall()
    assert row == (big + 1, (big + 1) / 2)


@pytest.mark.spark
def test_spark_averages_wide_decimals_as_the_embedded_engine_does(
    spark: Any, tmp_path: Any
) -> None:
    import ledger.spark as ls

    for precision, scale in ((38, 18), (38, 0), (38, 38), (36, 30), (20, 4)):
        table = ledger.connect(str(tmp_path / f"p{precision}s{scale}")).create_table(
            "t", {"k": "BIGINT", "d": f"DECIMAL({precision},{scale})"}, primary_key="k"
        )
        largest = Decimal(10**precision - 1).scaleb(-scale, EXACT)
        third = Decimal(-(10**precision - 1) // 3).scaleb(-scale, EXACT)
        table.insert(
            [
                {"k": 1, "d": largest},
                {"k": 2, "d": third},
                {"k": 3, "d": Decimal(1).scaleb(-scale, EXACT)},
            ]
        )
        table.update([{"k": 3, "d": Decimal(0)}])  # a delete mark of a value of scale s
        embedded = views.totals(table, sum="d", avg="d").fetchall()
        on_spark = [tuple(r) for r in ls.totals(table, sum="d", avg="d").collect()]
        assert on_spark == embedded, (precision, scale)
