"""An HTTP event sink: JSON events in, one ledger table out, merges and vacuum on timers.

    POST /events   one event (a JSON object) or a batch (a JSON array of objects)
    GET  /health   rows accepted and committed, the table's version and data files

Every request goes through one buffered writer (``table.writer()``), so a thousand requests a
second become a few commits, not a thousand tiny Parquet files. A request is answered only once
the commit holding its events landed: ``200`` means the events are durable and will be read
exactly once. Requests that arrive while a commit is under way wait for the next one together
(a group commit), so the answer takes about one commit's time, however many clients send.

A malformed request (not JSON, ``NaN`` or ``Infinity`` among its numbers, not an object or a
list of objects, an unknown field, a value that does not fit its column: a number out of its
range or with more digits than it keeps, text with a lone surrogate escape; a missing
``event_id``, one that is not a string or an empty one,
two events of a batch with one ``event_id``) gets ``400`` or ``422``, a body sent with a
Content-Type other than JSON (a form) ``415``, and nothing of it is written; other requests in
flight are not affected. The answer says where a body stopped parsing, and which event of a
batch (counted from 1) and which of its fields was refused.
Every answer is JSON, errors included: an unknown path gets ``404``, a method a route does not
take ``405`` (with an ``Allow`` header), a failure of the service itself ``500``, each as
``{"error": "..."}``.

If the store fails, the answer is ``503``: the events stay buffered and are committed by a later
flush, so a client that retries may send them twice; the table's dedup policy on ``event_id``
makes the second copy a repeat, which views drop and merges remove.

A background timer merges small files every ``merge_every`` seconds and another vacuums every
``vacuum_every`` seconds, keeping files older versions need for ``vacuum_grace`` seconds.

Run it::

    .venv/bin/python examples/ingest_service.py --serve --warehouse ./warehouse --port 8080
    curl localhost:8080/events --json '{"event_id": "e-1", "kind": "click", "user_id": 7}'

Without ``--serve`` it runs a short demonstration on a free port of 127.0.0.1 and stops.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import decimal
import json
import logging
import re
import tempfile
import threading
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, request
from werkzeug.exceptions import HTTPException
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Response

import ledger

log = logging.getLogger("ingest_service")

EVENTS_SCHEMA = {
    "event_id": "VARCHAR",
    "kind": "VARCHAR",
    "user_id": "BIGINT",
    "amount": "DECIMAL(18,2)",
    "received_at": "TIMESTAMPTZ",
}
STAMPED = "received_at"  # set by the service when the request arrives


@dataclass(frozen=True)
class Settings:
    """How the service buffers and maintains the table (seconds unless named otherwise)."""

    max_rows: int = 50_000
    max_seconds: float = 1.0
    # Flushes commit as app batches, so a retried flush never commits its events twice. One
    # running service per app_id: each process gets its own unless one is given.
    app_id: str = field(default_factory=lambda: f"ingest-service-{uuid.uuid4().hex[:12]}")
    ack_timeout: float = 30.0
    merge_every: float = 60.0
    vacuum_every: float = 600.0
    vacuum_grace: float = 3600.0


def open_events(warehouse: ledger.Warehouse, name: str = "events") -> ledger.Table:
    """The events table, created on first use: keyed by event_id, partitioned by day, and
    deduplicated on event_id (an event sent twice is a repeat)."""
    if name in warehouse.tables():
        return warehouse.table(name)
    return warehouse.create_table(
        name,
        EVENTS_SCHEMA,
        primary_key="event_id",
        partition_by="day(received_at)",
        policy={"name": "dedup", "dedup_key": ["event_id"]},
    )


class IngestService:
    """The writer and the maintenance timers behind the HTTP routes."""

    def __init__(self, table: ledger.Table, settings: Settings | None = None) -> None:
        self.table = table
        self.settings = settings or Settings()
        self.writer = table.writer(
            max_rows=self.settings.max_rows,
            max_seconds=self.settings.max_seconds,
            app_id=self.settings.app_id,
        )
        self._stop = threading.Event()
        self._timers = [
            threading.Thread(target=self._every, args=(self.settings.merge_every, self.merge)),
            threading.Thread(target=self._every, args=(self.settings.vacuum_every, self.vacuum)),
        ]
        self.merges = 0
        self.vacuums = 0

    def start(self) -> None:
        for timer in self._timers:
            timer.start()

    def stop(self) -> None:
        """Stop the timers, then commit whatever is still buffered."""
        self._stop.set()
        for timer in self._timers:
            if timer.is_alive():
                timer.join()
        self.writer.close()

    def accept(self, events: list[dict[str, Any]]) -> int:
        """Write the events and wait until they are committed; return how many. Events that do
        not fit the table raise :class:`RefusedEvents`, in the terms of the JSON body."""
        received_at = dt.datetime.now(dt.UTC)
        check_fields(events, self.table.schema)
        refuse_repeated_ids(events)
        stamped = [{**event, STAMPED: received_at} for event in events]
        try:
            position = self.writer.write(stamped)
            self.writer.wait(position, timeout=self.settings.ack_timeout)
        except ledger.FlushError:
            raise  # a store failure: the events stay buffered (503)
        except ledger.LedgerError as e:  # checked before anything is buffered: nothing written
            unfit = self._first_unfit(stamped) if len(events) > 1 else None
            if unfit is None:
                raise RefusedEvents(in_request_terms(e)) from e
            # The event's own refusal: the batch's counts rows its own way.
            index, error = unfit
            refused = f"{event_position(index, len(events))}: {in_request_terms(error)}"
            raise RefusedEvents(refused) from e
        return len(events)

    def _first_unfit(self, events: list[dict[str, Any]]) -> tuple[int, ledger.LedgerError] | None:
        """The index of the first event the table refuses on its own, and its refusal (a
        refusal of a batch does not say which event): each is converted alone, as the writer
        would, and nothing is buffered. None when each fits alone."""
        for index, event in enumerate(events):
            try:
                self.table.check([event])
            except ledger.LedgerError as e:
                return index, e
        return None

    def merge(self) -> None:
        result = self.table.merge()
        self.merges += 1
        log.info("merge: %s", result)

    def vacuum(self) -> None:
        result = self.table.vacuum(self.settings.vacuum_grace)
        self.vacuums += 1
        log.info("vacuum: %s", result)

    def _every(self, seconds: float, task: Callable[[], None]) -> None:
        while not self._stop.wait(seconds):
            try:
                task()
            except ledger.LedgerError as e:  # a conflict or a store hiccup: try next time
                log.warning("%s failed: %s", task.__name__, e)


class RefusedEvents(ValueError):
    """Events of a request that do not fit the table, said in terms of the JSON body."""


def event_position(index: int, events: int) -> str:
    """Which event of a batch, counted from 1 as a reader counts: "event 2 of 2"."""
    return f"event {index + 1} of {events} in the JSON array (counted from 1)"


def check_fields(events: list[dict[str, Any]], schema: Mapping[str, str]) -> None:
    """Refuse fields the events table does not have, the field the service sets, an event_id
    that is not a string, and values no conversion takes (see :func:`check_values`), before
    anything is buffered. In a batch, the refusal names the first event at fault."""
    accepted = [c for c in schema if c != STAMPED]
    for index, event in enumerate(events):
        try:
            check_event(event, accepted)
            check_values(event, schema)
        except RefusedEvents as e:
            if len(events) > 1:
                raise RefusedEvents(f"{event_position(index, len(events))}: {e}") from None
            raise


MISSING_ID = "every event needs the field 'event_id', holding a string (not null)"


def check_event(event: dict[str, Any], accepted: list[str]) -> None:
    """Refuse one event's fields that the table does not take as they are."""
    if STAMPED in event:
        raise RefusedEvents(f"the field {STAMPED!r} is set by the service; leave it out")
    unknown = sorted(name for name in event if name not in accepted)
    if unknown:
        spelled = {name.lower(): name for name in accepted}
        hints = [f"{n!r} -> {spelled[n.lower()]!r}" for n in unknown if n.lower() in spelled]
        hint = f" (names match exactly: {', '.join(hints)})" if hints else ""
        raise RefusedEvents(
            f"unknown field(s) {unknown} in the JSON body{hint}; an event has the fields "
            f"{accepted} (only event_id is required)"
        )
    # An id is compared as text: 42 and "42" would be two spellings of one id, so only a
    # string is taken, as the message for a missing id promises.
    event_id = event.get("event_id")
    if event_id is None:
        raise RefusedEvents(MISSING_ID)
    if isinstance(event_id, str) and not event_id.strip():
        raise RefusedEvents(
            f"the field 'event_id' is empty ({json.dumps(event_id)}); an event_id names one "
            'event: send a non-empty string, as in "event_id": "e-1"'
        )
    if not isinstance(event_id, str):
        # A number with a fraction was read as a decimal: shown as the client wrote it.
        shown = str(event_id) if isinstance(event_id, decimal.Decimal) else json.dumps(event_id)
        raise RefusedEvents(
            f"the field 'event_id' holds {shown}, not a string; an event_id is a JSON string: "
            'send it quoted, as in "event_id": "e-1"'
        )


