"""Users' filters (``where``, ``delete_where``) as trees, checked against a table's columns
before any query runs: the one place that decides what a predicate's names mean."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ledger.arguments import closest_names
from ledger.errors import InvalidPredicateError, UnknownPredicateColumnError
from ledger.predicates import predicate_tree
from ledger.schema import folded_name
from ledger.sql.spec import TableSpec

_FORBIDDEN = (
    exp.Query,
    exp.Command,
    exp.Create,
    exp.Drop,
    exp.Insert,
    exp.Delete,
    exp.AggFunc,
    exp.Window,
)


def parse_predicate(spec: TableSpec, where: str | None) -> exp.Expr | None:
    """A user's filter as a tree, checked to be one expression over the table's columns."""
    if where is None:
        return None
    return predicate_over(spec.columns, where)


def predicate_over(
    columns: Sequence[str], where: object, caller: str = "where", over: str = "columns"
) -> exp.Expr:
    """``where`` as a tree of one expression over ``columns``, each name it reads replaced by
    the column's own spelling, quoted. Names are matched as the engines match them, without
    case (:func:`ledger.schema.folded_name`, quoted or not), so every call taking a predicate
    reads the same rows with it. ``caller`` names the call, in the refusal of an empty one;
    ``over`` what ``columns`` are (the table's, or its partition fields), in refusals.

    >>> predicate_over(["Amount"], "AMOUNT > 0").sql(dialect="duckdb")
    '"Amount" > 0'
    """
    if not isinstance(where, str) or not where.strip():
        raise InvalidPredicateError(f"{caller} needs a non-empty SQL predicate string")
    # Predicates are written in DuckDB's SQL and rendered per dialect, so one predicate means
    # the same everywhere.
    tree = predicate_tree(where)
    if any(isinstance(node, _FORBIDDEN) for node in tree.walk()):
        raise InvalidPredicateError(
            f"predicate {where!r} must be an expression over the table's {over}, not a "
            "statement, subquery, aggregate or window"
        )
    by_folded = {folded_name(c): c for c in columns}
    for column in tree.find_all(exp.Column):
        if column.table:
            raise InvalidPredicateError(
                f"predicate {where!r} names {column.sql()!r}: refer to the table's {over} "
                "without a table name"
            )
        name = by_folded.get(folded_name(column.name))
        if name is None:
            raise UnknownPredicateColumnError(
                f"predicate {where!r} names {column.name!r}, which is not one of the table's "
                f"{over}{closest_names(column.name, list(columns))} ({over}: {list(columns)})"
            )
        column.set("this", exp.to_identifier(name, quoted=True))
    return tree
