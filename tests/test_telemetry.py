"""OpenTelemetry: what the savers and the store export, read from the SDK's in-memory exporter
and metric reader in a process of its own (the global providers can be set once per process),
on a real Postgres: spans per operation with their attributes and errors, durations, errors by
class, rows and bytes written, the pool's wait and connections; and nothing without providers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import opentelemetry.sdk  # noqa: F401  # the test extra's: a missing SDK fails, not skips

TESTS = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {tests!r})
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from graphs import two_nodes
    from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver, PostgresStore
    from langgraph_pg_saver.errors import PgSaverError

    dsn = {dsn!r}
    configure = {configure!r}
    spans = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    if configure:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    with PostgresSaver.from_conn_string(dsn, max_size=2) as saver:
        saver.setup()
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({{"foo": "x", "bar": []}}, {{"configurable": {{"thread_id": "otel"}}}})
        try:  # a parent that is not stored: the put raises
            saver.put(
                {{"configurable": {{"thread_id": "otel", "checkpoint_ns": "",
                                   "checkpoint_id": "nope"}}}},
                {{**saver.get_tuple({{"configurable": {{"thread_id": "otel"}}}}).checkpoint,
                  "id": "child-of-nope"}},
                {{}},
                {{}},
            )
        except PgSaverError as exc:
            failed = type(exc).__qualname__
        else:
            failed = None
        gauges = reader.get_metrics_data() if configure else None
        # a read waiting on a lock, its backend killed: the driver reruns it (a retry, its cause)
        import threading, time
        import psycopg
        locker = psycopg.connect(dsn)
        locker.execute("LOCK TABLE pgsaver_checkpoints IN ACCESS EXCLUSIVE MODE")

        def kill():
            with psycopg.connect(dsn, autocommit=True) as admin:
                for _ in range(200):
                    waiting = admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND datname = current_database() AND pid <> pg_backend_pid()"
                    ).fetchall()
                    if waiting:
                        admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0][0],))
                        break
                    time.sleep(0.05)
            time.sleep(0.3)
            locker.rollback()

        killer = threading.Thread(target=kill)
        killer.start()
        assert saver.get_tuple({{"configurable": {{"thread_id": "otel"}}}}) is not None
        killer.join()
        locker.close()

    async def run_async():
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.aget_tuple({{"configurable": {{"thread_id": "otel"}}}})

    asyncio.run(run_async())
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        store.put(("otel",), "k", {{"v": 1}})

    def points(data):
        out = []
        for rm in (data.resource_metrics if data else []):
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for p in m.data.data_points:
                        value = getattr(p, "value", None)
                        if value is None:
                            value = getattr(p, "count", None)
                        out.append([m.name, dict(p.attributes), value])
        return out

    from langgraph_pg_saver import telemetry
    print(json.dumps({{
        "made": [telemetry._I.tracer is not None, telemetry._I.meter_provider is not None],
        "failed": failed,
        "spans": [
            {{"name": s.name, "kind": s.kind.name, "attributes": dict(s.attributes),
              "status": s.status.status_code.name}}
            for s in spans.get_finished_spans()
        ],
        "metrics": points(reader.get_metrics_data() if configure else None),
        "gauges": points(gauges),
    }}))
    """
)


def _run(dsn: str, configure: bool) -> dict[str, Any]:
    script = SCRIPT.format(tests=str(TESTS), dsn=dsn, configure=configure)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_spans_and_metrics_of_the_savers_and_the_store(db_dsn: str) -> None:
    got = _run(db_dsn, configure=True)
    assert got["made"] == [True, True]
    spans = got["spans"]
    names = {s["name"] for s in spans}
    for op in ("put", "put_writes", "get_tuple", "store.batch"):
        assert f"langgraph_pg_saver {op}" in names, names
    put = next(s for s in spans if s["name"] == "langgraph_pg_saver put")
    assert put["kind"] == "CLIENT"
    assert put["attributes"]["db.system.name"] == "postgresql"
    assert put["attributes"]["db.operation.name"] == "put"
    assert put["attributes"]["db.namespace"] == "public"
    # the failed put: its span is an error, with the class the caller saw
    assert got["failed"] is not None
    failed = [s for s in spans if s["attributes"].get("error.type") == got["failed"]]
    assert len(failed) == 1
    assert failed[0]["status"] == "ERROR"
    metrics = got["metrics"]

    def total(name: str, **labels: str) -> float:
        return sum(
            v for n, a, v in metrics if n == name and all(a.get(k) == x for k, x in labels.items())
        )

    # every span's operation has its durations (histogram counts)
    assert total("langgraph_pg_saver.operation.duration", **{"db.operation.name": "put"}) >= 3
    assert total("langgraph_pg_saver.operation.duration", **{"db.operation.name": "get_tuple"}) >= 2
    assert total("langgraph_pg_saver.errors", **{"error.type": got["failed"]}) == 1
    # two_nodes' three checkpoints and its nodes' writes, serialized values among them
    assert total("langgraph_pg_saver.written.rows", **{"db.operation.name": "put"}) >= 3
    assert total("langgraph_pg_saver.written.rows", **{"db.operation.name": "put_writes"}) >= 2
    assert total("langgraph_pg_saver.written.bytes", **{"db.operation.name": "put_writes"}) > 0
    assert total("langgraph_pg_saver.pool.wait") >= 3
    # the read whose backend was killed while it waited: rerun once, its cause named
    assert total("langgraph_pg_saver.retries", **{"error.type": "AdminShutdown"}) >= 1
    # the sync saver's pool, read while it was open
    sizes = [a for n, a, _ in got["gauges"] if n == "langgraph_pg_saver.pool.connections"]
    assert {a["state"] for a in sizes} == {"size", "idle", "waiting"}


def test_nothing_is_recorded_without_providers(db_dsn: str) -> None:
    got = _run(db_dsn, configure=False)
    assert got["made"] == [False, False]  # no tracer, no instruments: every hook returned
    assert got["spans"] == []
    assert got["metrics"] == []
    assert got["failed"] is not None  # the operations ran as ever
