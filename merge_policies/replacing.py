"""Replacing (dimension tables): keep the latest entry of each key.

"Latest" is by ``trx_id``/``trx_seq``, or by a user version column first (a NULL version ranks
below every other version; ties fall back to the ledger order). Upserts and updates refuse a row
whose version ranks below its key's latest entry (``StaleVersionError``): the mark they write
carries the old version, so it would outrank the new row and hide the key. The visible row of a
key is its latest entry unless that entry is a delete mark.

A delete mark that is a key's latest entry hides every older entry of the key, including one a
slow transaction has not committed yet. It is dropped only when dropping cannot bring a deleted
row back (ClickHouse's ReplacingMergeTree lost deletes this way):

1. the merge reads every alive file of its partition, and no key can have entries in another
   partition (the table is unpartitioned or partitioned by key columns only), so no older entry
   of the key is left outside the merge; and
2. every transaction that began before the mark's transaction has committed or can no longer
   commit: the mark's ``trx_id`` is at or below the settled bound (transactions open longer than
   the table's ``transaction_timeout`` are refused at commit, so an entry written more than that
   long ago bounds every transaction that reserved a smaller ``trx_id``).

Otherwise the mark stays, as the single entry of its key, until a later merge may drop it. With
a version column a mark is never dropped: it hides insertions of versions up to its own that
arrive later, which a dropped mark would let through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ledger.errors import InvalidArgumentError
from ledger.log.entries import TableConfig
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ, TableSchema
from ledger.sql import ident, idents
from merge_policies.base import (
    LATEST_VERSION,
    MergeContext,
    PolicyDefaults,
    check_columns,
    check_options,
)

NAME = "replacing"


@dataclass(frozen=True)
class ReplacingPolicy(PolicyDefaults):
    version_column: str | None = None
    name: str = NAME

    @property
    def visible_rows(self) -> str:
        return LATEST_VERSION

    def latest_order(self) -> list[str]:
        """The columns putting each key's latest entry first, each descending, NULLs last."""
        order = [TRX_ID, TRX_SEQ]
        if self.version_column is not None:
            order.insert(0, self.version_column)
        return order

    def latest_first(self) -> str:
        """ORDER BY text putting each key's latest entry first."""
        return ", ".join(f"{ident(c)} DESC NULLS LAST" for c in self.latest_order())

    def unique_insertions_unchanged(self, key_columns: tuple[str, ...]) -> bool:
        return True  # each key's one entry is its latest, and no mark is there to drop

    def merge_sql(self, context: MergeContext) -> str:
        keys = idents(list(context.key_columns))
        columns = idents(list(context.columns))
        latest = (
            f"SELECT {columns} FROM {context.source} "
            f"QUALIFY row_number() OVER (PARTITION BY {keys} ORDER BY {self.latest_first()}) = 1"
        )
        if self.version_column is not None:
            # A mark records that every version up to its own is deleted: an older version
            # inserted later (late data) must stay hidden, so the mark is never dropped.
            return latest
        if not context.covers_every_entry_of_its_keys or context.settled_trx_id is None:
            return latest
        return (
            f"SELECT {columns} FROM ({latest}) "
            f"WHERE NOT ({ident(DML_TYPE)} = -1 AND {ident(TRX_ID)} <= {context.settled_trx_id})"
        )


def build(options: Mapping[str, Any], schema: TableSchema, config: TableConfig) -> ReplacingPolicy:
    check_options(
        NAME, options, ("version_column",), '{"name": "replacing", "version_column": "updated_at"}'
    )
    if config.generated_row_id:
        raise InvalidArgumentError(
            "the replacing policy keeps the latest entry per key, so the table needs a primary key"
        )
    version = options.get("version_column")
    if version is None:
        return ReplacingPolicy()
    (column,) = check_columns(
        NAME, "version_column", [version] if isinstance(version, str) else version, schema, config
    )
    check_version_column(column, schema, config)
    return ReplacingPolicy(column)


def check_version_column(column: str, schema: TableSchema, config: TableConfig) -> None:
    """A version orders a key's entries, so it must be a value of the row (not the key, which
    every entry of a key shares) with an exact total order: an integer, decimal, date or
    timestamp. Floats are refused: NaN and -0.0/0.0 order differently across engines, and a
    version that cannot be compared exactly cannot pick one latest row."""
    if column in config.key_columns:
        raise InvalidArgumentError(
            f"merge policy 'replacing': version_column {column!r} is a primary-key column, "
            "which every entry of a key shares; use a separate column that grows with every "
            "new version of a row"
        )
    data_type = schema.type_of(column)
    if not (
        pa.types.is_integer(data_type)
        or pa.types.is_decimal(data_type)
        or pa.types.is_temporal(data_type)
    ):
        raise InvalidArgumentError(
            f"merge policy 'replacing': version_column {column!r} is {data_type}; use an "
            "integer, decimal, date or timestamp that grows with every new version of a row "
            "(floating-point versions do not order exactly)"
        )
