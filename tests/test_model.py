"""Model-based test: the ledger answers like a plain table updated in place.

Random sequences of insert / upsert / update / delete / delete_where / transactions run against
a ledger table and against an oracle, a plain DuckDB table changed in place (rows carry the order
they were written in). Merges of random subsets of the alive files (or the planner's choice) are
interleaved with the writes: the oracle does nothing for them, since a merge must not change any
answer (and must never add entries). After every step, per key: the ledger's sum(dml_type) equals
the oracle's row count, and the ledger's visible row equals the oracle's most recently written row.

Oracle semantics (docs/concepts.md): insert adds rows (a key may get several); upsert and update
replace all rows of a key by one row whose missing columns keep the key's latest values; delete
removes every row of a key; delete_where removes every row matching the predicate;
append_entries removes, per delete mark, the oldest row holding exactly its values (the ledger
shows a key's value tuple whose latest insertion is latest) and then adds its insertions. A mark
that cancels nothing (other values, a key without rows, one row marked twice) must raise
UnmatchedDeleteMarkError and write nothing.

The table's column names are drawn per run: mixed case, spaces, quotes, dots, unicode, names
that only start like a system column; the oracle keeps its own plain names (k, a, s).
"""

from __future__ import annotations

import datetime
import itertools
import shutil
from decimal import Decimal
from typing import Any, ClassVar

import duckdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import ledger
from ledger.errors import StaleVersionError, UnmatchedDeleteMarkError
from ledger.schema import RESERVED
from tests.conftest import examples
from tests.support.ledger_reads import entry_count, policy_answer, sign_sums, visible_rows
from tests.support.s3server import BUCKET, S3Endpoint
from tests.support.scratch import make_scratch_dir

KEYS = st.integers(min_value=0, max_value=5)
AMOUNTS = st.one_of(st.none(), st.integers(min_value=-50, max_value=50))
LABELS = st.one_of(st.none(), st.sampled_from(["x", "y", "it's", "ü"]))
ROW = st.fixed_dictionaries({"k": KEYS, "a": AMOUNTS, "s": LABELS})
PARTIAL_ROW = st.one_of(
    ROW,
    st.fixed_dictionaries({"k": KEYS, "a": AMOUNTS}),
    st.fixed_dictionaries({"k": KEYS, "s": LABELS}),
)


def _without_case(name: str) -> str:
    """A form at least as coarse as any engine's comparison without case (DuckDB folds ASCII,
    Spark compares character by character ignoring case): two names whose forms differ are
    always distinct columns."""
    return name.upper().casefold()


_RESERVED_FORMS = {_without_case(n) for n in RESERVED}
# Odd but legal names, each a trap for naive quoting or comparison.
ODD_NAMES = [
    "Amount",
    "prix €",
    "Größe",
    "trx_id_x",
    "Dml_Type2",
    "_row_id_",
    'say "hi"',
    "it's",
    "a.b",
    "two  spaces",
    "select",
    "ÉTÉ",
    "k",
]


def _legal(name: str) -> bool:
    form = _without_case(name)
    return form not in _RESERVED_FORMS and not form.startswith(_without_case("__ledger"))


COLUMN_NAME = st.one_of(
    st.sampled_from(ODD_NAMES),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=6),
).filter(_legal)
COLUMN_NAMES = st.lists(COLUMN_NAME, min_size=3, max_size=3, unique_by=_without_case)


