"""OpenTelemetry spans and metrics of the savers and the store (``pip install
'langgraph-pg-saver[telemetry]'``, the OpenTelemetry API).

Nothing is recorded unless the application configured OpenTelemetry's SDK (a ``TracerProvider``,
a ``MeterProvider``): without the API installed, or with its default no-op providers, every hook
here returns at once. Names (docs/guide.md, "Monitoring"):

- a span per operation, ``langgraph_pg_saver <operation>`` (``put``, ``put_writes``,
  ``get_tuple``, ``delete_thread``, ``prune``, ``copy_thread``, ``retention``, ``store.batch``,
  ...), kind CLIENT, attributes ``db.system.name`` = ``postgresql``, ``db.operation.name``,
  ``db.namespace`` (the schema), ``error.type`` on failure;
- ``langgraph_pg_saver.operation.duration`` (histogram, s): per operation and ``error.type``;
- ``langgraph_pg_saver.retries`` (counter): reruns after a transient error, by ``error.type``
  (the cause);
- ``langgraph_pg_saver.errors`` (counter): operations that raised, by operation and
  ``error.type``;
- ``langgraph_pg_saver.written.bytes`` and ``langgraph_pg_saver.written.rows`` (counters):
  what ``put`` and ``put_writes`` sent (serialized values, rows);
- ``langgraph_pg_saver.pool.wait`` (histogram, s): the wait for a pooled connection;
- ``langgraph_pg_saver.pool.connections`` (gauge): each open saver's pool, ``state`` =
  ``size``, ``idle`` or ``waiting`` (clients waiting for a connection), by ``pool.name``.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

NAME = "langgraph_pg_saver"

try:  # the optional extra
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the extra not installed
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]


class _Instruments:
    """The tracer and instruments, made once the application configured a provider."""

    def __init__(self) -> None:
        self.tracer: Any = None
        self.tracer_provider: Any = None
        self.meter_provider: Any = None
        self.duration: Any = None
        self.retries: Any = None
        self.errors: Any = None
        self.written_bytes: Any = None
        self.written_rows: Any = None
        self.pool_wait: Any = None
        self.drivers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.lock = threading.Lock()  # drivers are added from any thread, read by the reader's

    def tracing(self) -> Any:
        """The tracer, or None while no TracerProvider is configured."""
        if _trace is None:
            return None
        provider = _trace.get_tracer_provider()
        if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
            return None
        if self.tracer is None or self.tracer_provider is not provider:
            self.tracer = provider.get_tracer(NAME)
            self.tracer_provider = provider
        return self.tracer

    def enabled(self) -> bool:
        """Whether the application configured a tracer or a meter provider."""
        return self.tracing() is not None or self.metering()

    def metering(self) -> bool:
        """Whether a MeterProvider is configured (the instruments made on it)."""
        if _metrics is None:
            return False
        provider = _metrics.get_meter_provider()
        if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
            return False
        if self.meter_provider is not provider:
            meter = provider.get_meter(NAME)
            self.duration = meter.create_histogram(
                f"{NAME}.operation.duration", unit="s", description="Duration of an operation"
            )
            self.retries = meter.create_counter(
                f"{NAME}.retries", description="Reruns after a transient error, by its cause"
            )
            self.errors = meter.create_counter(
                f"{NAME}.errors", description="Operations that raised, by error class"
            )
            self.written_bytes = meter.create_counter(
                f"{NAME}.written.bytes", unit="By", description="Serialized values sent to write"
            )
            self.written_rows = meter.create_counter(
                f"{NAME}.written.rows", description="Rows sent to write"
            )
            self.pool_wait = meter.create_histogram(
                f"{NAME}.pool.wait", unit="s", description="Wait for a pooled connection"
            )
            meter.create_observable_gauge(
                f"{NAME}.pool.connections",
                callbacks=[self._observe_pools],
                description="Connections of each saver's pool: size, idle, waiting clients",
            )
            self.meter_provider = provider
        return True

    def _observe_pools(self, options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation

        with self.lock:
            drivers = list(self.drivers)
        for driver in drivers:
            pool = getattr(driver, "pool", None)
            if pool is None or getattr(driver.state, "closed", False):
                continue
            try:
                stats = pool.get_stats()
            except Exception:  # a pool closing under the callback
                continue
            name = str(getattr(pool, "name", ""))
            size = int(stats.get("pool_size", 0))
            idle = int(stats.get("pool_available", 0))
            waiting = int(stats.get("requests_waiting", 0))
            for state, value in (("size", size), ("idle", idle), ("waiting", waiting)):
                yield Observation(value, {"pool.name": name, "state": state})


_I = _Instruments()


def watch_pool(driver: Any) -> None:
    """Report ``driver``'s pool in the ``pool.connections`` gauge while it lives."""
    if _metrics is not None:
        with _I.lock:
            _I.drivers.add(driver)


