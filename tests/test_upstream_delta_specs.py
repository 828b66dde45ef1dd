"""LangGraph's delta-history conformance specs, ported to our savers.

LangGraph's repository has, in ``libs/checkpoint-conformance/langgraph/checkpoint/conformance/spec/``,
three spec files that the released ``langgraph-checkpoint-conformance`` wheel (0.0.2, which
tests/test_conformance.py runs) does not ship yet:

* ``test_delta_channel_history.py``: the ``get_delta_channel_history`` contract (writes oldest
  first, the seed is the nearest stored value, the target's own writes left out, channels walked
  independently, no channels → nothing, no stored value up to the root → no seed, a plain
  pre-DeltaChannel value is a seed);
* ``test_delta_channel_reconstruction.py``: a DeltaChannel rebuilt from that history
  (``from_checkpoint(seed)`` then ``replay_writes``) holds the expected value;
* ``test_delta_channel_keepset.py``: the checkpoints that must survive a deletion for the head to
  stay readable (the head, and its ancestors back to each DeltaChannel's nearest stored value);

with the chains they build in ``spec/_delta_fixtures.py``. CI runs without internet, so it cannot
fetch that repository: the same behaviours are written here again, in our own code, against
``PostgresSaver`` and ``AsyncPostgresSaver``. Where this port departs from them:

* every history is also computed on LangGraph's ``InMemorySaver`` fed the same chain, and must be
  equal (the reference, whatever the installed LangGraph);
* the chains come in two shapes: ``sparse``, the specs' own (a channel versioned only where a value
  is stored), and ``dense``, what LangGraph writes (the version advances at every written step, the
  value is stored only at snapshots, the metadata counts the DeltaChannels since their snapshot);
* the reconstruction spec's expected values include the target's own pending writes, which the
  history contract (and InMemorySaver's walk) leaves out: here the rebuilt value is seed + writes up
  to the target's parent, and the target's writes replayed on top give the value its child holds;
* langgraph-checkpoint 4.3 has no ``get_delta_channel_keepset``: the keep-set is checked through
  our public API instead, as what ``prune(strategy="keep_latest")`` leaves of a thread whose newest
  checkpoint is the head (and every survivor's history is unchanged by it).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from conftest import migrated_database
from langchain_core.runnables import RunnableConfig
from langgraph._internal._typing import MISSING
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    empty_checkpoint,
)
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver, Report

Shape = Literal["sparse", "dense"]
SHAPES: list[Shape] = ["sparse", "dense"]


class Driver:
    """One saver, sync or async, behind the async calls the chains and checks make."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.is_async = isinstance(saver, AsyncPostgresSaver)

    async def put(
        self,
        config: RunnableConfig,
        cp: Checkpoint,
        metadata: CheckpointMetadata,
        versions: ChannelVersions,
    ) -> RunnableConfig:
        if self.is_async:
            return await self.saver.aput(config, cp, metadata, versions)
        return self.saver.put(config, cp, metadata, versions)

    async def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        if self.is_async:
            await self.saver.aput_writes(config, writes, task_id)
        else:
            self.saver.put_writes(config, writes, task_id)

    async def history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if self.is_async:
            return await self.saver.aget_delta_channel_history(config=config, channels=channels)
        return self.saver.get_delta_channel_history(config=config, channels=channels)

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple:
        tup = await self.saver.aget_tuple(config) if self.is_async else self.saver.get_tuple(config)
        assert tup is not None, config
        return tup

    async def prune(self, thread_id: str, *, dry_run: bool = False) -> Report:
        if isinstance(self.saver, AsyncPostgresSaver):
            return await self.saver.aprune([thread_id], dry_run=dry_run)
        assert isinstance(self.saver, PostgresSaver)
        return self.saver.prune([thread_id], dry_run=dry_run)

    async def checkpoint_ids(self, thread_id: str) -> set[str]:
        root: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        if self.is_async:
            found = [t async for t in self.saver.alist(root)]
        else:
            found = list(self.saver.list(root))
        return {t.config["configurable"]["checkpoint_id"] for t in found}


@pytest.fixture(scope="module")
def module_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """One migrated database for the module (a clone per test would be most of its time): each test
    writes a thread of its own."""
    with migrated_database(request) as dsn:
        yield dsn


@pytest.fixture(params=["sync", "async"])
async def ours(request: pytest.FixtureRequest, module_dsn: str) -> AsyncIterator[Driver]:
    if request.param == "sync":
        with PostgresSaver.from_conn_string(module_dsn, max_size=2) as saver:
            yield Driver(saver)
    else:
        async with AsyncPostgresSaver.from_conn_string(module_dsn, max_size=2) as asaver:
            yield Driver(asaver)


