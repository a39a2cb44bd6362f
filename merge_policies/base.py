"""The contract of a merge policy: the entries of the merged files in, their replacement out.

A policy is one function from entries to entries, written as a SQL query over a relation of the
merged files' entries (every column of the data files, system columns included). The merge
executor sorts the result by the table's sort order and writes it; the policy never sees files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ledger.errors import InvalidArgumentError
from ledger.log.entries import TableConfig
from ledger.schema import TableSchema
from ledger.sql import ident
from ledger.sql.names import ORDER_SHIFT, TRX_ID, TRX_SEQ

if TYPE_CHECKING:
    import pyarrow as pa

# The order of entries in the ledger, as one number: trx_id in the high bits, trx_seq low.
ENTRY_ORDER = f"CAST({ident(TRX_ID)} AS HUGEINT) * {ORDER_SHIFT} + {ident(TRX_SEQ)}"


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
    # Where the executor offers it: two relations splitting ``source`` by the files the
    # entries come from, (those of files holding at least one insertion, those of files
    # holding delete marks only), so a query can skip work the markers already answer. None
    # when only ``source`` exists.
    split_sources: tuple[str, str] | None = None


# How a policy's visible rows are derived from its entries (docs/views.md says each exactly).
SIGNED = "signed"  # the newest insertion of each key whose dml_type sum is positive
LATEST_VERSION = "latest_version"  # each key's first entry in the policy's latest_order
AGGREGATED = "aggregated"  # one row per key, aggregated from all of its entries


class MergePolicy(Protocol):
    """A validated policy of one table.

    Code outside ``merge_policies`` never compares policy names: it asks the policy these
    questions instead, so a new policy is one new module.
    """

    name: str  # for messages and the log only

    @property
    def visible_rows(self) -> str:
        """How the visible rows are derived: :data:`SIGNED`, :data:`LATEST_VERSION` or
        :data:`AGGREGATED`."""
        ...

    @property
    def signs_consistent(self) -> bool:
        """Whether ``sum(dml_type * x)`` over the raw entries is the total of the visible rows
        (every mark cancels an insertion carrying the same values), so totals and rollup
        deltas may weight entries by sign, and files holding insertions only may be read as
        they are."""
        ...

    @property
    def files_isolatable(self) -> bool:
        """Whether a file whose key range overlaps no other file's may be read as it is."""
        ...

    @property
    def keys_independent(self) -> bool:
        """Whether a key's visible rows depend on its own entries only (false when entries of
        different keys can repeat each other)."""
        ...

    @property
    def unmarked_keys_pass_through(self) -> bool:
        """Whether the merge query returns every entry of a key that holds no delete mark among
        the merged entries exactly as it is, so a merge may copy files of insertions only whose
        keys no merged mark can share (their key ranges meet no marked file's) without running
        them through the query."""
        ...

    def unique_insertions_unchanged(self, key_columns: tuple[str, ...]) -> bool:
        """Whether the merge query returns entries holding no delete mark and no key (of
        ``key_columns``) twice exactly as they are, so a merge of one such file alone has
        nothing to do."""
        ...

    def repeat_columns(self, key_columns: tuple[str, ...]) -> list[str] | None:
        """The columns making two entries repeats of each other (the reader keeps one of
        them), or None when the policy keeps every entry."""
        ...

    def keeps_replacements(self, key_columns: tuple[str, ...]) -> bool:
        """Whether the new row an update or upsert writes for an existing key is kept (False
        when it would be dropped as a repeat of the key's first load: the row would vanish)."""
        ...

    def latest_order(self) -> list[str] | None:
        """The columns putting each key's latest entry first, each descending with NULLs last,
        or None when the latest entry is the newest by ``trx_id``, ``trx_seq``."""
        ...

    def aggregates(self) -> tuple[tuple[str, str, str], ...]:
        """``(column, function, SQL type)`` of each measure an :data:`AGGREGATED` policy merges
        its entries with (``sum``, ``count``, ``min``, ``max``, ...); empty for other policies."""
        ...

    def merge_sql(self, context: MergeContext) -> str:
        """A SELECT over ``context.source`` returning the entries that replace it (any column
        order, every column of ``context.columns``)."""
        ...

    def check_against_files(self, files: pa.Schema) -> None:
        """Check, before a table is created, that merges can write what this policy returns
        into data files of schema ``files`` (every column, system columns included); raise
        :class:`~ledger.errors.SchemaError` (or a subclass) if not. Built-in policies fit by
        construction; a user's query is bound to find out."""
        ...


class PolicyDefaults:
    """The answers most policies give (a policy keeping every entry, whose latest entry is the
    newest, with no measures and a query that returns the entries' own columns); a policy
    inherits them and overrides only the answers it differs in."""

    @property
    def visible_rows(self) -> str:
        return SIGNED

    @property
    def signs_consistent(self) -> bool:
        return False

    @property
    def files_isolatable(self) -> bool:
        return True

    @property
    def keys_independent(self) -> bool:
        return True

    @property
    def unmarked_keys_pass_through(self) -> bool:
        return False

    def unique_insertions_unchanged(self, key_columns: tuple[str, ...]) -> bool:
        return False

    def keeps_replacements(self, key_columns: tuple[str, ...]) -> bool:
        """Whether the new row an update or upsert writes for an existing key is kept (a dedup
        key made of key columns, an event id, drops it as a repeat of the key's first load)."""
        return True

    def repeat_columns(self, key_columns: tuple[str, ...]) -> list[str] | None:
        return None

    def latest_order(self) -> list[str] | None:
        return None

    def aggregates(self) -> tuple[tuple[str, str, str], ...]:
        return ()

    def check_against_files(self, files: pa.Schema) -> None:
        return None  # a built-in policy's query returns the merged entries' own columns


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
