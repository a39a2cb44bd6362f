"""The small builders every query tree is made of (sqlglot), and rendering per dialect.

Identifiers are always quoted, so any column name works in any dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from ledger.sql.dialects import Dialect
from ledger.sql.names import DML_TYPE, ENTRIES, ORDER_SHIFT, TRX_ID, TRX_SEQ


@dataclass(frozen=True)
class Sources:
    """The relations a view reads: ``entries``, the raw ledger (the data files' columns,
    system columns included), and, where the engine knows more from the log:

    * ``isolated`` (visible rows): entries of files whose keys are unique, hold no delete mark
      and occur in no other file, whose rows are visible as they are;
    * ``lonely`` (visible rows, signed policies): entries of files whose keys are unique and
      which hold no delete mark, but whose key ranges meet other files'; ``entries`` then holds
      the other files only. A lonely row is visible as it is unless its key also occurs in
      ``entries`` or in ``repeated_keys``, the keys found in more than one lonely file (every
      such key, and maybe more; None when no two lonely files' key ranges meet);
    * ``insertions`` (totals): entries of files holding no delete mark, which sum without
      weighting. Sums are linear, so splitting the files changes nothing but the cost;
    * ``lonely_older`` (visible rows): every lonely entry is older (by ``trx_id``) than every
      entry of ``entries``, so a key's latest insertion is in ``entries`` when it has one there;
    * ``inserted_once`` (visible rows, with ``lonely_older``): no key of ``entries`` is inserted
      there more than once, so a key's insertion there is its latest, found without grouping;
    * ``every_entry_grouped`` (visible rows, signed policies): every entry of ``entries`` goes
      through the per-tuple cancellation, keys with a single entry too, instead of finding the
      crowded keys first: one grouping of a few entries costs less than the joins that spare it.
    """

    entries: str = ENTRIES
    isolated: str | None = None
    insertions: str | None = None
    lonely: str | None = None
    repeated_keys: str | None = None
    lonely_older: bool = False
    inserted_once: bool = False
    every_entry_grouped: bool = False


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference.

    >>> col("my col").sql()
    '"my col"'
    """
    return exp.column(name, table=table, quoted=True)


def cols(names: Sequence[str]) -> list[exp.Expr]:
    """Quoted column references, in order."""
    return [col(n) for n in names]


def alias(expression: exp.Expr, name: str) -> exp.Expr:
    """``expression AS "name"``."""
    return exp.alias_(expression, name, quoted=True)


def relation(name: str) -> exp.Table:
    """A quoted relation name (a view or table registered under ``name``)."""
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def using(names: Sequence[str]) -> list[int | str | exp.Expr]:
    """The quoted identifiers of a ``JOIN ... USING (...)``."""
    return [exp.to_identifier(n, quoted=True) for n in names]


def number(value: int) -> exp.Expr:
    """An integer literal."""
    return exp.Literal.number(value)


def dml() -> exp.Column:
    """The ``dml_type`` column: +1 for an insertion, -1 for a delete mark."""
    return col(DML_TYPE)


def is_insertion() -> exp.Expr:
    """``dml_type = 1``."""
    return exp.EQ(this=dml(), expression=number(1))


def weighted_by_sign(expression: exp.Expr) -> exp.Expr:
    """``dml_type * (expression)``: an entry's value counted with its sign."""
    return exp.Mul(this=dml(), expression=exp.paren(expression, copy=False))


def entry_order(dialect: Dialect) -> exp.Expr:
    """``trx_id`` and ``trx_seq`` as one number that orders entries as the ledger does."""
    as_wide = exp.cast(col(TRX_ID), exp.DataType.build(dialect.order_type, dialect=dialect.name))
    return exp.Add(
        this=exp.Mul(this=as_wide, expression=number(ORDER_SHIFT)), expression=col(TRX_SEQ)
    )


def descending(names: Sequence[str]) -> list[exp.Ordered]:
    """Each column descending, NULLs last."""
    return [exp.Ordered(this=col(n), desc=True, nulls_first=False) for n in names]


def first_per(query: exp.Select, partition: Sequence[str], order: list[exp.Ordered]) -> exp.Select:
    """``query`` keeping the first row of each ``partition`` group by ``order``."""
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=cols(partition),
        order=exp.Order(expressions=order),
    )
    return query.qualify(exp.EQ(this=window, expression=number(1)))


def with_ctes(query: exp.Query, ctes: list[tuple[str, exp.Query]]) -> exp.Query:
    """``query`` with its common table expressions, at the top where every dialect takes them."""
    if not ctes:
        return query
    out = exp.select("*").from_(exp.paren(query, copy=False))
    for name, cte in ctes:
        out = out.with_(exp.to_identifier(name, quoted=True), as_=cte)
    return out


def from_text(source: str, dialect: Dialect) -> exp.Expr:
    """A relation given as SQL text (a name or a parenthesised query) as a tree, for the
    callers that build their sources as text."""
    select = sqlglot.parse_one(f"SELECT * FROM {source}", read=dialect.name)
    found = select.args["from_"].this
    assert isinstance(found, exp.Expr)
    return found


def order_from_text(order_by: str, dialect: Dialect) -> list[exp.Ordered]:
    """An ORDER BY list given as SQL text, as trees."""
    select = sqlglot.parse_one(f"SELECT 1 ORDER BY {order_by}", read=dialect.name)
    return list(select.args["order"].expressions)


def render(query: exp.Expr, dialect: Dialect) -> str:
    """The SQL text of ``query`` in ``dialect``."""
    return str(query.sql(dialect=dialect.name))
