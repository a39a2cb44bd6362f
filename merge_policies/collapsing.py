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

from ledger.log.entries import TableConfig
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ, TableSchema
from ledger.sql import ident, idents
from merge_policies.base import ENTRY_ORDER, MergeContext, check_options

NAME = "collapsing"


@dataclass(frozen=True)
class CollapsingPolicy:
    name: str = NAME

    def merge_sql(self, context: MergeContext) -> str:
        keys = idents(list(context.key_columns))
        values = idents(list(context.value_columns))
        columns = idents(list(context.columns))
        dml, trx, seq = ident(DML_TYPE), ident(TRX_ID), ident(TRX_SEQ)
        src = context.source
        return f"""
WITH marked_keys AS (SELECT DISTINCT {keys} FROM {src} WHERE {dml} = -1),
corrected AS (
    SELECT {columns},
        sum({dml}) OVER grp AS __net,
        max(CASE WHEN {dml} = 1 THEN {ENTRY_ORDER} END) OVER grp AS __last_insert,
        max(CASE WHEN {dml} = -1 THEN {ENTRY_ORDER} END) OVER grp AS __last_mark,
        row_number() OVER (PARTITION BY {values}, {dml} ORDER BY {trx} DESC, {seq} DESC)
            AS __newest
    FROM (SELECT * FROM {src} SEMI JOIN marked_keys USING ({keys}))
    WINDOW grp AS (PARTITION BY {values})
)
SELECT {columns} FROM {src} ANTI JOIN marked_keys USING ({keys})
UNION ALL
SELECT {columns} FROM corrected
WHERE CASE
    WHEN __net > 0 THEN {dml} = 1 AND __newest <= __net
    WHEN coalesce(__last_insert > __last_mark, false)
        THEN __newest <= CASE WHEN {dml} = 1 THEN 1 ELSE 1 - __net END
    ELSE {dml} = -1 AND __newest <= -__net
END
"""


def build(options: Mapping[str, Any], schema: TableSchema, config: TableConfig) -> CollapsingPolicy:
    check_options(NAME, options, (), '"collapsing"')
    return CollapsingPolicy()
