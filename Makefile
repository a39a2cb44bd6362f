PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Spark's jars (jvm/pom.xml), copied from Maven Central into one folder per group; a group is
# fetched again only when jvm/pom.xml changed. Without Maven the Delta/S3A tests skip.
# `make test` fetches delta and s3a (26 MB together); iceberg is for the benchmarks only.
MVN ?= mvn
JARS := .jvm/jars
FETCH_JARS = $(MVN) -q -B -Dstyle.color=never -f jvm/pom.xml dependency:copy-dependencies -P
DELTA_JARS := $(JARS)/delta/.fetched
S3A_JARS := $(JARS)/s3a/.fetched
ICEBERG_JARS := $(JARS)/iceberg/.fetched
# The files holding the tests marked `alone` (RUN_ALONE in tests/conftest.py): the second phase of
# `make test` collects only these (tests/test_alone_files.py checks the list is complete).
ALONE_TESTS := tests/test_concurrency.py tests/test_maintenance_concurrency.py \
	tests/test_vacuum_running_work.py

.PHONY: install jars jars-s3a jars-iceberg demo test test-deep bench lint typecheck clean

# Idempotent: re-installs only when pyproject.toml changed.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

$(JARS)/%/.fetched: jvm/pom.xml
	@if command -v $(MVN) >/dev/null; then \
		rm -rf $(JARS)/$* && { $(FETCH_JARS) $* && touch $@ \
			|| echo "Maven could not fetch the $* jars: the tests that need them skip"; }; \
	else \
		echo "Maven ($(MVN)) is missing: the $* jars were not fetched and the tests that need them skip"; \
	fi

jars: $(DELTA_JARS)

jars-s3a: $(S3A_JARS)

jars-iceberg: $(ICEBERG_JARS)

install: $(STAMP) jars jars-s3a

demo: $(STAMP)
	$(PY) examples/quickstart.py
	$(PY) examples/corrections.py
	$(PY) examples/rollups.py
	$(PY) examples/dimension.py
	$(PY) examples/ingest_service.py
	$(PY) examples/spark_pipeline.py

test: $(STAMP) jars jars-s3a
	$(VENV)/bin/ruff check ledger merge_policies views tests examples
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not alone"
	$(PY) -m pytest -q -m alone $(ALONE_TESTS)

# The property suites at hundreds of examples each (slow: run before a release, not on every change).
test-deep: $(STAMP) jars
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q -m "not spark" tests/test_delete_marks.py \
		tests/test_model.py tests/test_merge_invariance.py tests/test_views.py \
		tests/test_rollups.py tests/test_publish.py tests/test_visible_files.py \
		tests/test_visible_small_tables.py tests/test_visible_latest_insertions.py \
		tests/test_reads_in_one_statement.py tests/test_correction_dense_reads.py \
		tests/test_conversion.py tests/test_correction_reads.py tests/test_correction_value_reads.py \
		tests/test_partition_restricted_reads.py tests/test_held_snapshots.py \
		tests/test_replacing_versions.py tests/test_partial_rows.py tests/test_exact_totals.py \
		tests/test_wide_decimal_averages.py tests/test_long_partition_values.py \
		tests/test_fast_appends.py tests/test_inputs.py tests/test_key_encoding.py \
		tests/test_partitioning.py tests/test_partition_split.py
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q tests/test_cross_engine.py tests/test_shared_trees.py

# Every benchmark; writes docs/benchmarks.md, docs/benchmarks.json and docs/benchmarks.png.
bench: $(STAMP) jars jars-s3a jars-iceberg
	LEDGER_BENCH_REPORT=docs $(PY) -m pytest -q -s tests/benchmarks -p no:cacheprovider -o addopts=""

lint: $(STAMP)
	$(VENV)/bin/ruff check ledger merge_policies views tests examples
	$(VENV)/bin/ruff format --check ledger merge_policies views tests examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .jvm warehouse .pytest_cache .hypothesis
