"""The one table of differences between the SQL dialects views are generated in.

Views are built as sqlglot trees and rendered per dialect; sqlglot already rewrites most of the
syntax (``QUALIFY`` becomes a filtered subquery on Spark, ``FILTER`` clauses, quoting). What it
cannot know is which types we mean: the entry order (``trx_id`` and ``trx_seq`` as one number)
needs 96 bits, a HUGEINT on DuckDB and a DECIMAL(38, 0) on Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ledger.errors import InvalidArgumentError


def negative_zero_by_angle(value: exp.Expr) -> exp.Expr:
    """Whether ``value`` is -0.0: ``value = 0 AND atan2(value, -1) < 0`` (atan2 keeps the sign
    of a zero)."""
    angle = exp.Anonymous(this="ATAN2", expressions=[value.copy(), exp.Literal.number(-1)])
    return exp.and_(
        exp.EQ(this=value.copy(), expression=exp.Literal.number(0)),
        exp.LT(this=angle, expression=exp.Literal.number(0)),
    )


def negative_zero_by_text(value: exp.Expr) -> exp.Expr:
    """Whether ``value`` is -0.0, from its text: Spark's atan2 adds 0.0 to its arguments, which
    turns -0.0 into 0.0, but it prints -0.0 as ``-0.0``."""
    text = exp.cast(value.copy(), "STRING")
    return exp.and_(
        exp.EQ(this=value.copy(), expression=exp.Literal.number(0)),
        exp.EQ(this=text, expression=exp.Literal.string("-0.0")),
    )


@dataclass(frozen=True)
class Dialect:
    """How one engine spells what sqlglot leaves to us."""

    name: str  # sqlglot's dialect name
    order_type: str  # a type holding trx_id * 2**32 + trx_seq exactly
    count_type: str  # the type of counts (sums of dml_type)
    # The function turning microseconds since the epoch into an instant (a time zone-aware
    # timestamp): DuckDB's one-argument make_timestamptz, Spark's timestamp_micros.
    timestamp_from_micros: str
    # Whether a FLOAT/DOUBLE value is -0.0 (SQL compares it equal to 0.0).
    negative_zero: Callable[[exp.Expr], exp.Expr]
    # How the visible view finds keys with more than one entry: a grouped subquery joined back
    # (DuckDB's hash joins are cheap), or a window count over the key, which costs Spark one
    # shuffle by the key instead of three scans and two joins (about twice as fast there).
    crowded_by_window: bool = False


DIALECTS = {
    "duckdb": Dialect(
        name="duckdb",
        order_type="HUGEINT",
        count_type="BIGINT",
        timestamp_from_micros="make_timestamptz",
        negative_zero=negative_zero_by_angle,
    ),
    "spark": Dialect(
        name="spark",
        order_type="DECIMAL(38, 0)",
        count_type="BIGINT",
        timestamp_from_micros="timestamp_micros",
        negative_zero=negative_zero_by_text,
        crowded_by_window=True,
    ),
}


def dialect_named(name: str) -> Dialect:
    """The dialect called ``name`` (``duckdb`` or ``spark``)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown SQL dialect {name!r}; views are generated for {sorted(DIALECTS)}"
        ) from None
