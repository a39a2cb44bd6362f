"""Users' filters (``where``) as trees, checked against a table's columns before any query runs."""

from __future__ import annotations

from sqlglot import exp

from ledger.arguments import closest_names
from ledger.errors import InvalidPredicateError, UnknownColumnError
from ledger.predicates import predicate_tree
from ledger.sql.spec import TableSpec


def parse_predicate(spec: TableSpec, where: str | None) -> exp.Expr | None:
    """A user's filter as a tree, checked to be one expression over the table's columns."""
    if where is None:
        return None
    if not isinstance(where, str) or not where.strip():
        raise InvalidPredicateError("where must be a non-empty SQL predicate string")
    # Predicates are written in DuckDB's SQL (as delete_where's) and rendered per dialect, so
    # one predicate means the same everywhere.
    tree = predicate_tree(where)
    forbidden = (
        exp.Query,
        exp.Command,
        exp.Create,
        exp.Drop,
        exp.Insert,
        exp.Delete,
        exp.AggFunc,
        exp.Window,
    )
    if any(isinstance(node, forbidden) for node in tree.walk()):
        raise InvalidPredicateError(
            f"predicate {where!r} must be an expression over the table's columns, not a "
            "statement, subquery, aggregate or window"
        )
    for column in tree.find_all(exp.Column):
        if column.table:
            raise InvalidPredicateError(
                f"predicate {where!r} names {column.sql()!r}: refer to the table's columns "
                "without a table name"
            )
        if column.name not in spec.columns:
            raise UnknownColumnError(
                f"predicate {where!r} names {column.name!r}, which is not a column of the "
                f"table{closest_names(column.name, list(spec.columns))} (columns: "
                f"{list(spec.columns)})"
            )
        column.this.set("quoted", True)
    return tree
