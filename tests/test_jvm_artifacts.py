"""The JVM artifacts: jvm/pom.xml declares versions that match the pinned PySpark and delta-spark,
and ledger.engines.spark.jars finds what `make jars` fetched (or says which make target fetches
it)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import ledger
from ledger.engines.spark import jars

POM = Path(__file__).resolve().parent.parent / "jvm" / "pom.xml"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom_properties() -> dict[str, str]:
    root = ElementTree.parse(POM).getroot()
    properties = root.find("m:properties", NS)
    assert properties is not None
    return {child.tag.split("}", 1)[1]: (child.text or "") for child in properties}


def _pyspark_jars() -> list[str]:
    import pyspark

    return sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def test_delta_artifact_is_built_for_the_pinned_spark_and_delta_versions():
    import pyspark

    properties = _pom_properties()
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    assert properties["delta.artifact"] == f"delta-spark_{spark_minor}_2.13"
    python_delta = importlib.metadata.version("delta-spark").split(".")[:2]
    assert properties["delta.version"].split(".")[:2] == python_delta


def test_hadoop_aws_matches_the_hadoop_pyspark_ships():
    hadoop = _pom_properties()["hadoop.version"]
    assert f"hadoop-client-api-{hadoop}.jar" in _pyspark_jars()


def test_scala_binary_version_matches_pyspark():
    assert any(name.startswith("scala-library-2.13.") for name in _pyspark_jars())
    assert _pom_properties()["iceberg.artifact"].endswith("_2.13")


def test_jars_are_found_under_the_folder_ledger_jars_names(tmp_path, monkeypatch):
    (tmp_path / "delta").mkdir()
    for name in ("b-1.jar", "a-2.jar", "notes.txt"):
        (tmp_path / "delta" / name).write_text("x")
    monkeypatch.setenv(jars.JARS_ENV, str(tmp_path))
    assert jars.jars_directory() == tmp_path
    assert [p.name for p in jars.group_jars("delta")] == ["a-2.jar", "b-1.jar"]
    assert jars.group_jars("s3a") == []
    options = jars.spark_options(["delta", "s3a"])
    assert options["spark.jars"] == f"{tmp_path}/delta/a-2.jar,{tmp_path}/delta/b-1.jar"
    assert options["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert "spark.jars.packages" not in options  # nothing is resolved when a session starts


def test_without_fetched_jars_there_are_no_options_and_the_message_names_the_target(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(jars.JARS_ENV, str(tmp_path / "nothing"))
    assert jars.spark_options(["delta", "s3a", "iceberg"]) == {}
    assert "make jars-s3a" in jars.missing_message("s3a")
    assert "make jars`" in jars.missing_message("delta")
    assert str(tmp_path / "nothing" / "delta") in jars.missing_message("delta")


def test_s3a_jars_alone_turn_on_no_delta_options(tmp_path, monkeypatch):
    (tmp_path / "s3a").mkdir()
    (tmp_path / "s3a" / "hadoop-aws.jar").write_text("x")
    monkeypatch.setenv(jars.JARS_ENV, str(tmp_path))
    assert jars.spark_options(["delta", "s3a"]) == {"spark.jars": f"{tmp_path}/s3a/hadoop-aws.jar"}


def test_an_unknown_jar_group_is_a_typed_error(monkeypatch, tmp_path):
    monkeypatch.setenv(jars.JARS_ENV, str(tmp_path))
    with pytest.raises(ledger.InvalidArgumentError, match="delta, iceberg, s3a"):
        jars.group_jars("hive")


def test_the_default_folder_is_the_one_the_makefile_fills(monkeypatch):
    monkeypatch.delenv(jars.JARS_ENV, raising=False)
    makefile = (POM.parent.parent / "Makefile").read_text()
    assert "JARS := .jvm/jars" in makefile
    assert jars.jars_directory() == POM.parent.parent / ".jvm" / "jars"


def test_publish_without_the_delta_jars_is_refused_before_anything_is_written(tmp_path):
    """In a session without the jars (its own process: the run's session has them when `make
    jars` ran), the error names the make target and nothing is written. It needs no shared
    session, so it is no Spark-marked test: it runs beside the Spark tests, not among them."""
    script = f"""
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
import ledger, ledger.spark as ls
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
warehouse = ledger.connect({str(tmp_path / "wh")!r})
table = warehouse.create_table("t", {{"k": "BIGINT"}}, primary_key="k")
table.insert([{{"k": 1}}])
try:
    ls.publish_delta(table, {str(tmp_path / "delta")!r}, spark=spark)
except ledger.MissingDependencyError as e:
    print("REFUSED:", e)
"""
    environment = {**os.environ, jars.JARS_ENV: str(tmp_path / "no-jars")}
    root = Path(__file__).resolve().parent.parent
    environment["PYTHONPATH"] = os.pathsep.join([str(root), environment.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        cwd=root,
    )
    assert "REFUSED:" in done.stdout, done.stderr[-2000:]
    assert "make jars" in done.stdout and "Delta Lake jars" in done.stdout
    assert not (tmp_path / "delta").exists()
