"""A CSV value that does not fit its column is named with its column and row, on every store:
the file is read a second time as text to find it, and closed before the error is raised."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import Location, examples

TABLE_NUMBERS = itertools.count()

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(18,2)"}


def _put_csv(location: Location, table: ledger.Table, key: str, lines: list[str]) -> str:
    """Store a CSV file beside the warehouse's tables; return its path or URI."""
    table.store.put(key, ("id,name,amount\n" + "\n".join(lines) + "\n").encode())
    return f"{location.uri}/{key}"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("x,twelve", r"column 'amount', row 40\b"),
        ("x,1.239", r"column 'amount', row 40: '1\.239' has more than 2 decimal place"),
        ("x,  -0.001 ", r"column 'amount', row 40: '  -0\.001 ' has more than 2"),
    ],
)
def test_a_refused_csv_value_is_named_with_its_column_and_row(location, bad, message):
    table = location.connect().create_table("accounts", SCHEMA, primary_key="id")
    lines = [f"{i},n{i},{i}.50" for i in range(1, 60)]
    lines[39] = f"40,{bad}"
    uri = _put_csv(location, table, "incoming/late.csv", lines)
    for _ in range(3):  # each attempt opens and closes the file again
        with pytest.raises(ledger.MalformedSourceError, match=message):
            table.insert(uri)
    assert table.version == 0
    assert table.count() == 0


def test_a_refused_value_in_a_later_file_of_a_folder_names_that_file(location):
    table = location.connect().create_table("accounts", SCHEMA, primary_key="id")
    _put_csv(location, table, "incoming/a.csv", ["1,a,1.00", "2,b,2.00"])
    uri = _put_csv(location, table, "incoming/b.csv", ["3,c,3.00", "4,d,oops"])
    with pytest.raises(ledger.MalformedSourceError, match=r"b\.csv.*column 'amount', row 2\b"):
        table.insert(uri.rsplit("/", 1)[0] + "/")
    assert table.version == 0


def test_a_timestamp_without_offset_for_a_timestamptz_column_is_named_with_what_to_do(location):
    table = location.connect().create_table(
        "events", {"id": "BIGINT", "at": "TIMESTAMPTZ"}, primary_key="id"
    )
    table.store.put(
        "incoming/at.csv",
        b"id,at\n1,2026-01-03 10:00:00+00:00\n2,2026-01-03T10:00:00Z\n3,2026-01-03 10:00:00\n",
    )
    with pytest.raises(
        ledger.MalformedSourceError,
        match=r"at\.csv.*column 'at', row 3: '2026-01-03 10:00:00' has no UTC offset.*offset",
    ) as raised:
        table.insert(f"{location.uri}/incoming/at.csv")
    assert "assume_timezone" not in str(raised.value)  # Arrow's advice is for its own API
    assert table.version == 0


@given(
    files=st.lists(st.integers(1, 30), min_size=1, max_size=3),
    empty=st.data(),
    quoted_name=st.booleans(),
    operation=st.sampled_from(["insert", "upsert"]),
)
@settings(max_examples=examples(6), deadline=None)
def test_an_empty_key_field_names_its_file_and_row(
    local_location, files, empty, quoted_name, operation
):
    """Any CSV row whose key field is empty, in any file of a folder, is refused naming that
    file and row (counted from 1 after the header), as every other CSV refusal is."""
    table = local_location.connect().create_table(
        f"keys{next(TABLE_NUMBERS)}", SCHEMA, primary_key="id"
    )
    bad_file = empty.draw(st.integers(0, len(files) - 1))
    bad_row = empty.draw(st.integers(1, files[bad_file]))
    folder = f"batch{next(TABLE_NUMBERS)}"
    first_id = 0
    for number, rows in enumerate(files):
        lines = []
        for row in range(1, rows + 1):
            first_id += 1
            key = "" if (number, row) == (bad_file, bad_row) else str(first_id)
            name = f'"n {first_id}"' if quoted_name else f"n{first_id}"
            lines.append(f"{key},{name},{first_id}.50")
        _put_csv(local_location, table, f"{folder}/part-{number}.csv", lines)
    with pytest.raises(ledger.MissingKeyError) as raised:
        getattr(table, operation)(f"{local_location.uri}/{folder}")
    message = str(raised.value)
    assert f"part-{bad_file}.csv" in message, message
    assert f"primary-key column 'id', row {bad_row}: the field is empty" in message, message
    assert table.version == 0