def _spec_friendly(name: str) -> bool:
    """Partition specs name their column unquoted (``bucket(3, name)``)."""
    return name == name.strip() and not set(name) & set(",()")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _unique_keys(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[int, dict[str, Any]] = {}
    for row in rows:
        seen[row["k"]] = row
    return list(seen.values())


def _same_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One operation's rows share their columns (a column absent from every row is 'missing')."""
    columns = set(rows[0])
    return [{c: r.get(c) for c in columns} for r in rows if set(r) == columns] or rows[:1]


class Oracle:
    """A plain table updated in place."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE t (k BIGINT, a BIGINT, s VARCHAR, ord BIGINT)")
        self.order = itertools.count()

    def _latest(self, key: int) -> tuple[Any, ...] | None:
        return self.con.execute(
            "SELECT k, a, s FROM t WHERE k = ? ORDER BY ord DESC LIMIT 1", [key]
        ).fetchone()

    def insert(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.con.execute(
                "INSERT INTO t VALUES (?, ?, ?, ?)",
                [row["k"], row.get("a"), row.get("s"), next(self.order)],
            )

    def replace(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            current = self._latest(row["k"])
            merged = {"k": row["k"], "a": None, "s": None}
            if current is not None:
                merged.update(a=current[1], s=current[2])
            merged.update(row)
            self.con.execute("DELETE FROM t WHERE k = ?", [row["k"]])
            self.insert([merged])

    def exists(self, key: int) -> bool:
        return self._latest(key) is not None

    def delete(self, keys: list[int]) -> None:
        for key in keys:
            self.con.execute("DELETE FROM t WHERE k = ?", [key])

    def delete_where(self, predicate: str) -> None:
        self.con.execute(f"DELETE FROM t WHERE {predicate}")

    def rows(self) -> list[dict[str, Any]]:
        """Every row, oldest first."""
        rows = self.con.execute("SELECT k, a, s FROM t ORDER BY ord").fetchall()
        return [{"k": k, "a": a, "s": s} for k, a, s in rows]

    def cancel(self, row: dict[str, Any]) -> None:
        """Remove the oldest row holding exactly these values (NULL equals NULL)."""
        self.con.execute(
            "DELETE FROM t WHERE ord = (SELECT min(ord) FROM t WHERE k = ? "
            "AND a IS NOT DISTINCT FROM ? AND s IS NOT DISTINCT FROM ?)",
            [row["k"], row["a"], row["s"]],
        )

    def counts(self) -> dict[tuple[Any, ...], int]:
        rows = self.con.execute("SELECT k, count(*) FROM t GROUP BY k").fetchall()
        return {(k,): n for k, n in rows}

    def visible(self) -> list[tuple[Any, ...]]:
        rows = self.con.execute(
            "SELECT k, a, s FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY ord DESC) = 1"
        ).fetchall()
        return sorted(rows, key=repr)


class LedgerMachine(RuleBasedStateMachine):
    partition_by: ClassVar[list[str] | None] = None

    # Where the warehouse lives: a fresh local folder, or (set by the S3 test) a fresh S3 prefix.
    s3_options: ClassVar[dict[str, Any] | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.directory = make_scratch_dir("ledger-model-")  # in memory where possible
        self.oracle = Oracle()

    @initialize(names=COLUMN_NAMES)
    def create_table(self, names: list[str]) -> None:
        if self.partition_by is not None and not _spec_friendly(names[0]):
            names = ["k", "Amount", "prix €"]
        # The oracle's plain name -> the table's column name.
        self.names = dict(zip(["k", "a", "s"], names, strict=True))
        name = self.names
        self.table = self._connect().create_table(
            "t",
            {name["k"]: "BIGINT", name["a"]: "BIGINT", name["s"]: "VARCHAR"},
            primary_key=[name["k"]],
            partition_by=[p.format(k=name["k"]) for p in self.partition_by or []] or None,
            checkpoint_interval=4,  # exercise checkpoints and reopening through them
        )

    def _physical(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The oracle's rows under the table's column names."""
        return [{self.names.get(c, c): v for c, v in row.items()} for row in rows]

    def _connect(self) -> ledger.Warehouse:
        if self.s3_options is None:
            return ledger.connect(self.directory)
        prefix = self.directory.rsplit("/", 1)[1]  # unique per run
        return ledger.connect(f"s3://{BUCKET}/{prefix}", **self.s3_options)

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- operations ---------------------------------------------------------------------------

    @rule(rows=st.lists(ROW, min_size=1, max_size=4))
    def insert(self, rows: list[dict[str, Any]]) -> None:
        self.table.insert(self._physical(rows))
        self.oracle.insert(rows)

    @rule(rows=st.lists(PARTIAL_ROW, min_size=1, max_size=4))
    def upsert(self, rows: list[dict[str, Any]]) -> None:
        rows = _same_columns(_unique_keys(rows))
        self.table.upsert(self._physical(rows))
        self.oracle.replace(rows)

    @rule(rows=st.lists(PARTIAL_ROW, min_size=1, max_size=3))
    def update(self, rows: list[dict[str, Any]]) -> None:
        rows = _same_columns(_unique_keys(rows))
        if all(self.oracle.exists(r["k"]) for r in rows):
            self.table.update(self._physical(rows))
            self.oracle.replace(rows)
        else:
            version = self.table.version
            with pytest.raises(ledger.KeyNotFoundError):
                self.table.update(self._physical(rows))
            assert self.table.refresh().version == version, "a failed update committed"

    @rule(keys=st.lists(KEYS, min_size=1, max_size=3, unique=True))
    def delete(self, keys: list[int]) -> None:
        self.table.delete(keys)
        self.oracle.delete(keys)

    @rule(threshold=st.integers(min_value=-50, max_value=50), label=LABELS)
    def delete_where(self, threshold: int, label: str | None) -> None:
        column, test = (
            ("a", f"> {threshold}")
            if label is None
            else ("s", f"= '{label.replace(chr(39), chr(39) * 2)}'")
        )
        self.table.delete_where(f"{_quoted(self.names[column])} {test}")
        self.oracle.delete_where(f"{column} {test}")

    @rule(
        steps=st.lists(
            st.tuples(
                st.sampled_from(["insert", "upsert", "delete"]),
                st.lists(ROW, min_size=1, max_size=2),
            ),
            min_size=1,
            max_size=4,
        )
    )
    def transaction(self, steps: list[tuple[str, list[dict[str, Any]]]]) -> None:
        with self.table.transaction() as tx:
            for operation, rows in steps:
                if operation == "insert":
                    tx.insert(self._physical(rows))
                    self.oracle.insert(rows)
                elif operation == "upsert":
                    rows = _unique_keys(rows)
                    tx.upsert(self._physical(rows))
                    self.oracle.replace(rows)
                else:
                    keys = sorted({r["k"] for r in rows})
                    tx.delete(keys)
                    self.oracle.delete(keys)

    @rule(rows=st.lists(ROW, min_size=1, max_size=3))
    def aborted_transaction(self, rows: list[dict[str, Any]]) -> None:
        version = self.table.refresh().version
        with pytest.raises(RuntimeError, match="abort"), self.table.transaction() as tx:
            tx.upsert(self._physical(_unique_keys(rows)))
            raise RuntimeError("abort")
        assert self.table.refresh().version == version

    @rule(data=st.data(), insertions=st.lists(ROW, max_size=2))
    def append_entries(self, data: st.DataObject, insertions: list[dict[str, Any]]) -> None:
        """Hand-written entries: delete marks for some live rows (valid), or a batch with one
        mark that cancels nothing (refused whole), plus blind insertions."""
        rows = self.oracle.rows()
        kind = data.draw(
            st.sampled_from(["valid", "valid", "other_values", "no_live_entry", "twice"]),
            label="marks",
        )
        chosen = data.draw(st.sets(st.integers(0, max(len(rows) - 1, 0)), max_size=3))
        marks = [rows[i] for i in sorted(chosen) if i < len(rows)]
        if kind == "valid":
            entries = [{**m, "dml_type": -1} for m in marks]
            entries += [{"a": None, "s": None, **r, "dml_type": 1} for r in insertions]
            if entries:
                self.table.append_entries(self._physical(entries))
            for mark in marks:
                self.oracle.cancel(mark)
            self.oracle.insert(insertions)
            return
        if kind == "other_values" and rows:  # amounts never drawn: no row holds these values
            live = data.draw(st.sampled_from(rows), label="changed")
            bad = {**live, "a": 1000 + (live["a"] or 0)}
        elif kind == "twice" and rows:  # one mark more than the rows holding these values
            bad = data.draw(st.sampled_from(rows), label="twice")
            marks = [m for m in marks if m != bad] + [bad] * rows.count(bad)
        else:  # a key without rows
            free = sorted(set(range(8)) - {r["k"] for r in rows})
            bad = {"k": data.draw(st.sampled_from(free)), "a": None, "s": "x"}
        # An insertion of the batch carrying the bad mark's values is what the mark cancels.
        insertions = [r for r in insertions if {"a": None, "s": None, **r} != bad]
        entries = [{**m, "dml_type": -1} for m in [*marks, bad]]
        entries += [{"a": None, "s": None, **r, "dml_type": 1} for r in insertions]
        version = self.table.refresh().version
        with pytest.raises(UnmatchedDeleteMarkError):
            self.table.append_entries(self._physical(entries))
        assert self.table.refresh().version == version, "a refused append_entries committed"

    @rule(data=st.data())
    def merge(self, data: st.DataObject) -> None:
        entries = entry_count(self.table)
        how = data.draw(st.sampled_from(["files", "files", "planner", "full"]), label="merge")
        # Commit order, not paths (file names are random), so that hypothesis can replay a run.
        markers = sorted(
            self.table.snapshot().markers(),
            key=lambda m: (m.trx_min, m.trx_max, repr(sorted(m.partition.items())), m.rows),
        )
        if how == "files" and markers:  # any subset, each file in or out with even odds
            chosen = data.draw(
                st.lists(st.booleans(), min_size=len(markers), max_size=len(markers))
            )
            paths = [m.path for m, c in zip(markers, chosen, strict=True) if c]
            self.table.merge(files=paths or [markers[-1].path])
        elif how == "planner":
            self.table.merge()  # every partition with two files or more
        else:
            self.table.merge(min_files=1)
        assert entry_count(self.table) <= entries, "a merge added entries"

    @rule()
    def reopen(self) -> None:
        self.table = self._connect().table("t")

    # --- the invariant --------------------------------------------------------------------------

    @invariant()
    def answers_match_the_oracle(self) -> None:
        assert sign_sums(self.table) == self.oracle.counts()
        assert visible_rows(self.table) == self.oracle.visible()
        assert self.table.count() == sum(self.oracle.counts().values())


class PartitionedLedgerMachine(LedgerMachine):
    partition_by: ClassVar[list[str] | None] = ["bucket(3, {k})"]


TestLedgerModel = LedgerMachine.TestCase
TestLedgerModel.settings = settings(
    max_examples=examples(10), stateful_step_count=15, deadline=None
)
TestPartitionedLedgerModel = PartitionedLedgerMachine.TestCase
TestPartitionedLedgerModel.settings = settings(
    max_examples=examples(5), stateful_step_count=15, deadline=None
)


class S3LedgerMachine(LedgerMachine):
    """The same model on S3 (moto's server over HTTP), with fewer examples: it is slower."""


def test_ledger_model_on_s3(s3_endpoint: S3Endpoint) -> None:
    S3LedgerMachine.s3_options = s3_endpoint.options()
    run_state_machine_as_test(
        S3LedgerMachine,
        settings=settings(max_examples=examples(5), stateful_step_count=10, deadline=None),
    )


# --- replacing tables with a version column (docs/merges.md section 2.2) -------------------------

VERSION_TYPES = ["INTEGER", "DATE", "DECIMAL(10,2)"]
VERSION_STEPS = st.none() | st.integers(min_value=0, max_value=3)  # small: stale writes are common
VERSIONED_ROW = st.fixed_dictionaries({"k": KEYS, "a": AMOUNTS, "v": VERSION_STEPS})


def _version_value(sql_type: str, step: int | None) -> Any:
    """The version of rank ``step`` in a column of ``sql_type`` (None stays NULL)."""
    if step is None:
        return None
    if sql_type == "DATE":
        return datetime.date(2026, 1, 1) + datetime.timedelta(days=step)
    if sql_type.startswith("DECIMAL"):
        return Decimal(step) / 4  # 0, 0.25, 0.5, 0.75: compared by value in the column's scale
    return step


def _rank(step: int | None) -> tuple[bool, int]:
    """NULL ranks below every version."""
    return (step is not None, step or 0)


class VersionedOracle:
    """Per key, its latest entry: the row written with the highest version (ties: the later
    write), and whether that entry is a delete mark."""

    def __init__(self) -> None:
        self.latest: dict[int, dict[str, Any]] = {}
        self.deleted: set[int] = set()

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """Blind: an older version is recorded but stays behind the newer entry."""
        for row in rows:
            current = self.latest.get(row["k"])
            if current is None or _rank(row["v"]) >= _rank(current["v"]):
                self.latest[row["k"]] = row
                self.deleted.discard(row["k"])

    def stale(self, rows: list[dict[str, Any]]) -> bool:
        """Would an upsert or update of these rows rank below a key's latest entry?"""
        return any(
            row["k"] in self.latest and _rank(row["v"]) < _rank(self.latest[row["k"]]["v"])
            for row in rows
        )

    def visible_keys(self) -> set[int]:
        return set(self.latest) - self.deleted

    def delete(self, keys: list[int]) -> None:
        self.deleted.update(k for k in keys if k in self.latest)

    def visible(self, sql_type: str) -> list[tuple[Any, ...]]:
        rows = [self.latest[k] for k in self.visible_keys()]
        answer = [(r["k"], r["a"], _version_value(sql_type, r["v"])) for r in rows]
        return sorted(answer, key=repr)


class VersionedLedgerMachine(RuleBasedStateMachine):
    """A replacing table with an INTEGER, DATE or DECIMAL version column against
    VersionedOracle: upserts and updates below a key's latest entry (a delete mark included)
    raise StaleVersionError and write nothing; blind inserts of older versions stay hidden."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = make_scratch_dir("ledger-model-versions-")
        self.oracle = VersionedOracle()

    @initialize(names=COLUMN_NAMES, version_type=st.sampled_from(VERSION_TYPES))
    def create_table(self, names: list[str], version_type: str) -> None:
        self.names = dict(zip(["k", "a", "v"], names, strict=True))
        self.version_type = version_type
        name = self.names
        self.table = ledger.connect(self.directory).create_table(
            "t",
            {name["k"]: "BIGINT", name["a"]: "BIGINT", name["v"]: version_type},
            primary_key=[name["k"]],
            policy={"name": "replacing", "version_column": name["v"]},
            checkpoint_interval=4,
        )

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def _physical(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                self.names["k"]: r["k"],
                self.names["a"]: r["a"],
                self.names["v"]: _version_value(self.version_type, r["v"]),
            }
            for r in rows
        ]

    def _refused(self, write: Any, rows: list[dict[str, Any]]) -> None:
        version = self.table.refresh().version
        with pytest.raises(StaleVersionError):
            write(self._physical(rows))
        assert self.table.refresh().version == version, "a stale write committed"

    @rule(rows=st.lists(VERSIONED_ROW, min_size=1, max_size=3))
    def insert(self, rows: list[dict[str, Any]]) -> None:
        self.table.insert(self._physical(rows))
        self.oracle.insert(rows)

    @rule(rows=st.lists(VERSIONED_ROW, min_size=1, max_size=3))
    def upsert(self, rows: list[dict[str, Any]]) -> None:
        rows = _unique_keys(rows)
        if self.oracle.stale(rows):
            self._refused(self.table.upsert, rows)
            return
        self.table.upsert(self._physical(rows))
        for row in rows:
            self.oracle.latest[row["k"]] = row
            self.oracle.deleted.discard(row["k"])

    @rule(rows=st.lists(VERSIONED_ROW, min_size=1, max_size=3))
    def update(self, rows: list[dict[str, Any]]) -> None:
        rows = [r for r in _unique_keys(rows) if r["k"] in self.oracle.visible_keys()]
        if not rows:
            return
        if self.oracle.stale(rows):
            self._refused(self.table.update, rows)
            return
        self.table.update(self._physical(rows))
        for row in rows:
            self.oracle.latest[row["k"]] = row

    @rule(keys=st.lists(KEYS, min_size=1, max_size=3, unique=True))
    def delete(self, keys: list[int]) -> None:
        self.table.delete(keys)
        self.oracle.delete(keys)

    @rule(data=st.data())
    def merge(self, data: st.DataObject) -> None:
        paths = [m.path for m in sorted(self.table.snapshot().markers(), key=repr)]
        if paths and data.draw(st.booleans(), label="subset"):
            chosen = data.draw(st.lists(st.booleans(), min_size=len(paths), max_size=len(paths)))
            self.table.merge(files=[p for p, c in zip(paths, chosen, strict=True) if c] or paths)
        else:
            self.table.merge(min_files=1)

    @invariant()
    def answers_match_the_oracle(self) -> None:
        if not hasattr(self, "table"):
            return
        assert policy_answer(self.table)["visible"] == self.oracle.visible(self.version_type)


TestVersionedLedgerModel = VersionedLedgerMachine.TestCase
TestVersionedLedgerModel.settings = settings(
    max_examples=examples(12), stateful_step_count=12, deadline=None
)
