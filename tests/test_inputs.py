"""Every source a write accepts, read back value for value: Python lists and dicts, Arrow,
pandas, polars, DuckDB relations, and Parquet, CSV and JSON-lines files (local and S3)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples
from tests.support.s3server import BUCKET
from tests.test_cli import run_ledger

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(18,2)"}
ROWS = [
    {"id": 1, "name": "alice", "amount": Decimal("1.50")},
    {"id": 2, "name": 'bo, the "second"', "amount": None},
    {"id": 3, "name": "zoë 名前", "amount": Decimal("-3.00")},
]


def _visible(table: ledger.Table) -> list[dict[str, Any]]:
    return sorted(views.visible(table).to_arrow_table().to_pylist(), key=lambda r: r["id"])


def _table_files(location_root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(location_root)) for p in location_root.rglob("*") if p.is_file()
    )


@pytest.fixture
def accounts(warehouse: ledger.Warehouse) -> ledger.Table:
    return warehouse.create_table("accounts", SCHEMA, primary_key="id")


@pytest.fixture
def local_accounts(local_location) -> ledger.Table:
    return local_location.connect().create_table("accounts", SCHEMA, primary_key="id")


def _arrow() -> pa.Table:
    return pa.Table.from_pylist(
        ROWS,
        pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(18, 2))]),
    )


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    pacsv.write_csv(pa.Table.from_pylist(rows), path)
    return path


# --- in-memory sources ------------------------------------------------------------------------

IN_MEMORY_SOURCES = {
    "list of dicts": lambda: ROWS,
    "dict of lists": lambda: {k: [r[k] for r in ROWS] for k in SCHEMA},
    "arrow table": _arrow,
    "record batch": lambda: _arrow().to_batches()[0],
    "record batch reader": lambda: pa.RecordBatchReader.from_batches(
        _arrow().schema, _arrow().to_batches(max_chunksize=1)
    ),
    "pandas": lambda: pd.DataFrame(ROWS),
}


@pytest.mark.parametrize("source", sorted(IN_MEMORY_SOURCES))
def test_every_in_memory_source_inserts_the_same_rows(local_accounts, source):
    local_accounts.insert(IN_MEMORY_SOURCES[source]())
    assert _visible(local_accounts) == ROWS


def test_a_duckdb_relation_is_streamed_into_insert_upsert_and_delete(local_accounts):
    con = duckdb.connect()
    local_accounts.insert(
        con.sql("SELECT * FROM range(1, 4) t(id)").project(
            "id, 'n' || id AS name, CAST(id AS DECIMAL(18,2)) AS amount"
        )
    )
    local_accounts.upsert(con.sql("SELECT 2 AS id, 'two' AS name"))
    local_accounts.delete(con.sql("SELECT 3 AS id"))
    assert _visible(local_accounts) == [
        {"id": 1, "name": "n1", "amount": Decimal("1.00")},
        {"id": 2, "name": "two", "amount": Decimal("2.00")},
    ]


def test_a_polars_dataframe_is_accepted(local_accounts):
    polars = pytest.importorskip(
        "polars", reason="polars is optional: pip install 'ledger-tables[polars]'"
    )
    local_accounts.insert(polars.DataFrame({"id": [1, 2], "name": ["a", None]}))
    assert [(r["id"], r["name"]) for r in _visible(local_accounts)] == [(1, "a"), (2, None)]


def test_an_unsupported_object_lists_the_accepted_sources_and_writes_nothing(local_accounts):
    with pytest.raises(ledger.TypeMismatchError) as raised:
        local_accounts.insert({1, 2, 3})
    for accepted in ("list of dicts", "pandas DataFrame", "polars", "DuckDB relation", "CSV"):
        assert accepted in str(raised.value)
    assert local_accounts.version == 0


@pytest.mark.parametrize(
    "empty",
    [
        [],
        {"id": [], "name": []},
        pd.DataFrame({"id": pd.Series([], dtype="int64")}),
        pa.table({"id": pa.array([], pa.int64())}),
    ],
    ids=["list", "dict", "pandas", "arrow"],
)
def test_empty_data_commits_nothing(local_accounts, empty):
    for write in (local_accounts.insert, local_accounts.upsert, local_accounts.delete):
        info = write(empty)
        assert info.version is None
    assert local_accounts.version == 0


# --- files ------------------------------------------------------------------------------------


def test_csv_with_missing_values_quoted_commas_and_unicode(local_accounts, tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(
        'id,name,amount\n1,alice,1.50\n2,"bo, the ""second""",\n3,zoë 名前,-3.00\n'
        '4,"",7\n5,,8\n6,NA,9\n',
        encoding="utf-8",
    )
    local_accounts.insert(str(path))
    rows = _visible(local_accounts)
    assert rows[:3] == ROWS
    # An empty quoted field is an empty string, an empty unquoted one NULL, NA is text.
    assert [(r["name"], r["amount"]) for r in rows[3:]] == [
        ("", Decimal("7.00")),
        (None, Decimal("8.00")),
        ("NA", Decimal("9.00")),
    ]


