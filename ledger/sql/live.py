"""Live entries: what the ledger holds for a key once opposite entries cancel out.

Entries of a key that carry the same values cancel by sign: an insertion and a later delete mark
with equal values sum to zero. The *live entries* of a key are its distinct value tuples whose
signs sum above zero, each as many times as that sum. The *visible row* of a key is the live
entry inserted last (by ``trx_id``, ``trx_seq``). Read-modify-write operations cancel every live
entry of a key, so sums over the raw ledger stay exact.

The trees here are shared with the visible view (:mod:`ledger.sql.visible`); the ``*_sql``
functions render them for DuckDB, which runs read-modify-write and collapsing merges.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ledger.sql.dialects import DIALECTS, Dialect
from ledger.sql.names import COPY, DML_TYPE, EXCESS, FIRST_ORDER, NET, ORDER, SIGN
from ledger.sql.trees import (
    alias,
    col,
    cols,
    dml,
    entry_order,
    first_per,
    from_text,
    is_insertion,
    number,
    order_from_text,
    relation,
    render,
    using,
)

DUCKDB = DIALECTS["duckdb"]
NEGATIVE_ZERO = "__ledger_negative_zero_"  # + the index of a FLOAT/DOUBLE value column


# --- trees ----------------------------------------------------------------------------------------


def zero_sign_flags(
    float_columns: Sequence[str], dialect: Dialect = DUCKDB
) -> list[tuple[str, str, exp.Expr]]:
    """Per FLOAT/DOUBLE column: (column, flag name, whether it holds -0.0). Grouped next to the
    values: SQL compares -0.0 equal to 0.0, so grouping by the value alone would merge the two
    and show whichever came first (a visible 0.0 could come back as -0.0)."""
    return [
        (column, name, exp.paren(dialect.negative_zero(col(column)), copy=False))
        for column, name in zero_sign_flag_names(float_columns)
    ]


def zero_sign_flag_names(float_columns: Sequence[str]) -> list[tuple[str, str]]:
    """Per FLOAT/DOUBLE column: (column, the name of its flag of :func:`zero_sign_flags`)."""
    return [(column, f"{NEGATIVE_ZERO}{i}") for i, column in enumerate(float_columns)]


def live_entries(
    value_columns: Sequence[str],
    float_columns: Sequence[str],
    dialect: Dialect,
    *,
    net_type: str | None = None,
    first_order: bool = False,
) -> exp.Select:
    """Distinct live value tuples with their multiplicity (``NET``) and the order of their
    latest insertion (``ORDER``), and with ``first_order`` the order of their earliest one
    (``FIRST_ORDER``, which :func:`expanded` writes marks in); the caller adds the FROM."""
    flags = zero_sign_flags(float_columns, dialect)
    net: exp.Expr = exp.Sum(this=dml())
    if net_type is not None:
        net = exp.cast(net, net_type)
    order = exp.Max(this=exp.Case().when(is_insertion(), entry_order(dialect)))
    first = exp.Min(this=exp.Case().when(is_insertion(), entry_order(dialect)))
    return (
        exp.select(
            *cols(value_columns),
            *(alias(flag, name) for _, name, flag in flags),
            alias(net, NET),
            alias(order, ORDER),
            *([alias(first, FIRST_ORDER)] if first_order else []),
        )
        .group_by(*cols(value_columns), *(flag.copy() for _, _, flag in flags))
        .having(exp.GT(this=exp.Sum(this=dml()), expression=number(0)))
    )


def latest_live_rows(
    live: exp.Expr,
    key_columns: Sequence[str],
    picked_columns: Sequence[str],
    float_columns: Sequence[str],
    extra: Sequence[exp.Expr] = (),
) -> exp.Select:
    """The latest live row of each key from a relation made by :func:`live_entries` (with the
    same ``float_columns``): ``picked_columns`` and ``extra``."""
    # Engines may pick the latest row through a sort that drops the sign of a zero (DuckDB's
    # arg_max), so the sign is put back from the group's flag.
    picked = with_zero_signs(picked_columns, float_columns)
    return first_per(
        exp.select(*picked, *extra).from_(live),
        key_columns,
        [exp.Ordered(this=col(ORDER), desc=True, nulls_first=False)],
    )


def with_zero_signs(columns: Sequence[str], float_columns: Sequence[str]) -> list[exp.Expr]:
    """``columns`` of a relation made by :func:`live_entries`, each FLOAT/DOUBLE one with the
    sign of its zero put back from the group's flag: an engine may give a group of ``-0.0`` the
    value ``0.0`` (Spark normalizes the zeros it groups by)."""
    signed = dict(zero_sign_flag_names(float_columns))
    return [
        alias(
            exp.If(this=col(signed[c]), true=exp.Neg(this=exp.Abs(this=col(c))), false=col(c)),
            c,
        )
        if c in signed
        else col(c)
        for c in columns
    ]


def latest_version_rows(
    source: exp.Expr,
    key_columns: Sequence[str],
    shown: Sequence[str],
    latest_first: list[exp.Ordered],
) -> exp.Select:
    """Replacing semantics: ``shown`` of the latest entry of each key (by ``latest_first``),
    unless it is a delete mark."""
    latest = first_per(
        exp.select(*cols(shown), col(DML_TYPE)).from_(source),
        key_columns,
        latest_first,
    )
    return exp.select(*cols(shown)).from_(exp.paren(latest, copy=False)).where(is_insertion())


def latest_entries(
    source: exp.Expr,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    latest_first: list[exp.Ordered],
    dialect: Dialect,
) -> exp.Select:
    """Replacing semantics in the shape of :func:`live_entries` (with ``first_order``): the
    latest entry of each key (by ``latest_first``) if it is an insertion, as the key's one
    live entry (``NET`` 1, ``FIRST_ORDER`` its place in the ledger)."""
    latest = first_per(
        exp.select(
            *cols(value_columns), col(DML_TYPE), alias(entry_order(dialect), FIRST_ORDER)
        ).from_(source),
        key_columns,
        latest_first,
    )
    wide = exp.DataType.build(dialect.order_type, dialect=dialect.name)
    return (
        exp.select(
            *cols(value_columns),
            alias(exp.cast(number(1), dialect.count_type), NET),
            alias(exp.cast(number(0), wide), ORDER),
            col(FIRST_ORDER),
        )
        .from_(exp.paren(latest, copy=False))
        .where(is_insertion())
    )


def expanded(
    live: exp.Expr,
    value_columns: Sequence[str],
    float_columns: Sequence[str] = (),
    *,
    in_entry_order: bool = False,
) -> exp.Select:
    """One row per live entry of a relation made by :func:`live_entries` (with the same
    ``float_columns``): each value tuple repeated ``NET`` times (the delete marks that cancel
    them all, carrying the sign of each zero they cancel).

    ``in_entry_order`` (``live`` made with ``first_order``) sorts the marks by the earliest
    insertion they cancel: on a dedup table whose dedup key several keys share, the marks are
    repeats of each other and only the first written stays (see docs/merges.md, 2.4)."""
    repeated = exp.Explode(this=exp.GenerateSeries(start=number(1), end=col(NET)))
    values = with_zero_signs(value_columns, float_columns)
    order = [col(FIRST_ORDER)] if in_entry_order else []
    inner = exp.select(*values, *order, alias(repeated, COPY)).from_(live)
    query = exp.select(*cols(value_columns)).from_(exp.paren(inner, copy=False))
    return query.order_by(col(FIRST_ORDER)) if in_entry_order else query


def rows_of_keys(entries: str, keys: str, key_columns: Sequence[str]) -> exp.Select:
    """The entries in the relation ``entries`` of the keys in the relation ``keys``."""
    return (
        exp.select("*")
        .from_(relation(entries))
        .join(relation(keys), using=using(key_columns), join_type="semi")
    )


# --- DuckDB text ----------------------------------------------------------------------------------


def negative_zero_flags(float_columns: Sequence[str]) -> list[str]:
    """The flags of :func:`zero_sign_flags` as DuckDB select items (``... AS name``)."""
    return [render(alias(flag, name), DUCKDB) for _, name, flag in zero_sign_flags(float_columns)]


def live_entries_sql(
    source: str, value_columns: Sequence[str], float_columns: Sequence[str] = ()
) -> str:
    """Distinct live value tuples of ``source`` with their multiplicity and insertion order
    (``float_columns``: the FLOAT/DOUBLE ones, whose -0.0 and 0.0 stay apart)."""
    query = live_entries(value_columns, float_columns, DUCKDB, net_type="BIGINT", first_order=True)
    return render(query.from_(from_text(source, DUCKDB)), DUCKDB)


def latest_entries_sql(
    source: str, key_columns: Sequence[str], value_columns: Sequence[str], latest_first: str
) -> str:
    """For replacing tables: the latest entry of each key (by ``latest_first``, an ORDER BY),
    kept only when it is an insertion, in the shape of :func:`live_entries_sql` (one live entry
    per key, which is both the visible row and the entry an update cancels)."""
    query = latest_entries(
        from_text(source, DUCKDB),
        key_columns,
        value_columns,
        order_from_text(latest_first, DUCKDB),
        DUCKDB,
    )
    return render(query, DUCKDB)


def visible_rows_sql(
    live: str,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    float_columns: Sequence[str] = (),
) -> str:
    """The latest live row of each key, from a relation made by :func:`live_entries_sql` (with
    the same ``float_columns``)."""
    query = latest_live_rows(from_text(live, DUCKDB), key_columns, value_columns, float_columns)
    return render(query, DUCKDB)


def expand_sql(live: str, value_columns: Sequence[str]) -> str:
    """One row per live entry: each tuple repeated by its multiplicity, in the order of the
    earliest insertion each cancels (``live`` made by :func:`live_entries_sql` or
    :func:`latest_entries_sql`)."""
    query = expanded(from_text(live, DUCKDB), value_columns, in_entry_order=True)
    return render(query, DUCKDB)


def unmatched_marks_sql(
    live: str,
    incoming: str,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    float_columns: Sequence[str] = (),
) -> str:
    """The value tuples that the delete marks of ``incoming`` (entries with their
    ``dml_type``) would cancel more often than they are live: in ``live`` (one row per live
    entry, as :func:`expand_sql` gives) or inserted by ``incoming`` itself. ``EXCESS`` says by
    how many. Grouping is the same as :func:`live_entries_sql`'s (``float_columns``: the
    FLOAT/DOUBLE ones, grouped with their sign of zero), so "equal values" means the same here
    as in every read: a mark of -0.0 cancelling an insertion of 0.0 would leave the insertion
    live while ``count()`` and totals drop it."""
    marked = (
        exp.select(*cols(key_columns))
        .from_(from_text(incoming, DUCKDB))
        .where(exp.EQ(this=dml(), expression=number(-1)))
    )
    as_live = exp.select(*cols(value_columns), alias(number(1), SIGN)).from_(
        from_text(live, DUCKDB)
    )
    as_incoming = (
        exp.select(*cols(value_columns), alias(exp.cast(dml(), "INTEGER"), SIGN))
        .from_(from_text(incoming, DUCKDB))
        .join(exp.paren(marked, copy=False), using=using(key_columns), join_type="semi")
    )
    signs = exp.union(as_live, as_incoming, distinct=False)
    excess = exp.cast(exp.Neg(this=exp.Sum(this=col(SIGN))), "BIGINT")
    same_zero_sign = [flag for _, _, flag in zero_sign_flags(float_columns)]
    query = (
        exp.select(*cols(value_columns), alias(excess, EXCESS))
        .from_(exp.paren(signs, copy=False))
        .group_by(*cols(value_columns), *same_zero_sign)
        .having(exp.LT(this=exp.Sum(this=col(SIGN)), expression=number(0)))
    )
    return render(query, DUCKDB)