# ---------------------------------------------------------------- the chains


def _identity(step: int) -> Any:
    return step


@dataclass(frozen=True)
class Plan:
    """One channel along a chain of checkpoints, steps numbered from 0 (the root)."""

    name: str
    #: steps storing the accumulated value as a _DeltaSnapshot
    snapshots: frozenset[int] = frozenset()
    #: steps storing a plain value instead (a thread saved before the channel became a DeltaChannel)
    plain: Mapping[int, Any] = field(default_factory=dict)
    #: the first step at which the channel exists
    start: int = 0
    #: which steps get a pending write: those storing nothing, all, or none
    writes: Literal["between", "every", "none"] = "between"
    #: the snapshot value and the write of a step
    value: Callable[[int], Any] = _identity

    def stored(self, step: int) -> bool:
        return step in self.snapshots or step in self.plain

    def written(self, step: int) -> bool:
        if step < self.start or self.writes == "none":
            return False
        return self.writes == "every" or not self.stored(step)

    def since_stored(self, step: int) -> int:
        """Steps since the nearest stored value at or before ``step`` (from before the start if none)."""
        last = max(
            (s for s in range(self.start, step + 1) if self.stored(s)), default=self.start - 1
        )
        return step - last


def new_thread() -> str:
    return f"spec-{uuid.uuid4().hex}"


def _version(n: int) -> str:
    return f"{n:032}.{0:016}"  # LangGraph's form of a channel version


async def build(
    d: Driver,
    thread_id: str,
    steps: int,
    plans: Sequence[Plan],
    shape: Shape,
    *,
    delta_metadata: bool = True,
) -> list[RunnableConfig]:
    """A linear chain of ``steps`` checkpoints put one on the other, with each channel's stored
    values and pending writes as its plan says; the stored configs, root first.

    ``sparse``: a checkpoint versions a channel only where it stores a value. ``dense``: the version
    advances at every step the channel exists (cumulative, as LangGraph's checkpoints carry them),
    and with ``delta_metadata`` the metadata counts, per DeltaChannel not stored at that step, the
    steps since its value was (LangGraph's ``counters_since_delta_snapshot``)."""
    saved: list[RunnableConfig] = []
    versions: dict[str, str | int | float] = {}
    for step in range(steps):
        values: dict[str, Any] = {}
        new: dict[str, str | int | float] = {}
        counters: dict[str, tuple[int, int]] = {}
        for p in plans:
            if step < p.start:
                continue
            if step in p.plain:
                values[p.name] = p.plain[step]
            elif step in p.snapshots:
                values[p.name] = _DeltaSnapshot(p.value(step))
            if p.name in values or shape == "dense":
                new[p.name] = _version(step + 1)
            if not p.stored(step):
                n = p.since_stored(step)
                counters[p.name] = (n, n)
        if shape == "dense":
            versions.update(new)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=step))
        cp["channel_values"] = values
        cp["channel_versions"] = dict(versions) if shape == "dense" else dict(new)
        metadata: CheckpointMetadata = {"source": "loop", "step": step, "parents": {}}
        if delta_metadata and shape == "dense" and counters:
            metadata["counters_since_delta_snapshot"] = counters
        conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if saved:
            conf["checkpoint_id"] = saved[-1]["configurable"]["checkpoint_id"]
        saved.append(await d.put({"configurable": conf}, cp, metadata, new))
        for p in plans:
            if p.written(step):
                await d.put_writes(saved[-1], [(p.name, p.value(step))], f"task-{p.name}-{step}")
    return saved


async def history_of(
    d: Driver,
    steps: int,
    plans: Sequence[Plan],
    shape: Shape,
    channels: Sequence[str],
    *,
    late_write: tuple[str, Any] | None = None,
) -> tuple[Mapping[str, DeltaChannelHistory], RunnableConfig]:
    """The history at the head of a new chain (after ``late_write`` was put on the head, if any),
    checked equal to InMemorySaver's for the same chain; with the head's config."""
    results = []
    thread_id = new_thread()
    for driver in (d, Driver(InMemorySaver())):
        head = (await build(driver, thread_id, steps, plans, shape))[-1]
        if late_write is not None:
            await driver.put_writes(head, [late_write], "late")
        results.append((await driver.history(head, channels), head))
    (found, head), (reference, _) = results
    assert found == reference
    return found, head


def _written(history: DeltaChannelHistory) -> list[Any]:
    return [value for _task, _channel, value in history["writes"]]