def test_csv_text_is_parsed_into_the_tables_types(local_location, tmp_path):
    table = local_location.connect().create_table(
        "zips", {"zip": "VARCHAR", "n": "INTEGER"}, primary_key="zip"
    )
    (tmp_path / "z.csv").write_text("zip,n\n007,1\n10115,2\n")
    table.insert(tmp_path / "z.csv")  # a pathlib.Path works too
    assert sorted(views.visible(table).fetchall()) == [("007", 1), ("10115", 2)]


def test_a_header_only_csv_and_an_empty_file_are_empty_data(local_accounts, tmp_path):
    (tmp_path / "header.csv").write_text("id,name,amount\n")
    (tmp_path / "zero.csv").write_bytes(b"")
    for name in ("header.csv", "zero.csv"):
        assert local_accounts.insert(str(tmp_path / name)).version is None
        assert local_accounts.upsert(str(tmp_path / name)).version is None
    assert local_accounts.version == 0


def test_a_folder_of_csvs_and_a_glob(local_accounts, tmp_path):
    folder = tmp_path / "drop"
    (folder / "nested").mkdir(parents=True)
    _write_csv(folder / "a.csv", ROWS[:1])
    _write_csv(folder / "nested" / "b.csv", ROWS[1:])
    (folder / "_SUCCESS").write_text("")
    (folder / ".hidden.csv").write_text("garbage")
    local_accounts.insert(str(folder))
    assert _visible(local_accounts) == ROWS
    local_accounts.delete(str(folder / "nested" / "*.csv"))
    assert _visible(local_accounts) == ROWS[:1]


def test_json_lines_and_parquet_files(local_accounts, tmp_path):
    with (tmp_path / "rows.jsonl").open("w") as out:
        for row in ROWS:
            out.write(
                json.dumps({**row, "amount": None if row["amount"] is None else str(row["amount"])})
                + "\n"
            )
    local_accounts.insert(str(tmp_path / "rows.jsonl"))
    assert _visible(local_accounts) == ROWS
    pq.write_table(pa.table({"id": [1, 3], "name": ["A", "C"]}), tmp_path / "fix.parquet")
    local_accounts.update(str(tmp_path / "fix.parquet"))
    assert [(r["name"], r["amount"]) for r in _visible(local_accounts)] == [
        ("A", Decimal("1.50")),
        ('bo, the "second"', None),
        ("C", Decimal("-3.00")),
    ]


def test_append_entries_from_a_csv(local_accounts, tmp_path):
    local_accounts.insert(ROWS)
    (tmp_path / "e.csv").write_text("id,name,amount,dml_type\n1,alice,1.50,-1\n1,alice,2.00,1\n")
    local_accounts.append_entries(str(tmp_path / "e.csv"))
    assert _visible(local_accounts)[0] == {"id": 1, "name": "alice", "amount": Decimal("2.00")}


def test_files_in_a_transaction(local_accounts, tmp_path):
    _write_csv(tmp_path / "a.csv", ROWS)
    with local_accounts.transaction() as tx:
        tx.insert(str(tmp_path / "a.csv"))
        tx.delete(str(tmp_path / "a.csv"))
        tx.upsert(str(tmp_path / "a.csv"))
    assert _visible(local_accounts) == ROWS
    assert local_accounts.count() == 3


