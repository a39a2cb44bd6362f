"""Assigning ``trx_id``: unique in the table, above everything committed before the transaction.

A transaction reserves its id before writing any row by creating ``<table>/_trx/<id>`` with
put-if-absent. The candidate is one above both the largest ``trx_id`` committed in the snapshot
and every reservation listed above it, so it exceeds the id of any transaction that committed
before this one began (that transaction reserved its id before committing, and the listing sees
it). Two writers can never create the same reservation key, so ids are unique without a lock.
Reservations at or below the committed maximum are garbage that vacuum may delete.
A reservation need not survive a machine crash (``Store.reserve``): the crash ends the
transaction that made it, and an id that committed is in the log, which new ids stay above.

A transaction's reservation also holds ``{"snapshot": V}``: a version at or below the snapshot
it reads. Vacuum keeps the data files such a transaction may still read or check for conflicts
while the reservation is younger than the transaction timeout (docs/merges.md 4.4).
"""

from __future__ import annotations

import json
import logging
import re

from ledger.errors import ConflictError, LedgerError
from ledger.storage import Store

log = logging.getLogger(__name__)

ID_DIGITS = 20
# A generated _row_id holds its trx_id in the high half of a signed 64-bit value.
MAX_TRX_ID = 2**31 - 1
_MAX_TRIES = 1000
_RESERVATION_NAME = re.compile(rf"[0-9]{{{ID_DIGITS}}}", re.ASCII)
_reported: set[str] = set()


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
        reserved = reservation_id(info.key[len(prefix) :])
        if reserved is None:
            _report_foreign(info.key)
        else:
            candidate = max(candidate, reserved + 1)
    for _ in range(_MAX_TRIES):
        if candidate > MAX_TRX_ID:
            raise LedgerError(
                f"table {table_prefix[:-1]!r} has used every trx_id up to {MAX_TRX_ID}; copy its "
                "rows into a new table"
            )
        if store.reserve(reservation_key(table_prefix, candidate), body):
            return candidate
        candidate += 1
    raise ConflictError("could not reserve a trx_id: too many concurrent transactions; retry")


def reservation_id(name: str) -> int | None:
    """The trx_id a name under ``_trx/`` reserves, or None for a name no writer makes (other
    digits, other lengths, ids no transaction can have): such names are ignored, never let
    stop the table."""
    if not _RESERVATION_NAME.fullmatch(name):
        return None
    value = int(name)
    return value if value <= MAX_TRX_ID else None


def _report_foreign(key: str) -> None:
    if key not in _reported:
        _reported.add(key)
        log.warning("ignoring %s: not a trx_id reservation this library writes", key)
