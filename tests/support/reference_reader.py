"""An independent reader of ledger tables, written from docs/format.md, concepts.md and views.md.

It imports nothing of the library (only pyarrow, json and the standard library), so it checks
that the format is open: the docs alone are enough to read a table. It reads a table folder on
local disk at any version: the log (section 4.1 of format.md: checkpoint base, later commits,
tombstones, `expunged`, drops and re-creations), the data files the state names (section 7: every
file projected to the current schema), the visible rows and the sign-weighted totals of a
collapsing table (concepts.md section 1, views.md sections 2 and 3).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq

_COMMIT = re.compile(r"^(\d{20})\.jsonl$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.jsonl$")
SYSTEM = ("trx_id", "trx_seq", "dml_type")
ROW_ID = "_row_id"


class FormatError(Exception):
    """The files break a rule of docs/format.md."""


@dataclass(frozen=True)
class LogFile:
    meta: dict[str, Any]
    schema: dict[str, str]
    markers: list[dict[str, Any]]


@dataclass
class State:
    """format.md 4.1: the state of a table at one version."""

    version: int
    config: dict[str, Any]
    schema: dict[str, str]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_trx_id: int = 0
    apps: dict[str, int] = field(default_factory=dict)
    dropped: bool = False

    def alive(self) -> list[dict[str, Any]]:
        return [marker for marker in self.files.values() if "tmb" not in marker]


# --- the log (format.md sections 1, 2 and 4) -----------------------------------------------------


def read_log_file(path: str) -> LogFile:
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.endswith(b"\n"):
        raise FormatError(f"{path}: no final newline (a truncated write)")
    lines = [json.loads(line) for line in raw.decode("utf-8").split("\n")[:-1]]
    meta = lines[0]
    if meta["v"] != 1 or meta["lines"] != len(lines):
        raise FormatError(f"{path}: format {meta['v']}, {len(lines)} lines for {meta['lines']}")
    schema = lines[meta["sch"]]
    return LogFile(meta=meta, schema=schema, markers=lines[meta["f"] :])


def log_versions(table_folder: str) -> tuple[list[int], list[int]]:
    """(commit versions, checkpoint versions) present in ``_log/``."""
    names = os.listdir(os.path.join(table_folder, "_log"))
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    checkpoints = sorted(int(m.group(1)) for n in names if (m := _CHECKPOINT.match(n)))
    return commits, checkpoints


def _log_path(table_folder: str, version: int, checkpoint: bool = False) -> str:
    suffix = ".checkpoint.jsonl" if checkpoint else ".jsonl"
    return os.path.join(table_folder, "_log", f"{version:020d}{suffix}")


def latest_version(table_folder: str) -> int:
    commits, checkpoints = log_versions(table_folder)
    return max(commits + checkpoints)


def state_at(table_folder: str, version: int) -> State:
    """format.md 4.1: from the newest checkpoint at or below ``version`` (else commit 0), apply
    every later commit up to ``version`` in order."""
    _, checkpoints = log_versions(table_folder)
    bases = [v for v in checkpoints if v <= version]
    if bases:
        base = read_log_file(_log_path(table_folder, bases[-1], checkpoint=True))
        state = State(
            version=bases[-1],
            config=base.meta["config"],
            schema=base.schema,
            files={marker["p"]: marker for marker in base.markers},
            max_trx_id=base.meta["max_trx_id"],
            apps=dict(base.meta["apps"]),
        )
    else:
        first = read_log_file(_log_path(table_folder, 0))
        if first.meta["op"] != "create_table":
            raise FormatError("commit 0 is not a create_table")
        state = State(version=0, config=first.meta["config"], schema=first.schema)
    for number in range(state.version + 1, version + 1):
        path = _log_path(table_folder, number)
        if not os.path.exists(path):
            raise FormatError(f"version {number} is missing: the log has a gap")
        _apply(state, read_log_file(path))
    return state


def _apply(state: State, commit: LogFile) -> None:
    meta = commit.meta
    if meta["version"] != state.version + 1:
        raise FormatError(f"version {meta['version']} follows {state.version}")
    state.version = meta["version"]
    if meta["op"] == "create_table":
        state.files, state.apps, state.dropped = {}, {}, False
    if meta["op"] == "drop_table":
        state.dropped = True
    if "config" in meta:
        state.config = meta["config"]
    state.schema = commit.schema
    for marker in commit.markers:
        state.files[marker["p"]] = marker
    for path in meta.get("expunged", []):
        if path in state.files and "tmb" in state.files[path]:
            del state.files[path]
    if "trx_id" in meta:
        state.max_trx_id = max(state.max_trx_id, meta["trx_id"])
    if "app" in meta:
        app = meta["app"]
        state.apps[app["id"]] = max(state.apps.get(app["id"], -1), app["batch"])


# --- the entries (format.md section 7) ----------------------------------------------------------


def value_columns(state: State) -> list[str]:
    """The user columns, then ``_row_id`` in a table without a primary key."""
    extra = [ROW_ID] if state.config.get("generated_row_id") else []
    return [*state.schema, *extra]


def key_columns(state: State) -> list[str]:
    return list(state.config["primary_key"]) or [ROW_ID]


def entries(table_folder: str, state: State) -> list[dict[str, Any]]:
    """Every entry of the alive files, projected to the current schema (a column a file lacks
    is NULL; a narrower integer or float reads as the same Python number)."""
    wanted = [*value_columns(state), *SYSTEM]
    out: list[dict[str, Any]] = []
    for marker in state.alive():
        rows = pq.read_table(os.path.join(table_folder, marker["p"])).to_pylist()
        if len(rows) != marker["rows"] or sum(r["dml_type"] for r in rows) != marker["dml_sum"]:
            raise FormatError(f"{marker['p']}: rows or dml_sum differ from its marker")
        out.extend({name: row.get(name) for name in wanted} for row in rows)
    return out


# --- meaning (concepts.md section 1, views.md sections 2 and 3) ----------------------------------


def _comparable(value: Any) -> Any:
    """Values compare as GROUP BY does, NaN equal to NaN, -0.0 apart from 0.0."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("nan",)
        if value == 0.0:
            return ("zero", math.copysign(1.0, value))
    if isinstance(value, Decimal):
        return ("decimal", value.normalize())
    return value


