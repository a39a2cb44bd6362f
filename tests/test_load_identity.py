"""A `ledger load` knows each data file the read takes by one app id (its path, size,
modification time and the mode), however the source is spelled: a folder, the same folder with
markers and hidden files, a glob matching the same files, a relative or absolute path. Files
the read skips have none; a new file adds its own and leaves the others' alone."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.cli.writing import load_tokens
from ledger.inputs import local_source_files


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "part0.csv").write_text("id,amount\n1,10\n")
    (folder / "part1.csv").write_text("id,amount\n2,20\n")
    return folder


def test_every_spelling_of_the_same_data_files_is_one_load(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    first = load_tokens(str(folder), "insert")
    assert len(first) == len(set(first.values())) == 2
    (folder / "_SUCCESS").write_text("")
    (folder / "_README.txt").write_text("notes")
    (folder / ".hidden.csv").write_text("id,amount\n9,90\n")
    (folder / "empty.csv").write_text("")
    spellings = [str(folder), f"{folder}/", f"{folder}/*.csv", f"{folder}/part*"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        spellings += ["mixed", "./mixed", "mixed/*.csv"]
        assert all(load_tokens(s, "insert") == first for s in spellings)
    finally:
        os.chdir(cwd)
    (folder / "_README.txt").unlink()
    assert load_tokens(str(folder), "insert") == first
    (folder / "README.txt").write_text("notes")  # no data file: the load is refused
    assert load_tokens(str(folder), "insert") == {}
    assert load_tokens(f"{folder}/*.csv", "insert") == first
    assert not set(load_tokens(str(folder), "upsert").values()) & set(first.values())


def test_another_data_file_or_a_changed_one_is_another_load(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    first = load_tokens(str(folder), "insert")
    part0 = str(folder / "part0.csv")
    assert load_tokens(part0, "insert") == {part0: first[part0]}
    (folder / "part2.csv").write_text("id,amount\n3,30\n")
    second = load_tokens(str(folder), "insert")
    assert len(second) == 3 and {p: second[p] for p in first} == first
    stamp = os.stat(folder / "part0.csv").st_mtime_ns + 10**9
    os.utime(folder / "part0.csv", ns=(stamp, stamp))
    third = load_tokens(str(folder), "insert")
    assert third[part0] not in second.values()
    assert {p: t for p, t in third.items() if p != part0} == {
        p: t for p, t in second.items() if p != part0
    }


def test_a_source_naming_no_data_file_has_no_identity(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert local_source_files(str(tmp_path / "missing")) == []
    assert local_source_files(str(tmp_path / "notes.txt")) == []
    assert load_tokens(str(tmp_path / "nothing*.csv"), "insert") == {}
    assert load_tokens("s3://bucket/rows.csv", "insert") == {}
