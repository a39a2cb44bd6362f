"""SQL predicates given by users (``delete_where``): parsed and checked before they run."""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from ledger.errors import InvalidPredicateError

_FORBIDDEN_IN_PREDICATE = (exp.Query, exp.Command, exp.Create, exp.Drop, exp.Insert, exp.Delete)


def check_predicate(predicate: Any) -> str:
    """The predicate re-rendered from its parse tree; refuse statements, subqueries and junk.

    >>> check_predicate("amount < 0 and region = 'EU'")
    "amount < 0 AND region = 'EU'"
    """
    if not isinstance(predicate, str) or not predicate.strip():
        raise InvalidPredicateError("delete_where needs a non-empty SQL predicate string")
    try:
        statements = sqlglot.parse(predicate, dialect="duckdb")
    except sqlglot.errors.ParseError as e:
        raise InvalidPredicateError(f"cannot parse predicate {predicate!r}: {e}") from e
    if len(statements) != 1 or statements[0] is None:
        raise InvalidPredicateError(f"predicate {predicate!r} must be one SQL expression")
    tree = statements[0]
    if any(isinstance(node, _FORBIDDEN_IN_PREDICATE) for node in tree.walk()):
        raise InvalidPredicateError(
            f"predicate {predicate!r} must be an expression over the table's columns, not a "
            "statement or subquery"
        )
    return str(tree.sql(dialect="duckdb"))
