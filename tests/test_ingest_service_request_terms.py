"""The example HTTP event sink refuses events that do not fit its table (422) in the terms of
the request: the fields of the JSON body the client sent, never the Python API's arguments or
conversions; nothing of the request is written."""

from __future__ import annotations

from typing import Any

import pytest

import ledger
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


@pytest.fixture(scope="module")
def one_service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    table = open_events(ledger.connect(str(tmp_path_factory.mktemp("events"))))
    with RunningService(table, QUIET) as running:
        yield running


@pytest.mark.parametrize(
    ("body", "event", "field", "says"),
    [
        (
            [
                {"event_id": "b-1", "amount": 1},
                {"event_id": "b-2", "amount": 1.005},
                {"event_id": "b-3"},
            ],
            "event 2 of 3",
            "amount",
            "does not fit its type DECIMAL(18,2): value 1.005 has more than 2 decimal place(s)",
        ),
        ({"event_id": "b-6", "amount": 1.005}, None, "amount", "DECIMAL(18,2): value 1.005 "),
        ({"event_id": "b-5", "user_id": False}, None, "user_id", "BIGINT: it holds a JSON boolean"),
        (
            [{"event_id": "b-4"}, {"event_id": "b-5", "user_id": True}],
            "event 2 of 2",
            "user_id",
            "does not fit its type BIGINT: it holds a JSON boolean",
        ),
        ({"event_id": "e-8", "user_id": 1.5}, None, "user_id", "BIGINT: 1.5 is not a whole number"),
        ({"event_id": "", "kind": None}, None, "event_id", "is empty"),
        ([{"event_id": "x"}, {"event_id": " "}], "event 2 of 2", "event_id", "is empty"),
        (
            [{"event_id": "y"}, {"event_id": "z", "kind": {"a": 1}}],
            "event 2 of 2",
            "kind",
            "holds a JSON object, and a VARCHAR field takes text",
        ),
    ],
)
def test_every_refusal_names_the_event_and_the_field_once(
    one_service: Any, body: Any, event: str | None, field: str, says: str
) -> None:
    status, answer = post_json(f"{one_service.url}/events", body)
    error = answer["error"]
    assert status == 422, answer
    assert error.count(f"'{field}'") == 1 and f"the field '{field}'" in error, error
    assert says in error, error
    if event is None:
        assert "event " not in error.split("the field")[0], error
    else:
        assert error.startswith(f"{event} in the JSON array (counted from 1): the field ")
    assert not [
        w for w in (*PYTHON_ADVICE, "row ", "counted from 0", "counting from 0") if w in error
    ]
    assert not [w for w in ("column '", "Decimal(", "Rescaling", "before writing") if w in error]
    assert one_service.service.table.refresh().count() == 0