_INTEGER_BITS = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64}
_DECIMAL_TYPE = re.compile(r"^DECIMAL\((?P<precision>\d+),\s*(?P<scale>\d+)\)$")


def check_values(event: dict[str, Any], schema: Mapping[str, str]) -> None:
    """Refuse values that JSON carries and no conversion takes, said in the terms of the body:
    text holding a lone surrogate escape (JSON allows ``"\ud800"``, but it is half of a
    character), and numbers out of their field's range or with more digits than it keeps,
    judged on the number as sent whatever its exponent (``1e400`` is a number to JSON)."""
    for name, value in event.items():
        sql = schema.get(name, "")
        why = _unfit_text(value) if isinstance(value, str) else _unfit_number(value, sql)
        if why is not None:
            raise RefusedEvents(
                f"the field {name!r} of an event in the JSON body does not fit its type {sql}: "
                f"{why}"
            )


def _unfit_text(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (
            f"it holds {json.dumps(text[e.start])}, a lone surrogate, which is half of a "
            "character: send text of whole characters (a surrogate escape pairs with the next "
            'one, as in "\\ud83d\\ude00")'
        )
    return None


def _unfit_number(value: Any, sql: str) -> str | None:
    """Why a JSON number does not fit a field of type ``sql``, or None (other values, and
    numbers that fit, are left to the table). Compares decimals without expanding them: a
    number of a million digits costs no more than one of ten."""
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        return None
    number = decimal.Decimal(value)
    bits = _INTEGER_BITS.get(sql)
    if bits is not None:
        if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
            return f"value {value} is out of its range"
        if number != number.to_integral_value():
            return f"{value} is not a whole number"
        return None
    decimal_type = _DECIMAL_TYPE.match(sql)
    if decimal_type is None or number.is_zero():
        return None
    precision, scale = int(decimal_type["precision"]), int(decimal_type["scale"])
    if number.adjusted() + 1 > precision - scale:
        return f"value {value} does not fit: it has more than {precision - scale} whole digit(s)"
    _, digits, exponent = number.as_tuple()
    trailing_zeros = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    if -(int(exponent) + trailing_zeros) > scale:
        return f"value {value} has more than {scale} decimal place(s)"
    return None


# A refused value's column and type, as the table's errors begin: "column 'user_id' (BIGINT): ",
# or with the row of the data: "column 'amount' (DECIMAL(18,2)), row 0 (counted from 0): ". The
# row is left out: the service refuses one event at a time and names it its own way.
_REFUSED_VALUE = re.compile(
    r"^column '(?P<field>[^']*)' \((?P<type>[^)]*\)?)\)(?:, row \d+ \(counted from 0\))?: "
    r"(?P<why>.*)$",
    re.DOTALL,
)


# A value of another kind than the column takes, as the table refuses it: "column 'kind' is
# VARCHAR but the data holds struct<a: int64>; ..." (or "... holds dict {...}" when other
# events give the field a plain value), "column 'user_id' is BIGINT but the data holds bool; ...".
_OTHER_KIND = re.compile(
    r"^column '(?P<field>[^']*)' is (?P<type>.+?) but the data holds (?P<held>.*)$", re.DOTALL
)
_LIST_ROW = re.compile(r"^row \d+ of the list \(counting from 0\): ")
_NESTED = ("struct<", "list<", "large_list<", "dict ", "list ", "map<")
_NUMERIC = re.compile(r"^(?:TINYINT|SMALLINT|INTEGER|BIGINT|FLOAT|DOUBLE|DECIMAL\(.*\))$")
_INTEGER = re.compile(r"^(?:TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT)$")
# A JSON number with a fraction is read as a Decimal; the client wrote it as a plain number.
_DECIMAL_TEXT = re.compile(r"Decimal\('(?P<digits>[^']*)'\)")
_FRACTION_LOST = re.compile(
    r"^value (?P<value>\S+) does not fit \(Rescaling Decimal value would cause data loss\)$"
)


def _takes(sql: str) -> str:
    """What a field of the SQL type takes, said in JSON's terms."""
    if sql == "VARCHAR":
        return "text"
    if sql == "BOOLEAN":
        return "true or false"
    return "a number" if _NUMERIC.match(sql) else "a value of that type"


def _held(held: str) -> str:
    """The kind of JSON value the table found where another kind was due."""
    if held.startswith(("bool", "boolean")):
        return "a JSON boolean (true or false)"
    if held.startswith(("string", "large_string", "str")):
        return "text"
    if held.startswith(("int", "uint", "double", "float", "decimal")):
        return "a number"
    return "a value of another kind"


def in_request_terms(error: ledger.LedgerError) -> str:
    """The table's refusal of some events, told to an HTTP client: which field of the JSON body
    is wrong, not which Python argument or conversion would fix it."""
    if isinstance(error, ledger.MissingKeyError):
        return MISSING_ID
    # The row of a refused list of events: the service names the event itself, counted from 1.
    message = _LIST_ROW.sub("", str(error), count=1)
    other = _OTHER_KIND.match(message)
    if isinstance(error, ledger.TypeMismatchError) and other is not None:
        field, sql, held = other["field"], other["type"], other["held"]
        if held.startswith(_NESTED):
            kind = "object" if held.startswith(("struct", "dict", "map")) else "array"
            return (
                f"the field {field!r} of an event in the JSON body holds a JSON {kind}, and a "
                f"{sql} field takes {_takes(sql)}, not an {kind}"
            )
        return (
            f"the field {field!r} of an event in the JSON body does not fit its type {sql}: it "
            f"holds {_held(held)}, and a {sql} field takes {_takes(sql)}"
        )
    refused = _REFUSED_VALUE.match(message)
    if isinstance(error, ledger.TypeMismatchError) and refused is not None:
        why = refused["why"].split("; ")[0]  # the advice after it is for Python callers
        why = _DECIMAL_TEXT.sub(r"\g<digits>", why)
        lost = _FRACTION_LOST.match(why)
        if lost is not None and _INTEGER.match(refused["type"]):
            why = f"{lost['value']} is not a whole number"
        why = re.sub(r"^value '([^']*)'", r"value \1", why)  # a number, shown as sent
        return (
            f"the field {refused['field']!r} of an event in the JSON body does not fit its "
            f"type {refused['type']}: {why}"
        )
    return f"the events in the JSON body do not fit the events table: {error}"


ROUTES = "this service answers POST /events and GET /health"


def refuse_constant(name: str) -> Any:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON (a JSON number is
    finite), as the parser refuses any other word it does not know."""
    raise ValueError(
        f"{name} is not JSON: a JSON number is finite (send null, or leave the field out)"
    )


def refused_content_type(mimetype: str) -> str | None:
    """Why a body of this media type is not taken, or None: the service takes JSON only, sent
    as ``application/json`` (or a ``+json`` type), or without a Content-Type."""
    if not mimetype or mimetype == "application/json" or mimetype.endswith("+json"):
        return None
    return (
        f"the body is sent as {mimetype}, and this service takes JSON only: send it with "
        "Content-Type: application/json (curl -d sends application/x-www-form-urlencoded; use "
        "curl --json, or add -H 'Content-Type: application/json')"
    )


def refuse_repeated_ids(events: list[dict[str, Any]]) -> None:
    """Refuse a batch that gives one event_id to two events: an event_id names one event, so
    the second would be taken for a repeat of the first and dropped by the dedup policy, while
    the client was told both were accepted."""
    first_of: dict[Any, int] = {}
    for index, event in enumerate(events):
        event_id = event.get("event_id")
        if not isinstance(event_id, str):
            continue  # refused by check_event, with its own message
        if event_id in first_of:
            raise RefusedEvents(
                f"events {first_of[event_id] + 1} and {index + 1} of {len(events)} in the JSON "
                f"array (counted from 1) both have the event_id {json.dumps(event_id)}; an "
                "event_id names one event: give each event its own, or send the event once"
            )
        first_of[event_id] = index


def create_app(service: IngestService) -> Flask:
    """The Flask application: POST /events and GET /health."""
    app = Flask(__name__)

    @app.post("/events")
    def post_events() -> tuple[dict[str, Any], int]:
        refused_type = refused_content_type(request.mimetype)
        if refused_type is not None:
            return {"error": refused_type}, 415
        try:  # the parser's message says where it failed
            # Numbers with a fraction or exponent read as decimals, so an amount is stored with
            # the digits the client sent (a float would round 1234567890123456.78).
            # NaN and Infinity, which Python's parser takes by default, are not JSON.
            body = json.loads(
                request.get_data(), parse_float=decimal.Decimal, parse_constant=refuse_constant
            )
        except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8/16/32 text
            return {"error": f"the body did not parse as JSON: {e}"}, 400
        events = [body] if isinstance(body, dict) else body
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            return {"error": "send a JSON object (one event) or an array of objects"}, 400
        try:
            accepted = service.accept(events)
        except (ledger.FlushError, TimeoutError) as e:
            return {"error": f"not committed yet, retry later: {e}"}, 503
        except RefusedEvents as e:  # the events do not fit the table: nothing written
            return {"error": str(e)}, 422
        return {"accepted": accepted}, 200

    @app.get("/health")
    def health() -> dict[str, Any]:
        table = service.table.refresh()
        return {
            "accepted": service.writer.accepted_rows,
            "committed": service.writer.committed_rows,
            "version": table.version,
            "files": len(table.files()),
            "merges": service.merges,
            "vacuums": service.vacuums,
        }

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        # Every answer is JSON, errors of routing too: an unknown path (404), a method a route
        # does not take (405, whose Allow header says which it does).
        answer = error.get_response()
        answer.data = json.dumps({"error": f"{error.code} {error.name}: {ROUTES}"})
        answer.content_type = "application/json"
        return answer

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[dict[str, Any], int]:
        log.exception("request failed")
        return {"error": f"internal error ({type(error).__name__}); see the service log"}, 500

    return app


class RunningService:
    """The service on a real HTTP server in a background thread (port 0: a free port)."""

    def __init__(
        self, table: ledger.Table, settings: Settings | None = None, port: int = 0
    ) -> None:
        self.service = IngestService(table, settings)
        self.server: BaseWSGIServer = make_server(
            "127.0.0.1", port, create_app(self.service), threaded=True
        )
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RunningService:
        self.service.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()  # answers every request in flight first
        self._thread.join()
        self.service.stop()


def post_json(url: str, payload: Any) -> tuple[int, dict[str, Any]]:
    """POST ``payload`` as JSON; return the status and the decoded answer."""
    data = json.dumps(payload).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def demo(warehouse_uri: str) -> dict[str, Any]:
    """Start the service, send events (and one bad request), and return what the table holds."""
    table = open_events(ledger.connect(warehouse_uri))
    settings = Settings(max_seconds=0.2, merge_every=0.5, vacuum_every=1.0, vacuum_grace=0.5)
    with RunningService(table, settings) as running:
        answers = [
            post_json(f"{running.url}/events", {"event_id": "e-1", "kind": "signup", "user_id": 1}),
            post_json(
                f"{running.url}/events",
                [
                    {"event_id": "e-2", "kind": "purchase", "user_id": 1, "amount": 19.99},
                    {"event_id": "e-3", "kind": "purchase", "user_id": 2, "amount": 5.25},
                ],
            ),
            post_json(f"{running.url}/events", {"event_id": "e-4", "user_id": "not a number"}),
        ]
    totals = table.refresh().scan().aggregate("kind, count(*), sum(amount)", "kind").fetchall()
    return {"answers": answers, "totals": sorted(totals, key=lambda r: str(r[0]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="serve until interrupted")
    parser.add_argument("--warehouse", default=None, help="local path or s3:// URI")
    parser.add_argument("--table", default="events")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--app-id", default=None, help="one per running service (default: new)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    if not args.serve:
        result = demo(args.warehouse or tempfile.mkdtemp())
        for status, answer in result["answers"]:
            print(status, answer)
        print(result["totals"])
        return
    table = open_events(ledger.connect(args.warehouse or "./warehouse"), args.table)
    settings = Settings() if args.app_id is None else Settings(app_id=args.app_id)
    with RunningService(table, settings, port=args.port) as running:
        print(f"listening on {running.url}; Ctrl-C to stop")
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