def test_parquet_on_s3_through_the_tables_own_s3_options(s3_endpoint, tmp_path):
    from tests.conftest import Location

    location = Location("s3", f"s3://{BUCKET}/sources-{tmp_path.name}", s3_endpoint.options())
    table = location.connect().create_table("accounts", SCHEMA, primary_key="id")
    store = table.store
    with store.filesystem.open_output_stream(store.fs_path("incoming/part-0.parquet")) as out:
        pq.write_table(_arrow(), out)
    table.insert(f"{location.uri}/incoming/")
    assert _visible(table) == ROWS
    table.delete(f"{location.uri}/incoming/*.parquet")
    assert _visible(table) == []
    with pytest.raises(ledger.SourceNotFoundError):
        table.insert(f"{location.uri}/missing.parquet")


def test_a_missing_file_raises_and_writes_nothing(local_location, tmp_path):
    table = local_location.connect().create_table("accounts", SCHEMA, primary_key="id")
    root = Path(local_location.uri)
    before = _table_files(root)
    for write in (table.insert, table.upsert, table.delete, table.append_entries):
        with pytest.raises(ledger.SourceNotFoundError, match=r"nope\.csv"):
            write(str(tmp_path / "nope.csv"))
    with pytest.raises(ledger.SourceNotFoundError, match="no file matches"):
        table.insert(str(tmp_path / "*.csv"))
    assert table.version == 0
    assert _table_files(root) == before


def test_a_malformed_csv_raises_and_writes_nothing(local_location, tmp_path):
    table = local_location.connect().create_table("accounts", SCHEMA, primary_key="id")
    table.insert(ROWS)
    root = Path(local_location.uri)
    before = _table_files(root)
    (tmp_path / "bad.csv").write_text("id,name,amount\n9,x,1\n10,y,2,extra\n")
    (tmp_path / "types.csv").write_text("id,name,amount\nnot-a-number,x,1\n")
    for name in ("bad.csv", "types.csv"):
        with pytest.raises(ledger.MalformedSourceError, match=re.escape(name)):
            table.insert(str(tmp_path / name))
        with pytest.raises(ledger.MalformedSourceError):
            table.upsert(str(tmp_path / name))
    assert table.version == 1
    assert _table_files(root) == before
    assert _visible(table) == ROWS


def test_a_csv_value_that_does_not_parse_is_named_with_its_column_and_row(local_accounts, tmp_path):
    lines = [f"{i},n{i},1.00" for i in range(1, 30_000)]
    lines[20_000] = '20001,"two\nlines",1.00'  # a value spanning lines still counts one row
    lines[25_000] = "25001,x,twelve"
    (tmp_path / "late.csv").write_text("id,name,amount\n" + "\n".join(lines) + "\n")
    with pytest.raises(ledger.MalformedSourceError, match=r"column 'amount', row 25001\b"):
        local_accounts.insert(str(tmp_path / "late.csv"))
    assert local_accounts.version == 0


@pytest.mark.parametrize("value", ["12.345", "-0.001", " 7.000001 "])
def test_a_csv_decimal_with_too_many_places_is_named_with_its_column_and_row(
    local_accounts, tmp_path, value
):
    lines = [f"{i},n{i},{i}.25" for i in range(1, 10)]
    lines[6] = f"7,n7,{value}"
    (tmp_path / "places.csv").write_text("id,name,amount\n" + "\n".join(lines) + "\n")
    with pytest.raises(
        ledger.MalformedSourceError, match=rf"column 'amount', row 7: '{re.escape(value)}'"
    ):
        local_accounts.insert(str(tmp_path / "places.csv"))
    assert local_accounts.version == 0


def test_a_json_file_holding_one_array_is_refused_with_what_to_do(local_accounts, tmp_path):
    (tmp_path / "array.json").write_text("\ufeff  " + json.dumps([{"id": 1, "name": "a"}]))
    with pytest.raises(ledger.MalformedSourceError, match=r"one JSON array.*one object per line"):
        local_accounts.insert(str(tmp_path / "array.json"))
    assert local_accounts.version == 0


