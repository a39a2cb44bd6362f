"""SQL that callers hand to an operation runs only as one plain SELECT over what it provides.

Every entry point taking caller SQL (partition rewrites, custom merge policies, ``where=`` and
``delete_where`` predicates, rollup measures; Spark's totals) is fed a corpus of hostile text:
statements that write files or change the catalog, file and catalog readers, several statements,
comments hiding statements, unknown tables, setting leaks, in mixed case. Each must raise the
typed error before anything runs: the canary file the statement would write never appears and
the warehouse's objects and the table's version are unchanged. Legitimate shapes keep working,
and a rewrite that changes values but keeps the row count really rewrites.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledger
import views
from ledger.sql_guard import checked_select
from tests.conftest import Location

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "email": "VARCHAR", "v": "INTEGER"}
ROWS = [
    {"id": 1, "region": "eu", "email": "a@x.org", "v": 1},
    {"id": 2, "region": "eu", "email": "b@x.org", "v": 2},
    {"id": 3, "region": "us", "email": "c@x.org", "v": 3},
]

CANARY = "{canary}"  # replaced by a path under the test's tmp_path

# Whole queries, for the entry points taking a SELECT over `entries`.
HOSTILE_QUERIES = [
    f"COPY (SELECT 42) TO '{CANARY}'",
    f"copy (select * from entries) to '{CANARY}' (FORMAT parquet)",
    f"SELECT * FROM entries; COPY (SELECT 42) TO '{CANARY}'",
    f"SELECT * FROM entries /* harmless */ ; COPY (SELECT 1) TO '{CANARY}'",
    f"SELECT * FROM entries -- a comment\n; COPY (SELECT 1) TO '{CANARY}'",
    f"WITH a AS (COPY (SELECT 1) TO '{CANARY}') SELECT * FROM entries",
    f"ATTACH '{CANARY}' AS other",
    f"EXPORT DATABASE '{CANARY}'",
    f"CREATE TABLE t AS SELECT * FROM read_csv('{CANARY}')",
    "DROP TABLE entries",
    "DROP VIEW entries",
    "INSERT INTO entries SELECT * FROM entries",
    "DELETE FROM entries",
    "INSTALL httpfs",
    "LOAD httpfs",
    "PRAGMA version",
    "SET threads = 1",
    "CALL pragma_version()",
    "DESCRIBE entries",
    "SUMMARIZE entries",
    "SHOW TABLES",
    "CHECKPOINT",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM parquet_scan('/etc/passwd')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM query_table('entries')",
    "SELECT * FROM '/etc/passwd'",
    "FROM '/etc/passwd.csv'",
    'SELECT * FROM "/etc/passwd.csv"',
    "SELECT * FROM entries WHERE id IN (SELECT * FROM read_csv('/etc/passwd'))",
    "SELECT * FROM entries WHERE id IN (FROM 'file.csv')",
    "WITH e AS (SELECT * FROM read_json('/etc/passwd')) SELECT * FROM entries",
    "SELECT * FROM entries, LATERAL (SELECT * FROM glob('*'))",
    "SELECT * FROM entries UNION ALL SELECT * FROM read_parquet('x.parquet')",
    "SELECT * FROM duckdb_tables()",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM main.entries",
    "SELECT * FROM other_table",
    "SELECT * FROM entries_2",
    "SELECT * REPLACE (current_setting('home_directory') AS email) FROM entries",
    "SELECT * REPLACE (getenv('HOME') AS email) FROM entries",
    "SELECT * FROM range(3)",
    "SELECT * FROM TABLE(read_csv('x'))",
    "SeLeCt * FrOm ReAd_PaRqUeT('/etc/passwd')",
    "sElEcT * fRoM GLOB('*')",
    # A CTE's body sees only the CTEs before it: a later or self-named CTE is no cover, DuckDB
    # reads such a name as a file path or a catalog table.
    f'WITH s AS (SELECT * FROM "{CANARY}"), "{CANARY}" AS (SELECT 1 AS z) '
    "SELECT * FROM entries WHERE (SELECT count(*) FROM s) >= 0",
    f'WITH "{CANARY}" AS (SELECT * FROM "{CANARY}") SELECT * FROM entries',
    f'WITH RECURSIVE "{CANARY}" AS (SELECT * FROM "{CANARY}") SELECT * FROM entries',
    f'WITH RECURSIVE "{CANARY}" AS (SELECT * FROM "{CANARY}" UNION ALL SELECT 1) '
    "SELECT * FROM entries",
    "WITH a AS (SELECT * FROM pg_settings), pg_settings AS (SELECT 1) "
    "SELECT * FROM entries WHERE (SELECT count(*) FROM a) >= 0",
    "SELECT * FROM entries WHERE v = $1",
]

# Expressions, for predicates and measures.
HOSTILE_EXPRESSIONS = [
    f"id = 1; COPY (SELECT 42) TO '{CANARY}'",
    f"id = 1 /* x */; COPY (SELECT 42) TO '{CANARY}'",
    f"id IN (SELECT 1 FROM (COPY (SELECT 42) TO '{CANARY}'))",
    "id IN (SELECT * FROM read_csv('/etc/passwd'))",
    "EXISTS (SELECT 1 FROM glob('*'))",
    "read_csv('/etc/passwd') IS NULL",
    "glob('*') IS NULL",
    "current_setting('home_directory') = ''",
    "getenv('HOME') = ''",
    "reflect('java.lang.System', 'exit', '0') = 1",
    "java_method('java.lang.System', 'exit', '0') = 1",
    "CURRENT_SETTING('threads') = '1'",
    "id IN (FROM duckdb_tables())",
    # Parameters: the statements' own (file lists) are not the caller's, and a caller's has no
    # value to bind.
    "v = ?",
    "v = $1",
    "v = :v",
    "len($__ledger_entries_files) > 0",
    "region = $__ledger_entries_files[1]",
]


def _with_canary(text: str, canary: Path) -> str:
    return text.replace(CANARY, str(canary))


def _footprint(location: Location) -> tuple[int, set[str]]:
    warehouse = location.connect()
    return warehouse.table("events").version, {i.key for i in warehouse.store.list("")}


@contextmanager
def _runs_nothing(location: Location, canary: Path) -> Iterator[None]:
    """Nothing is written: no canary file, no object in the warehouse, the same version."""
    before = _footprint(location)
    yield
    assert not canary.exists(), f"the statement ran: {canary} was written"
    after = _footprint(location)
    assert after[0] == before[0], "the table's version changed"
    assert after[1] == before[1], f"objects written: {sorted(after[1] - before[1])}"


def _events(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("events", SCHEMA, primary_key="id", partition_by="region")
    table.insert(ROWS[:2])
    table.insert(ROWS[2:])
    return table


@pytest.fixture(scope="module")
def events_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The events warehouse, built once: each case gets its own copy of its folder (copying a
    few small files costs far less than the three commits that made them)."""
    root = tmp_path_factory.mktemp("caller-sql") / "warehouse"
    _events(ledger.connect(str(root)))
    return root


