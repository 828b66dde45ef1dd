"""Threads of 20,000+ checkpoints: history in one statement equals the base walk; a keep_latest prune
keeps exactly the DeltaChannel ancestry and the state it rebuilds."""

from __future__ import annotations

import random
import time

import pytest
from helpers import config
from histories import build
from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_pg_saver import PostgresSaver

N = 20_000


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_twenty_thousand_checkpoints(saver: PostgresSaver) -> None:
    rng = random.Random(20_000)
    # "m" is a DeltaChannel written at every step with a stored snapshot about every 100 writes;
    # "rare" is written now and then and never snapshotted, so its walk goes back to the root
    t0 = time.perf_counter()
    hist = build(
        saver,
        "big",
        N,
        rng,
        channels=("m",),
        fork_prob=0.0,
        write_prob=1.0,
        seed_prob=0.01,
        delta_channels=("m",),
        writes_per_step=(1, 2),
    )
    print(f"\nbuilt {N} checkpoints in {time.perf_counter() - t0:.1f}s")
    latest = config("big", hist.nodes[-1].checkpoint_id)
    for target in (latest, config("big", hist.nodes[N // 2].checkpoint_id)):
        t0 = time.perf_counter()
        ours = saver.get_delta_channel_history(config=target, channels=["m", "other"])
        ours_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        base = BaseCheckpointSaver.get_delta_channel_history(saver, config=target, channels=["m"])
        base_s = time.perf_counter() - t0
        assert {"m": ours["m"]} == base
        print(f"history of 'm': ours {ours_s * 1000:.1f} ms, base walk {base_s * 1000:.1f} ms")
    # 'other' is written (pending writes) but never stored: the walk goes to the root
    t0 = time.perf_counter()
    deep = saver.get_delta_channel_history(config=latest, channels=["other"])
    print(
        f"history to the root ({N} ancestors): {(time.perf_counter() - t0) * 1000:.0f} ms, "
        f"{len(deep['other']['writes'])} writes"
    )
    assert "seed" not in deep["other"]

    before = saver.get_delta_channel_history(config=latest, channels=["m"])
    t0 = time.perf_counter()
    saver.prune(["big"])
    prune_s = time.perf_counter() - t0
    survivors = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("big"))]
    print(f"keep_latest prune of {N} checkpoints: {prune_s:.2f}s, {len(survivors)} survive")
    assert survivors[0] == hist.nodes[-1].checkpoint_id
    # exactly the chain back to the nearest stored value of 'm'
    seed_depth = next(
        i
        for i, node in enumerate(reversed(hist.nodes[:-1]))
        if node.checkpoint_id and _stored(saver, node.checkpoint_id, node.versions["m"])
    )
    assert len(survivors) == seed_depth + 2
    assert saver.get_delta_channel_history(config=latest, channels=["m"]) == before


def _stored(saver: PostgresSaver, checkpoint_id: str, version: str) -> bool:
    with saver._driver.cursor() as cur:
        row = cur.execute(
            "SELECT type <> 'empty' FROM pgsaver_blobs WHERE thread_id = 'big' AND channel = 'm' AND version = %s",
            (version,),
        ).fetchone()
    return bool(row and row[0])
