"""Warehouse locations that name nothing usable are refused before anything is created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ledger


@pytest.mark.parametrize("uri", ["", "   ", "file://relative/x", "file://some-host/data/x"])
def test_an_empty_location_or_a_file_uri_with_a_host_is_refused(
    uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ledger.InvalidArgumentError):
        ledger.connect(uri).create_table("t", {"id": "BIGINT"}, primary_key="id")
    assert os.listdir(tmp_path) == []
    assert not Path("/data/x").exists() and not Path("/x").exists()


def test_file_uris_with_an_absolute_path_or_localhost_open_that_path(tmp_path: Path) -> None:
    for uri in (f"file://{tmp_path}/a", f"file://localhost{tmp_path}/b"):
        ledger.connect(uri).create_table("t", {"id": "BIGINT"}, primary_key="id")
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]
