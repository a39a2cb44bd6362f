"""The checks of read-modify-write as trees: keys given twice or NULL in one operation, and
rows whose version ranks below their key's latest entry (the live entries themselves are in
:mod:`ledger.sql.live`).

>>> from ledger.sql.dialects import DIALECTS
>>> from ledger.sql.trees import render
>>> print(render(key_problems("rows", ["id"], 3), DIALECTS["spark"]))  # doctest: +ELLIPSIS
SELECT * FROM (SELECT `id`, COUNT(*) AS `__ledger_n`, ... LIMIT 4
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ledger.sql.names import ENTRY_COUNT, NULL_KEY
from ledger.sql.trees import alias, col, cols, first_per, number, relation, using

GIVEN = "given"  # the version a row gives
CURRENT = "current"  # the version of its key's latest entry


def key_problems(rows: str, key_columns: Sequence[str], limit: int) -> exp.Select:
    """Keys of the relation ``rows`` that hold a NULL (``NULL_KEY``) or appear more than once
    (``ENTRY_COUNT``): the NULL ones first, at most ``limit`` + 1 rows (enough to tell both
    problems apart and show ``limit`` duplicates)."""
    null = exp.or_(*(exp.Is(this=col(k), expression=exp.Null()) for k in key_columns))
    counted = (
        exp.select(
            *cols(key_columns),
            alias(exp.Count(this=exp.Star()), ENTRY_COUNT),
            alias(exp.paren(null, copy=False), NULL_KEY),
        )
        .from_(relation(rows))
        .group_by(*cols(key_columns))
    )
    return (
        exp.select("*")
        .from_(exp.paren(counted, copy=False))
        .where(exp.or_(col(NULL_KEY), exp.GT(this=col(ENTRY_COUNT), expression=number(1))))
        .order_by(exp.Ordered(this=col(NULL_KEY), desc=True))
        .limit(limit + 1)
    )


def stale_versions(
    entries: str,
    rows: str,
    key_columns: Sequence[str],
    version_column: str,
    latest_first: list[exp.Ordered],
) -> exp.Select:
    """The rows of ``rows`` whose ``version_column`` ranks below the version of their key's
    latest entry in ``entries`` (by ``latest_first``; a delete mark counts): key columns,
    ``given`` and ``current``. A NULL version ranks below every other version."""
    touched = (
        exp.select(*cols(key_columns), col(version_column))
        .from_(relation(entries))
        .join(relation(rows), using=using(key_columns), join_type="semi")
    )
    latest = first_per(touched, key_columns, latest_first)
    given, current = col(version_column, GIVEN), col(version_column, CURRENT)
    below = exp.or_(
        exp.Is(this=given.copy(), expression=exp.Null()),
        exp.LT(this=given.copy(), expression=current.copy()),
    )
    return (
        exp.select(*cols(key_columns), alias(given, GIVEN), alias(current, CURRENT))
        .from_(exp.alias_(relation(rows), GIVEN, quoted=True))
        .join(
            exp.alias_(exp.paren(latest, copy=False), CURRENT, quoted=True),
            using=using(key_columns),
        )
        .where(
            exp.and_(
                exp.Not(this=exp.Is(this=current.copy(), expression=exp.Null())),
                exp.paren(below, copy=False),
            )
        )
    )
