"""The example HTTP event sink, over real HTTP on 127.0.0.1: every acknowledged event is in the
table exactly once, a malformed request gets a 4xx and writes nothing, and the timers merge and
vacuum while requests keep coming."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest

import ledger
from examples.ingest_service import RunningService, Settings, demo, open_events, post_json
from tests.conftest import Location

QUIET = Settings(max_seconds=0.1, merge_every=3600, vacuum_every=3600)


def _entries_per_event(table: ledger.Table) -> Counter[str]:
    """How many entries the raw ledger holds per event_id (a duplicate would show as 2)."""
    rows = table.refresh().scan().aggregate("event_id, sum(dml_type)", "event_id").fetchall()
    return Counter({event_id: int(count) for event_id, count in rows})


def _post_raw(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_burst_of_concurrent_requests_lands_every_acknowledged_event_once(
    location: Location,
) -> None:
    table = open_events(location.connect())
    requests, acknowledged = 48, []
    lock = threading.Lock()
    with RunningService(table, QUIET) as running:

        def send(n: int) -> None:
            # one event, or a batch of up to three, with two-decimal amounts and unicode kinds
            events = [
                {"event_id": f"e-{n}-{i}", "kind": f"clïck-{i}", "user_id": n, "amount": n + 0.01}
                for i in range(1 + n % 3)
            ]
            status, answer = post_json(f"{running.url}/events", events)
            assert status == 200, answer
            assert answer == {"accepted": len(events)}
            with lock:
                acknowledged.extend(events)
            if n % 8 == 0:  # durable when acknowledged: a new handle sees the events now
                seen = _entries_per_event(location.connect().table("events"))
                assert all(seen[e["event_id"]] == 1 for e in events)

        senders = [threading.Thread(target=send, args=(n,)) for n in range(requests)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        assert len(acknowledged) == sum(1 + n % 3 for n in range(requests))
    per_event = _entries_per_event(table)
    assert per_event == Counter({e["event_id"]: 1 for e in acknowledged})
    [(count, total)] = table.scan().aggregate("count(*), sum(amount)").fetchall()
    assert count == len(acknowledged)
    assert total == sum(Decimal(str(e["amount"])) for e in acknowledged)
    commits = [c for c in table.history() if c.operation == "insert"]
    assert sum(c.inserted for c in commits) == len(acknowledged)
    # every flush an app batch, numbered in order: a retried flush could not commit twice
    assert len({c.app_id for c in commits}) == 1
    assert commits[0].app_id.startswith("ingest-service-")
    assert [c.batch for c in commits] == list(range(len(commits)))


MALFORMED: list[tuple[bytes, int, str]] = [
    (b"{not json", 400, "did not parse as JSON"),
    (b'"a string"', 400, "JSON object"),
    (b'[{"event_id": "m-1"}, 7]', 400, "JSON object"),
    (b'{"event_id": "m-1", "colour": "red"}', 422, "unknown field"),
    (b'{"event_id": "m-1", "user_id": "seven"}', 422, "user_id"),
    (b'{"kind": "no id"}', 422, "event_id"),
    (b'{"event_id": null}', 422, "event_id"),
    (b'{"event_id": "m-1", "amount": 1.005}', 422, "amount"),
    (b'{"event_id": "m-1", "received_at": "2024-01-01"}', 422, "received_at"),
    (b'[{"event_id": "m-1"}, {"event_id": "m-2", "user_id": 1.5}]', 422, "user_id"),
]


@pytest.mark.parametrize(("body", "status", "message"), MALFORMED)
def test_a_malformed_request_gets_a_4xx_and_writes_nothing(
    local_location: Location, body: bytes, status: int, message: str
) -> None:
    table = open_events(local_location.connect())
    with RunningService(table, QUIET) as running:
        got, answer = _post_raw(f"{running.url}/events", body)
        assert got == status
        assert message.lower() in answer["error"].lower()
        # a good request right after still works, and only it is written
        assert post_json(f"{running.url}/events", {"event_id": "ok-1"}) == (200, {"accepted": 1})
        health = json.loads(urllib.request.urlopen(f"{running.url}/health").read())
        assert health["accepted"] == health["committed"] == 1
    assert _entries_per_event(table) == Counter({"ok-1": 1})


def test_the_timers_merge_and_vacuum_while_events_arrive(local_location: Location) -> None:
    table = open_events(local_location.connect())
    settings = Settings(max_seconds=0.05, merge_every=0.3, vacuum_every=0.5, vacuum_grace=0.2)
    sent: list[str] = []
    with RunningService(table, settings) as running:
        deadline = time.monotonic() + 30
        health: dict[str, Any] = {}
        while time.monotonic() < deadline:
            event_id = f"t-{len(sent)}"
            assert (
                post_json(f"{running.url}/events", {"event_id": event_id, "amount": 1.5})[0] == 200
            )
            sent.append(event_id)
            health = json.loads(urllib.request.urlopen(f"{running.url}/health").read())
            if health["merges"] >= 2 and health["vacuums"] >= 2 and len(sent) >= 10:
                break
            time.sleep(0.05)
        assert health["merges"] >= 2 and health["vacuums"] >= 2
    merges = [c for c in table.history() if c.operation == "merge"]
    assert merges and any(c.files_removed > 1 for c in merges)
    assert _entries_per_event(table) == Counter({e: 1 for e in sent})
    assert table.count() == len(sent)


def test_the_demo_answers_and_totals(tmp_path: Any) -> None:
    result = demo(str(tmp_path / "wh"))
    assert [status for status, _ in result["answers"]] == [200, 200, 422]
    assert result["totals"] == [("purchase", 2, Decimal("25.24")), ("signup", 1, None)]


def test_an_event_sent_twice_is_read_once_and_merged_away(local_location: Location) -> None:
    """A client that retries after a 503 may send an event again: the dedup policy on event_id
    makes the copy a repeat that views drop and a merge removes."""
    import views

    table = open_events(local_location.connect())
    event = {"event_id": "r-1", "kind": "buy", "amount": 2.5}
    with RunningService(table, QUIET) as running:
        assert post_json(f"{running.url}/events", event) == (200, {"accepted": 1})
        assert post_json(f"{running.url}/events", event) == (200, {"accepted": 1})
    assert _entries_per_event(table) == Counter({"r-1": 2})  # both loads are in the ledger
    assert views.visible(table).project("event_id, amount").fetchall() == [("r-1", Decimal("2.50"))]
    table.merge()
    assert _entries_per_event(table) == Counter({"r-1": 1})
    assert views.visible(table).project("event_id, amount").fetchall() == [("r-1", Decimal("2.50"))]


def _post_with_type(url: str, body: bytes, content_type: str | None) -> tuple[int, str]:
    """POST ``body`` with the Content-Type given, or none at all (urllib would add a form's)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    headers = {} if content_type is None else {"Content-Type": content_type}
    connection.request("POST", parts.path, body, headers)
    answer = connection.getresponse()
    try:
        return answer.status, answer.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize("content_type", [None, "application/json", "application/cloudevents+json"])
def test_a_json_body_without_a_content_type_or_with_a_json_one_is_taken(
    local_location: Location, content_type: str | None
) -> None:
    table = open_events(local_location.connect())
    with RunningService(table, QUIET) as running:
        body = json.dumps({"event_id": "j-1", "kind": "click", "user_id": 7}).encode()
        status, _ = _post_with_type(f"{running.url}/events", body, content_type)
    assert status == 200
    assert _entries_per_event(table) == Counter({"j-1": 1})


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        # What `curl -d '{...}'` sends: a form's type, JSON text.
        ("application/x-www-form-urlencoded", b'{"event_id": "f-1", "kind": "click"}'),
        ("application/x-www-form-urlencoded", b"event_id=f-1&kind=click"),
        ("multipart/form-data; boundary=x", b"--x\r\n\r\nf-1\r\n--x--\r\n"),
        ("text/csv", b"event_id,kind\nf-1,click\n"),
    ],
)
def test_a_body_sent_as_another_type_than_json_gets_415_and_writes_nothing(
    local_location: Location, content_type: str, body: bytes
) -> None:
    table = open_events(local_location.connect())
    with RunningService(table, QUIET) as running:
        status, answer = _post_with_type(f"{running.url}/events", body, content_type)
    assert status == 415
    error = json.loads(answer)["error"]
    assert content_type.split(";")[0] in error and "Content-Type: application/json" in error
    assert table.refresh().version == 0