def _seed_value(history: DeltaChannelHistory) -> Any:
    seed = history["seed"]
    return seed.value if isinstance(seed, _DeltaSnapshot) else seed


# ---------------------------------------------------------------- test_delta_channel_history.py


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_lists_the_writes_oldest_first(ours: Driver, shape: Shape) -> None:
    # root stores a value; steps 1-4 write; the head (4) is rebuilt from the root and steps 1-3
    found, _ = await history_of(ours, 5, [Plan("ch", frozenset({0}))], shape, ["ch"])
    assert _written(found["ch"]) == [1, 2, 3]
    assert [task for task, _, _ in found["ch"]["writes"]] == ["task-ch-1", "task-ch-2", "task-ch-3"]


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_seed_is_the_nearest_stored_value(ours: Driver, shape: Shape) -> None:
    found, _ = await history_of(ours, 6, [Plan("ch", frozenset({0, 3}))], shape, ["ch"])
    assert isinstance(found["ch"]["seed"], _DeltaSnapshot)
    assert _seed_value(found["ch"]) == 3  # step 3's, not the root's
    assert _written(found["ch"]) == [4]


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_leaves_out_the_targets_own_writes(ours: Driver, shape: Shape) -> None:
    found, _ = await history_of(
        ours, 3, [Plan("ch", frozenset({0}))], shape, ["ch"], late_write=("ch", "late")
    )
    assert _written(found["ch"]) == [1]  # step 2's write and the late one sit on the head


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_walks_each_channel_to_its_own_seed(ours: Driver, shape: Shape) -> None:
    plans = [
        Plan("a", frozenset({1}), writes="every"),
        Plan("b", frozenset({3}), writes="every"),
    ]
    found, _ = await history_of(ours, 5, plans, shape, ["a", "b"])
    assert (_seed_value(found["a"]), _written(found["a"])) == (1, [1, 2, 3])
    assert (_seed_value(found["b"]), _written(found["b"])) == (3, [3])


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_of_no_channels_is_empty(ours: Driver, shape: Shape) -> None:
    found, _ = await history_of(ours, 3, [Plan("ch", frozenset({0}))], shape, [])
    assert found == {}


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_without_a_stored_value_has_no_seed(ours: Driver, shape: Shape) -> None:
    found, _ = await history_of(ours, 4, [Plan("ch")], shape, ["ch"])
    assert "seed" not in found["ch"]
    assert _written(found["ch"]) == [0, 1, 2]  # back to the root, its write included


@pytest.mark.parametrize("shape", SHAPES)
async def test_history_takes_a_plain_old_value_as_seed(ours: Driver, shape: Shape) -> None:
    # a thread saved while the channel was a plain reducer channel, then continued as a DeltaChannel
    plan = Plan("ch", plain={1: [10, 20, 30]})
    found, _ = await history_of(ours, 4, [plan], shape, ["ch"])
    assert found["ch"]["seed"] == [10, 20, 30]
    assert not isinstance(found["ch"]["seed"], _DeltaSnapshot)
    assert _written(found["ch"]) == [2]


# ---------------------------------------------------------------- test_delta_channel_reconstruction.py


def _as_list(step: int) -> list[int]:
    return [step]


def _concat(value: list[int], writes: Sequence[list[int]]) -> list[int]:
    return [*value, *itertools.chain.from_iterable(writes)]


def _rebuild(history: DeltaChannelHistory) -> Any:
    channel = DeltaChannel(_concat, list).from_checkpoint(history.get("seed", MISSING))
    channel.replay_writes(history["writes"])
    return channel.get()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("steps", "snapshots", "at_head", "after_head"),
    [
        # a snapshot at the root: the round trip of a _DeltaSnapshot blob and of every write
        (5, {0}, [0, 1, 2, 3], [0, 1, 2, 3, 4]),
        # a snapshot in the middle: nothing older is replayed
        (6, {0, 3}, [3, 4], [3, 4, 5]),
        # no snapshot: everything from the root
        (4, set(), [0, 1, 2], [0, 1, 2, 3]),
    ],
    ids=["root-snapshot", "mid-snapshot", "no-snapshot"],
)
async def test_reconstruction_from_the_history(
    ours: Driver,
    shape: Shape,
    steps: int,
    snapshots: set[int],
    at_head: list[int],
    after_head: list[int],
) -> None:
    plan = Plan("msgs", frozenset(snapshots), value=_as_list)
    found, head = await history_of(ours, steps, [plan], shape, ["msgs"])
    assert _rebuild(found["msgs"]) == at_head
    # the head's own pending writes (not part of its history) replayed on top: its child's value
    tup = await ours.get_tuple(head)
    own = [w for w in tup.pending_writes or [] if w[1] == "msgs"]
    extended: DeltaChannelHistory = {"writes": [*found["msgs"]["writes"], *own]}
    if "seed" in found["msgs"]:
        extended["seed"] = found["msgs"]["seed"]
    assert _rebuild(extended) == after_head


