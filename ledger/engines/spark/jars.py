"""Where the JVM artifacts for Spark live, and the session options that put them on the classpath.

The project declares its Spark jars in ``jvm/pom.xml``; ``make jars`` (Delta Lake),
``make jars-s3a`` (hadoop-aws and the AWS SDK) and ``make jars-iceberg`` (benchmarks only) copy
them from Maven Central into one folder per group under the jars directory: ``$LEDGER_JARS``
when set, else ``.jvm/jars`` in the project checkout. The jars go on the classpath through
``spark.jars`` (local files: nothing is resolved or downloaded when a session starts).

>>> from ledger.engines.spark import jars
>>> sorted(jars.GROUPS)
['delta', 'iceberg', 's3a']
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ledger.errors import InvalidArgumentError

JARS_ENV = "LEDGER_JARS"
DEFAULT_JARS = Path(__file__).resolve().parents[3] / ".jvm" / "jars"

# Jar group -> the make target that fetches it.
GROUPS = {"delta": "make jars", "s3a": "make jars-s3a", "iceberg": "make jars-iceberg"}

# What a session needs besides the jars for Delta Lake's SQL and catalog (DeltaTable.merge,
# format("delta") writes with their commit options).
DELTA_OPTIONS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def jars_directory() -> Path:
    """The folder holding one subfolder of jars per group: ``$LEDGER_JARS``, else ``.jvm/jars``
    beside the package (where ``make jars`` puts them in a checkout).

    >>> jars_directory().name                                           # doctest: +SKIP
    'jars'
    """
    configured = os.environ.get(JARS_ENV)
    return Path(configured) if configured else DEFAULT_JARS


def group_jars(group: str) -> list[Path]:
    """The jar files of one group (``delta``, ``s3a``, ``iceberg``), sorted; empty when the group
    was not fetched.

    >>> [p.name for p in group_jars("delta")][:1]                       # doctest: +SKIP
    ['delta-kernel-api-4.4.0.jar']
    """
    if group not in GROUPS:
        raise InvalidArgumentError(
            f"unknown jar group {group!r}; the groups are {', '.join(sorted(GROUPS))}"
        )
    folder = jars_directory() / group
    return sorted(folder.glob("*.jar")) if folder.is_dir() else []


def missing_message(group: str) -> str:
    """Why a group's jars are not there and how to get them (for errors and test skips)."""
    return (
        f"the {group} jars are not in {jars_directory() / group}: run `{GROUPS[group]}` "
        f"(Maven fetches them from Maven Central) or set {JARS_ENV} to a folder holding them"
    )


def spark_options(groups: Iterable[str] = ("delta",)) -> dict[str, str]:
    """Session options that put the fetched jars of ``groups`` on the classpath (``spark.jars``)
    and, with the Delta jars, turn on Delta Lake's SQL extension and catalog. Groups that were
    not fetched are left out, so the options are empty on a machine without jars.

    >>> builder = SparkSession.builder                                  # doctest: +SKIP
    >>> for name, value in spark_options(["delta", "s3a"]).items():     # doctest: +SKIP
    ...     builder = builder.config(name, value)
    """
    found = {group: group_jars(group) for group in groups}
    jars = [str(path) for paths in found.values() for path in paths]
    if not jars:
        return {}
    options = {"spark.jars": ",".join(jars)}
    if found.get("delta"):
        options.update(DELTA_OPTIONS)
    return options


def on_classpath(spark: Any, class_name: str) -> bool:
    """Whether the session's JVM loads ``class_name`` (a jar given with ``spark.jars`` is there).

    >>> on_classpath(spark, "io.delta.tables.DeltaTable")               # doctest: +SKIP
    True
    """
    # Jars given with spark.jars are on the context class loader (as Spark loads them), not on
    # the loader Class.forName(name) alone would use from the py4j gateway.
    try:
        java: Any = spark.sparkContext._jvm
        loader = java.java.lang.Thread.currentThread().getContextClassLoader()
        java.java.lang.Class.forName(class_name, False, loader)
    except Exception:
        return False
    return True
