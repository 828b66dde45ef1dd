"""Random checkpoint trees with DeltaChannel-like storage, written through the saver's own SQL."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.checkpoint.base.id import uuid6

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.checkpoint import writing as _writing


@dataclass
class Node:
    checkpoint_id: str
    parent: str | None
    versions: dict[str, str]


@dataclass
class History:
    thread_id: str
    ns: str
    nodes: list[Node] = field(default_factory=list)


def build(
    saver: PostgresSaver,
    thread_id: str,
    n: int,
    rng: random.Random,
    *,
    channels: tuple[str, ...] = ("a", "b", "c"),
    ns: str = "",
    fork_prob: float = 0.1,
    write_prob: float = 0.6,
    seed_prob: float = 0.12,
    delta_channels: tuple[str, ...] = (),
    writes_per_step: tuple[int, int] = (0, 4),
) -> History:
    """n checkpoints; each step writes some channels (a stored value with probability seed_prob, else
    'no value' like a DeltaChannel between snapshots) and leaves pending writes on the checkpoint."""
    hist = History(thread_id, ns)
    put_rows: list[dict[str, Any]] = []
    write_rows: list[dict[str, Any]] = []
    counter = 0
    for i in range(n):
        if not hist.nodes:
            parent = None
        elif rng.random() < fork_prob:
            parent = rng.choice(hist.nodes)
        else:
            parent = hist.nodes[-1]
        versions = dict(parent.versions) if parent else {}
        values: dict[str, Any] = {}
        new_versions: dict[str, str] = {}
        for ch in channels:
            if rng.random() < write_prob:
                counter += 1
                versions[ch] = f"{counter:032}.{rng.random():016}"
                new_versions[ch] = versions[ch]
                if rng.random() < seed_prob:
                    values[ch] = {"seed": f"{ch}@{i}"}
        cid = str(uuid6(clock_seq=i))
        cp: Any = {
            "v": 1,
            "id": cid,
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": {},
            "updated_channels": None,
        }
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent.checkpoint_id
        metadata: Any = {"step": i}
        if delta_channels:  # as LangGraph records them: the delta channels with non-zero counters
            metadata["counters_since_delta_snapshot"] = {ch: [1, 1] for ch in delta_channels}
        put_rows.append(
            _writing.put_params(
                saver.serde, config, cp, metadata, new_versions, values_max=0
            ).params
        )
        node = Node(cid, parent.checkpoint_id if parent else None, versions)
        hist.nodes.append(node)
        stored: Any = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
        }
        for t in range(rng.randrange(*writes_per_step)):
            writes = [
                (rng.choice((*channels, "other")), f"w{i}.{t}.{k}")
                for k in range(rng.randrange(1, 3))
            ]
            if rng.random() < 0.1:
                writes.append(("__interrupt__", f"int{i}"))
            params = _writing.put_writes_params(
                saver.serde,
                stored,
                writes,
                f"task-{rng.randrange(5)}-{t}",
                rng.choice(("", "~a", "~b:1", "~b:0")),
                values_max=0,  # one executemany below: every row's parameters as arrays
            )
            if params is not None:
                write_rows.append(params.params)
    with saver._driver.cursor() as cur:
        cur.executemany(
            saver._q.render("put", blob_rows=0, claim=False, status=None, parts=False), put_rows
        )
        if write_rows:
            cur.executemany(saver._q.render("put_writes", write_rows=0), write_rows)
    assert WRITES_IDX_MAP  # the special channel above uses its fixed negative idx
    return hist
