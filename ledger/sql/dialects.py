"""The one table of differences between the SQL dialects views are generated in.

Views are built as sqlglot trees and rendered per dialect; sqlglot already rewrites most of the
syntax (``QUALIFY`` becomes a filtered subquery on Spark, ``FILTER`` clauses, quoting). What it
cannot know is which types we mean: the entry order (``trx_id`` and ``trx_seq`` as one number)
needs 96 bits, a HUGEINT on DuckDB and a DECIMAL(38, 0) on Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import InvalidArgumentError


@dataclass(frozen=True)
class Dialect:
    """How one engine spells what sqlglot leaves to us."""

    name: str  # sqlglot's dialect name
    order_type: str  # a type holding trx_id * 2**32 + trx_seq exactly
    count_type: str  # the type of counts (sums of dml_type)
    # How the visible view finds keys with more than one entry: a grouped subquery joined back
    # (DuckDB's hash joins are cheap), or a window count over the key, which costs Spark one
    # shuffle by the key instead of three scans and two joins (about twice as fast there).
    crowded_by_window: bool = False


DIALECTS = {
    "duckdb": Dialect(name="duckdb", order_type="HUGEINT", count_type="BIGINT"),
    "spark": Dialect(
        name="spark", order_type="DECIMAL(38, 0)", count_type="BIGINT", crowded_by_window=True
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
