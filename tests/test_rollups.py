"""Materialized rollups (ledger.rollup): an aggregating table that follows a base ledger exactly
once.

Every check compares the rollup's rows (``views.visible(rollup.table)``) with an oracle that never
touches a ledger: a plain list of the base's rows, changed in place by every write, summed per
group in Python. Since the rollup holds the base *as of its watermark*, the oracle's totals are
kept for every base version, and the rollup is checked against the totals at its watermark.

- A model (hypothesis): random writes of every kind on a partitioned collapsing base with NULL-able
  numeric columns, interleaved with refreshes, merges of the base and of the rollup, partition
  drops, vacuums and rebuilds.
- Faults: the N-th storage call of a refresh (and of a rebuild) fails, once or for good (a crash),
  for every N; a commit whose response is lost. Never double counted, never missing.
- Races: refreshes racing each other, base writes and merges, freely and at chosen moments.
- auto_refresh: the rollup follows every base write; a failing refresh never fails the write.
- S3, bad input, and refreshing past a vacuumed history (then rebuild).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow.fs as pafs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import ledger
import views
from ledger.errors import (
    InvalidArgumentError,
    KeyNotFoundError,
    LedgerError,
    SchemaError,
    SnapshotNotFoundError,
    TableExistsError,
    UnknownColumnError,
)
from ledger.maintenance import vacuum as vacuuming
from ledger.rollup import Rollup
from ledger.snapshot import Snapshot
from ledger.storage import Store
from tests.conftest import Location, examples
from tests.support.failing import (
    FAULTS,
    CallCounter,
    FailingStore,
    InjectedFault,
    _FailingHandler,
    caused_by_fault,
)
from tests.support.lost_responses import LateFailingStore, LostCommitResponseStore
from tests.support.maintenance import POLICIES, clock_ahead, set_clock_skew, vacuum_now
from tests.support.scratch import make_scratch_dir

SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "p": "BIGINT", "x": "BIGINT", "d": "DECIMAL(10,2)"}
COLUMNS = tuple(SCHEMA)
PARTITION_BY = ["p"]
BY = ["g"]
# A row count, a sum and a count of a NULL-able column, and a decimal sum (another measure order:
# test_a_group_whose_values_are_all_null_is_not_hidden).
MEASURES = {"views": "count", "total": "sum(x)", "n": "count(x)", "dsum": "sum(d)"}

Totals = list[tuple[Any, ...]]


def dec(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


# --- the oracle ----------------------------------------------------------------------------------


class Oracle:
    """The base table's rows, a plain list changed in place (insertion order kept, so that a
    key's latest row is its last one). Semantics as in tests/test_model.py: insert adds rows (a
    key may get several), upsert and update replace every row of a key by one row whose missing
    columns keep the key's latest values, delete removes every row of a key, a delete mark
    removes one row equal to the values it carries."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    @staticmethod
    def full(row: dict[str, Any]) -> dict[str, Any]:
        return {c: row.get(c) for c in COLUMNS}

    def of_key(self, key: int) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["k"] == key]

    def insert(self, rows: list[dict[str, Any]]) -> None:
        self.rows += [self.full(r) for r in rows]

    def replace(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            current = self.of_key(row["k"])
            merged = dict(current[-1]) if current else self.full({})
            merged.update(row)
            self.delete([row["k"]])
            self.rows.append(merged)

    def delete(self, keys: list[int]) -> None:
        self.rows = [r for r in self.rows if r["k"] not in keys]

    def delete_where(self, matches: Callable[[dict[str, Any]], bool]) -> None:
        self.rows = [r for r in self.rows if not matches(r)]

    def cancel(self, row: dict[str, Any]) -> None:
        self.rows.remove(self.full(row))

    def drop_partition(self, p: int) -> None:
        self.rows = [r for r in self.rows if r["p"] != p]

    def totals(self) -> Totals:
        """Per group: count, coalesce(sum(x), 0), count(x), coalesce(sum(d), 0)."""
        groups: dict[Any, list[Any]] = {}
        for row in self.rows:
            g = groups.setdefault(row["g"], [0, 0, 0, Decimal(0)])
            g[0] += 1
            if row["x"] is not None:
                g[1] += row["x"]
                g[2] += 1
            if row["d"] is not None:
                g[3] += row["d"]
        return ordered((key, *values) for key, values in groups.items())


def ordered(rows: Any) -> Totals:
    """Rows sorted, NULLs last (a NULL group sorts like any other)."""
    return sorted(rows, key=lambda t: tuple((v is None, v) for v in t))


def row(k: int, g: str, p: int, x: int | None, d: Decimal | None) -> dict[str, Any]:
    return {"k": k, "g": g, "p": p, "x": x, "d": d}


def as_entries(rows: list[dict[str, Any]], sign: int) -> list[dict[str, Any]]:
    return [{**Oracle.full(r), "dml_type": sign} for r in rows]


# --- reading -------------------------------------------------------------------------------------


def rows_of(source: ledger.Table | Snapshot) -> Totals:
    return ordered(views.visible(source).fetchall())


def rollup_state(rollup: Rollup) -> tuple[int | None, Totals]:
    """The rollup's watermark and rows, read from one snapshot."""
    snap, watermark = rollup.snapshot()
    return watermark, rows_of(snap)


def base_totals(base: ledger.Table, version: int) -> Totals:
    """The library's own totals of the base (views.totals) in the oracle's shape (no count(x):
    totals has none, so the oracle's is left out on comparison)."""
    rel = views.totals(base, by=BY, sum=["x", "d"], version=version)
    return ordered((g, n, sx or 0, sd or Decimal(0)) for g, n, sx, sd in rel.fetchall())


def without_count_x(totals: Totals) -> Totals:
    return [(g, n, sx, sd) for g, n, sx, _, sd in totals]


def create_base(warehouse: ledger.Warehouse, name: str = "b", **options: Any) -> ledger.Table:
    return warehouse.create_table(
        name, SCHEMA, primary_key=["k"], partition_by=PARTITION_BY, **options
    )


def rollup_commits(rollup: Rollup) -> list[tuple[int, int]]:
    """(version, batch) of every rollup commit that moved the watermark, in log order."""
    app = rollup.definition.app_id
    return [(r.version, r.batch) for r in rollup.table.history() if r.app_id == app]


def assert_watermarks_only_advance(rollup: Rollup) -> None:
    batches = [batch for _, batch in rollup_commits(rollup)]
    assert batches == sorted(set(batches)), (
        f"a watermark went back or was committed twice: {batches}"
    )


class VersionedOracle:
    """The oracle, and its totals at every base version (merges, drops and vacuums of the base
    commit versions too: a version no write made has the totals of the last one that did)."""

    def __init__(self) -> None:
        self.oracle = Oracle()
        self.at: dict[int, Totals] = {}
        self.lock = threading.Lock()

    def record(self, version: int) -> None:
        with self.lock:
            self.at[version] = self.oracle.totals()

    def settle(self, base: ledger.Table) -> None:
        """Every version up to the base's latest has the oracle's current totals."""
        latest = base.refresh().version
        with self.lock:
            known = max(self.at, default=-1)
            for version in range(known + 1, latest + 1):
                self.at[version] = self.oracle.totals()

    def expected(self, watermark: int) -> Totals:
        with self.lock:
            return self.at[max(v for v in self.at if v <= watermark)]


def check_rollup(rollup: Rollup, versions: VersionedOracle) -> int:
    """The rollup equals the oracle at its watermark; return the watermark."""
    watermark, rows = rollup_state(rollup)
    assert watermark is not None, "the rollup has no watermark"
    expected = versions.expected(watermark)
    assert rows == expected, f"watermark {watermark}: rollup {rows} != oracle {expected}"
    return watermark


# --- 1. the model ---------------------------------------------------------------------------------

KEYS = st.integers(min_value=0, max_value=7)
GROUPS = st.sampled_from(["a", "b", "c", None])  # NULL is a group of its own, as in GROUP BY
PARTS = st.integers(min_value=0, max_value=1)
XS = st.one_of(st.none(), st.integers(min_value=-20, max_value=20))
DS = st.one_of(st.none(), st.integers(min_value=-999, max_value=999).map(dec))
ROW = st.fixed_dictionaries({"k": KEYS, "g": GROUPS, "p": PARTS, "x": XS, "d": DS})
PARTIAL_ROW = st.one_of(
    st.fixed_dictionaries({"k": KEYS, "x": XS}),
    st.fixed_dictionaries({"k": KEYS, "d": DS}),
    st.fixed_dictionaries({"k": KEYS, "g": GROUPS, "x": XS}),
)


def _unique_keys(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list({r["k"]: r for r in rows}.values())


def _same_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    columns = set(rows[0])
    return [r for r in rows if set(r) == columns]


PREDICATES: dict[str, Callable[[int], Callable[[dict[str, Any]], bool]]] = {
    "x > {t}": lambda t: lambda r: r["x"] is not None and r["x"] > t,
    "x IS NULL AND p = {p}": lambda t: lambda r: r["x"] is None and r["p"] == t % 2,
    "d < {t}": lambda t: lambda r: r["d"] is not None and r["d"] < t,
    "g = 'b' OR x = {t}": lambda t: lambda r: r["g"] == "b" or r["x"] == t,
}


class RollupMachine(RuleBasedStateMachine):
    """A partitioned collapsing base (partitioned by ``p``, not by its key, so that a drop
    removes part of several groups) and its rollup per ``g``."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = make_scratch_dir("ledger-rollup-")  # in memory where possible
        self.warehouse = ledger.connect(self.directory)
        self.base = create_base(self.warehouse, checkpoint_interval=4)
        self.versions = VersionedOracle()
        self.versions.settle(self.base)
        self.rollup = self.base.create_rollup("r", by=BY, measures=MEASURES)
        assert self.rollup.watermark == self.base.version
        self.batches = itertools.count(1)

    @property
    def oracle(self) -> Oracle:
        return self.versions.oracle

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def _settle(self) -> None:
        self.versions.settle(self.base)

    # --- base writes ----------------------------------------------------------------------------

    @rule(rows=st.lists(ROW, min_size=1, max_size=4))
    def insert(self, rows: list[dict[str, Any]]) -> None:
        self.base.insert(rows)
        self.oracle.insert(rows)
        self._settle()

    @rule(rows=st.lists(ROW, min_size=1, max_size=3))
    def upsert(self, rows: list[dict[str, Any]]) -> None:
        rows = _unique_keys(rows)
        self.base.upsert(rows)
        self.oracle.replace(rows)
        self._settle()

    @rule(rows=st.lists(st.one_of(ROW, PARTIAL_ROW), min_size=1, max_size=3))
    def update(self, rows: list[dict[str, Any]]) -> None:
        rows = _same_columns(_unique_keys(rows))
        partial = set(rows[0]) != set(COLUMNS)
        counts = [len(self.oracle.of_key(r["k"])) for r in rows]
        if 0 in counts:
            version = self.base.version
            with pytest.raises(KeyNotFoundError):
                self.base.update(rows)
            assert self.base.refresh().version == version, "a failed update committed"
            return
        if partial and max(counts) > 1:
            return  # "the key's latest values" is ambiguous once marks cancelled some copies
        self.base.update(rows)
        self.oracle.replace(rows)
        self._settle()

    @rule(keys=st.lists(KEYS, min_size=1, max_size=3, unique=True))
    def delete(self, keys: list[int]) -> None:
        self.base.delete(keys)
        self.oracle.delete(keys)
        self._settle()

    @rule(which=st.sampled_from(sorted(PREDICATES)), t=st.integers(min_value=-10, max_value=10))
    def delete_where(self, which: str, t: int) -> None:
        self.base.delete_where(which.format(t=t, p=t % 2))
        self.oracle.delete_where(PREDICATES[which](t))
        self._settle()

    @rule(
        new=st.lists(ROW, max_size=3),
        cancel=st.lists(st.integers(min_value=0, max_value=50), max_size=2, unique=True),
        reload=st.booleans(),
    )
    def append_load(self, new: list[dict[str, Any]], cancel: list[int], reload: bool) -> None:
        """An idempotent load (app_id + batch) of insertions and of delete marks carrying the
        values of rows they cancel; with ``reload``, the same load is delivered again (a no-op)."""
        if self.oracle.rows:
            picked = sorted({i % len(self.oracle.rows) for i in cancel})
            marks = [self.oracle.rows[i] for i in picked]
        else:
            marks = []
        if not new and not marks:
            return
        entries = as_entries(new, 1) + as_entries(marks, -1)
        batch = next(self.batches)
        info = self.base.append_entries(entries, app_id="loader", batch=batch)
        assert info.version is not None
        for mark in marks:
            self.oracle.cancel(mark)
        self.oracle.insert(new)
        if reload:
            again = self.base.append_entries(entries, app_id="loader", batch=batch)
            assert again.version is None, "a duplicate load committed"
        self._settle()

    @rule(index=st.integers(min_value=0, max_value=50))
    def duplicate(self, index: int) -> None:
        """An at-least-once load: an existing row's entry appended again."""
        if not self.oracle.rows:
            return
        copy = self.oracle.rows[index % len(self.oracle.rows)]
        self.base.append_entries(as_entries([copy], 1))
        self.oracle.insert([copy])
        self._settle()

    @rule(rows=st.lists(ROW, min_size=1, max_size=2), keys=st.lists(KEYS, max_size=2))
    def transaction(self, rows: list[dict[str, Any]], keys: list[int]) -> None:
        rows = _unique_keys(rows)
        with self.base.transaction() as tx:
            tx.upsert(rows)
            self.oracle.replace(rows)
            if keys:
                tx.delete(sorted(set(keys)))
                self.oracle.delete(keys)
        self._settle()

    @rule(p=PARTS)
    def drop_partition(self, p: int) -> None:
        self.base.drop_partitions({"p": str(p)})
        self.oracle.drop_partition(p)
        self._settle()

    @rule(p=PARTS, key=KEYS)
    def rewrite_partition(self, p: int, key: int) -> None:
        """Filter one key's entries out of one partition: a delete mark is in its insertion's
        partition (it carries the same values), so the key's rows in that partition go."""
        self.base.rewrite_partitions({"p": str(p)}, f"SELECT * FROM entries WHERE k <> {key}")
        self.oracle.delete_where(lambda r: r["k"] == key and r["p"] == p)
        self._settle()

    # --- maintenance ----------------------------------------------------------------------------

    @rule(data=st.data())
    def merge_base(self, data: st.DataObject) -> None:
        markers = sorted(
            self.base.snapshot().markers(),
            key=lambda m: (m.trx_min, m.trx_max, repr(sorted(m.partition.items())), m.rows),
        )
        if data.draw(st.booleans(), label="subset") and markers:
            chosen = data.draw(
                st.lists(st.booleans(), min_size=len(markers), max_size=len(markers))
            )
            paths = [m.path for m, c in zip(markers, chosen, strict=True) if c]
            self.base.merge(files=paths or [markers[-1].path])
        else:
            self.base.merge(min_files=1)
        self._settle()

    @rule()
    def merge_rollup(self) -> None:
        before = rollup_state(self.rollup)
        self.rollup.table.merge(min_files=1)
        assert rollup_state(self.rollup) == before, "a merge changed the rollup"

    @rule()
    def vacuum_base(self) -> None:
        """Vacuum the base right away; a refresh that needs what it deleted is refused, and a
        rebuild then restores the totals."""
        before = rollup_state(self.rollup)
        vacuum_now(self.base)
        self._settle()
        try:
            self.rollup.refresh()
        except SnapshotNotFoundError:
            assert rollup_state(self.rollup) == before, "a refused refresh changed the rollup"
            self.rollup.rebuild()
        assert self.rollup.watermark == self.base.refresh().version

    # --- the rollup -----------------------------------------------------------------------------

    @rule()
    def refresh(self) -> None:
        result = self.rollup.refresh()
        latest = self.base.refresh().version
        assert result.watermark == latest == self.rollup.watermark
        rows = rows_of(self.rollup.table)
        assert rows == self.oracle.totals()
        # The oracle agrees with the library's own totals of the base at the watermark.
        assert without_count_x(rows) == base_totals(self.base, result.watermark)

    @rule()
    def rebuild(self) -> None:
        result = self.rollup.rebuild()
        assert result.watermark == self.base.refresh().version == self.rollup.watermark
        assert rows_of(self.rollup.table) == self.oracle.totals()

    @rule()
    def reopen(self) -> None:
        self.rollup = self.warehouse.rollup("r")
        self.base = self.rollup.base

    @invariant()
    def rollup_is_the_oracle_at_its_watermark(self) -> None:
        check_rollup(self.rollup, self.versions)
        assert_watermarks_only_advance(self.rollup)


TestRollupModel = RollupMachine.TestCase
TestRollupModel.settings = settings(max_examples=examples(8), stateful_step_count=14, deadline=None)


# --- fault injection -----------------------------------------------------------------------------


def clone_table(warehouse: ledger.Warehouse, source: str, name: str) -> None:
    """Copy every object of table ``source`` to ``name`` (log paths are relative to the table,
    so the copy is the same rollup, following the same base)."""
    store = warehouse.store
    for info in store.list(f"{source}/"):
        target = name + info.key[len(source) :]
        source_path, target_path = store.local_path(info.key), store.local_path(target)
        if source_path is not None and target_path is not None:
            os.makedirs(os.path.dirname(target_path), exist_ok=True)
            shutil.copy2(source_path, target_path)
        else:
            store.put(target, store.get(info.key))


@dataclass(frozen=True)
class Template:
    """Rollup ``template`` at ``before`` (a base version); the base has moved on to ``after``."""

    before: int
    after: int
    versions: VersionedOracle


def build_template(warehouse: ledger.Warehouse) -> Template:
    """A base and a rollup behind it by every kind of change: inserts (one of them a duplicate
    load), an update moving rows between groups and partitions, deletes, a delete_where, delete
    marks appended by a loader, a merge, a partition drop (so the change set has removed files
    as well as written ones) and an insert into the dropped partition."""
    versions = VersionedOracle()
    oracle = versions.oracle
    base = create_base(warehouse, checkpoint_interval=3)
    first = [row(k, "abc"[k % 3], k % 2, k if k % 4 else None, dec(k * 25)) for k in range(9)]
    base.insert(first)
    oracle.insert(first)
    versions.settle(base)
    rollup = base.create_rollup("template", by=BY, measures=MEASURES)
    before = rollup.watermark
    assert before == base.version

    more = [row(k, "abcd"[k % 4], k % 2, -k, None) for k in range(9, 14)]
    base.insert(more)
    oracle.insert(more)
    base.append_entries(as_entries(more[:1], 1))  # a duplicate load
    oracle.insert(more[:1])
    changed = [row(1, "d", 0, 100, dec(1)), row(4, "a", 1, None, dec(-350))]
    base.update(changed)
    oracle.replace(changed)
    base.delete([2, 11])
    oracle.delete([2, 11])
    base.delete_where("x IS NULL AND p = 0")
    oracle.delete_where(lambda r: r["x"] is None and r["p"] == 0)
    marks = [oracle.rows[0], oracle.rows[-1]]
    base.append_entries(as_entries(marks, -1), app_id="loader", batch=1)
    for mark in marks:
        oracle.cancel(mark)
    versions.settle(base)
    assert base.merge({"p": "0"}, min_files=1).version is not None
    versions.settle(base)
    assert base.drop_partitions({"p": "1"}).version is not None
    oracle.drop_partition(1)
    last = [row(20, "a", 1, 7, dec(70)), row(21, "e", 0, None, None)]
    base.insert(last)
    oracle.insert(last)
    versions.settle(base)
    assert versions.expected(base.version) != versions.expected(before)
    return Template(before, base.version, versions)


def _counted_local_path(self: FailingStore, key: str) -> str | None:
    self.counter.tick(f"local path {key}")
    return self.inner.local_path(key)


def armed(
    store_type: type[FailingStore],
    inner: Store,
    name: str,
    n: int | None,
    native_filesystem: bool = False,
) -> FailingStore:
    """A failing store whose count starts after the rollup was opened (so that N counts the
    refresh's own calls). Locally DuckDB opens data files by path, past the store's count, so
    asking for a file's local path counts (and fails) as a call too: reads of the base's files
    are swept like every other call. Reading them through the failing store's Python
    filesystem instead (as on S3) can deadlock pyarrow's I/O threads against DuckDB (see
    failing.py): with ``native_filesystem`` data files are read and written through the inner
    store's own filesystem (uncounted), which S3 needs."""
    members: dict[str, Any] = {"local_path": _counted_local_path}
    if native_filesystem:
        members["filesystem"] = property(lambda self: self.inner.filesystem)
    counted = type(f"Counted{store_type.__name__}", (store_type,), members)
    store = counted(inner, fail_at=None)
    opened = ledger.Warehouse(store).rollup(name)
    start = store.counter.calls
    store.counter.fail_at = None if n is None else start + n
    store.opened = opened  # type: ignore[attr-defined]
    store.start = start  # type: ignore[attr-defined]
    return store


def present_files(warehouse: ledger.Warehouse, name: str) -> set[str]:
    prefix = f"{name}/_data/"
    return {i.key[len(name) + 1 :] for i in warehouse.store.list(prefix)}


def check_after_fault(
    warehouse: ledger.Warehouse,
    name: str,
    template: Template,
    error: BaseException | None,
    where: str,
) -> None:
    """The rollup reads as before or as after, matching what was reported; a later run on a
    working store ends exactly at the base's latest totals, committed exactly once."""
    if error is not None:
        assert caused_by_fault(error), f"{where}: unrelated error {error!r}"
    rollup = warehouse.rollup(name)
    watermark, rows = rollup_state(rollup)
    assert watermark in (template.before, template.after), f"{where}: watermark {watermark}"
    assert rows == template.versions.expected(watermark), f"{where}: at {watermark}: {rows}"
    # Nothing after the commit can fail a refresh, so an error means nothing was committed.
    assert (error is None) == (watermark == template.after), f"{where}: {error!r} at {watermark}"
    alive = {m.path for m in rollup.table.snapshot().state.alive_files}
    missing = alive - present_files(warehouse, name)
    assert not missing, f"{where}: alive rollup files are missing: {missing}"

    again = rollup.refresh()
    assert again.watermark == template.after
    assert (again.version is None) == (error is None), f"{where}: retry {again}"
    assert rows_of(rollup.table) == template.versions.expected(template.after), where
    batches = [batch for _, batch in rollup_commits(rollup)]
    assert batches.count(template.after) == 1, f"{where}: batches committed {batches}"


def _kind(call: str) -> str:
    """A call's kind: its verb and the table folder it touches (``get b/_log``)."""
    verb, _, key = call.partition(" ")
    if verb in ("fs", "local"):
        verb, _, key = call.partition(" ")[2].partition(" ")
        verb = f"{call.split()[0]} {verb}"
    parts = key.strip("/").split("/")
    folder = "/".join(parts[:2]) if not key.startswith("/") else key.rsplit("/", 2)[0]
    return f"{verb} {folder}"


def calls_to_fail(calls: list[str]) -> list[int]:
    """Every call (1-based), except inside a run of consecutive reads of one kind (the base's
    log files, or its data files), where the first and the last stand for the run: failing
    the 3rd of 9 log reads is the same fault as failing the 2nd."""
    chosen = []
    for n, call in enumerate(calls, 1):
        read = call.startswith(("get ", "fs path ", "local path "))
        same_before = n > 1 and _kind(calls[n - 2]) == _kind(call)
        same_after = n < len(calls) and _kind(calls[n]) == _kind(call)
        if not (read and same_before and same_after):
            chosen.append(n)
    return chosen


@pytest.mark.timeout(300)
@pytest.mark.parametrize("operation", ["refresh", "rebuild"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_at_any_storage_call_of_a_refresh_counts_every_change_exactly_once(
    local_location: Location, fault: str, operation: str
) -> None:
    warehouse = local_location.connect()
    template = build_template(warehouse)

    clone_table(warehouse, "template", "clean")
    probe = armed(FailingStore, warehouse.store, "clean", None)
    result = getattr(probe.opened, operation)()  # type: ignore[attr-defined]
    calls = probe.counter.log[probe.start :]  # type: ignore[attr-defined]
    assert result.version is not None and result.watermark == template.after
    assert rows_of(warehouse.table("clean")) == template.versions.expected(template.after)
    # The refresh read the base's log and data, wrote a data file and committed.
    assert any(c.startswith("local path ") and "b/_data/" in c for c in calls), calls
    assert any(c.startswith("fs write ") and "clean/_data/" in c for c in calls), calls
    assert any(c.startswith("put_if_absent clean/_log/") for c in calls), calls

    chosen = calls_to_fail(calls)
    assert len(chosen) >= 8, chosen
    for n in chosen:
        name = f"r{n}"
        clone_table(warehouse, "template", name)
        failing = armed(FAULTS[fault], warehouse.store, name, n)
        try:
            getattr(failing.opened, operation)()  # type: ignore[attr-defined]
            error = None
        except Exception as e:
            error = e
        assert failing.counter.failed, f"call {n} not reached: the call count changed"
        where = f"{fault} at call {n} of {operation} ({calls[n - 1]})"
        check_after_fault(warehouse, name, template, error, where)


def test_a_refresh_whose_commit_response_is_lost_is_not_repeated(
    local_location: Location,
) -> None:
    warehouse = local_location.connect()
    template = build_template(warehouse)
    expected = template.versions.expected(template.after)

    # The commit lands, but the caller hears an error: a retried refresh is a no-op.
    clone_table(warehouse, "template", "late")
    probe = armed(FailingStore, warehouse.store, "late", None)
    probe.opened.refresh()  # type: ignore[attr-defined]
    calls = probe.counter.log[probe.start :]  # type: ignore[attr-defined]
    commit = next(n for n, c in enumerate(calls, 1) if c.startswith("put_if_absent late/_log/"))
    clone_table(warehouse, "template", "late2")
    late = armed(LateFailingStore, warehouse.store, "late2", commit)
    with pytest.raises(InjectedFault):
        late.opened.refresh()  # type: ignore[attr-defined]
    rollup = warehouse.rollup("late2")
    assert rollup_state(rollup) == (template.after, expected)
    retried = rollup.refresh()
    assert retried.version is None and retried.watermark == template.after
    assert rows_of(rollup.table) == expected
    assert [b for _, b in rollup_commits(rollup)].count(template.after) == 1

    # The commit lands and put-if-absent answers "exists" (a retried PUT got 412): the refresh
    # recognises its own commit and reports it; a second refresh does nothing.
    clone_table(warehouse, "template", "lost")
    lost = LostCommitResponseStore(warehouse.store)
    result = ledger.Warehouse(lost).rollup("lost").refresh()
    assert lost.lost is not None and lost.lost.startswith("lost/_log/")
    assert result.version is not None and result.watermark == template.after
    rollup = warehouse.rollup("lost")
    assert rollup.refresh().version is None
    assert rollup_state(rollup) == (template.after, expected)
    assert [b for _, b in rollup_commits(rollup)].count(template.after) == 1


# --- 3. races ------------------------------------------------------------------------------------


class HookStore(FailingStore):
    """The real store; ``hook`` runs once, just before the first put-if-absent ``when`` accepts."""

    def __init__(self, inner: Store, when: Callable[[str], bool], hook: Callable[[], Any]) -> None:
        super().__init__(inner, fail_at=None)
        self.when, self.hook = when, hook
        self.fired = False
        self.result: Any = None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if not self.fired and self.when(key):
            self.fired = True
            self.result = self.hook()
        return super().put_if_absent(key, data)


def _is_rollup_commit(name: str) -> Callable[[str], bool]:
    return lambda key: key.startswith(f"{name}/_log/") and ".checkpoint." not in key


@pytest.fixture
def seeded(local_location: Location) -> tuple[ledger.Warehouse, VersionedOracle]:
    """Base ``b`` (some rows), rollup ``r`` refreshed, and the oracle."""
    warehouse = local_location.connect()
    versions = VersionedOracle()
    base = create_base(warehouse)
    rows = [row(k, "abc"[k % 3], k % 2, k, dec(k)) for k in range(6)]
    base.insert(rows)
    versions.oracle.insert(rows)
    versions.settle(base)
    base.create_rollup("r", by=BY, measures=MEASURES)
    return warehouse, versions


def test_a_refresh_overtaken_by_a_further_refresh_commits_nothing(
    seeded: tuple[ledger.Warehouse, VersionedOracle],
) -> None:
    warehouse, versions = seeded
    other = warehouse.rollup("r")

    def write_then_refresh() -> Any:
        rows = [row(30, "a", 0, 5, dec(5))]
        other.base.insert(rows)
        versions.oracle.insert(rows)
        versions.settle(other.base)
        return other.refresh()

    hook = HookStore(warehouse.store, _is_rollup_commit("r"), write_then_refresh)
    racing = ledger.Warehouse(hook).rollup("r")
    racing.base.insert([row(31, "b", 1, 6, None)])  # so that the racing refresh has work
    versions.oracle.insert([row(31, "b", 1, 6, None)])
    versions.settle(racing.base)
    target = racing.base.version
    result = racing.refresh()

    # The other refresh rolled up every change up to a later version first: the racing one
    # must not add its (older) deltas on top.
    latest = warehouse.table("b").version
    assert hook.fired and hook.result.version is not None and hook.result.watermark == latest
    assert result.version is None and result.watermark in (target, latest)
    rollup = warehouse.rollup("r")
    assert check_rollup(rollup, versions) == latest
    assert rows_of(rollup.table) == versions.oracle.totals()
    assert_watermarks_only_advance(rollup)


@pytest.mark.parametrize("operation", ["refresh", "rebuild"])
def test_a_refresh_whose_watermark_moved_under_it_starts_again(
    seeded: tuple[ledger.Warehouse, VersionedOracle], operation: str
) -> None:
    """Refresh W reads the base at T1 and stalls before its commit; the base moves on to T2;
    L (a refresh or a rebuild) reads T2 and, just before its commit, W commits T1. L's commit
    no longer follows the watermark it started from: it must start again from T1 (a rebuild:
    cancel what the rollup holds at T1, not at the old watermark)."""
    warehouse, versions = seeded
    base = warehouse.table("b")
    base.insert([row(60, "a", 0, 1, dec(1))])
    versions.oracle.insert([row(60, "a", 0, 1, dec(1))])
    versions.settle(base)
    t1 = base.version
    at_commit, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def stall() -> None:
        at_commit.set()
        assert release.wait(60), "never released"

    def run_w() -> None:
        try:
            store = HookStore(warehouse.store, _is_rollup_commit("r"), stall)
            outcome["w"] = ledger.Warehouse(store).rollup("r").refresh()
        except BaseException as e:
            outcome["w"] = e
            at_commit.set()

    w_thread = threading.Thread(target=run_w)
    w_thread.start()
    assert at_commit.wait(60)
    base.update([row(0, "c", 1, 70, None)])
    versions.oracle.replace([row(0, "c", 1, 70, None)])
    base.insert([row(61, "b", 1, None, dec(2))])
    versions.oracle.insert([row(61, "b", 1, None, dec(2))])
    versions.settle(base)
    t2 = base.version

    def let_w_commit() -> None:
        release.set()
        w_thread.join(60)

    hook = HookStore(warehouse.store, _is_rollup_commit("r"), let_w_commit)
    result = getattr(ledger.Warehouse(hook).rollup("r"), operation)()
    assert hook.fired and not w_thread.is_alive()
    w_result = outcome["w"]
    assert not isinstance(w_result, BaseException), repr(w_result)
    assert w_result.watermark == t1 and w_result.version is not None
    assert result.watermark == t2 and result.version == w_result.version + 1
    rollup = warehouse.rollup("r")
    assert check_rollup(rollup, versions) == t2
    assert rows_of(rollup.table) == versions.oracle.totals()
    assert [b for _, b in rollup_commits(rollup)][-2:] == [t1, t2]
    assert_watermarks_only_advance(rollup)


def test_a_write_landing_while_a_refresh_commits_is_left_for_the_next_refresh(
    seeded: tuple[ledger.Warehouse, VersionedOracle],
) -> None:
    warehouse, versions = seeded
    base = warehouse.table("b")
    base.insert([row(40, "c", 0, 1, dec(1))])
    versions.oracle.insert([row(40, "c", 0, 1, dec(1))])
    versions.settle(base)
    target = base.version

    def write() -> Any:
        rows = [row(41, "c", 1, 2, dec(2))]
        info = base.insert(rows)
        versions.oracle.insert(rows)
        versions.settle(base)
        return info

    hook = HookStore(warehouse.store, _is_rollup_commit("r"), write)
    result = ledger.Warehouse(hook).rollup("r").refresh()
    assert hook.fired and hook.result.version == target + 1
    assert result.watermark == target  # the write came after the refresh read the base
    rollup = warehouse.rollup("r")
    assert check_rollup(rollup, versions) == target
    assert rollup.refresh().watermark == target + 1
    assert check_rollup(rollup, versions) == target + 1


def test_a_rebuild_overtaken_by_a_further_refresh_commits_nothing(
    seeded: tuple[ledger.Warehouse, VersionedOracle],
) -> None:
    warehouse, versions = seeded
    other = warehouse.rollup("r")
    rows = [row(50, "a", 0, 9, dec(9))]
    other.base.insert(rows)
    versions.oracle.insert(rows)
    versions.settle(other.base)

    def write_then_refresh() -> Any:
        more = [row(51, "b", 1, None, dec(3))]
        other.base.update([row(0, "b", 1, 1000, None)])
        versions.oracle.replace([row(0, "b", 1, 1000, None)])
        other.base.insert(more)
        versions.oracle.insert(more)
        versions.settle(other.base)
        return other.refresh()

    hook = HookStore(warehouse.store, _is_rollup_commit("r"), write_then_refresh)
    result = ledger.Warehouse(hook).rollup("r").rebuild()
    assert hook.fired and hook.result.version is not None
    latest = warehouse.table("b").version
    assert hook.result.watermark == latest
    assert result.version is None and result.watermark <= latest
    rollup = warehouse.rollup("r")
    assert check_rollup(rollup, versions) == latest
    assert_watermarks_only_advance(rollup)


def _random_write(
    base: ledger.Table, oracle: Oracle, rng: random.Random, ids: Iterator[int]
) -> int | None:
    """One random write to the base, applied to the oracle; its version."""
    kind = rng.choice(["insert", "insert", "upsert", "update", "delete", "append", "where"])
    if kind == "insert":
        rows = [
            row(
                next(ids),
                rng.choice("abc"),
                rng.randint(0, 1),
                rng.randint(-9, 9),
                dec(rng.randint(-99, 99)),
            )
            for _ in range(rng.randint(1, 3))
        ]
        info = base.insert(rows)
        oracle.insert(rows)
    elif kind in ("upsert", "update") and oracle.rows:
        keys = sorted({rng.choice(oracle.rows)["k"] for _ in range(2)})
        rows = [
            row(k, rng.choice("abcd"), rng.randint(0, 1), rng.choice([None, 3]), None) for k in keys
        ]
        info = base.upsert(rows) if kind == "upsert" else base.update(rows)
        oracle.replace(rows)
    elif kind == "delete" and oracle.rows:
        keys = [rng.choice(oracle.rows)["k"]]
        info = base.delete(keys)
        oracle.delete(keys)
    elif kind == "append" and oracle.rows:
        mark = rng.choice(oracle.rows)
        info = base.append_entries(as_entries([mark], -1) + as_entries([mark], 1) * 2)
        oracle.insert([mark])  # -1 +1 +1: one more copy
    elif kind == "where":
        t = rng.randint(0, 9)
        info = base.delete_where(f"x = {t}")
        oracle.delete_where(lambda r: r["x"] == t)
    else:
        return None
    return info.version


@pytest.mark.timeout(300)
def test_refreshes_racing_each_other_writes_and_merges_stay_exact(
    local_location: Location,
) -> None:
    """Three threads refresh the same rollup (each through its own handle) while one writes to
    the base and one merges the base and the rollup. Every snapshot taken during the race equals
    the oracle at its watermark, no refresher's watermark and none a fresh reader sees ever goes
    back, and after one more refresh the rollup equals the oracle exactly."""
    warehouse = local_location.connect()
    versions = VersionedOracle()
    create_base(warehouse)
    versions.settle(warehouse.table("b"))
    warehouse.table("b").create_rollup("r", by=BY, measures=MEASURES)
    done = threading.Event()
    errors: list[BaseException] = []
    samples: list[tuple[int | None, Totals]] = []
    seen: dict[int, list[int]] = {}
    observed: list[int | None] = []

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as e:
                errors.append(e)
                done.set()

        return run

    def writer() -> None:
        base = location_copy().table("b")
        rng = random.Random(1234)
        ids = itertools.count(100)
        for _ in range(40):
            version = _random_write(base, versions.oracle, rng, ids)
            if version is not None:
                versions.record(version)
        done.set()

    def refresher(i: int) -> None:
        rollup = location_copy().rollup("r")
        seen[i] = []
        while not done.is_set():
            result = rollup.refresh()
            seen[i].append(result.watermark)
            samples.append(rollup_state(rollup))

    def monitor() -> None:
        """Watermarks as a reader opening the rollup afresh sees them, in time order."""
        while not done.is_set():
            observed.append(location_copy().rollup("r").watermark)
            time.sleep(0.01)

    def merger() -> None:
        base = location_copy().table("b")
        rollup_table = location_copy().table("r")
        while not done.is_set():
            base.merge(min_files=1)
            rollup_table.merge(min_files=1)
            time.sleep(0.05)

    def location_copy() -> ledger.Warehouse:
        return local_location.connect()

    threads = [
        threading.Thread(target=guarded(writer)),
        threading.Thread(target=guarded(merger)),
        threading.Thread(target=guarded(monitor)),
        *(threading.Thread(target=guarded(lambda i=i: refresher(i))) for i in range(3)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    assert not errors, f"a racing thread failed: {errors!r}"

    for i, marks in seen.items():
        assert marks == sorted(marks), f"refresher {i}'s watermark went back: {marks}"
    assert None not in observed and len(observed) >= 3, observed
    assert observed == sorted(observed), f"a reader saw the watermark go back: {observed}"
    assert len(samples) >= 3, "the refreshers hardly ran"
    for watermark, rows in samples:
        assert watermark is not None
        assert rows == versions.expected(watermark), f"mid-race snapshot at {watermark}"
    rollup = warehouse.rollup("r")
    final = rollup.refresh()
    assert final.watermark == warehouse.table("b").version
    assert rows_of(rollup.table) == versions.oracle.totals()
    assert versions.oracle.totals(), "the race wrote nothing"
    assert_watermarks_only_advance(rollup)


# --- 4. auto_refresh -----------------------------------------------------------------------------


def test_auto_refresh_follows_every_write(local_location: Location) -> None:
    warehouse = local_location.connect()
    base = create_base(warehouse)
    early = warehouse.table("b")  # a handle opened before the rollup existed
    versions = VersionedOracle()
    oracle = versions.oracle
    rollup = base.create_rollup("r", by=BY, measures=MEASURES, auto_refresh=True)
    assert base.config.get("auto_refresh", []) == ["r"]
    assert rollup.watermark is not None and rows_of(rollup.table) == []

    writes: list[tuple[ledger.Table, Callable[[ledger.Table], Any], Callable[[], None]]] = []
    first = [row(k, "abc"[k % 3], k % 2, k - 3, dec(k)) for k in range(8)]
    writes.append((base, lambda t: t.insert(first), lambda: oracle.insert(first)))
    up = [row(1, "c", 0, None, None), row(20, "a", 1, 4, dec(4))]
    writes.append((early, lambda t: t.upsert(up), lambda: oracle.replace(up)))
    upd = [{"k": 2, "x": 50}]
    writes.append((base, lambda t: t.update(upd), lambda: oracle.replace(upd)))
    writes.append((early, lambda t: t.delete([3, 4]), lambda: oracle.delete([3, 4])))
    writes.append(
        (
            base,
            lambda t: t.delete_where("x < 0"),
            lambda: oracle.delete_where(lambda r: r["x"] is not None and r["x"] < 0),
        )
    )
    loaded = [row(30, "d", 0, 1, dec(1))]
    writes.append(
        (
            early,
            lambda t: t.append_entries(as_entries(loaded, 1) * 2, app_id="l", batch=1),
            lambda: oracle.insert(loaded * 2),
        )
    )

    def in_a_transaction(t: ledger.Table) -> Any:
        with t.transaction() as tx:
            tx.insert([row(40, "e", 1, 2, None)])
            tx.delete([5])
        return tx.commit_info

    def in_the_oracle() -> None:
        oracle.insert([row(40, "e", 1, 2, None)])
        oracle.delete([5])

    writes.append((base, in_a_transaction, in_the_oracle))

    for handle, write, apply in writes:
        info = write(handle)
        apply()
        versions.settle(handle)
        assert info.version is not None
        follower = warehouse.rollup("r")
        assert follower.watermark is not None and follower.watermark >= info.version
        assert rows_of(follower.table) == oracle.totals()
    assert_watermarks_only_advance(warehouse.rollup("r"))


@pytest.mark.parametrize("change", ["drop", "rewrite"])
def test_auto_refresh_follows_partition_drops_and_rewrites(
    local_location: Location, change: str
) -> None:
    """drop_partitions and rewrite_partitions change the base's answer like a write does (they
    commit no transaction): an auto-refreshed rollup follows them too."""
    warehouse = local_location.connect()
    base = create_base(warehouse)
    rows = [row(k, "ab"[k % 2], k % 3 % 2, k, dec(k)) for k in range(6)]
    base.insert(rows)
    base.create_rollup("r", by=BY, measures=MEASURES, auto_refresh=True)
    oracle = Oracle()
    oracle.insert(rows)
    if change == "drop":
        changed = base.drop_partitions({"p": "1"})
        oracle.drop_partition(1)
    else:
        changed = base.rewrite_partitions({"p": "0"}, "SELECT * FROM entries WHERE k <> 3")
        oracle.delete([3])
    follower = warehouse.rollup("r")
    assert changed.version is not None
    assert follower.watermark is not None and follower.watermark >= changed.version, (
        f"the rollup did not follow the {change} (watermark {follower.watermark}, "
        f"committed version {changed.version})"
    )
    assert rows_of(follower.table) == oracle.totals()


class PrefixFailingStore(FailingStore):
    """Every call on one table's folder fails while ``down`` is set (the rest works)."""

    def __init__(self, inner: Store, prefix: str) -> None:
        super().__init__(inner, fail_at=None)
        self.down = True
        self.failures = 0
        outer = self

        class Counter(CallCounter):
            def tick(self, what: str) -> None:
                super().tick(what)
                key = what.rsplit(" ", 1)[-1]
                if outer.down and f"/{prefix}" in f"/{key}":
                    outer.failures += 1
                    raise InjectedFault(f"injected failure of {what}")

        self.counter = Counter(None)
        self._fs = pafs.PyFileSystem(_FailingHandler(inner.filesystem, self.counter))


def test_a_failing_auto_refresh_never_fails_the_write_and_is_caught_up(
    local_location: Location, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = local_location.connect()
    base = create_base(warehouse)
    oracle = Oracle()
    rows = [row(k, "abc"[k % 3], k % 2, k, dec(k)) for k in range(5)]
    base.insert(rows)
    oracle.insert(rows)
    base.create_rollup("stuck_rollup", by=BY, measures=MEASURES, auto_refresh=True)
    base.create_rollup("fine_rollup", by=["g", "p"], measures={"c": "count"}, auto_refresh=True)
    watermark = warehouse.rollup("stuck_rollup").watermark

    failing = PrefixFailingStore(warehouse.store, "stuck_rollup/")
    writer = ledger.Warehouse(failing).table("b")
    more = [row(10, "a", 0, 7, None), row(11, "d", 1, None, dec(5))]
    with caplog.at_level(logging.WARNING, logger="ledger.rollup"):
        info = writer.insert(more)  # the refresh of stuck_rollup fails: the write does not
    oracle.insert(more)
    assert info.version is not None and failing.failures > 0
    assert any("stuck_rollup" in r.getMessage() for r in caplog.records), caplog.text
    assert sorted(views.visible(warehouse.table("b")).fetchall())[-2:] == [
        (10, "a", 0, 7, None),
        (11, "d", 1, None, dec(5)),
    ]
    stuck = warehouse.rollup("stuck_rollup")
    assert stuck.watermark == watermark, "the failing refresh committed"
    assert rows_of(stuck.table) != oracle.totals()
    fine = warehouse.rollup("fine_rollup")  # the other rollup of the base still followed
    assert fine.watermark == info.version
    counts: dict[tuple[Any, Any], int] = {}
    for r in oracle.rows:
        counts[(r["g"], r["p"])] = counts.get((r["g"], r["p"]), 0) + 1
    assert rows_of(fine.table) == ordered((g, p, c) for (g, p), c in counts.items())

    # The next write refreshes again and catches up both writes, exactly once.
    failing.down = False
    last = writer.delete([0])
    oracle.delete([0])
    stuck = warehouse.rollup("stuck_rollup")
    assert stuck.watermark == last.version
    assert rows_of(stuck.table) == oracle.totals()
    assert_watermarks_only_advance(stuck)


def test_an_explicit_refresh_catches_up_after_a_failed_auto_refresh(
    local_location: Location,
) -> None:
    warehouse = local_location.connect()
    base = create_base(warehouse)
    base.create_rollup("stuck_rollup", by=BY, measures=MEASURES, auto_refresh=True)
    failing = PrefixFailingStore(warehouse.store, "stuck_rollup/")
    rows = [row(k, "ab"[k % 2], 0, k, None) for k in range(4)]
    info = ledger.Warehouse(failing).table("b").insert(rows)
    assert info.version is not None
    rollup = warehouse.rollup("stuck_rollup")
    assert rollup.watermark is not None and rollup.watermark < info.version
    result = rollup.refresh()
    assert result.watermark == info.version
    oracle = Oracle()
    oracle.insert(rows)
    assert rows_of(rollup.table) == oracle.totals()


# --- 5. S3 ---------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_refresh_merge_and_faults_on_s3(s3_location: Location) -> None:
    warehouse = s3_location.connect()
    versions = VersionedOracle()
    oracle = versions.oracle
    base = create_base(warehouse, checkpoint_interval=3)
    rows = [row(k, "abc"[k % 3], k % 2, k if k % 3 else None, dec(k * 10)) for k in range(8)]
    base.insert(rows)
    oracle.insert(rows)
    versions.settle(base)
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)
    assert check_rollup(rollup, versions) == base.version

    base.upsert([row(1, "c", 1, 11, None), row(9, "a", 0, 9, dec(9))])
    oracle.replace([row(1, "c", 1, 11, None), row(9, "a", 0, 9, dec(9))])
    base.delete([2])
    oracle.delete([2])
    versions.settle(base)
    assert base.merge(min_files=1).version is not None
    versions.settle(base)
    assert rollup.refresh().watermark == base.version
    assert check_rollup(rollup, versions) == base.version

    base.insert([row(12, "b", 1, 3, None)])
    oracle.insert([row(12, "b", 1, 3, None)])
    base.drop_partitions({"p": "0"})
    oracle.drop_partition(0)
    versions.settle(base)
    assert rollup.table.merge(min_files=1).version is not None
    assert check_rollup(rollup, versions) < base.version

    # The rollup's commit lands but its response is lost: the retry is a no-op.
    clone_table(warehouse, "r", "probe")
    probe = armed(FailingStore, warehouse.store, "probe", None, native_filesystem=True)
    probe.opened.refresh()  # type: ignore[attr-defined]
    calls = probe.counter.log[probe.start :]  # type: ignore[attr-defined]
    late_at = next(n for n, c in enumerate(calls, 1) if c.startswith("put_if_absent probe/_log/"))
    late = armed(LateFailingStore, warehouse.store, "r", late_at, native_filesystem=True)
    with pytest.raises(InjectedFault):
        late.opened.refresh()  # type: ignore[attr-defined]
    fresh = s3_location.connect().rollup("r")
    assert fresh.refresh().version is None
    assert check_rollup(fresh, versions) == base.version
    assert rows_of(fresh.table) == oracle.totals()
    assert_watermarks_only_advance(fresh)


# --- 6. bad input --------------------------------------------------------------------------------

BAD_DEFINITIONS: list[tuple[str, Any, Any, type[LedgerError]]] = [
    ("unknown by column", ["nope"], {"c": "count"}, UnknownColumnError),
    ("one by column unknown", ["g", "nope"], {"c": "count"}, UnknownColumnError),
    ("unknown sum column", BY, {"c": "sum(nope)"}, UnknownColumnError),
    ("unknown count column", BY, {"c": "count", "m": "count(nope)"}, UnknownColumnError),
    ("sum of a VARCHAR", ["p"], {"c": "sum(g)"}, InvalidArgumentError),
    ("min", BY, {"c": "count", "m": "min(x)"}, InvalidArgumentError),
    ("max", BY, {"m": "max(x)"}, InvalidArgumentError),
    ("avg", BY, {"m": "avg(d)"}, InvalidArgumentError),
    ("an expression", BY, {"m": "sum(x + 1)"}, InvalidArgumentError),
    ("count distinct", BY, {"m": "count(DISTINCT x)"}, InvalidArgumentError),
    ("unparseable", BY, {"m": "sum(("}, InvalidArgumentError),
    ("not a string", BY, {"m": 3}, InvalidArgumentError),
    ("empty measures", BY, {}, InvalidArgumentError),
    ("measures not a mapping", BY, ["count"], InvalidArgumentError),
    ("measure named like a by column", BY, {"g": "count"}, InvalidArgumentError),
    ("row_count taken, no row count", BY, {"row_count": "sum(x)"}, InvalidArgumentError),
    ("empty by", [], {"c": "count"}, InvalidArgumentError),
    ("by repeats a column", ["g", "g"], {"c": "count"}, InvalidArgumentError),
    ("measure named like a system column", BY, {"dml_type": "count"}, SchemaError),
]


@pytest.fixture
def bad_input_base(local_location: Location) -> tuple[ledger.Warehouse, ledger.Table]:
    warehouse = local_location.connect()
    base = create_base(warehouse)
    base.insert([row(k, "ab"[k % 2], 0, k, dec(k)) for k in range(3)])
    base.create_rollup("existing", by=BY, measures={"c": "count"})
    return warehouse, base


def _assert_nothing_created(
    warehouse: ledger.Warehouse, base: ledger.Table, tables: list[str], version: int
) -> None:
    assert sorted(warehouse.tables()) == tables, "a refused rollup left a table behind"
    assert base.refresh().version == version, "a refused rollup wrote to the base"


@pytest.mark.parametrize(
    ("by", "measures", "error"),
    [pytest.param(b, m, e, id=i) for i, b, m, e in BAD_DEFINITIONS],
)
def test_bad_definitions_give_typed_errors_and_create_nothing(
    bad_input_base: tuple[ledger.Warehouse, ledger.Table],
    by: Any,
    measures: Any,
    error: type[LedgerError],
) -> None:
    warehouse, base = bad_input_base
    tables, version = sorted(warehouse.tables()), base.version
    for auto_refresh in (False, True):
        with pytest.raises(error):
            base.create_rollup("new", by=by, measures=measures, auto_refresh=auto_refresh)
        _assert_nothing_created(warehouse, base, tables, version)
    assert base.config.get("auto_refresh", []) == []


@pytest.mark.parametrize("policy", ["replacing", "aggregating", "dedup"])
def test_a_base_whose_marks_do_not_cancel_exactly_is_refused(
    local_location: Location, policy: str
) -> None:
    warehouse = local_location.connect()
    base = warehouse.create_table(
        "t",
        {"k": "BIGINT", "v": "BIGINT", "n": "BIGINT"},
        primary_key=["k"],
        policy=POLICIES[policy],
    )
    base.insert([{"k": 1, "v": 2, "n": 1}])
    tables, version = sorted(warehouse.tables()), base.version
    with pytest.raises(InvalidArgumentError, match=policy) as refused:
        base.create_rollup("r", by=["v"], measures={"c": "count", "s": "sum(n)"})
    # It says what to do instead: total the table when read, with the same groups and measures.
    message = str(refused.value)
    assert "views.totals(table, by=['v'], count=True, sum=['n'])" in message, message
    assert "docs/views.md" in message
    totals = views.totals(base, by=["v"], count=True, sum=["n"]).fetchall()
    assert [tuple(row) for row in totals] == [(2, 1, 1)]
    _assert_nothing_created(warehouse, base, tables, version)


def test_a_rollup_of_a_rollup_is_refused(
    bad_input_base: tuple[ledger.Warehouse, ledger.Table],
) -> None:
    warehouse, _ = bad_input_base
    existing = warehouse.table("existing")
    tables, version = sorted(warehouse.tables()), existing.version
    with pytest.raises(InvalidArgumentError):
        existing.create_rollup("again", by=BY, measures={"s": "sum(c)"})
    _assert_nothing_created(warehouse, existing, tables, version)


@pytest.mark.parametrize("name", ["existing", "b", "other"])
def test_a_taken_name_gives_table_exists_and_changes_nothing(
    bad_input_base: tuple[ledger.Warehouse, ledger.Table], name: str
) -> None:
    warehouse, base = bad_input_base
    warehouse.create_table("other", {"a": "BIGINT"})
    tables, version = sorted(warehouse.tables()), base.version
    before = rows_of(warehouse.table("existing"))
    with pytest.raises(TableExistsError):
        base.create_rollup(name, by=BY, measures={"t": "sum(x)"}, auto_refresh=True)
    _assert_nothing_created(warehouse, base, tables, version)
    assert base.config.get("auto_refresh", []) == []
    assert rows_of(warehouse.table("existing")) == before
    assert warehouse.rollup("existing").definition.measures[0].name == "c"


def test_an_invalid_rollup_name_or_flag_is_refused(
    bad_input_base: tuple[ledger.Warehouse, ledger.Table],
) -> None:
    warehouse, base = bad_input_base
    tables, version = sorted(warehouse.tables()), base.version
    with pytest.raises(InvalidArgumentError):
        base.create_rollup("no such/name", by=BY, measures={"c": "count"})
    with pytest.raises(InvalidArgumentError):
        base.create_rollup("r", by=BY, measures={"c": "count"}, auto_refresh="yes")  # type: ignore[arg-type]
    _assert_nothing_created(warehouse, base, tables, version)
    with pytest.raises(InvalidArgumentError):
        warehouse.rollup("b")  # not a rollup


def test_a_measure_named_like_a_by_column_in_other_case_is_refused(
    bad_input_base: tuple[ledger.Warehouse, ledger.Table],
) -> None:
    """SQL names are case-insensitive: measure "G" next to by column "g" is the same column."""
    warehouse, base = bad_input_base
    tables, version = sorted(warehouse.tables()), base.version
    with pytest.raises(InvalidArgumentError, match="compared without case"):
        base.create_rollup("r", by=BY, measures={"G": "count"})
    _assert_nothing_created(warehouse, base, tables, version)


def test_measures_named_alike_but_for_case_are_refused(
    bad_input_base: tuple[ledger.Warehouse, ledger.Table],
) -> None:
    """docs/views.md 7: measure names differ, without regard to case, from each other."""
    warehouse, base = bad_input_base
    tables, version = sorted(warehouse.tables()), base.version
    with pytest.raises(InvalidArgumentError, match="compared without case"):
        base.create_rollup("r", by=BY, measures={"c": "count", "C": "sum(d)"})
    _assert_nothing_created(warehouse, base, tables, version)


def test_a_null_group_value_is_a_group_of_its_own(local_location: Location) -> None:
    """docs/views.md 7: rows with NULL in a ``by`` column form one group, as in GROUP BY."""
    warehouse = local_location.connect()
    base = create_base(warehouse)
    base.insert([row(1, None, 0, 3, None), row(2, "b", 0, 5, dec(1))])  # type: ignore[arg-type]
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)
    assert rows_of(rollup.table) == [("b", 1, 5, 1, dec(1)), (None, 1, 3, 1, 0)]


def test_a_null_group_value_written_later_does_not_stall_the_rollup(
    local_location: Location,
) -> None:
    warehouse = local_location.connect()
    base = create_base(warehouse)
    base.insert([row(2, "b", 0, 5, dec(1))])
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)
    base.insert([row(1, None, 0, 3, None)])  # type: ignore[arg-type]
    base.insert([row(3, "b", 0, 1, None)])
    result = rollup.refresh()
    assert result.watermark == base.version
    assert rows_of(rollup.table) == [("b", 2, 6, 2, dec(1)), (None, 1, 3, 1, 0)]


def test_a_group_whose_values_are_all_null_is_not_hidden(local_location: Location) -> None:
    """A group whose rows all have x NULL has count(x) = 0 but rows: it is not absent, whatever
    the order of the measures."""
    warehouse = local_location.connect()
    base = create_base(warehouse)
    base.insert([row(1, "a", 0, None, None), row(2, "b", 0, 5, dec(1))])
    rollup = base.create_rollup("r", by=BY, measures={"n": "count(x)", "total": "sum(x)"})
    # Columns: by, then the added row_count (row counts come first), then n and total.
    assert rows_of(rollup.table) == [("a", 1, 0, 0), ("b", 1, 1, 5)]
    rollup.table.merge(min_files=1)
    assert rows_of(rollup.table) == [("a", 1, 0, 0), ("b", 1, 1, 5)]


# --- 7. vacuumed history, rebuild, rewrites -------------------------------------------------------


def test_a_refresh_past_vacuumed_data_files_is_refused_and_rebuild_restores(
    local_location: Location,
) -> None:
    warehouse = local_location.connect()
    versions = VersionedOracle()
    oracle = versions.oracle
    base = create_base(warehouse)
    first = [row(k, "abc"[k % 3], k % 2, k, dec(k)) for k in range(6)]
    base.insert(first)
    oracle.insert(first)
    versions.settle(base)
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)

    # A vacuum within its grace period deletes nothing the refresh needs.
    base.insert([row(10, "a", 0, 1, None)])
    oracle.insert([row(10, "a", 0, 1, None)])
    versions.settle(base)
    base.merge(min_files=1)
    base.vacuum(3600)
    versions.settle(base)
    assert rollup.refresh().watermark == base.version
    watermark = check_rollup(rollup, versions)

    # Written after the watermark, merged, then vacuumed at once: those files are gone.
    base.update([row(0, "c", 1, 100, dec(100))])
    oracle.replace([row(0, "c", 1, 100, dec(100))])
    base.insert([row(11, "d", 1, None, dec(7))])
    oracle.insert([row(11, "d", 1, None, dec(7))])
    versions.settle(base)
    base.merge(min_files=1)
    assert vacuum_now(base).data_files_deleted > 0
    versions.settle(base)
    with pytest.raises(SnapshotNotFoundError):
        rollup.refresh()
    assert check_rollup(rollup, versions) == watermark, "a refused refresh changed the rollup"

    result = rollup.rebuild()
    assert result.watermark == base.version
    assert rows_of(rollup.table) == oracle.totals()
    # And incremental refreshes go on from the rebuilt watermark.
    base.delete([1, 11])
    oracle.delete([1, 11])
    versions.settle(base)
    assert rollup.refresh().watermark == base.version
    assert rows_of(rollup.table) == oracle.totals()
    assert_watermarks_only_advance(rollup)


def test_a_refresh_past_a_vacuumed_log_is_refused_and_rebuild_restores(
    local_location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch, 0)
    warehouse = local_location.connect()
    oracle = Oracle()
    base = create_base(warehouse, checkpoint_interval=2, transaction_timeout=1.0)
    base.insert([row(0, "a", 0, 1, None)])
    oracle.insert([row(0, "a", 0, 1, None)])
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)
    before = rows_of(rollup.table)
    watermark = rollup.watermark
    for k in range(1, 6):  # no merge: every data file stays alive, only log files can go
        base.insert([row(k, "ab"[k % 2], k % 2, k, dec(k))])
        oracle.insert([row(k, "ab"[k % 2], k % 2, k, dec(k))])
    # Vacuum's clock past the transaction timeout: the log before the checkpoint can go.
    clock_ahead(monkeypatch, vacuuming, 1.1)
    assert vacuum_now(base).log_files_deleted > 0
    with pytest.raises(SnapshotNotFoundError):
        rollup.refresh()
    assert rollup.watermark == watermark and rows_of(rollup.table) == before
    assert rollup.rebuild().watermark == base.refresh().version
    assert rows_of(rollup.table) == oracle.totals()
    assert rollup.refresh().version is None


@pytest.mark.xfail(
    strict=True,
    reason="known limitation (docs/views.md 7): rebuild records the base version as the "
    "watermark token, so at an unchanged base version it is a no-op",
)
def test_rebuild_restores_exact_totals_even_when_the_base_did_not_move(
    local_location: Location,
) -> None:
    """rebuild() recomputes the rollup from the base: a rollup gone wrong (here an entry
    written into the rollup table by hand) is put right, although the watermark is current."""
    warehouse = local_location.connect()
    base = create_base(warehouse)
    rows = [row(k, "ab"[k % 2], 0, k, None) for k in range(4)]
    base.insert(rows)
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)
    oracle = Oracle()
    oracle.insert(rows)
    rollup.table.insert([{"g": "a", "views": 10, "total": 100, "n": 1, "dsum": dec(0)}])
    assert rows_of(rollup.table) != oracle.totals()
    rollup.rebuild()
    assert rows_of(rollup.table) == oracle.totals()


def test_a_refresh_rolls_up_rewritten_partitions(local_location: Location) -> None:
    """rewrite_partitions changes the base's answer (rows filtered out): the next refresh must
    take those rows out of the rollup."""
    warehouse = local_location.connect()
    base = create_base(warehouse)
    rows = [row(k, "ab"[k % 2], k % 2, k, dec(k)) for k in range(6)]
    base.insert(rows)
    rollup = base.create_rollup("r", by=BY, measures=MEASURES)
    rewritten = base.rewrite_partitions({"p": "0"}, "SELECT * FROM entries WHERE k <> 2")
    assert rewritten.version is not None
    oracle = Oracle()
    oracle.insert(rows)
    oracle.delete([2])
    assert without_count_x(oracle.totals()) == base_totals(base, base.version)
    assert rollup.refresh().watermark == base.version
    assert rows_of(rollup.table) == oracle.totals()
