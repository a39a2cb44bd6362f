"""The example HTTP event sink refuses events that do not fit its table (422) in the terms of
the request: the fields of the JSON body the client sent, never the Python API's arguments or
conversions; nothing of the request is written."""

from __future__ import annotations

import decimal
import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ledger
from examples.ingest_service import RunningService, Settings, open_events, post_json
from tests.conftest import Location, examples

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


# What a refusal of a value says: the field, its type as the table names it, then why.
DOCUMENTED = re.compile(
    r"^(?:event \d+ of \d+ in the JSON array \(counted from 1\): )?the field '(?P<field>\w+)' "
    r"of an event in the JSON body does not fit its type (?P<type>VARCHAR|BIGINT|"
    r"DECIMAL\(18,2\)): "
)
# Words of the engine beneath the table, which a client of the service cannot act on.
ENGINE_WORDS = (
    "int64",
    "decimal128",
    "type string",
    "codec",
    "truncated",
    "out of bounds",
    "one type",
    "precision out of range",
    "any DECIMAL",
    "Float value",
)


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (b'{"event_id":"b","user_id":1e400}', "user_id", "1E+400 is out of its range"),
        (b'{"event_id":"b","user_id":-1e400}', "user_id", "-1E+400 is out of its range"),
        (b'{"event_id":"b","user_id":1e19}', "user_id", "1E+19 is out of its range"),
        (b'{"event_id":"b","user_id":-9.3e18}', "user_id", "-9.3E+18 is out of its range"),
        (b'{"event_id":"b","user_id":1e-400}', "user_id", "1E-400 is not a whole number"),
        (b'{"event_id":"b","user_id":2.5e0}', "user_id", "2.5 is not a whole number"),
        (b'{"event_id":"b","user_id":99999999999999999999}', "user_id", "is out of its range"),
        (b'{"event_id":"c","amount":1e400}', "amount", "more than 16 whole digit(s)"),
        (b'{"event_id":"c","amount":-1e17}', "amount", "more than 16 whole digit(s)"),
        (b'{"event_id":"c","amount":1e-400}', "amount", "1E-400 has more than 2 decimal place"),
        (b'{"event_id":"c","amount":0.001}', "amount", "0.001 has more than 2 decimal place"),
        (b'{"event_id":"\\ud800"}', "event_id", "a lone surrogate"),
        (b'{"event_id":"d","kind":"\\ud800"}', "kind", "a lone surrogate"),
        (b'{"event_id":"d","kind":"ok \\udfff"}', "kind", "a lone surrogate"),
        (b'[{"event_id":"e"},{"event_id":"f","kind":"\\udc00x"}]', "kind", "a lone surrogate"),
        (b'[{"event_id":"e"},{"event_id":"f","user_id":1e400}]', "user_id", "out of its range"),
    ],
)
def test_a_value_that_cannot_convert_is_refused_in_the_documented_form(
    one_service: Any, body: bytes, field: str, says: str
) -> None:
    status, answer = _post_raw(f"{one_service.url}/events", body)
    error = answer["error"]
    assert status == 422, answer
    form = DOCUMENTED.match(error)
    assert form is not None and form["field"] == field, error
    assert says in error, error
    assert not [w for w in (*ENGINE_WORDS, *PYTHON_ADVICE) if w in error], error
    assert one_service.service.table.refresh().count() == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"event_id":"a","amount":NaN}',
        b'{"event_id":"a","amount":Infinity}',
        b'{"event_id":"a","user_id":-Infinity}',
        b'[{"event_id":"a"},{"event_id":"b","kind":NaN}]',
    ],
)
def test_nan_and_infinity_are_not_json(one_service: Any, body: bytes) -> None:
    status, answer = _post_raw(f"{one_service.url}/events", body)
    assert status == 400, answer
    assert answer["error"].startswith("the body did not parse as JSON: "), answer
    assert "not JSON" in answer["error"] and "float" not in answer["error"], answer
    assert one_service.service.table.refresh().count() == 0


def _post_raw(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _fits(number: decimal.Decimal, sql: str) -> bool:
    """The oracle: whether the table stores the number exactly in a field of type ``sql``."""
    if sql == "BIGINT":
        return -(2**63) <= number < 2**63 and number == number.to_integral_value()
    with decimal.localcontext(decimal.Context(prec=18, traps=[decimal.Inexact])) as context:
        try:
            stored = number.quantize(decimal.Decimal("0.01"), context=context)
        except (decimal.Inexact, decimal.InvalidOperation):
            return False
    return stored == number


_NUMBERS = st.builds(
    lambda digits, fraction, exponent, sign: (
        sign + digits + ("." + fraction if fraction else "") + (f"e{exponent}" if exponent else "")
    ),
    st.sampled_from(["0", "1", "12", "9223372036854775807", "9223372036854775808", "99"]),
    st.sampled_from(["", "0", "5", "05", "001", "50000"]),
    st.integers(-450, 450) | st.sampled_from([0, 0, 1, 2, 16, 17, 18, 19, -1, -2, -3]),
    st.sampled_from(["", "-"]),
)


@pytest.fixture(scope="module")
def service_taking_numbers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A service of its own: the other tests here find their table empty."""
    table = open_events(ledger.connect(str(tmp_path_factory.mktemp("numbers"))))
    with RunningService(table, QUIET) as running:
        yield running


@settings(max_examples=examples(15), deadline=None)
@given(text=_NUMBERS, field=st.sampled_from(["user_id", "amount"]))
@example(text="0E+76", field="user_id")
def test_any_json_number_is_stored_exactly_or_refused_in_the_documented_form(
    service_taking_numbers: Any, text: str, field: str
) -> None:
    one_service = service_taking_numbers
    table = one_service.service.table
    before = table.refresh().count()
    body = f'{{"event_id": "n-{uuid.uuid4().hex}", "{field}": {text}}}'.encode()
    status, answer = _post_raw(f"{one_service.url}/events", body)
    number = decimal.Decimal(text)
    if _fits(number, table.schema[field]):
        assert status == 200, answer
        assert table.refresh().count() == before + 1
    else:
        assert status == 422, answer
        form = DOCUMENTED.match(answer["error"])
        assert form is not None and form["field"] == field, answer
        assert not [w for w in (*ENGINE_WORDS, *PYTHON_ADVICE) if w in answer["error"]], answer
        assert table.refresh().count() == before
