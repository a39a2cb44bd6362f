"""Small commits on S3 (moto in a process of its own, over HTTP on 127.0.0.1): the storage requests
and the latency of a
10-row ``table.insert`` of a list of dicts, beside one raw PutObject of the same bytes.

Requests are counted at the server, so pyarrow's requests count as much as boto3's. The figure
is the median per commit; the mean beside it includes the checkpoint and its hint, written by
every 50th commit. The raw PutObject sends the
bytes of the data file a commit wrote, through the store's own boto3 client, interleaved with the
commits so that noise from the shared machine hits both alike. Targets: at most 4 requests per
commit and at most 30 ms.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

import pytest

import ledger
from tests.benchmarks.timing import env_int, summary, timed
from tests.support.request_counting import CountingS3Server
from tests.support.s3server import BUCKET

COMMITS = env_int("LEDGER_BENCH_SMALL_COMMITS", 200)
ROWS_PER_COMMIT = 10
REQUESTS_TARGET = 4
LATENCY_TARGET_S = 0.030
SCHEMA = {"id": "BIGINT", "user_id": "BIGINT", "kind": "VARCHAR", "amount": "DOUBLE"}

pytestmark = pytest.mark.timeout(1200)


def _rows(start: int) -> list[dict[str, Any]]:
    return [
        {"id": start + i, "user_id": (start + i) % 97, "kind": "click", "amount": i * 1.25}
        for i in range(ROWS_PER_COMMIT)
    ]


def test_small_commits_on_s3(
    counting_server: CountingS3Server, bench_results: dict[str, Any]
) -> None:
    assert counting_server.endpoint is not None
    options = counting_server.endpoint.options()
    warehouse = ledger.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}", **options)
    table = warehouse.create_table("events", SCHEMA, primary_key="id")
    for warm in range(5):  # the store's one-time probe of conditional writes, imports, caches
        table.insert(_rows(-100 * (warm + 1)))
    store = table.store
    data_file = table.snapshot().markers()[0].path
    payload = store.get(table.prefix + data_file)
    client = store.client  # type: ignore[attr-defined]
    raw_key = f"{store.prefix}/raw-put/one-object"  # type: ignore[attr-defined]

    commit_samples: list[float] = []
    commit_cpu_samples: list[float] = []
    put_samples: list[float] = []
    put_cpu_samples: list[float] = []
    requests_per_commit: list[int] = []
    for number in range(COMMITS):
        cpu_start = time.process_time()
        put_s, _ = timed(
            lambda: client.put_object(Bucket=store.bucket, Key=raw_key, Body=payload)  # type: ignore[attr-defined]
        )
        put_samples.append(put_s)
        put_cpu_samples.append(time.process_time() - cpu_start)
        counting_server.taken()
        cpu_start = time.process_time()
        commit_s, info = timed(lambda n=number: table.insert(_rows(n * ROWS_PER_COMMIT)))
        # Every thread of this process (moto serves from its own): what a commit asks of a core,
        # whatever the load, beside its latency.
        commit_cpu_samples.append(time.process_time() - cpu_start)
        requests_per_commit.append(len(counting_server.taken()))
        assert info.inserted == ROWS_PER_COMMIT
        commit_samples.append(commit_s)
    assert table.count() == (COMMITS + 5) * ROWS_PER_COMMIT
    ids = [row[0] for row in table.scan().select("id").fetchall()]
    assert len(ids) == len(set(ids)) == (COMMITS + 5) * ROWS_PER_COMMIT

    commits, puts = summary(commit_samples), summary(put_samples)
    mean_requests = statistics.mean(requests_per_commit)
    bench_results["small_commits_s3"] = {
        "commits": COMMITS,
        "rows_per_commit": ROWS_PER_COMMIT,
        "requests_per_commit": {
            "ratio": round(statistics.median(requests_per_commit), 3),
            "target": f"<= {REQUESTS_TARGET}",
            "comparison": "requests of one raw PutObject of the same bytes (1)",
            "mean_with_checkpoints": round(mean_requests, 3),
            "max": max(requests_per_commit),
        },
        "latency": {
            "value_s": commits["median_s"],
            "baseline_s": puts["median_s"],
            "commit_vs_raw_put": round(commits["median_s"] / puts["median_s"], 3),
            "target_s": f"<= {LATENCY_TARGET_S}",
            "meets_target": commits["median_s"] <= LATENCY_TARGET_S,
            "comparison": "one raw PutObject of the data file's bytes, same client and server",
            "commit_min_s": commits["min_s"],
            "raw_put_min_s": puts["min_s"],
            "commit_cpu_s": round(statistics.median(commit_cpu_samples), 4),
            "raw_put_cpu_s": round(statistics.median(put_cpu_samples), 4),
        },
    }