@pytest.fixture
def events(events_warehouse: Path, local_location: Location) -> ledger.Table:
    shutil.copytree(events_warehouse, local_location.uri)
    return local_location.connect().table("events")


def _visible(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(views.visible(table.refresh()).fetchall())


QUERY_ENTRY_POINTS: dict[str, Callable[[Location, ledger.Table, str], Any]] = {
    "rewrite_partitions": lambda _, t, sql: t.rewrite_partitions({"region": "eu"}, sql),
    "custom policy": lambda where, _, sql: where.connect().create_table(
        "custom", SCHEMA, primary_key="id", policy={"name": "custom", "sql": sql}
    ),
}

EXPRESSION_ENTRY_POINTS: dict[str, Callable[[ledger.Table, str], Any]] = {
    "delete_where": lambda t, p: t.delete_where(p),
    "drop_partitions where": lambda t, p: t.drop_partitions(where=p),
    "totals where": lambda t, p: views.totals(t, sum="v", where=p).fetchall(),
    "views.sql where": lambda t, p: views.sql(t, "totals", dialect="spark", where=p),
    "rollup measure": lambda t, p: t.create_rollup("daily", by="region", measures={"n": p}),
}


@pytest.mark.parametrize("entry", list(QUERY_ENTRY_POINTS))
@pytest.mark.parametrize("sql", HOSTILE_QUERIES)
def test_hostile_queries_are_refused_before_anything_runs(
    events, local_location, tmp_path, entry, sql
):
    canary = tmp_path / "canary.out"
    rows = _visible(events)
    with _runs_nothing(local_location, canary), pytest.raises(ledger.UnsafeSqlError):
        QUERY_ENTRY_POINTS[entry](local_location, events, _with_canary(sql, canary))
    assert _visible(events) == rows


@pytest.mark.parametrize("entry", list(EXPRESSION_ENTRY_POINTS))
@pytest.mark.parametrize("predicate", HOSTILE_EXPRESSIONS)
def test_hostile_expressions_are_refused_before_anything_runs(
    events, local_location, tmp_path, entry, predicate
):
    canary = tmp_path / "canary.out"
    rows = _visible(events)
    # Text that parses is refused as unsafe; text that does not parse (COPY inside an
    # expression) is refused as a bad predicate or measure.
    parses = "(COPY" not in predicate
    refused: tuple[type[Exception], ...] = (
        (ledger.UnsafeSqlError,)
        if parses
        else (ledger.InvalidArgumentError, ledger.InvalidPredicateError)
    )
    with _runs_nothing(local_location, canary), pytest.raises(refused):
        EXPRESSION_ENTRY_POINTS[entry](events, _with_canary(predicate, canary))
    assert _visible(events) == rows


@pytest.mark.parametrize("entry", [e for e in EXPRESSION_ENTRY_POINTS if e != "rollup measure"])
@pytest.mark.parametrize(
    "predicate", ["read_csv('/etc/passwd') IS NULL", "current_setting('threads') = '1'"]
)
def test_predicates_reading_files_or_settings_raise_the_typed_error(events, entry, predicate):
    with pytest.raises(ledger.UnsafePredicateError, match="reads files or settings"):
        EXPRESSION_ENTRY_POINTS[entry](events, predicate)
    assert issubclass(ledger.UnsafePredicateError, ledger.InvalidPredicateError)


@pytest.mark.parametrize("entry", [e for e in EXPRESSION_ENTRY_POINTS if e != "rollup measure"])
@pytest.mark.parametrize(
    "predicate", ["COLUMNS(*) > 0", "COLUMNS('^(v|dml_type)$') > 0", "#1 > 0", "*COLUMNS(*) > 0"]
)
def test_predicates_expanding_columns_are_refused(events, entry, predicate):
    # Expanded over the entries, these would reach the system columns and let a delete mark
    # match where its insertion does not.
    rows = _visible(events)
    with pytest.raises(ledger.UnsafePredicateError, match="expands columns"):
        EXPRESSION_ENTRY_POINTS[entry](events, predicate)
    assert _visible(events) == rows


def test_a_measure_calling_a_file_reader_raises_the_typed_error(events):
    with pytest.raises(ledger.UnsafeSqlError, match="read_csv"):
        events.create_rollup("daily", by="region", measures={"n": "sum(read_csv('x'))"})


def test_the_canary_would_be_written_if_the_statement_ran(tmp_path):
    """The corpus's canary check can fail: DuckDB itself does write the file."""
    canary = tmp_path / "canary.out"
    duckdb.connect().execute(_with_canary(HOSTILE_QUERIES[0], canary))
    assert canary.exists()


def test_hostile_queries_are_refused_on_s3_too(location, tmp_path):
    table = _events(location.connect())
    canary = tmp_path / "canary.out"
    for sql in (HOSTILE_QUERIES[0], "SELECT * FROM read_parquet('/etc/passwd')"):
        with _runs_nothing(location, canary), pytest.raises(ledger.UnsafeSqlError):
            table.rewrite_partitions({"region": "eu"}, _with_canary(sql, canary))


# --- case variants and table names: properties ---------------------------------------------------


def _mixed_case(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if flip else c.lower() for c, flip in zip(text, flips, strict=False))


@given(st.sampled_from(HOSTILE_QUERIES), st.lists(st.booleans(), min_size=120, max_size=120))
def test_any_casing_of_a_hostile_query_is_refused(sql, flips):
    mixed = _mixed_case(_with_canary(sql, Path("/nonexistent/canary")), flips)
    with pytest.raises(ledger.UnsafeSqlError):
        checked_select(mixed, ("entries",), "rewrite query")


@given(st.lists(st.booleans(), min_size=7, max_size=7), st.booleans())
def test_the_provided_relation_is_matched_in_any_case(flips, quoted):
    name = _mixed_case("entries", flips)
    shown = f'"{name}"' if quoted else name
    assert checked_select(f"SELECT * FROM {shown}", ("entries",), "q") == (f"SELECT * FROM {shown}")


@given(
    st.text(min_size=1, max_size=20).filter(lambda n: n.lower() != "entries" and "\x00" not in n)
)
def test_any_other_table_name_is_refused(name):
    quoted = '"' + name.replace('"', '""') + '"'
    with pytest.raises(ledger.UnsafeSqlError):
        checked_select(f"SELECT * FROM {quoted}", ("entries",), "q")


# --- legitimate shapes keep working --------------------------------------------------------------

LEGITIMATE_REWRITES = [
    ("SELECT * FROM entries WHERE id <> 1", [2]),
    ("FROM entries WHERE id <> 1", [2]),
    ("WITH kept AS (SELECT * FROM entries WHERE id <> 1) SELECT * FROM kept", [2]),
    ("SELECT * FROM entries WHERE id = 1 UNION ALL SELECT * FROM entries WHERE id = 2", [1, 2]),
    ("SELECT * FROM entries EXCEPT SELECT * FROM entries WHERE id = 2", [1]),
    ("SELECT * FROM Entries e WHERE e.id IN (SELECT id FROM ENTRIES WHERE v > 1)", [2]),
    ('SELECT * FROM "entries" -- keep the second\nWHERE id = 2', [2]),
    ("WITH a AS (SELECT * FROM entries), b AS (SELECT * FROM a WHERE id <> 1) FROM b", [2]),
    (
        "WITH RECURSIVE r AS (SELECT * FROM entries WHERE id = 2 "
        "UNION ALL SELECT * FROM r WHERE false) SELECT * FROM r",
        [2],
    ),
]


@pytest.mark.parametrize(("sql", "kept"), LEGITIMATE_REWRITES)
def test_legitimate_rewrite_shapes_run(events, sql, kept):
    events.rewrite_partitions({"region": "eu"}, sql)
    assert [r[0] for r in _visible(events)] == [*kept, 3]


def test_a_legitimate_predicate_with_functions_runs(events):
    events.delete_where("lower(email) LIKE 'a@%' OR abs(v) = 3")
    assert [r[0] for r in _visible(events)] == [2]


# --- a rewrite that keeps the row count ----------------------------------------------------------


def test_a_redaction_keeping_the_row_count_is_rewritten(location):
    table = _events(location.connect())
    before = table.version
    redact = (
        "SELECT * REPLACE (CASE WHEN id = 1 THEN 'redacted' ELSE email END AS email) FROM entries"
    )
    result = table.rewrite_partitions({"region": ["eu", "us"]}, redact)
    assert result.version == before + 1 == table.version
    # Only the eu file holds id 1; the us file comes back unchanged and is kept as it is.
    assert (result.files_removed, result.entries_removed, result.entries_rewritten) == (1, 0, 2)
    assert _visible(table) == [
        (1, "eu", "redacted", 1),
        (2, "eu", "b@x.org", 2),
        (3, "us", "c@x.org", 3),
    ]
    fresh = location.connect().table("events")
    assert sorted(views.visible(fresh).fetchall()) == _visible(table)


def test_a_rewrite_returning_the_entries_unchanged_commits_nothing(events):
    before = events.version
    files = sorted(m.path for m in events.snapshot().markers())
    result = events.rewrite_partitions({"region": ["eu", "us"]}, "SELECT * FROM entries ORDER BY v")
    assert result.version is None and events.refresh().version == before
    assert sorted(m.path for m in events.snapshot().markers()) == files


@pytest.mark.spark
def test_spark_totals_refuse_hostile_predicates(events, spark):
    import ledger.spark as ls

    for predicate in ("reflect('java.lang.System', 'exit', '0') = 1", "getenv('HOME') = ''"):
        with pytest.raises(ledger.UnsafePredicateError):
            ls.totals(events, sum="v", where=predicate, spark=spark)
    assert ls.totals(events, sum="v", where="id <> 1", spark=spark).collect()[0][0] == 2


# A custom merge query in a shape worth checking: mixed-case relation, a CTE and a comment (the
# comment is dropped from the text that runs, the rest runs as written).
CUSTOM_PURGE = "WITH kept AS (SELECT * FROM Entries -- all but id 2\n WHERE id <> 2) FROM kept"


def _custom_table(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table(
        "custom", SCHEMA, primary_key="id", policy={"name": "custom", "sql": CUSTOM_PURGE}
    )
    for row in ROWS:
        table.insert([row])
    return table


def test_a_checked_custom_query_runs_in_an_embedded_merge(local_location):
    table = _custom_table(local_location.connect())
    table.merge(min_files=1)
    assert [r[0] for r in _visible(table)] == [1, 3]


@pytest.mark.spark
def test_a_checked_custom_query_runs_in_a_spark_merge(local_location, spark):
    import ledger.spark as ls

    table = _custom_table(local_location.connect())
    ls.merge(table, min_files=1, spark=spark)
    assert [r[0] for r in _visible(table)] == [1, 3]


# --- any hostile source in any position of a legitimate query -----------------------------------

TEMPLATES = [
    "SELECT * FROM {src}",
    "SELECT * FROM entries WHERE id IN (SELECT 1 FROM {src})",
    "SELECT * FROM entries WHERE EXISTS (SELECT 1 FROM {src} AS s)",
    "WITH c AS (SELECT * FROM {src}) SELECT * FROM entries",
    "WITH c AS (SELECT 1 AS x), d AS (SELECT * FROM c, {src}) SELECT * FROM entries",
    "SELECT * FROM entries UNION ALL SELECT * FROM {src}",
    "SELECT * FROM entries EXCEPT SELECT * FROM (SELECT * FROM {src})",
    "SELECT * FROM entries e JOIN {src} s ON true",
    "SELECT * FROM entries e, LATERAL (SELECT * FROM {src}) l",
    "SELECT (SELECT count(*) FROM {src}) AS n FROM entries",
    "FROM {src}",
]
HOSTILE_SOURCES = [
    "read_parquet('x.parquet')",
    "read_csv_auto('/etc/passwd')",
    "read_json_objects('x.json')",
    "glob('*')",
    "query('SELECT 1')",
    "duckdb_tables()",
    "duckdb_settings()",
    "pragma_database_list()",
    "range(10)",
    "'/etc/passwd'",
    '"data.csv"',
    "information_schema.columns",
    "main.entries",
    "other",
]
SAFE_SOURCES = ["entries", "ENTRIES", '"Entries"']


@given(
    st.sampled_from(TEMPLATES),
    st.sampled_from(HOSTILE_SOURCES),
    st.lists(st.booleans(), min_size=200, max_size=200),
)
def test_a_hostile_source_anywhere_in_a_query_is_refused(template, source, flips):
    sql = _mixed_case(template.format(src=source), flips)
    with pytest.raises(ledger.UnsafeSqlError):
        checked_select(sql, ("entries",), "rewrite query")


@given(st.sampled_from(TEMPLATES), st.sampled_from(SAFE_SOURCES))
def test_the_provided_relation_anywhere_in_a_query_is_accepted(template, source):
    sql = template.format(src=source)
    rendered = checked_select(sql, ("entries",), "rewrite query")
    # What runs is the same query: DuckDB binds it over an empty `entries` alike.
    con = duckdb.connect()
    con.execute("CREATE TABLE entries (id BIGINT, v INTEGER)")
    assert con.sql(rendered).columns == con.sql(sql).columns


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * REPLACE (v + list_sum(range(1)) AS v) FROM entries",
        "SELECT * REPLACE (v + len(generate_series(1, 2)) - 2 AS v) FROM entries",
    ],
)
def test_scalar_forms_of_names_that_are_also_table_functions_run(events, sql):
    """range and generate_series are table functions in FROM but lists outside it."""
    events.rewrite_partitions({"region": "eu"}, sql)
    assert [r[3] for r in _visible(events)] == [1, 2, 3]
