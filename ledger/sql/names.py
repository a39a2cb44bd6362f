"""Every internal name and constant the generated SQL uses, in one place.

User columns may not start with ``__ledger_`` (the schema refuses them), so these names never
collide with a table's own columns. Engines and merge policies import them from here.
"""

from __future__ import annotations

from ledger.schema import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DML_TYPE,
    ROW_ID,
    TRX_ID,
    TRX_SEQ,
)

__all__ = [
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "DML_TYPE",
    "ROW_ID",
    "TRX_ID",
    "TRX_SEQ",
]

# The order of entries in the ledger as one number: trx_id in the high bits, trx_seq (32 bits)
# low, so that order = trx_id * ORDER_SHIFT + trx_seq.
ORDER_SHIFT = 4294967296

ENTRIES = "entries"  # the relation a merge policy's or a rewrite's query reads
# A merge's entries split by the files they come from (see MergeContext.split_sources): the
# files holding an insertion, and the files holding delete marks only.
ENTRIES_OF_INSERTION_FILES = "__ledger_entries_of_insertion_files"
ENTRIES_OF_MARK_FILES = "__ledger_entries_of_mark_files"

# Columns and relations of generated queries.
NET = "__ledger_net"  # a key's sum of dml_type
COPY = "__ledger_copy"  # which of the copies of an entry repeated by its net sign
ORDER = "__ledger_order"  # an entry's place in the ledger (see ORDER_SHIFT)
FIRST_ORDER = "__ledger_first_order"  # a live value tuple's earliest insertion (marks' order)
EXCESS = "__ledger_excess"
SIGN = "__ledger_sign"
KIND = "__ledger_kind"  # ordering class of an entry in one write: marks (0) before insertions (1)
CROWDED = "__ledger_crowded_keys"
CROWDED_ENTRIES = "__ledger_crowded_entries"  # every entry of the crowded keys (visible rows)
KEYED = "__ledger_keyed"  # entries with the number of entries of their key (window dialects)
ENTRIES_OF_KEY = "__ledger_entries_of_key"
LIVE = "__ledger_live"
LATEST_ORDER = "__ledger_latest_order"  # each key's latest insertion order (visible rows)
LATEST_INSERTIONS = "__ledger_latest_insertions"  # each key's latest insertion (visible rows)
MARKS = "__ledger_marks"  # the delete marks of a relation (visible rows)
DELETED = "__ledger_deleted_marks"  # marks of keys not inserted again (visible rows)
UNSURE = "__ledger_unsure_keys"  # keys whose latest insertion may be cancelled (visible rows)
RANK = "__ledger_rank"
ROW_NUMBER = "__ledger_row"
DEDUPED = "__ledger_deduped"
PARTITION_PREFIX = "__ledger_partition_"  # a writer's computed partition values
ACTION = "__ledger_action"  # a Delta merge source's tag column

# Partial totals (one row per file group, combined afterwards).
PART_COUNT = "__ledger_count"
PART_SUM = "__ledger_sum_"
PART_PRESENT = "__ledger_present_"
PART_NAN = "__ledger_nan_"
PART_POSITIVE_INF = "__ledger_pinf_"
PART_NEGATIVE_INF = "__ledger_ninf_"

# The key checks of read-modify-write (ledger.sql.rmw).
ENTRY_COUNT = "__ledger_n"  # entries of a key
NULL_KEY = "__ledger_null"  # whether a key column is NULL
