"""Hadoop's S3A connector settings for an S3 store, so Spark's own Parquet reader scans the
ledger's files at ``s3a://bucket/key`` with the store's endpoint and credentials.

The settings are per bucket (``fs.s3a.bucket.<bucket>.*``): two warehouses on two endpoints, or
with two sets of keys, live side by side in one session, and the session's own ``fs.s3a.*``
defaults for other buckets are left alone. Options the store was not given are not set, so
Hadoop's default credential chain (environment, instance profile, ...) applies as it would for
any other S3A path.

>>> from ledger.storage.s3 import S3Store
>>> store = S3Store("s3://bucket/warehouse", endpoint_url="http://127.0.0.1:9000")
>>> s3a_settings(store)["fs.s3a.bucket.bucket.endpoint"]
'http://127.0.0.1:9000'
"""

from __future__ import annotations

import logging
from typing import Any

from ledger.engines.spark.jars import on_classpath
from ledger.storage import Store
from ledger.storage.s3 import S3Store

log = logging.getLogger(__name__)

CONNECTOR_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
_SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_TEMPORARY_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
# Never written to logs or messages.
_SECRET_SUFFIXES = ("access.key", "secret.key", "session.token")


def s3a_settings(store: S3Store) -> dict[str, str]:
    """The per-bucket Hadoop settings that point S3A at ``store``'s endpoint with its keys.

    An explicit endpoint (MinIO, moto, R2, ...) also turns on path-style access, which
    S3-compatible servers on an IP address or ``localhost`` need.
    """
    options = store.settings
    prefix = f"fs.s3a.bucket.{store.bucket}."
    settings: dict[str, str] = {}
    endpoint = options.endpoint_url
    if endpoint:
        settings[prefix + "endpoint"] = str(endpoint)
        settings[prefix + "path.style.access"] = "true"
        settings[prefix + "connection.ssl.enabled"] = str(
            str(endpoint).lower().startswith("https")
        ).lower()
    region = options.region
    if region:
        settings[prefix + "endpoint.region"] = str(region)
    elif endpoint:
        # Without a region the SDK would probe AWS to find one, which a private endpoint lacks.
        settings[prefix + "endpoint.region"] = "us-east-1"
    if options.access_key_id:
        settings[prefix + "access.key"] = options.access_key_id
        settings[prefix + "secret.key"] = options.secret_access_key or ""
        if options.session_token:
            settings[prefix + "session.token"] = options.session_token
            settings[prefix + "aws.credentials.provider"] = _TEMPORARY_PROVIDER
        else:
            settings[prefix + "aws.credentials.provider"] = _SIMPLE_PROVIDER
    return settings


def configure(spark: Any, store: Store) -> bool:
    """Set ``store``'s S3A settings on the session's Hadoop configuration; False when Spark
    cannot read the store through S3A (not an S3 store, the connector's jars are not on the
    classpath, or the session has no Hadoop configuration to set, as under Spark Connect).

    A bucket whose settings change (another endpoint or other keys) has its cached S3A
    filesystem closed, so the next read opens one with the new settings.
    """
    if not isinstance(store, S3Store) or not connector_present(spark):
        return False
    try:
        java: Any = spark.sparkContext._jvm
        hadoop: Any = spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:
        return False
    settings = s3a_settings(store)
    changed = {name: value for name, value in settings.items() if hadoop.get(name) != value}
    if not changed:
        return True
    replaced = any(hadoop.get(name) is not None for name in changed)
    for name, value in changed.items():
        hadoop.set(name, value)
    log.debug(
        "S3A settings for bucket %s: %s",
        store.bucket,
        {name: _shown(name, value) for name, value in changed.items()},
    )
    if replaced:
        _forget_cached_filesystem(java, hadoop, store.bucket)
    return True


def connector_present(spark: Any) -> bool:
    """Whether ``hadoop-aws`` is on the session's classpath (``make jars-s3a``)."""
    return on_classpath(spark, CONNECTOR_CLASS)


def _forget_cached_filesystem(java: Any, hadoop: Any, bucket: str) -> None:
    # Hadoop caches one filesystem per scheme and bucket with the settings it was opened with;
    # closing it drops it from the cache.
    uri = java.java.net.URI(f"s3a://{bucket}/")
    cached = java.org.apache.hadoop.fs.FileSystem.get(uri, hadoop)
    cached.close()


def _shown(name: str, value: str) -> str:
    return "*****" if name.endswith(_SECRET_SUFFIXES) else value