def test_text_mixed_with_numbers_goes_into_a_text_column_as_text(local_accounts):
    names: list[Any] = ["a", 7, 7.5, True, None]
    local_accounts.insert([{"id": i, "name": name} for i, name in enumerate(names, start=1)])
    assert [r["name"] for r in _visible(local_accounts)] == ["a", "7", "7.5", "true", None]
    with pytest.raises(ledger.TypeMismatchError, match="'amount'"):  # not text: refused
        local_accounts.insert([{"id": 6, "amount": "1.00"}, {"id": 7, "amount": [1]}])
    local_accounts.insert([{"id": 8, "name": 8}])  # alone too: never up to its neighbours
    assert _visible(local_accounts)[-1]["name"] == "8"


def test_an_unknown_file_extension_is_refused(local_accounts, tmp_path):
    (tmp_path / "rows.txt").write_text("id\n1\n")
    with pytest.raises(ledger.InvalidArgumentError, match="cannot tell the format"):
        local_accounts.insert(str(tmp_path / "rows.txt"))


# --- a file larger than the chunk size streams in bounded memory ------------------------------

_STREAMING_PROBE = textwrap.dedent(
    """
    import sys, pyarrow as pa, ledger, ledger.transaction
    ledger.transaction.STREAM_CHUNK_ROWS = 50_000
    table = ledger.connect(sys.argv[1]).create_table(
        "big", {"id": "BIGINT", "name": "VARCHAR", "amount": "DOUBLE"}, primary_key="id")
    info = table.insert(sys.argv[2])
    print(info.inserted, pa.default_memory_pool().max_memory())
    """
)


