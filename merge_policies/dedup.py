"""Dedup: drop repeated entries, for batches loaded twice.

Entries are repeats when they agree on the dedup key and on ``dml_type``; the earliest (by
``trx_id``, ``trx_seq``) is kept. The default dedup key is the table key with ``trx_id`` and
``trx_seq`` (the same entry written twice); a user row id column (an event id) makes a second
load of the same events a repeat. Views of a dedup table drop repeats the same way, so a merge
never changes an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.log.entries import TableConfig
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ, TableSchema
from ledger.sql import ident, idents
from merge_policies.base import MergeContext, PolicyDefaults, check_columns, check_options

if TYPE_CHECKING:
    pass

NAME = "dedup"


@dataclass(frozen=True)
class DedupPolicy(PolicyDefaults):
    dedup_key: tuple[str, ...] | None = None
    name: str = NAME

    @property
    def files_isolatable(self) -> bool:
        return self.dedup_key is None

    @property
    def keys_independent(self) -> bool:
        return self.dedup_key is None

    def keeps_replacements(self, key_columns: tuple[str, ...]) -> bool:
        # A dedup key of key columns only (an event id): an update's new row repeats the load
        # it replaces, so it would be dropped, its delete mark kept, and the row would vanish.
        return self.dedup_key is None or not set(self.dedup_key) <= set(key_columns)

    def unique_insertions_unchanged(self, key_columns: tuple[str, ...]) -> bool:
        # Entries of distinct keys repeat each other only under a dedup key lacking a key column.
        return self.dedup_key is None or set(key_columns) <= set(self.dedup_key)

    def repeat_columns(self, key_columns: tuple[str, ...]) -> list[str] | None:
        return self.repeat_partition(key_columns)

    def repeat_partition(self, key_columns: tuple[str, ...]) -> list[str]:
        """The columns that make two entries repeats of each other."""
        columns = list(self.dedup_key or (*key_columns, TRX_ID, TRX_SEQ))
        return [*columns, DML_TYPE] if DML_TYPE not in columns else columns

    def merge_sql(self, context: MergeContext) -> str:
        partition = idents(self.repeat_partition(context.key_columns))
        return (
            f"SELECT {idents(list(context.columns))} FROM {context.source} "
            f"QUALIFY row_number() OVER (PARTITION BY {partition} "
            f"ORDER BY {ident(TRX_ID)}, {ident(TRX_SEQ)}) = 1"
        )


def build(options: Mapping[str, Any], schema: TableSchema, config: TableConfig) -> DedupPolicy:
    check_options(NAME, options, ("dedup_key",), '{"name": "dedup", "dedup_key": ["event_id"]}')
    if "dedup_key" not in options:
        return DedupPolicy()
    return DedupPolicy(check_columns(NAME, "dedup_key", options["dedup_key"], schema, config))
