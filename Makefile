PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-deep bench lint typecheck clean

# Idempotent: re-installs only when pyproject.toml changed.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py
	$(PY) examples/corrections.py
	$(PY) examples/rollups.py
	$(PY) examples/dimension.py
	$(PY) examples/spark_pipeline.py

test: $(STAMP)
	$(VENV)/bin/ruff check ledger merge_policies views tests examples
	$(VENV)/bin/mypy
	$(PY) -m pytest -q

# The property suites at hundreds of examples each (slow: run before a release, not on every change).
test-deep: $(STAMP)
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q -m "not spark" tests/test_delete_marks.py \
		tests/test_model.py tests/test_merge_invariance.py tests/test_views.py \
		tests/test_rollups.py tests/test_publish.py
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q tests/test_cross_engine.py

bench: $(STAMP)
	$(PY) -m pytest -q -s tests/benchmarks -p no:cacheprovider -o addopts=""

lint: $(STAMP)
	$(VENV)/bin/ruff check ledger merge_policies views tests examples
	$(VENV)/bin/ruff format --check ledger merge_policies views tests examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) warehouse .pytest_cache .hypothesis