# ---------------------------------------------------------------- test_delta_channel_keepset.py
#
# Upstream asks the saver for the keep-set (get_delta_channel_keepset, not in langgraph-checkpoint
# 4.3). Ours has no such method: the keep-set is what prune(strategy="keep_latest") keeps of a
# thread whose newest checkpoint is the head, and it takes the DeltaChannels from the checkpoints'
# metadata (counters_since_delta_snapshot) rather than a list of channels, so these chains are
# LangGraph's dense shape with that metadata.


async def _prune_and_check(
    d: Driver, configs: list[RunnableConfig], channels: Sequence[str], kept_steps: set[int]
) -> None:
    """Prune the chain's thread: exactly ``kept_steps`` survive, and each survivor's history of the
    channels it does not store itself (what reading it needs) is unchanged."""
    thread_id = configs[0]["configurable"]["thread_id"]
    before = {}
    for c in configs:
        tup = await d.get_tuple(c)
        needed = [ch for ch in channels if ch not in tup.checkpoint["channel_values"]]
        before[c["configurable"]["checkpoint_id"]] = (needed, await d.history(c, needed))
    plan = await d.prune(thread_id, dry_run=True)
    done = await d.prune(thread_id)
    assert (plan.checkpoints, plan.writes, plan.blobs) == (
        done.checkpoints,
        done.writes,
        done.blobs,
    )
    assert done.checkpoints == len(configs) - len(kept_steps)
    expected = {configs[s]["configurable"]["checkpoint_id"] for s in kept_steps}
    assert await d.checkpoint_ids(thread_id) == expected
    for c in configs:
        if c["configurable"]["checkpoint_id"] in expected:
            needed, history = before[c["configurable"]["checkpoint_id"]]
            assert await d.history(c, needed) == history


async def test_keepset_without_delta_channels_is_the_head(ours: Driver) -> None:
    # the checkpoints name no DeltaChannel (a graph without one): the head needs no ancestor
    configs = await build(
        ours, new_thread(), 4, [Plan("ch", frozenset({0}))], "dense", delta_metadata=False
    )
    await _prune_and_check(ours, configs, [], {3})


async def test_keepset_of_a_head_storing_the_value_is_the_head(ours: Driver) -> None:
    configs = await build(ours, new_thread(), 4, [Plan("ch", frozenset({0, 3}))], "dense")
    await _prune_and_check(ours, configs, ["ch"], {3})


async def test_keepset_reaches_back_to_the_snapshot(ours: Driver) -> None:
    configs = await build(ours, new_thread(), 5, [Plan("ch", frozenset({0}))], "dense")
    await _prune_and_check(ours, configs, ["ch"], {0, 1, 2, 3, 4})


async def test_keepset_of_two_channels_is_the_union(ours: Driver) -> None:
    # "a" from step 3 (stored there), "b" from step 1 (stored there): the head needs steps 1-5;
    # step 0 holds neither channel, so nothing, a survivor's own channels included, needs it
    plans = [
        Plan("a", frozenset({3}), start=3, writes="none"),
        Plan("b", frozenset({1}), start=1, writes="none"),
    ]
    configs = await build(ours, new_thread(), 6, plans, "dense")
    await _prune_and_check(ours, configs, ["a", "b"], {1, 2, 3, 4, 5})


async def test_keepset_without_a_snapshot_is_the_whole_chain(ours: Driver) -> None:
    configs = await build(ours, new_thread(), 4, [Plan("ch")], "dense")
    await _prune_and_check(ours, configs, ["ch"], {0, 1, 2, 3})


async def test_keepset_is_the_same_every_time(ours: Driver) -> None:
    thread_id = new_thread()
    configs = await build(ours, thread_id, 5, [Plan("ch", frozenset({2}))], "dense")
    first = await ours.prune(thread_id, dry_run=True)
    assert first.checkpoints == 2
    assert await ours.prune(thread_id, dry_run=True) == first
    await _prune_and_check(ours, configs, ["ch"], {2, 3, 4})
    # and once pruned, pruning again removes nothing
    again = await ours.prune(thread_id)
    assert (again.checkpoints, again.writes, again.blobs, again.missing) == (0, 0, 0, [])
