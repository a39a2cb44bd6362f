"""The example HTTP event sink tells a client exactly what is wrong with its body, over real
HTTP on 127.0.0.1: a body that is not JSON (and where it stops parsing), which event of a batch
is refused, an event_id that is not a string; nothing of a refused request is written."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from examples.ingest_service import RunningService, Settings, open_events, post_json
from tests.conftest import Location

QUIET = Settings(max_seconds=0.1, merge_every=3600, vacuum_every=3600)


def _post_raw(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def table(local_location: Location) -> Any:
    return open_events(local_location.connect())


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"{bad json", "line 1 column 2 (char 1)"),
        (b'{"event_id": "e-1",}', "line 1 column 20 (char 19)"),
        (b'[{"event_id": "e-1"}\n{"event_id": "e-2"}]', "line 2 column 1"),
        (b"", "char 0"),
    ],
)
def test_a_body_that_is_not_json_is_told_apart_from_json_of_the_wrong_shape(
    table, body: bytes, where: str
) -> None:
    with RunningService(table, QUIET) as running:
        status, answer = _post_raw(f"{running.url}/events", body)
        shape_status, shape_answer = _post_raw(f"{running.url}/events", b'"just a string"')
    assert status == 400
    assert "did not parse as JSON" in answer["error"] and where in answer["error"]
    assert "send a JSON object" not in answer["error"]
    assert shape_status == 400 and "send a JSON object" in shape_answer["error"]
    assert table.refresh().count() == 0


@pytest.mark.parametrize(
    ("batch", "says"),
    [
        ([{"event_id": "e-1"}, {"event_id": "e-2", "user_id": "x"}], "the field 'user_id'"),
        ([{"event_id": "e-1"}, {"user_id": 7}], "needs the field 'event_id'"),
        ([{"event_id": "e-1"}, {"event_id": "e-2", "colour": "red"}], "['colour']"),
        ([{"event_id": "e-1"}, {"event_id": "e-2", "amount": "abc"}], "the field 'amount'"),
    ],
)
def test_a_refused_batch_names_the_event_at_fault(table, batch: list[Any], says: str) -> None:
    batch = [*batch, {"event_id": "e-9", "kind": "fine"}]
    with RunningService(table, QUIET) as running:
        status, answer = post_json(f"{running.url}/events", batch)
    assert status == 422
    assert answer["error"].startswith("event 2 of 3 in the JSON array (counted from 1): ")
    assert says in answer["error"]
    assert table.refresh().count() == 0


def test_a_single_event_is_refused_without_a_position(table) -> None:
    with RunningService(table, QUIET) as running:
        status, answer = post_json(f"{running.url}/events", {"event_id": "e-1", "user_id": "x"})
    assert status == 422 and "the field 'user_id'" in answer["error"]
    assert "event 1 of" not in answer["error"]


@pytest.mark.parametrize("event_id", [42, 4.5, True, ["e-1"], {"id": "e-1"}])
def test_an_event_id_that_is_not_a_string_is_refused(table, event_id: Any) -> None:
    with RunningService(table, QUIET) as running:
        status, answer = post_json(f"{running.url}/events", {"event_id": event_id})
        batch_status, batch_answer = post_json(
            f"{running.url}/events", [{"event_id": "e-1"}, {"event_id": event_id}]
        )
        fine = post_json(f"{running.url}/events", {"event_id": "42"})
    assert status == 422 and batch_status == 422
    assert f"'event_id' holds {json.dumps(event_id)}, not a string" in answer["error"]
    assert batch_answer["error"].startswith("event 2 of 2 in the JSON array (counted from 1): ")
    assert fine == (200, {"accepted": 1})
    assert table.refresh().scan().aggregate("event_id", "event_id").fetchall() == [("42",)]


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("1234567890123456.78", "1234567890123456.78"),  # a float would make it ...456.80
        ("9999999999999999.99", "9999999999999999.99"),  # a float would make it 1e16: refused
        ("0.1", "0.10"),
        ("1e3", "1000.00"),
        ("-7", "-7.00"),
    ],
)
def test_an_amount_is_stored_with_the_digits_the_client_sent(table, text: str, stored: str) -> None:
    body = f'{{"event_id": "e-1", "amount": {text}, "user_id": 2.0}}'.encode()
    with RunningService(table, QUIET) as running:
        assert _post_raw(f"{running.url}/events", body) == (200, {"accepted": 1})
    [(amount, user_id)] = table.refresh().scan().select("amount, user_id").fetchall()
    assert (str(amount), user_id) == (stored, 2)


@pytest.mark.parametrize("text", ["1.234", "1e400", "12345678901234567.5"])
def test_an_amount_that_would_be_rounded_is_refused(table, text: str) -> None:
    body = f'{{"event_id": "e-1", "amount": {text}}}'.encode()
    with RunningService(table, QUIET) as running:
        status, answer = _post_raw(f"{running.url}/events", body)
    assert status == 422 and "'amount'" in answer["error"], answer
    assert table.refresh().version == 0
