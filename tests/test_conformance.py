"""The official langgraph-checkpoint-conformance suite, against both savers.

The suite is async-only. The async saver runs it directly; the sync saver runs it through a thin
adapter whose async methods call the sync ones, so every spec test also exercises the sync code path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from langgraph_pg_saver import AsyncPostgresSaver, KeyringSerializer, PostgresSaver

ALL = {c.value for c in ALL_CAPABILITIES}


class SyncAsAsync(BaseCheckpointSaver[str]):
    """Presents a PostgresSaver's sync methods as the async API the conformance suite calls."""

    def __init__(self, inner: PostgresSaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for t in self.inner.list(config, filter=filter, before=before, limit=limit):
            yield t

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.inner.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.inner.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.inner.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.inner.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.inner.prune(thread_ids, strategy=strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        return self.inner.get_next_version(current, channel)


def _assert_report(report: Any, expected: set[str]) -> None:
    print(report.to_dict() if hasattr(report, "to_dict") else report)
    detected = {name for name, r in report.results.items() if r.detected}
    assert detected == expected, f"detected capabilities {sorted(detected)} != {sorted(expected)}"
    failures = {
        name: r.failures for name, r in report.results.items() if r.detected and not r.passed
    }
    assert not failures, f"conformance failures: {failures}"
    for name in expected:
        assert report.results[name].tests_passed > 0, name


@pytest.fixture(params=["direct", "pgbouncer", "sealed", "elements"])
def target(request: pytest.FixtureRequest, db_dsn: str) -> tuple[str, dict[str, Any]]:
    """The test database, direct and through a transaction-mode PgBouncer (defaults either way),
    direct with every value sealed by a KeyringSerializer, and direct with lists stored as their
    elements: the dsn and the saver's options."""
    if request.param == "pgbouncer":
        return str(request.getfixturevalue("bouncer").dsn(db_dsn)), {}
    if request.param == "sealed":
        return db_dsn, {"serde": KeyringSerializer({"k1": b"k" * 32})}
    if request.param == "elements":
        return db_dsn, {"list_storage": "elements"}
    return db_dsn, {}


async def test_conformance_async_saver(target: tuple[str, dict[str, Any]]) -> None:
    dsn, options = target

    @checkpointer_test(name="AsyncPostgresSaver")
    async def factory() -> AsyncIterator[AsyncPostgresSaver]:
        async with AsyncPostgresSaver.from_conn_string(dsn, max_size=4, **options) as saver:
            yield saver

    report = await validate(factory)
    _assert_report(report, ALL)


async def test_conformance_sync_saver(target: tuple[str, dict[str, Any]]) -> None:
    dsn, options = target

    @checkpointer_test(name="PostgresSaver")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        with PostgresSaver.from_conn_string(dsn, max_size=4, **options) as saver:
            yield SyncAsAsync(saver)

    report = await validate(factory)
    _assert_report(report, ALL)
