"""A view's SQL text by kind for any dialect: what ``views.sql`` returns and what the Spark
front runs over its DataFrames, so both engines render the same trees.

>>> from ledger.sql.view_text import KINDS
>>> KINDS
('visible', 'totals', 'changes')
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.errors import InvalidArgumentError
from ledger.sql.changes import changes as changes_tree
from ledger.sql.dialects import dialect_named
from ledger.sql.spec import TableSpec
from ledger.sql.totals import check_totals_request
from ledger.sql.totals import totals as totals_tree
from ledger.sql.trees import Sources, render
from ledger.sql.visible import visible as visible_tree

KINDS = ("visible", "totals", "changes")


def view_text(
    spec: TableSpec,
    kind: str,
    dialect: str,
    source: str,
    *,
    system_columns: bool = False,
    by: Sequence[str] | str | None = None,
    sum: Sequence[str] | str | None = None,
    count: bool = True,
    avg: Sequence[str] | str | None = None,
    where: str | None = None,
) -> str:
    """The SQL text of the view ``kind`` (one of :data:`KINDS`) in ``dialect`` over the raw
    ledger in the relation named ``source``; the totals' arguments are checked first."""
    target = dialect_named(dialect)
    sources = Sources(entries=source)
    if kind == "visible":
        query = visible_tree(spec, target, sources, system_columns=system_columns)
    elif kind == "totals":
        request = check_totals_request(spec, by, sum, count, avg, where)
        query = totals_tree(spec, target, sources, request)
    elif kind == "changes":
        query = changes_tree(spec, sources)
    else:
        raise InvalidArgumentError(f"unknown view kind {kind!r}; choose one of {list(KINDS)}")
    return render(query, target)
