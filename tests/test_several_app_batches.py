"""A transaction carrying several app batches (`apps=`) commits only while none of them is
committed: replayed whole or in part, it commits nothing, also when another writer commits one
of them between its start and its commit. The log keeps them, through checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledger
from ledger.cli.writing import load_tokens
from tests.test_cli import as_json, run_ledger


def _table(root: Path) -> ledger.Table:
    return ledger.connect(str(root / "wh")).create_table(
        "t", {"id": "BIGINT"}, checkpoint_interval=3
    )


def test_a_transaction_of_several_apps_commits_while_none_is_committed(tmp_path: Path) -> None:
    table = _table(tmp_path)
    first = table.transaction(apps={"a": 1, "b": 1})
    first.insert([{"id": 1}])
    racing = table.transaction(apps={"b": 1, "c": 1})  # began before the first committed
    racing.insert([{"id": 2}])
    assert first.commit().version == 1
    assert racing.commit().version is None  # "b" landed first
    with table.transaction(apps={"a": 1}) as replay:
        assert replay.insert([{"id": 3}]) == 0
    assert table.retrying(lambda tx: tx.insert([{"id": 4}]), apps={"c": 1, "d": 2}).version == 2
    for version in range(3, 6):
        table.insert([{"id": 10 + version}])  # past a checkpoint
    reopened = ledger.connect(str(tmp_path / "wh")).table("t")
    assert reopened.handle.latest_state().apps == {"a": 1, "b": 1, "c": 1, "d": 2}
    assert sorted(reopened.to_arrow()["id"].to_pylist()) == [1, 4, 13, 14, 15]


def test_apps_are_checked(tmp_path: Path) -> None:
    table = _table(tmp_path)
    for apps in ({"": 1}, {"a": -1}, {"a": "1"}, [("a", 1)]):
        with pytest.raises(ledger.InvalidArgumentError):
            table.transaction(apps=apps)  # type: ignore[arg-type]
    with pytest.raises(ledger.InvalidArgumentError):
        table.transaction(app_id="a", batch=1, apps={"b": 1})


def test_a_file_loaded_under_its_app_id_alone_is_known_to_a_folder_load(tmp_path: Path) -> None:
    """A one-file load commits the app id the file has in a folder load (as `app`, written
    before loads carried one app id per file, or in `apps`): either way it is not loaded again."""
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "id BIGINT", cwd=tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id\n1\n")
    (tmp_path / "in" / "b.csv").write_text("id\n2\n")
    table = ledger.connect(str(tmp_path / "wh")).table("t")
    [(path, token)] = load_tokens(str(tmp_path / "in" / "a.csv"), "insert").items()
    table.insert(path, app_id=token, batch=1)
    loaded = run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=tmp_path)
    assert as_json(loaded)["inserted"] == 1
    assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2]
