"""A `ledger load` is recognised as a repeat by the data files the read takes, however the
source is spelled: a folder, the same folder with a stray non-data file, a glob matching the
same files, a relative or absolute path. Files the read skips never change the identity."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.cli.writing import load_token
from ledger.inputs import local_source_files


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "part0.csv").write_text("id,amount\n1,10\n")
    (folder / "part1.csv").write_text("id,amount\n2,20\n")
    return folder


def test_every_spelling_of_the_same_data_files_is_one_load(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    first = load_token(str(folder), "insert")
    (folder / "_SUCCESS").write_text("")
    (folder / "README.txt").write_text("notes")
    (folder / ".hidden.csv").write_text("id,amount\n9,90\n")
    (folder / "empty.csv").write_text("")
    spellings = [str(folder), f"{folder}/", f"{folder}/*.csv", f"{folder}/part*"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        spellings += ["mixed", "./mixed", "mixed/*.csv"]
        assert {load_token(s, "insert") for s in spellings} == {first}
    finally:
        os.chdir(cwd)
    (folder / "README.txt").unlink()
    assert load_token(str(folder), "insert") == first
    assert load_token(str(folder), "upsert") != first


def test_another_data_file_or_a_changed_one_is_another_load(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    first = load_token(str(folder), "insert")
    assert load_token(f"{folder}/part0.csv", "insert") != first
    (folder / "part2.csv").write_text("id,amount\n3,30\n")
    second = load_token(str(folder), "insert")
    assert second != first
    stamp = os.stat(folder / "part0.csv").st_mtime_ns + 10**9
    os.utime(folder / "part0.csv", ns=(stamp, stamp))
    assert load_token(str(folder), "insert") not in (first, second)


def test_a_source_naming_no_data_file_has_no_identity(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert local_source_files(str(tmp_path / "missing")) == []
    assert local_source_files(str(tmp_path / "notes.txt")) == []
    assert load_token(str(tmp_path / "nothing*.csv"), "insert") is None
    assert load_token("s3://bucket/rows.csv", "insert") is None
