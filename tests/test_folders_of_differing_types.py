"""The files of a folder or glob may give a column in different types (a number in one
JSON-lines file, text or only nulls in another; Parquet timestamps of other units and zones, a
dictionary-encoded string beside a plain one): each file is converted to the table's types as
it would be alone, so a folder stores what its files store one by one, for every write, local
and on S3, and through `ledger load`."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import Location, examples
from tests.support.s3server import BUCKET
from tests.test_cli import as_json, run_ledger

SCHEMA = {
    "id": "BIGINT",
    "n": "BIGINT",
    "d": "DECIMAL(10,2)",
    "b": "BOOLEAN",
    "ts": "TIMESTAMPTZ",
    "s": "VARCHAR",
}
UTC = dt.UTC
PARIS = dt.timezone(dt.timedelta(hours=1))

# How a file may give each column: the Arrow type of a Parquet column, or for JSON lines
# whether a value is written as a JSON number (or boolean) or as text.
PARQUET_FORMS: dict[str, list[pa.DataType]] = {
    "id": [pa.int64(), pa.int32(), pa.string()],
    "n": [pa.int64(), pa.int32(), pa.string()],
    "d": [pa.decimal128(10, 2), pa.decimal128(12, 3), pa.string()],
    "b": [pa.bool_(), pa.string()],
    "ts": [pa.timestamp("ms", "UTC"), pa.timestamp("us", "Europe/Paris"), pa.timestamp("us")],
    "s": [pa.string(), pa.dictionary(pa.int32(), pa.string()), pa.large_string()],
}
JSON_FORMS = {"id": ["number", "text"], "n": ["number", "text"], "d": ["number", "text"],
              "b": ["boolean", "text"], "ts": ["text"], "s": ["text"]}  # fmt: skip

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "n": st.none() | st.integers(-(2**31), 2**31 - 1),
    "d": st.none() | st.decimals("-99999999.99", "99999999.99", places=2, allow_nan=False),
    "b": st.none() | st.booleans(),
    # Milliseconds: every Parquet form above holds them exactly.
    "ts": st.none()
    | st.datetimes(dt.datetime(1990, 1, 1), dt.datetime(2090, 1, 1)).map(
        lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000, tzinfo=UTC)
    ),
    "s": st.none() | st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=5),
}


@st.composite
def rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=8, unique=True))
    return [{"id": i, **{name: draw(values) for name, values in VALUES.items()}} for i in ids]


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def _parquet_values(name: str, kind: pa.DataType, values: list[Any]) -> pa.Array:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pa.array([None if v is None else _text(name, v) for v in values], kind)
    if pa.types.is_timestamp(kind):
        zone = None if kind.tz is None else (PARIS if kind.tz == "Europe/Paris" else UTC)
        shown = [None if v is None else v.astimezone(zone or UTC) for v in values]
        if zone is None:  # a TIMESTAMP without zone holds UTC wall times; refused, as alone
            shown = [None if v is None else v.replace(tzinfo=None) for v in shown]
        return pa.array(shown, kind)
    if pa.types.is_dictionary(kind):
        return pa.array(values, pa.string()).dictionary_encode()
    return pa.array(values, kind)


def _json_line(row: dict[str, Any], forms: dict[str, str]) -> str:
    fields = []
    for name, value in row.items():
        if value is None:
            shown = "null"
        elif forms[name] == "text":
            shown = json.dumps(_text(name, value))
        elif isinstance(value, bool):
            shown = "true" if value else "false"
        else:
            shown = str(value)  # a Decimal as written, not through a float
        fields.append(f"{json.dumps(name)}: {shown}")
    return "{" + ", ".join(fields) + "}\n"


@st.composite
def files(draw: st.DrawFn) -> tuple[str, list[tuple[list[dict[str, Any]], dict[str, Any]]]]:
    """Rows cut into files, each giving every column in a form of its own."""
    file_format = draw(st.sampled_from(["json", "parquet"]))
    given = draw(rows())
    cuts = sorted(draw(st.sets(st.integers(1, len(given)), max_size=3)) | {len(given)})
    parts = []
    start = 0
    for end in cuts:
        if end <= start:
            continue
        catalogue: dict[str, Any] = JSON_FORMS if file_format == "json" else PARQUET_FORMS
        forms = {name: draw(st.sampled_from(kinds)) for name, kinds in catalogue.items()}
        parts.append((given[start:end], forms))
        start = end
    return file_format, parts


def _write_files(
    folder: Path, file_format: str, parts: list[tuple[list[dict[str, Any]], dict[str, Any]]]
) -> list[Path]:
    folder.mkdir()
    paths = []
    for i, (part, forms) in enumerate(parts):
        if file_format == "json":
            path = folder / f"part-{i}.jsonl"
            path.write_text("".join(_json_line(row, forms) for row in part))
        else:
            path = folder / f"part-{i}.parquet"
            columns = {
                name: _parquet_values(name, kind, [row[name] for row in part])
                for name, kind in forms.items()
            }
            pq.write_table(pa.table(columns), path)
        paths.append(path)
    return paths


def _outcome(write: Any, source: Any) -> tuple[str, Any]:
    try:
        write(source)
    except ledger.LedgerError as refused:
        return "refused", type(refused)
    return "written", None


def _visible(table: ledger.Table) -> list[dict[str, Any]]:
    return sorted(table.to_arrow().to_pylist(), key=lambda row: row["id"])


@settings(max_examples=examples(12), deadline=None)
@given(cut=files(), operation=st.sampled_from(["insert", "upsert"]))
def test_a_folder_stores_what_its_files_store_one_by_one(
    cut: tuple[str, list[tuple[list[dict[str, Any]], dict[str, Any]]]], operation: str
) -> None:
    file_format, parts = cut
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        warehouse = ledger.connect(str(root / "wh"))
        alone = warehouse.create_table("alone", SCHEMA, primary_key="id")
        together = warehouse.create_table("together", SCHEMA, primary_key="id")
        paths = _write_files(root / "in", file_format, parts)
        outcomes = [_outcome(getattr(alone, operation), str(path)) for path in paths]
        refused = [kind for outcome, kind in outcomes if outcome == "refused"]
        folder = _outcome(getattr(together, operation), str(root / "in"))
        if refused:
            # A file refused alone fails the folder, with the error it has alone; nothing is
            # written.
            assert folder == ("refused", refused[0])
            assert together.refresh().version == 0
        else:
            assert folder == ("written", None)
            assert _visible(together) == _visible(alone)
            expected = [row for part, _ in parts for row in part]
            assert len(_visible(together)) == len(expected)


def _timestamp_files(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "a.jsonl").write_text('{"id": 1, "ts": "2024-01-01T00:00:00Z"}\n')
    (folder / "b.jsonl").write_text('{"id": 2, "ts": null}\n')


@pytest.mark.parametrize("operation", ["insert", "upsert", "update", "delete", "check"])
def test_a_column_of_text_in_one_file_and_nulls_in_another_loads(
    tmp_path: Path, operation: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "ts": "TIMESTAMPTZ"}, primary_key="id"
    )
    table.insert([{"id": 1}, {"id": 2}])
    _timestamp_files(tmp_path / "in")
    getattr(table, operation)(str(tmp_path / "in"))
    getattr(table, operation)(str(tmp_path / "in" / "*.jsonl"))
    stored = {row["id"]: row["ts"] for row in table.to_arrow().to_pylist()}
    if operation == "delete":
        assert stored == {}
    elif operation == "check":
        assert stored == {1: None, 2: None}
    else:
        assert stored == {1: dt.datetime(2024, 1, 1, tzinfo=dt.UTC), 2: None}


def test_an_s3_folder_of_differing_types_loads(s3_location: Location, s3_endpoint: Any) -> None:
    table = s3_location.connect().create_table(
        "t", {"id": "BIGINT", "amount": "DECIMAL(10,2)"}, primary_key="id"
    )
    prefix = f"sources/{uuid.uuid4().hex}"
    client = s3_endpoint.client()
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/a.jsonl", Body=b'{"id": 1, "amount": 1.5}\n')
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/b.jsonl", Body=b'{"id": "2", "amount": "2"}\n')
    table.insert(f"s3://{BUCKET}/{prefix}")
    assert _visible(table) == [{"id": 1, "amount": Decimal("1.50")}, {"id": 2, "amount": 2}]


def test_ledger_load_of_a_folder_of_differing_types(tmp_path: Path) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "id BIGINT, ts TIMESTAMPTZ", cwd=tmp_path)
    _timestamp_files(tmp_path / "in")
    loaded = run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=tmp_path)
    assert as_json(loaded)["inserted"] == 2


def test_a_column_the_table_lacks_in_two_types_is_an_unknown_column(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", {"id": "BIGINT"})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,x\n1,5\n")
    (tmp_path / "in" / "b.csv").write_text("id,x\n2,abc\n")
    with pytest.raises(ledger.UnknownColumnError, match=r"\['x'\]"):
        table.insert(str(tmp_path / "in"))
    assert table.refresh().version == 0
    # Added by a schema evolution, it holds the values as written (text, as the file of text).
    table.insert(str(tmp_path / "in"), evolve_schema=True)
    assert _visible(table) == [{"id": 1, "x": "5"}, {"id": 2, "x": "abc"}]


def test_a_transform_reads_a_column_the_files_give_in_different_types(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t",
        {"id": "BIGINT", "ts": "TIMESTAMPTZ", "day": "DATE"},
        primary_key="id",
        insert_transform="select id, ts, ts::DATE as day from rows",
    )
    _timestamp_files(tmp_path / "in")
    table.insert(str(tmp_path / "in"))
    assert _visible(table) == [
        {"id": 1, "ts": dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "day": dt.date(2024, 1, 1)},
        {"id": 2, "ts": None, "day": None},
    ]
