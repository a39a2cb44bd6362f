"""The example HTTP event sink refuses events that do not fit its table (422) in the terms of
the request: the fields of the JSON body the client sent, never the Python API's arguments or
conversions; nothing of the request is written."""

from __future__ import annotations

from typing import Any

import pytest

from examples.ingest_service import RunningService, Settings, open_events, post_json
from tests.conftest import Location

QUIET = Settings(max_seconds=0.1, merge_every=3600, vacuum_every=3600)
# Words of the Python API a client of the service cannot act on.
PYTHON_ADVICE = (
    "evolve_schema",
    "=True",
    "append_entries",
    "_row_id",
    "convert the column",
    "struct<",
    "list<",
    "the data holds",
)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"event_id": "e-1", "colour": "red"}, "unknown field(s) ['colour'] in the JSON body"),
        ({"event_id": "e-1", "Kind": "click"}, "'Kind' -> 'kind'"),
        ({"event_id": "e-1", "trx_id": 7}, "unknown field(s) ['trx_id']"),
        ({"event_id": "e-1", "user_id": "seven"}, "the field 'user_id' of an event in the JSON"),
        ({"event_id": "e-1", "amount": "abc"}, "the field 'amount' of an event in the JSON"),
        ([{"event_id": "e-1"}, {"event_id": "e-2", "user_id": 1.5}], "the field 'user_id'"),
        ({"kind": "no id"}, "every event needs the field 'event_id'"),
        ({"event_id": None}, "every event needs the field 'event_id'"),
        ({"event_id": "e-1", "received_at": "2024-01-01"}, "'received_at' is set by the service"),
        (
            {"event_id": "nested", "kind": {"a": 1}},
            "the field 'kind' of an event in the JSON body holds a JSON object, and a VARCHAR "
            "field takes text, not an object",
        ),
        (
            {"event_id": "listed", "kind": ["a", "b"]},
            "the field 'kind' of an event in the JSON body holds a JSON array, and a VARCHAR "
            "field takes text, not an array",
        ),
        (
            [{"event_id": "e-1"}, {"event_id": "e-2", "user_id": {"n": 1}}],
            "event 2 of 2 in the JSON array (counted from 1): the field 'user_id' of an event in "
            "the JSON body holds a JSON object, and a BIGINT field takes a number",
        ),
    ],
)
def test_a_refusal_speaks_of_the_json_body(local_location: Location, body: Any, says: str):
    table = open_events(local_location.connect())
    with RunningService(table, QUIET) as running:
        status, answer = post_json(f"{running.url}/events", body)
    assert status == 422
    assert says in answer["error"]
    assert not [words for words in PYTHON_ADVICE if words in answer["error"]]
    assert table.refresh().count() == 0
