"""Collapsing: cancel insertions against later delete marks of the same key and values.

Entries of one key with equal values form a group. Within the merged files, a group's signs sum
to ``net``; the group is replaced by ``net`` insertions (the latest ones) when ``net > 0``, by
``-net`` delete marks when ``net < 0``, and by nothing when ``net = 0``. One exception keeps the
latest visible row of every key exact whatever subset of files is merged: a delete mark only
cancels an insertion made *before* it, so when a group's latest entry is an insertion that no
later mark in the merge cancels, that insertion stays (with the marks that balance it).

Keys with no delete mark among the merged entries pass through untouched, so the grouping work
is proportional to the corrected keys, not to the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ledger.log.entries import TableConfig
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ, TableSchema
from ledger.sql import ident, idents
from ledger.sql.live import negative_zero_flags
from ledger.sql.names import ORDER_SHIFT
from merge_policies.base import ENTRY_ORDER, MergeContext, PolicyDefaults, check_options

NAME = "collapsing"


@dataclass(frozen=True)
class CollapsingPolicy(PolicyDefaults):
    name: str = NAME
    float_columns: tuple[str, ...] = ()  # grouped with their sign of zero (ledger.sql.live)

    @property
    def signs_consistent(self) -> bool:
        return True

    @property
    def unmarked_keys_pass_through(self) -> bool:
        return True  # the anti join of the query below

    def unique_insertions_unchanged(self, key_columns: tuple[str, ...]) -> bool:
        return True

    def merge_sql(self, context: MergeContext) -> str:
        keys = idents(list(context.key_columns))
        values = idents(list(context.value_columns))
        columns = idents(list(context.columns))
        grouped = ", ".join([values, *negative_zero_flags(self.float_columns)])
        dml, trx, seq = ident(DML_TYPE), ident(TRX_ID), ident(TRX_SEQ)
        marked, grouped_entries, passed = _sources(context, keys, columns)
        # Per group: the entry orders of its insertions and of its marks, newest first; the
        # entries kept are slices of those lists (see the module docstring). The lists are
        # sorted after aggregating: an ordered aggregate (list(... ORDER BY ...)) buffers and
        # sorts every group apart, and cost as much as a scan of every entry.
        return f"""
WITH marked_keys AS ({marked}),
groups AS (
    SELECT {grouped}, sum({dml}) AS __net,
        list_reverse_sort(list({ENTRY_ORDER}) FILTER (WHERE {dml} = 1)) AS __inserts,
        list_reverse_sort(list({ENTRY_ORDER}) FILTER (WHERE {dml} = -1)) AS __marks
    FROM ({grouped_entries})
    GROUP BY ALL
),
kept AS (
    SELECT {values}, unnest(CASE
        WHEN __net > 0 THEN list_transform(__inserts[1:__net], lambda o: {{'o': o, 'd': 1}})
        WHEN coalesce(__inserts[1] > __marks[1], false) THEN list_concat(
            list_transform(__inserts[1:1], lambda o: {{'o': o, 'd': 1}}),
            list_transform(__marks[1:1 - __net], lambda o: {{'o': o, 'd': -1}}))
        ELSE list_transform(__marks[1:-__net], lambda o: {{'o': o, 'd': -1}})
    END) AS __entry
    FROM groups
    WHERE __net <> 0 OR coalesce(__inserts[1] > __marks[1], false)
)
{passed}
UNION ALL
SELECT {values},
    CAST(__entry.o // {ORDER_SHIFT} AS BIGINT) AS {trx},
    CAST(__entry.o % {ORDER_SHIFT} AS INTEGER) AS {seq},
    CAST(__entry.d AS TINYINT) AS {dml}
FROM kept
"""


def _sources(context: MergeContext, keys: str, columns: str) -> tuple[str, str, str]:
    """The query's three reads of the entries: the keys holding a delete mark, the entries of
    those keys (to group), and every other entry (passed through).

    Given the entries split by file (``context.split_sources``), a file of delete marks only
    is read once, not three times, with no join: every entry of it is a mark, so its key is
    marked and the entry grouped. A mark whose key holds a NULL (which the joins never match,
    so reading ``source`` passes it through) is then grouped only with marks of its own
    values from such files, none of which a group of marks alone drops: it is returned as it
    is either way.
    """
    dml = ident(DML_TYPE)
    if context.split_sources is None:
        src = context.source
        return (
            f"SELECT DISTINCT {keys} FROM {src} WHERE {dml} = -1",
            f"SELECT * FROM {src} SEMI JOIN marked_keys USING ({keys})",
            f"SELECT {columns} FROM {src} ANTI JOIN marked_keys USING ({keys})",
        )
    with_insertions, marks_only = context.split_sources
    return (
        f"SELECT DISTINCT {keys} FROM (SELECT {keys} FROM {with_insertions} WHERE {dml} = -1 "
        f"UNION ALL SELECT {keys} FROM {marks_only})",
        f"SELECT * FROM {with_insertions} SEMI JOIN marked_keys USING ({keys}) "
        f"UNION ALL SELECT * FROM {marks_only}",
        f"SELECT {columns} FROM {with_insertions} ANTI JOIN marked_keys USING ({keys})",
    )


def build(options: Mapping[str, Any], schema: TableSchema, config: TableConfig) -> CollapsingPolicy:
    check_options(NAME, options, (), '"collapsing"')
    floats = tuple(c for c in schema.names if pa.types.is_floating(schema.type_of(c)))
    return CollapsingPolicy(float_columns=floats)
