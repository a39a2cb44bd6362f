"""The contract of a merge policy: the entries of the merged files in, their replacement out.

A policy is one function from entries to entries, written as a SQL query over a relation of the
merged files' entries (every column of the data files, system columns included). The merge
executor sorts the result by the table's sort order and writes it; the policy never sees files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.errors import InvalidArgumentError
from ledger.log.entries import TableConfig
from ledger.schema import TableSchema

# The order of entries in the ledger, as one number: trx_id in the high bits, trx_seq low.
ENTRY_ORDER = 'CAST("trx_id" AS HUGEINT) * 4294967296 + "trx_seq"'


@dataclass(frozen=True)
class MergeContext:
    """What a policy's query may rely on about one merge of one partition."""

    source: str  # the relation holding the merged entries
    columns: tuple[str, ...]  # the data files' columns, system columns last
    key_columns: tuple[str, ...]  # the primary key, or _row_id
    value_columns: tuple[str, ...]  # user columns (and _row_id): what a delete mark carries
    # The merge reads every alive file of its partition, and no key has entries in another
    # partition (the table is unpartitioned or partitioned by key columns only).
    covers_every_entry_of_its_keys: bool
    # Every transaction with a trx_id at or below this one has committed or can no longer
    # commit (it timed out); None when no such bound is known yet.
    settled_trx_id: int | None


class MergePolicy(Protocol):
    """A validated policy of one table."""

    name: str

    def merge_sql(self, context: MergeContext) -> str:
        """A SELECT over ``context.source`` returning the entries that replace it (any column
        order, every column of ``context.columns``)."""
        ...


def check_options(
    name: str, options: Mapping[str, Any], allowed: Sequence[str], example: str
) -> None:
    """Reject options a policy does not know (a typo must not silently change merges)."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise InvalidArgumentError(
            f"merge policy {name!r} has no option(s) {unknown}; its options are "
            f"{list(allowed) or 'none'}, e.g. {example}"
        )


def check_columns(
    name: str, option: str, columns: Any, schema: TableSchema, config: TableConfig
) -> tuple[str, ...]:
    """A list of existing column names given as an option."""
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, list | tuple) or not columns:
        raise InvalidArgumentError(
            f"merge policy {name!r}: {option} must be a column name or a non-empty list of them"
        )
    known = [*schema.names, *(["_row_id"] if config.generated_row_id else [])]
    for column in columns:
        if column not in known:
            raise InvalidArgumentError(
                f"merge policy {name!r}: {option} names {column!r}, which is not a column of "
                f"the table (columns: {known})"
            )
    return tuple(columns)