def test_a_large_csv_is_inserted_in_bounded_memory(tmp_path):
    rows = 1_500_000
    ids = pa.array(range(rows), pa.int64())
    data = pa.table(
        {
            "id": ids,
            "name": pa.compute.binary_join_element_wise(
                "name-", pa.compute.cast(ids, pa.string()), ""
            ),
            "amount": pa.compute.multiply(pa.compute.cast(ids, pa.float64()), 0.5),
        }
    )
    path = tmp_path / "big.csv"
    pacsv.write_csv(data, path)
    whole = data.nbytes
    out = subprocess.run(
        [sys.executable, "-c", _STREAMING_PROBE, str(tmp_path / "wh"), str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    inserted, peak = int(out[0]), int(out[1])
    assert inserted == rows
    # Every row arrived, yet Arrow never held more than a fraction of the file's data at once.
    assert peak < whole / 2, (peak, whole)
    table = ledger.connect(str(tmp_path / "wh")).table("big")
    assert table.count() == rows
    assert views.visible(table).aggregate("sum(id), max(name)").fetchall() == [
        (rows * (rows - 1) // 2, "name-999999")
    ]


def test_rows_of_files_lacking_a_column_keep_it_in_an_upsert(local_accounts, tmp_path):
    local_accounts.insert(ROWS)
    folder = tmp_path / "changes"
    folder.mkdir()
    (folder / "a.csv").write_text("id,name,amount\n1,A,\n")
    (folder / "b.csv").write_text("id,amount\n2,5\n3,6\n")
    local_accounts.upsert(str(folder))
    assert [(r["name"], r["amount"]) for r in _visible(local_accounts)] == [
        ("A", None),
        ('bo, the "second"', Decimal("5.00")),
        ("zoë 名前", Decimal("6.00")),
    ]


def test_chunks_of_partial_rows_join_with_their_masks():
    from ledger.inputs import Rows, concat_rows

    first = Rows(pa.table({"id": [1, 2], "x": [10, None]}), {"x": pa.array([True, False])})
    second = Rows(pa.table({"id": [3]}))
    third = Rows(pa.table({"id": [4], "x": [None]}))
    joined = concat_rows([first, second, third])
    assert joined.table.to_pylist() == [
        {"id": 1, "x": 10},
        {"id": 2, "x": None},
        {"id": 3, "x": None},
        {"id": 4, "x": None},
    ]
    assert {k: v.to_pylist() for k, v in joined.given.items()} == {"x": [True, False, False, True]}


def test_a_file_that_breaks_after_chunks_were_written_leaves_nothing(
    local_location, tmp_path, monkeypatch
):
    import ledger.transaction

    monkeypatch.setattr(ledger.transaction, "STREAM_CHUNK_ROWS", 1000)
    table = local_location.connect().create_table("accounts", SCHEMA, primary_key="id")
    table.insert(ROWS)
    root = Path(local_location.uri)
    before = _table_files(root)
    good = "".join(f"{i},n{i},{i}.25\n" for i in range(10, 40_000))
    (tmp_path / "late.csv").write_text("id,name,amount\n" + good + "1,x,not-a-number\n")
    written: list[int] = []
    original = ledger.transaction.Transaction._write

    def counting_write(self, entries):
        written.append(entries.num_rows)
        return original(self, entries)

    monkeypatch.setattr(ledger.transaction.Transaction, "_write", counting_write)
    with pytest.raises(ledger.MalformedSourceError, match="late"):
        table.insert(str(tmp_path / "late.csv"))
    assert sum(written) >= 1000  # chunks were written before the bad line was reached
    assert table.version == 1
    assert _table_files(root) == before
    assert _visible(table) == ROWS


# --- random text through CSV and JSON lines ---------------------------------------------------


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    return str(value)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=examples(20))
@given(
    names=st.lists(st.one_of(st.none(), _TEXT), min_size=1, max_size=8),
    scores=st.data(),
    form=st.sampled_from(["csv", "jsonl"]),
)
def test_random_text_reads_back_from_csv_and_json_lines(names, scores, form):
    values = [scores.draw(st.one_of(st.none(), st.integers(-(2**62), 2**62))) for _ in names]
    rows = [
        {"id": i, "name": name, "score": score}
        for i, (name, score) in enumerate(zip(names, values, strict=True))
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"rows.{form}"
        if form == "csv":
            lines = ["id,name,score"]
            lines += [",".join(_csv_field(r[c]) for c in ("id", "name", "score")) for r in rows]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        table = ledger.connect(str(Path(folder) / "wh")).create_table(
            "t", {"id": "BIGINT", "name": "VARCHAR", "score": "BIGINT"}, primary_key="id"
        )
        table.insert(str(path))
        got = sorted(views.visible(table).to_arrow_table().to_pylist(), key=lambda r: r["id"])
        assert got == rows


def test_quoted_line_breaks_across_read_blocks(local_location, tmp_path):
    table = local_location.connect().create_table(
        "notes", {"id": "BIGINT", "name": "VARCHAR"}, primary_key="id"
    )
    body = "".join(f'{i},"line one\nline two {i}"\n' for i in range(40_000))  # > one block
    (tmp_path / "notes.csv").write_text("id,name\n" + body)
    table.insert(str(tmp_path / "notes.csv"))
    assert table.count() == 40_000
    assert views.visible(table).filter("id = 39999").fetchall() == [
        (39999, "line one\nline two 39999")
    ]


@pytest.mark.parametrize(
    ("pattern", "read"),
    [
        ("exports/*.csv", ["top"]),  # a star stays within its folder level, as in a shell
        ("exports/*/*.csv", ["old", "new"]),
        ("exports/**/*.csv", ["top", "old", "new"]),
        ("exports/202?", ["old", "new"]),  # a glob naming folders reads them whole
        ("*/2026/*.csv", ["new"]),
    ],
)
def test_a_glob_matches_as_a_shell_does(local_location, tmp_path, monkeypatch, pattern, read):
    files = {"top": "exports/top.csv", "old": "exports/2025/old.csv", "new": "exports/2026/new.csv"}
    for number, (name, path) in enumerate(files.items()):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(f"id,name\n{number},{name}\n")
    monkeypatch.chdir(tmp_path)
    table = local_location.connect().create_table(
        "files", {"id": "BIGINT", "name": "VARCHAR"}, primary_key="id"
    )
    table.insert(pattern)
    assert sorted(table.to_arrow()["name"].to_pylist()) == sorted(read)


@pytest.mark.parametrize(
    ("source", "link", "refused"),
    [
        ("land/*.csv", "land/broken.csv", True),
        ("land/**/*.csv", "land/2026/broken.csv", True),
        ("land", "land/2026/broken.csv", True),  # a folder is read whole, links included
        ("land/*", "land/broken", True),  # a glob takes any name it matches
        ("land/a*.csv", "land/broken.csv", False),  # a link the glob does not name
        ("land", "land/broken.txt", True),  # whatever its name: a folder's files are data
        ("land", "land/_broken.csv", False),  # and hidden ones
    ],
)
@pytest.mark.parametrize("through", ["insert", "ledger load"])
def test_a_broken_link_a_source_names_is_refused_before_anything_is_written(
    tmp_path, monkeypatch, source, link, refused, through
):
    """A link whose target is gone is no file a listing shows: a load reading past it would
    silently miss its rows, so it names the link and writes nothing."""
    (tmp_path / "land" / "2026").mkdir(parents=True)
    (tmp_path / "land" / "a.csv").write_text("id,name\n1,a\n")
    (tmp_path / link).symlink_to(tmp_path / "gone.csv")
    monkeypatch.chdir(tmp_path)
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "name": "VARCHAR"}, primary_key="id"
    )
    if through == "insert":
        if refused:
            with pytest.raises(ledger.SourceNotFoundError, match=Path(link).name):
                table.insert(source)
        else:
            table.insert(source)
    else:
        result = run_ledger("-w", "wh", "load", "t", source, cwd=tmp_path, expect=None)
        assert result.returncode == (1 if refused else 0), result.stderr
        if refused:
            assert "SourceNotFoundError" in result.stderr and Path(link).name in result.stderr
    assert table.count() == (0 if refused else 1)


FOLDER_NUMBERS = iter(range(10**6))


@given(
    skipped=st.sets(
        st.sampled_from(["_SUCCESS", ".hidden.parquet", "_temporary/part-0.parquet", "_notes.txt"])
    ),
    operation=st.sampled_from(["insert", "upsert", "delete", "append_entries"]),
)
@settings(max_examples=examples(6), deadline=None)
def test_a_folder_holding_no_data_file_is_empty_data(location, skipped, operation):
    """An existing folder (an S3 prefix holding objects) with no data file in it, such as the
    output of a job that wrote no rows, commits nothing, as a zero-byte file does; a folder that
    does not exist stays an error."""
    table = location.connect().create_table(f"t{next(FOLDER_NUMBERS)}", SCHEMA, primary_key="id")
    table.insert(ROWS)
    folder = f"incoming-{next(FOLDER_NUMBERS)}"
    if location.backend == "local":
        Path(location.uri, folder).mkdir()  # an empty folder exists locally
    elif not skipped:
        skipped = {"_SUCCESS"}  # an S3 prefix exists only while it holds an object
    for name in skipped:
        table.store.put(f"{folder}/{name}", b"x")
    info = getattr(table, operation)(f"{location.uri}/{folder}")
    assert info.version is None
    assert table.version == 1
    assert _visible(table) == ROWS
    with pytest.raises(ledger.SourceNotFoundError, match="no file or folder"):
        getattr(table, operation)(f"{location.uri}/{folder}-missing")


@pytest.mark.parametrize("kind", ["device", "pipe"])
def test_a_source_neither_file_nor_folder_is_refused_as_such(
    local_location: Any, tmp_path: Path, kind: str
) -> None:
    """A device or a named pipe given as data is refused with a typed error saying what it is
    (it would otherwise be listed as a folder and fail with the operating system's own error),
    before anything is written."""
    table = local_location.connect().create_table("t", {"id": "BIGINT"}, primary_key="id")
    if kind == "device":
        source = "/dev/null"
    else:
        source = str(tmp_path / "rows.csv")
        os.mkfifo(source)
    with pytest.raises(ledger.InvalidArgumentError, match="neither a file nor a folder"):
        table.insert(source)
    assert table.version == 0
