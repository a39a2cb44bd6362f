"""Assigning ``trx_id``: unique in the table, above everything committed before the transaction.

A transaction reserves its id before committing any row by creating ``<table>/_trx/<id>`` with
put-if-absent (usually before writing any, too; a blind insert on an object store writes its rows
while the reservation is in flight: :class:`SpeculativeReservation`). The candidate is one above
both the largest ``trx_id`` committed in the snapshot and every reservation listed above it, so it
exceeds the id of any transaction that committed before this one began (that transaction reserved
its id before committing, and the listing sees it). Two writers can never create the same
reservation key, so ids are unique without a lock. Reservations at or below the committed maximum
are garbage that vacuum may delete. A reservation need not survive a machine crash
(``Store.reserve``): the crash ends the transaction that made it, and an id that committed is in the
log, which new ids stay above.

A transaction's reservation also holds ``{"snapshot": V}``: a version at or below the snapshot
it reads. Vacuum keeps the data files such a transaction may still read or check for conflicts
while the reservation is younger than the transaction timeout (docs/merges.md 4.4).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

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
    listed = _listed_reservations(store, table_prefix, committed_max)
    candidate = max([committed_max, *listed]) + 1
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


def _listed_reservations(store: Store, table_prefix: str, committed_max: int) -> list[int]:
    """The ids reserved above ``committed_max``, from one listing of ``_trx/``."""
    prefix = reservation_prefix(table_prefix)
    listed = []
    for info in store.list(prefix, start_after=f"{prefix}{committed_max:0{ID_DIGITS}d}"):
        reserved = reservation_id(info.key[len(prefix) :])
        if reserved is None:
            _report_foreign(info.key)
        else:
            listed.append(reserved)
    return listed


# Runs a request on another thread and returns its future (ledger.writer.start_request).
StartRequest = Callable[[Callable[[], Any]], "Future[Any]"]


class SpeculativeReservation:
    """The reservation of ``committed_max + 1``, sent at the same time as the listing of
    ``_trx/`` instead of after it, so the two requests cost one round trip (docs/format.md 6.2).

    The id is the transaction's when the put-if-absent created it and the listing shows no other
    reservation above ``committed_max``: then it is above every reservation the listing saw, which
    is all :func:`reserve_trx_id` guarantees too (a reservation made after the listing was sent sees
    this one, or races it exactly as it would race the sequential pair). Otherwise :meth:`confirmed`
    gives the reservation back (if it made it) and the caller starts again, reserving with
    :func:`reserve_trx_id`. Until then the caller may already write rows carrying :attr:`trx_id`:
    they stay invisible until a commit, which waits for :meth:`confirmed`.
    """

    def __init__(
        self, store: Store, table_prefix: str, committed_max: int, body: bytes, start: StartRequest
    ) -> None:
        if committed_max + 1 > MAX_TRX_ID:
            raise LedgerError(
                f"table {table_prefix[:-1]!r} has used every trx_id up to {MAX_TRX_ID}; copy its "
                "rows into a new table"
            )
        self.trx_id = committed_max + 1
        self._store = store
        self._key = reservation_key(table_prefix, self.trx_id)
        self._claim = start(lambda: store.reserve(self._key, body))
        self._listing = start(lambda: _listed_reservations(store, table_prefix, committed_max))
        self._outcome: bool | None = None

    def confirmed(self) -> bool:
        """Whether :attr:`trx_id` is reserved for the caller, waiting for both requests.
        Raises what either request raised, after giving back a reservation it made."""
        if self._outcome is None:
            self._outcome = self._settle()
        return self._outcome

    def _settle(self) -> bool:
        claim_error = self._claim.exception()
        listing_error = self._listing.exception()
        won = claim_error is None and bool(self._claim.result())
        listed: list[int] = [] if listing_error is not None else self._listing.result()
        above = any(reserved != self.trx_id or not won for reserved in listed)
        if won and (listing_error is not None or above):
            self._store.delete(self._key)
        if claim_error is not None:
            raise claim_error
        if listing_error is not None:
            raise listing_error
        return won and not above


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
