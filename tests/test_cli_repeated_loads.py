"""`ledger load` of files already loaded into the table (same mode, paths, sizes, modification
times) warns on stderr and writes nothing, unless --force: a second load no longer doubles the
rows silently."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.test_cli import as_json, run_ledger

SCHEMA = "id BIGINT, amount BIGINT"


def _warehouse(tmp_path: Path, *key: str) -> Path:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", SCHEMA, *key, cwd=tmp_path)
    (tmp_path / "rows.csv").write_text("id,amount\n1,10\n2,20\n")
    return tmp_path


def _count(tmp_path: Path) -> int:
    result = run_ledger("-w", "wh", "sql", "SELECT count(*) AS n FROM t", "--json", cwd=tmp_path)
    return int(as_json(result)[0]["n"])


def test_loading_the_same_file_again_warns_and_writes_nothing(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path)
    first = run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd)
    assert as_json(first)["inserted"] == 2 and first.stderr == ""
    again = run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd)
    assert as_json(again)["skipped"] is True and as_json(again)["version"] is None
    assert "already loaded" in again.stderr and "--force" in again.stderr
    assert _count(cwd) == 2
    forced = run_ledger("-w", "wh", "load", "t", "rows.csv", "--force", "--json", cwd=cwd)
    assert as_json(forced)["inserted"] == 2 and "skipped" not in as_json(forced)
    assert _count(cwd) == 4


def test_a_changed_file_another_mode_or_another_path_is_loaded(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path, "--key", "id")
    run_ledger("-w", "wh", "load", "t", "rows.csv", cwd=cwd)
    (cwd / "rows.csv").write_text("id,amount\n3,30\n")
    stamp = os.stat(cwd / "rows.csv").st_mtime_ns + 10**9
    os.utime(cwd / "rows.csv", ns=(stamp, stamp))  # a new modification time, whatever the clock
    changed = run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd)
    assert as_json(changed)["inserted"] == 1
    upserted = run_ledger("-w", "wh", "load", "t", "rows.csv", "--mode", "upsert", cwd=cwd)
    assert "already" not in upserted.stderr
    (cwd / "copy").mkdir()
    (cwd / "copy" / "rows.csv").write_text("id,amount\n4,40\n")
    copied = run_ledger("-w", "wh", "load", "t", "copy/rows.csv", "--json", cwd=cwd)
    assert as_json(copied)["inserted"] == 1
    # A folder or a glob is the set of files it matches.
    assert "already" in run_ledger("-w", "wh", "load", "t", "copy", cwd=cwd).stderr
    globbed = run_ledger("-w", "wh", "load", "t", "copy/*.csv", cwd=cwd)
    assert "already" in globbed.stderr
    assert _count(cwd) == 4  # 1, 2, then 3 (inserted, then upserted in place), then 4


def test_two_loads_of_one_file_at_once_commit_it_once(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path)
    results = []

    def load() -> None:
        results.append(
            run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd, process=True)
        )

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(as_json(r).get("skipped", False) for r in results) == [False, True]
    assert _count(cwd) == 2
