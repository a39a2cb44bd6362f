"""Model-based test: the ledger answers like a plain table updated in place.

Random sequences of insert / upsert / update / delete / delete_where / transactions run against
a ledger table and against an oracle, a plain DuckDB table changed in place (rows carry the order
they were written in). Merges of random subsets of the alive files (or the planner's choice) are
interleaved with the writes: the oracle does nothing for them, since a merge must not change any
answer (and must never add entries). After every step, per key: the ledger's sum(dml_type) equals
the oracle's row count, and the ledger's visible row equals the oracle's most recently written row.

Oracle semantics (docs/concepts.md): insert adds rows (a key may get several); upsert and update
replace all rows of a key by one row whose missing columns keep the key's latest values; delete
removes every row of a key; delete_where removes every row matching the predicate.
"""

from __future__ import annotations

import itertools
import shutil
from typing import Any, ClassVar

import duckdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import ledger
from tests.conftest import examples
from tests.support.ledger_reads import entry_count, sign_sums, visible_rows
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
        warehouse = self._connect()
        self.table = warehouse.create_table(
            "t",
            {"k": "BIGINT", "a": "BIGINT", "s": "VARCHAR"},
            primary_key=["k"],
            partition_by=self.partition_by,
            checkpoint_interval=4,  # exercise checkpoints and reopening through them
        )
        self.oracle = Oracle()

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
        self.table.insert(rows)
        self.oracle.insert(rows)

    @rule(rows=st.lists(PARTIAL_ROW, min_size=1, max_size=4))
    def upsert(self, rows: list[dict[str, Any]]) -> None:
        rows = _same_columns(_unique_keys(rows))
        self.table.upsert(rows)
        self.oracle.replace(rows)

    @rule(rows=st.lists(PARTIAL_ROW, min_size=1, max_size=3))
    def update(self, rows: list[dict[str, Any]]) -> None:
        rows = _same_columns(_unique_keys(rows))
        if all(self.oracle.exists(r["k"]) for r in rows):
            self.table.update(rows)
            self.oracle.replace(rows)
        else:
            version = self.table.version
            with pytest.raises(ledger.KeyNotFoundError):
                self.table.update(rows)
            assert self.table.refresh().version == version, "a failed update committed"

    @rule(keys=st.lists(KEYS, min_size=1, max_size=3, unique=True))
    def delete(self, keys: list[int]) -> None:
        self.table.delete(keys)
        self.oracle.delete(keys)

    @rule(threshold=st.integers(min_value=-50, max_value=50), label=LABELS)
    def delete_where(self, threshold: int, label: str | None) -> None:
        predicate = (
            f"a > {threshold}" if label is None else f"s = '{label.replace(chr(39), chr(39) * 2)}'"
        )
        self.table.delete_where(predicate)
        self.oracle.delete_where(predicate)

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
                    tx.insert(rows)
                    self.oracle.insert(rows)
                elif operation == "upsert":
                    rows = _unique_keys(rows)
                    tx.upsert(rows)
                    self.oracle.replace(rows)
                else:
                    keys = sorted({r["k"] for r in rows})
                    tx.delete(keys)
                    self.oracle.delete(keys)

    @rule(rows=st.lists(ROW, min_size=1, max_size=3))
    def aborted_transaction(self, rows: list[dict[str, Any]]) -> None:
        version = self.table.refresh().version
        with pytest.raises(RuntimeError, match="abort"), self.table.transaction() as tx:
            tx.upsert(_unique_keys(rows))
            raise RuntimeError("abort")
        assert self.table.refresh().version == version

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
    partition_by: ClassVar[list[str] | None] = ["bucket(3, k)"]


TestLedgerModel = LedgerMachine.TestCase
TestLedgerModel.settings = settings(
    max_examples=examples(20), stateful_step_count=15, deadline=None
)
TestPartitionedLedgerModel = PartitionedLedgerMachine.TestCase
TestPartitionedLedgerModel.settings = settings(
    max_examples=examples(10), stateful_step_count=15, deadline=None
)


class S3LedgerMachine(LedgerMachine):
    """The same model on S3 (moto's server over HTTP), with fewer examples: it is slower."""


def test_ledger_model_on_s3(s3_endpoint: S3Endpoint) -> None:
    S3LedgerMachine.s3_options = s3_endpoint.options()
    run_state_machine_as_test(
        S3LedgerMachine,
        settings=settings(max_examples=examples(5), stateful_step_count=10, deadline=None),
    )
