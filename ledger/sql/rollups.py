"""A rollup's group deltas as a tree: per group, the sign-weighted change of every measure.

Both engines render this one query: the embedded refresh on DuckDB (``ledger.rollup``) and
``ledger.spark.refresh`` on Spark (``ledger.engines.spark.rollups``).

>>> from ledger.sql.dialects import DIALECTS
>>> from ledger.sql.trees import render
>>> tree = group_deltas(["day"], [RollupMeasure("rows", "count", None)], {"rows": "BIGINT"},
...                     "changes")
>>> print(render(tree, DIALECTS["spark"]))  # doctest: +NORMALIZE_WHITESPACE
SELECT `day`, CAST(SUM(`rows`) AS BIGINT) AS `rows` FROM (SELECT `day`,
COALESCE(SUM(`dml_type`), 0) AS `rows` FROM `changes` GROUP BY `day`) GROUP BY `day`
HAVING SUM(`rows`) <> 0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from ledger.sql.trees import alias, col, cols, dml, number, relation, weighted_by_sign

# Measure types are stored as the table schema writes them (DuckDB's spelling); the tree
# parses them in that dialect and renders them in any.
SCHEMA_DIALECT = "duckdb"


@dataclass(frozen=True)
class RollupMeasure:
    """One rollup column: ``function`` (``count`` or ``sum``) of ``column`` (None: rows)."""

    name: str
    function: str
    column: str | None


def group_deltas(
    by: Sequence[str],
    measures: Sequence[RollupMeasure],
    types: Mapping[str, str],
    changes: str,
    held: str | None = None,
) -> exp.Select:
    """Per group of ``by``, the sign-weighted change of every measure over the entries in the
    relation ``changes``, less what the rollup's own entries in ``held`` add up to (a rebuild),
    each cast to its rollup column type in ``types``; groups that do not change are left out."""
    parts: exp.Query = _weighted_sums(by, measures, changes)
    if held is not None:
        parts = exp.union(parts, _held_sums(by, measures, held), distinct=False)
    summed = [
        alias(
            exp.cast(
                exp.Sum(this=col(m.name)),
                exp.DataType.build(types[m.name], dialect=SCHEMA_DIALECT),
            ),
            m.name,
        )
        for m in measures
    ]
    changed = [exp.NEQ(this=exp.Sum(this=col(m.name)), expression=number(0)) for m in measures]
    return (
        exp.select(*cols(by), *summed)
        .from_(exp.paren(parts, copy=False))
        .group_by(*cols(by))
        .having(exp.or_(*changed))
    )


def _weighted_sums(
    by: Sequence[str], measures: Sequence[RollupMeasure], entries: str
) -> exp.Select:
    """Per group, each measure over ``entries`` counted with the sign of every entry."""
    totals = [
        alias(exp.Coalesce(this=exp.Sum(this=_weighted(m)), expressions=[number(0)]), m.name)
        for m in measures
    ]
    return exp.select(*cols(by), *totals).from_(relation(entries)).group_by(*cols(by))


def _weighted(measure: RollupMeasure) -> exp.Expr:
    """What one entry adds to ``measure``: its sign for a row count, its sign unless the column
    is NULL for a count of values, its signed value for a sum."""
    if measure.function == "count" and measure.column is None:
        return dml()
    if measure.function == "count":
        return (
            exp.Case()
            .when(exp.Is(this=col(measure.column or ""), expression=exp.Null()), number(0))
            .else_(dml())
        )
    return weighted_by_sign(col(measure.column or ""))


def _held_sums(by: Sequence[str], measures: Sequence[RollupMeasure], held: str) -> exp.Select:
    """Per group, minus what the rollup table's own entries in ``held`` add up to."""
    negated = [
        alias(
            exp.Neg(
                this=exp.Coalesce(
                    this=exp.Sum(this=weighted_by_sign(col(m.name))), expressions=[number(0)]
                )
            ),
            m.name,
        )
        for m in measures
    ]
    return exp.select(*cols(by), *negated).from_(relation(held)).group_by(*cols(by))
