"""SQL predicates given by users (``delete_where``): parsed and checked before they run."""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from ledger.errors import InvalidPredicateError, UnsafePredicateError
from ledger.sql_guard import check_expression, too_deep, without_terminal_codes

_FORBIDDEN_IN_PREDICATE = (exp.Query, exp.Command, exp.Create, exp.Drop, exp.Insert, exp.Delete)


def check_predicate(predicate: Any, caller: str = "delete_where") -> str:
    """The predicate re-rendered from its parse tree; refuse statements, subqueries and junk.
    ``caller`` names the call the predicate was given to, in the refusal of an empty one.

    >>> check_predicate("amount < 0 and region = 'EU'")
    "amount < 0 AND region = 'EU'"
    """
    if not isinstance(predicate, str) or not predicate.strip():
        raise InvalidPredicateError(f"{caller} needs a non-empty SQL predicate string")
    tree = predicate_tree(predicate)
    if any(isinstance(node, _FORBIDDEN_IN_PREDICATE) for node in tree.walk()):
        raise InvalidPredicateError(
            f"predicate {predicate!r} must be an expression over the table's columns, not a "
            "statement or subquery"
        )
    return str(tree.sql(dialect="duckdb", comments=False))


def predicate_tree(predicate: str) -> exp.Expr:
    """``predicate`` parsed as one DuckDB expression that reads no file, table or setting.

    Raises :class:`InvalidPredicateError` when it does not parse, and
    :class:`UnsafePredicateError` (also an ``InvalidPredicateError``) for several statements, a
    statement, a table or a table function, file reader or setting lookup anywhere in it.
    """
    try:
        statements = sqlglot.parse(predicate, dialect="duckdb")
    except sqlglot.errors.SqlglotError as e:  # a parse or a tokenizer error (an open quote)
        raise InvalidPredicateError(
            f"cannot parse predicate {predicate!r}: {without_terminal_codes(str(e))}"
        ) from e
    except RecursionError as e:
        raise InvalidPredicateError(f"predicate {predicate[:80]!r}... nests too deeply") from e
    if len(statements) != 1 or statements[0] is None:
        raise UnsafePredicateError(
            f"predicate {predicate!r} must be one SQL expression, not several statements"
        )
    tree = statements[0]
    if too_deep(tree):
        raise InvalidPredicateError(f"predicate {predicate[:80]!r}... nests too deeply")
    check_expression(tree, predicate, "predicate", UnsafePredicateError)
    for node in tree.walk():
        node.comments = None  # rendered into other queries, the predicate carries no comment
    return tree