@contextmanager
def operation(op: str, schema: str | None = None) -> Iterator[dict[str, Any]]:
    """A span and the duration of ``op``; the dict yielded takes attributes to add."""
    tracer = _I.tracing()
    metering = _I.metering()
    extra: dict[str, Any] = {}
    if tracer is None and not metering:
        yield extra
        return
    attributes: dict[str, Any] = {"db.system.name": "postgresql", "db.operation.name": op}
    if schema:
        attributes["db.namespace"] = schema
    started = time.perf_counter()
    error: str | None = None
    spanning = (
        tracer.start_as_current_span(
            f"{NAME} {op}", kind=_trace.SpanKind.CLIENT, attributes=attributes
        )
        if tracer is not None
        else nullcontext(None)
    )
    with spanning as span:
        try:
            yield extra
        except Exception as exc:  # (a cancellation or an interrupt is not an error of the call)
            error = type(exc).__qualname__
            if span is not None:
                span.set_attribute("error.type", error)
            raise
        finally:
            if span is not None and extra:
                span.set_attributes(extra)
            if metering:
                labels = {"db.operation.name": op}
                if error is not None:
                    labels["error.type"] = error
                    _I.errors.add(1, labels)
                _I.duration.record(time.perf_counter() - started, labels)


def instrumented(op: str) -> Callable[[F], F]:
    """Wrap a method of a saver or store (sync or async) in :func:`operation`; the schema from
    the instance's ``_q.schema`` when it has one."""

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                if _trace is None or not _I.enabled():
                    return await fn(self, *args, **kwargs)
                with operation(op, _schema_of(self)):
                    return await fn(self, *args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _trace is None or not _I.enabled():
                return fn(self, *args, **kwargs)
            with operation(op, _schema_of(self)):
                return fn(self, *args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap


def _schema_of(obj: Any) -> str | None:
    q = getattr(obj, "_q", None)
    schema = getattr(q, "schema", None)
    return schema if isinstance(schema, str) else None


def retried(exc: BaseException) -> None:
    """A rerun after ``exc`` (its class is the cause)."""
    if _metrics is not None and _I.metering():
        _I.retries.add(1, {"error.type": type(exc).__qualname__})


def pool_waited(seconds: float) -> None:
    if _metrics is not None and _I.metering():
        _I.pool_wait.record(seconds)


def written(op: str, rows: int, params: Mapping[str, Any] | None) -> None:
    """What ``op`` sent to write: ``rows`` rows, and the bytes of the serialized values among
    ``params`` (bytes values, and lists of them)."""
    if _metrics is None or not _I.metering():
        return
    size = 0
    for value in (params or {}).values():
        if isinstance(value, (bytes, bytearray, memoryview)):
            size += len(value)
        elif isinstance(value, (list, tuple)):
            size += sum(len(v) for v in value if isinstance(v, (bytes, bytearray, memoryview)))
    labels = {"db.operation.name": op}
    _I.written_rows.add(rows, labels)
    _I.written_bytes.add(size, labels)