def visible_rows(table_folder: str, version: int) -> list[tuple[Any, ...]]:
    """The visible row of every key, as tuples of the user columns (sorted by repr)."""
    state = state_at(table_folder, version)
    if state.dropped:
        raise FormatError(f"the table does not exist at version {version}")
    values, keys = value_columns(state), key_columns(state)
    live: dict[tuple[Any, ...], dict[str, Any]] = {}  # value tuple -> net, latest insertion
    for entry in entries(table_folder, state):
        identity = tuple(_comparable(entry[c]) for c in values)
        group = live.setdefault(identity, {"net": 0, "latest": None, "row": entry})
        group["net"] += entry["dml_type"]
        if entry["dml_type"] > 0:
            order = (entry["trx_id"], entry["trx_seq"])
            if group["latest"] is None or order > group["latest"]:
                group["latest"], group["row"] = order, entry
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for group in live.values():
        if group["net"] <= 0:
            continue
        key = tuple(_comparable(group["row"][c]) for c in keys)
        if key not in best or group["latest"] > best[key]["latest"]:
            best[key] = group
    shown = list(state.schema)
    return sorted((tuple(g["row"][c] for c in shown) for g in best.values()), key=repr)


def totals(
    table_folder: str, version: int, by: list[str], sum_column: str
) -> list[tuple[Any, ...]]:
    """views.md 3: per group, COUNT = sum(dml_type) and SUM(x) = sum(dml_type * x) (NULL when
    no visible row has a non-NULL x); groups that count no row are left out when grouping."""
    state = state_at(table_folder, version)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for entry in entries(table_folder, state):
        group = groups.setdefault(tuple(entry[c] for c in by), [0, 0, 0])
        sign, x = entry["dml_type"], entry[sum_column]
        group[0] += sign
        if x is not None:
            group[1] += sign * x
            group[2] += sign
    out = [
        (*key, count, total if non_null else None)
        for key, (count, total, non_null) in groups.items()
        if count != 0 or not by
    ]
    if not by and not out:
        out = [(0, None)]
    return sorted(out, key=repr)
