"""Assigning ``trx_id``: unique in the table, above everything committed before the transaction.

A transaction reserves its id before writing any row by creating ``<table>/_trx/<id>`` with
put-if-absent. The candidate is one above both the largest ``trx_id`` committed in the snapshot
and every reservation listed above it, so it exceeds the id of any transaction that committed
before this one began (that transaction reserved its id before committing, and the listing sees
it). Two writers can never create the same reservation key, so ids are unique without a lock.
Reservations at or below the committed maximum are garbage that vacuum may delete.

A transaction's reservation also holds ``{"snapshot": V}``: a version at or below the snapshot
it reads. Vacuum keeps the data files such a transaction may still read or check for conflicts
while the reservation is younger than the transaction timeout (docs/merges.md 4.4).
"""

from __future__ import annotations

import json

from ledger.errors import ConflictError
from ledger.storage import Store

ID_DIGITS = 20
_MAX_TRIES = 1000


def reservation_prefix(table_prefix: str) -> str:
    return table_prefix + "_trx/"


def reservation_key(table_prefix: str, trx_id: int) -> str:
    return f"{reservation_prefix(table_prefix)}{trx_id:0{ID_DIGITS}d}"


def reservation_body(snapshot_version: int) -> bytes:
    """What a transaction's reservation holds: a lower bound of the version it reads."""
    return json.dumps({"snapshot": snapshot_version}, separators=(",", ":")).encode()


def reservation_snapshot(body: bytes) -> int | None:
    """The snapshot bound a reservation holds, or None when it holds none (an empty object, or
    anything else: then the reader must assume the oldest snapshot)."""
    try:
        value = json.loads(body).get("snapshot")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reserve_trx_id(store: Store, table_prefix: str, committed_max: int, body: bytes = b"") -> int:
    """Reserve and return a fresh ``trx_id`` above ``committed_max`` and every reservation."""
    prefix = reservation_prefix(table_prefix)
    candidate = committed_max + 1
    for info in store.list(prefix, start_after=f"{prefix}{committed_max:0{ID_DIGITS}d}"):
        name = info.key[len(prefix) :]
        if name.isdigit():
            candidate = max(candidate, int(name) + 1)
    for _ in range(_MAX_TRIES):
        if store.put_if_absent(reservation_key(table_prefix, candidate), body):
            return candidate
        candidate += 1
    raise ConflictError("could not reserve a trx_id: too many concurrent transactions; retry")
