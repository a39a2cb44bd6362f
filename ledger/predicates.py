"""SQL predicates given by users, parsed and checked for what they may read; their names are
checked against a table's columns in :mod:`ledger.sql.predicates`."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ledger.errors import InvalidPredicateError, UnsafePredicateError
from ledger.sql_guard import check_expression, too_deep, without_terminal_codes


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
