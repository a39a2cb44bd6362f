"""A JSON-lines value or line Arrow's reader refuses is named with its file and its line,
counted from 1 as an editor counts them (blank lines included), on every store and for every
write (an insert streams the file; an upsert reads which keys each line gives)."""

from __future__ import annotations

import re

import pytest

import ledger
from tests.conftest import Location

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(18,2)"}


def _put_lines(location: Location, table: ledger.Table, key: str, lines: list[str]) -> str:
    table.store.put(key, ("\n".join(lines) + "\n").encode())
    return f"{location.uri}/{key}"


BAD_LINES = [
    # Text among numbers is a value like any other (docs/concepts.md); an object is not.
    (
        '{"id": 40, "amount": {"value": 3.3}}',
        r"'amount' \(DECIMAL\(18,2\)\): value \{\"value\":3\.3\} is a JSON object.* \(line 41: ",
    ),
    (
        '{"id": 40, "amount": 1.239}',
        r"'amount' \(DECIMAL\(18,2\)\): value 1\.239 has more than 2 decimal place\(s\).* "
        r"\(line 41: .*1\.239",
    ),
    ('{"id": 40.5, "amount": 1}', r"'id' \(BIGINT\): 40\.5 is not a whole number \(line 41: "),
    ('{"id": 40, "amount": 1', r"JSON parse error: .* \(line 41: "),
]


# Arrow's reader words the error whatever the store: every bad line locally, one read from S3.
@pytest.mark.parametrize(
    ("location", "bad", "message"),
    [("local", *case) for case in BAD_LINES] + [("s3", *BAD_LINES[0])],
    indirect=["location"],
)
@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_a_refused_json_line_is_named_with_its_file_and_line(location, bad, message, operation):
    table = location.connect().create_table("accounts", SCHEMA, primary_key="id")
    lines = [f'{{"id": {i}, "name": "n{i}", "amount": {i}.5}}' for i in range(1, 60)]
    lines[39] = bad
    lines.insert(20, "")  # a blank line is a line of the file, not a row
    uri = _put_lines(location, table, "incoming/late.jsonl", lines)
    # A value that does not fit its column is a TypeMismatchError, as from a list of dicts.
    with pytest.raises(ledger.LedgerError, match=r"late\.jsonl.*" + message) as raised:
        getattr(table, operation)(uri)
    assert not re.search(r"in row \d", str(raised.value))  # Arrow counts rows of a block from 0
    assert table.version == 0


def test_a_refused_value_past_the_first_read_block_names_its_line(local_location, tmp_path):
    table = local_location.connect().create_table("accounts", SCHEMA, primary_key="id")
    lines = [f'{{"id": {i}, "amount": 1.5}}' for i in range(1, 30_000)]
    lines[25_000] = '{"id": 25001, "amount": "x"}'
    (tmp_path / "late.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ledger.MalformedSourceError, match=r"'x'.*\(line 25001: "):
        table.insert(str(tmp_path / "late.jsonl"))
    assert table.version == 0
