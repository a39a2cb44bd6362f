"""What a path given as data names: an empty path names nothing (it is refused, never read as
the working folder); a folder or glob takes every file it names but hidden and ``_`` names, so
a pipe, socket, device or file of no data format among them is refused naming it rather than
left out of the load; all before anything is written, for every write and ``ledger load``."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import Location, examples
from tests.test_cli import run_ledger

SCHEMA = {"id": "BIGINT", "name": "VARCHAR"}


def _write(operation: str) -> Callable[[ledger.Table, Any], Any]:
    """Each write taking ``data``, on the table or in a transaction."""
    if operation.startswith("tx."):

        def in_transaction(table: ledger.Table, data: Any) -> Any:
            with table.transaction() as tx:
                return getattr(tx, operation[3:])(data)

        return in_transaction
    return lambda table, data: getattr(table, operation)(data)


WRITES = ["insert", "upsert", "update", "delete", "append_entries", "tx.insert", "tx.delete"]
TABLE_NUMBERS = iter(range(10**6))


def _land(root: Path) -> None:
    """A folder of data a read of the working folder would find."""
    (root / "land").mkdir(exist_ok=True)
    (root / "land" / "a.csv").write_text("id,name\n1,a\n")


@given(
    path=st.text(alphabet=" \t\n\r\x0b\x0c\u3000", max_size=3),
    operation=st.sampled_from(WRITES),
)
@settings(max_examples=examples(20), deadline=None)
def test_an_empty_or_blank_path_is_refused_by_every_write(
    tmp_path_factory: pytest.TempPathFactory, path: str, operation: str
) -> None:
    """``t.insert(os.environ.get("SRC", ""))`` with the variable unset must not load (or
    delete) whatever the working folder holds."""
    root = tmp_path_factory.mktemp("cwd")
    _land(root)
    table = ledger.connect(str(root / "wh")).create_table(
        f"t{next(TABLE_NUMBERS)}", SCHEMA, primary_key="id"
    )
    table.insert([{"id": 1, "name": "kept"}])
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with pytest.raises(ledger.InvalidArgumentError, match="empty path"):
            _write(operation)(table, path)
    finally:
        os.chdir(cwd)
    assert table.version == 1
    assert table.to_arrow().to_pylist() == [{"id": 1, "name": "kept"}]


@pytest.mark.parametrize("mode", ["insert", "delete"])
@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_path_is_refused_by_ledger_load(tmp_path: Path, mode: str, path: str) -> None:
    _land(tmp_path)
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    table.insert([{"id": 1, "name": "kept"}])
    result = run_ledger("-w", "wh", "load", "t", path, "--mode", mode, cwd=tmp_path, expect=None)
    assert result.returncode == 1, result.stdout
    assert "InvalidArgumentError" in result.stderr and "empty path" in result.stderr
    assert table.count() == 1 and table.version == 1


def _special(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "pipe":
        os.mkfifo(path)
    elif kind == "socket":
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(path))
        listening.close()  # the socket file stays
    else:
        path.symlink_to("/dev/null")  # a device, through a link of a data file's name


@pytest.mark.parametrize(
    ("source", "special", "refused"),
    [
        ("land", "land/p.csv", True),
        ("land", "land/2026/p.csv", True),  # a folder is read whole
        ("land", "land/p", True),  # whatever its name: no file of the folder is left out
        ("land/*", "land/p.csv", True),
        ("land/**/*.csv", "land/2026/p.csv", True),
        ("land/a*.csv", "land/p.csv", False),  # one the glob does not name
        ("land", "land/_p.csv", False),  # a hidden name
    ],
)
@pytest.mark.parametrize(
    ("kind", "through"),
    [("pipe", "insert"), ("socket", "delete"), ("device", "upsert"), ("pipe", "ledger load")],
)
def test_a_special_file_a_folder_or_glob_names_is_refused_before_anything_is_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    special: str,
    refused: bool,
    kind: str,
    through: str,
) -> None:
    """A pipe, socket or device is no data file: given alone it is refused, so among the files
    of a folder or glob it is refused too, naming it, rather than loading the others without
    it."""
    _land(tmp_path)
    _special(tmp_path / special, kind)
    monkeypatch.chdir(tmp_path)
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    if through != "insert":
        table.insert([{"id": 1, "name": "a"}])
    before = table.version
    if through == "ledger load":
        result = run_ledger("-w", "wh", "load", "t", source, cwd=tmp_path, expect=None)
        assert result.returncode == (1 if refused else 0), result.stderr
        if refused:
            assert "InvalidArgumentError" in result.stderr
            assert Path(special).name in result.stderr and "pipe" in result.stderr
    elif refused:
        with pytest.raises(ledger.InvalidArgumentError, match=rf"{Path(special).name}'.*pipe"):
            getattr(table, through)(source)
    else:
        getattr(table, through)(source)
    table.refresh()
    assert table.version == (before if refused else before + 1)


@pytest.mark.parametrize(
    ("source", "operation"),
    [
        ("land", "insert"),
        ("land/", "upsert"),
        ("land*", "delete"),
        ("land/*", "append_entries"),
        ("land/**", "insert"),
    ],
)
def test_a_folder_and_a_glob_refuse_a_file_of_no_data_format_alike(
    location: Location, source: str, operation: str
) -> None:
    """One rule for folders and globs, local and on S3: every file they name but hidden and
    ``_`` names is read, so a file whose name tells no data format is refused naming it (a
    misnamed data file would otherwise be left out without a word)."""
    table = location.connect().create_table("t", SCHEMA, primary_key="id")
    table.insert([{"id": 1, "name": "a"}])
    root = location.uri.rstrip("/")
    # A row each write commits: a new entry, or the key of the row there is to delete.
    header = "id,name,dml_type" if operation == "append_entries" else "id,name"
    row = {"append_entries": "2,b,1", "delete": "1,a"}.get(operation, "2,b")
    for name, body in [
        ("land/a.csv", f"{header}\n{row}\n"),
        ("land/z.txt", "notes"),
        ("land/_SUCCESS", ""),
        ("land/.hidden.txt", "x"),
    ]:
        table.store.put(name, body.encode())
    with pytest.raises(ledger.InvalidArgumentError, match=r"z\.txt.*cannot tell its format"):
        getattr(table, operation)(f"{root}/{source}")
    assert table.version == 1
    table.store.delete("land/z.txt")
    getattr(table, operation)(f"{root}/{source}")  # the hidden and _ names are skipped
    assert table.version == 2


def test_ledger_load_refuses_a_folder_holding_a_file_of_no_data_format(tmp_path: Path) -> None:
    _land(tmp_path)
    (tmp_path / "land" / "README.txt").write_text("notes")
    ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    for source in ["land", "land/*"]:
        result = run_ledger("-w", "wh", "load", "t", source, cwd=tmp_path, expect=1)
        assert "README.txt" in result.stderr and "InvalidArgumentError" in result.stderr
    run_ledger("-w", "wh", "load", "t", "land/*.csv", cwd=tmp_path)  # a glob leaving it out
    assert ledger.connect(str(tmp_path / "wh")).table("t").count() == 1
