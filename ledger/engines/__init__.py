"""Engines: the only modules that import an execution engine (duckdb; pyspark later)."""
