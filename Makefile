PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench lint typecheck clean

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

bench: $(STAMP)
	$(PY) -m pytest -q -s tests/benchmarks -p no:cacheprovider -o addopts=""

lint: $(STAMP)
	$(VENV)/bin/ruff check ledger merge_policies views tests examples
	$(VENV)/bin/ruff format --check ledger merge_policies views tests examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) warehouse .pytest_cache .hypothesis
