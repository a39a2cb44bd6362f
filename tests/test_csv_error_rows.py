"""A CSV value that does not fit its column is named with its column and row, on every store:
the file is read a second time as text to find it, and closed before the error is raised."""

from __future__ import annotations

import pytest

import ledger
from tests.conftest import Location

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