def test_a_batch_giving_two_events_one_event_id_gets_422_naming_it(
    local_location: Location,
) -> None:
    table = open_events(local_location.connect())
    batch = [
        {"event_id": "d-1", "kind": "click", "user_id": 1},
        {"event_id": "d-2", "kind": "click", "user_id": 2},
        {"event_id": "d-1", "kind": "buy", "user_id": 3},
    ]
    with RunningService(table, QUIET) as running:
        status, answer = post_json(f"{running.url}/events", batch)
        assert status == 422
        assert answer["error"].startswith(
            'events 1 and 3 of 3 in the JSON array (counted from 1) both have the event_id "d-1"'
        )
        assert post_json(f"{running.url}/events", batch[:2]) == (200, {"accepted": 2})
    assert _entries_per_event(table) == Counter({"d-1": 1, "d-2": 1})


def test_a_number_in_a_text_field_is_stored_as_written(local_location: Location) -> None:
    """The service reads JSON numbers as Decimals: one in a text field is stored as its text,
    as an integer there is (`1.50` stays `"1.50"`)."""
    import views

    table = open_events(local_location.connect())
    with RunningService(table, QUIET) as running:
        for event_id, kind in (("n-1", b"1.50"), ("n-2", b"12")):
            body = b'{"event_id": "%s", "kind": %s}' % (event_id.encode(), kind)
            assert _post_raw(f"{running.url}/events", body) == (200, {"accepted": 1})
    kinds = views.visible(table).project("event_id, kind").order("event_id").fetchall()
    assert kinds == [("n-1", "1.50"), ("n-2", "12")]
