"""DeltaChannel history and lifecycle operations: exact history semantics, and for every lifecycle
operation, the state of every surviving checkpoint is identical before and after, and the graph
continues identically."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from graphs import delta_chat, two_delta
from helpers import checkpoint, config, run_threads
from histories import build
from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    DeltaDependencyError,
    InvalidInputError,
    PostgresSaver,
    Report,
    ThreadNotEmptyError,
)


def rows(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args or None).fetchall()  # type: ignore[arg-type]


def cfg(thread: str, run: str | None = None, cid: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if run is not None:
        c["run_id"] = run
    if cid is not None:
        c["checkpoint_ns"] = ""
        c["checkpoint_id"] = cid
    return {"configurable": c}


def states(saver: PostgresSaver, graph: Any, thread: str) -> dict[str, Any]:
    """get_state of every checkpoint of the thread's root namespace, by checkpoint id."""
    out: dict[str, Any] = {}
    for t in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}):
        cid = t.config["configurable"]["checkpoint_id"]
        snap = graph.get_state(cfg(thread, cid=cid))
        out[cid] = (snap.values, snap.next)
    return out


def run_turns(graph: Any, thread: str, turns: int, run_prefix: str = "run") -> None:
    for i in range(turns):
        graph.invoke({"a": [f"in{i}"]}, cfg(thread, run=f"{run_prefix}-{i}"))


# ---------------------------------------------------------------- get_delta_channel_history


def _base_walk(saver: PostgresSaver, conf: Any, channels: list[str]) -> Any:
    return BaseCheckpointSaver.get_delta_channel_history(saver, config=conf, channels=channels)


@pytest.mark.parametrize("seed", range(6))
def test_history_matches_the_base_walk_on_random_histories(saver: PostgresSaver, seed: int) -> None:
    rng = random.Random(seed)
    hist = build(saver, f"rand-{seed}", 120, rng)
    targets = [*rng.sample(hist.nodes, 25), hist.nodes[0], hist.nodes[-1]]
    for node in targets:
        conf = config(hist.thread_id, node.checkpoint_id)
        for channels in (["a"], ["a", "b", "c"], ["c", "a"], ["missing"], ["b", "other"]):
            ours = saver.get_delta_channel_history(config=conf, channels=channels)
            assert ours == _base_walk(saver, conf, channels), (seed, node.checkpoint_id, channels)
    # latest (no checkpoint id) and an unknown checkpoint
    latest = config(hist.thread_id)
    assert saver.get_delta_channel_history(config=latest, channels=["a", "b"]) == _base_walk(
        saver, latest, ["a", "b"]
    )
    unknown = config(hist.thread_id, "no-such-checkpoint")
    assert saver.get_delta_channel_history(config=unknown, channels=["a"]) == {"a": {"writes": []}}
    assert saver.get_delta_channel_history(config=latest, channels=[]) == {}


async def test_async_history_matches_the_base_walk(asaver: AsyncPostgresSaver, db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, max_size=1) as sync_saver:
        hist = build(sync_saver, "rand-async", 80, random.Random(99))
    for node in hist.nodes[::7]:
        conf = config(hist.thread_id, node.checkpoint_id)
        ours = await asaver.aget_delta_channel_history(config=conf, channels=["a", "b", "c"])
        base = await BaseCheckpointSaver.aget_delta_channel_history(
            asaver, config=conf, channels=["a", "b", "c"]
        )
        assert ours == base


def test_history_semantics_by_hand(saver: PostgresSaver) -> None:
    """seed at the nearest stored value, its writes included, the target's writes excluded, forks ignored."""
    t = "by-hand"
    c1 = checkpoint({"m": ["seed"]}, {"m": "1"})
    s1 = saver.put(config(t), c1, {}, {"m": "1"})
    saver.put_writes(s1, [("m", ["w1"])], "task-b", "~b")
    saver.put_writes(s1, [("m", ["w0"])], "task-a", "~a")
    c2 = checkpoint({}, {"m": "2"})  # a delta step: version moved, no value stored
    s2 = saver.put(s1, c2, {}, {"m": "2"})
    saver.put_writes(s2, [("m", ["w2"])], "task")
    sibling = saver.put(s1, checkpoint({}, {"m": "2b"}), {}, {"m": "2b"})  # a fork of s1
    saver.put_writes(sibling, [("m", ["sibling"])], "task")
    c3 = checkpoint({}, {"m": "3"})
    s3 = saver.put(s2, c3, {}, {"m": "3"})
    saver.put_writes(s3, [("m", ["pending"])], "task")
    hist = saver.get_delta_channel_history(config=s3, channels=["m"])
    assert hist == {
        "m": {
            "seed": ["seed"],
            "writes": [("task-a", "m", ["w0"]), ("task-b", "m", ["w1"]), ("task", "m", ["w2"])],
        }
    }
    # a None stored value is a seed too; the 'no value' marker is not
    s4 = saver.put(s3, checkpoint({"m": None}, {"m": "4"}), {}, {"m": "4"})
    s5 = saver.put(s4, checkpoint({}, {"m": "5"}), {}, {"m": "5"})
    assert saver.get_delta_channel_history(config=s5, channels=["m"]) == {
        "m": {"seed": None, "writes": []}
    }


def test_history_is_one_round_trip(db_dsn: str) -> None:
    from helpers import traced

    with psycopg.connect(db_dsn) as conn:
        saver = PostgresSaver(conn)
        hist = build(saver, "rt", 200, random.Random(5), seed_prob=0.0)
        with traced(conn.pgconn) as t:
            saver.get_delta_channel_history(
                config=config("rt", hist.nodes[-1].checkpoint_id), channels=["a", "b", "c"]
            )
        assert t.round_trips == 1


def _fork_mid_history(graph: Any) -> tuple[list[Any], Any]:
    """Five turns, then a fork from the fifth-newest checkpoint with an edited message, run on:
    the thread's history before the fork and its final state."""
    for _ in range(5):
        graph.invoke({"messages": ["hi"]}, cfg("fork"))
    history = list(graph.get_state_history(cfg("fork")))
    forked = graph.update_state(history[4].config, {"messages": ["edited"]})
    graph.invoke(None, forked)
    return history, graph.get_state(cfg("fork"))


def test_history_on_a_forked_graph_thread(saver: PostgresSaver) -> None:
    """Against the same graph on LangGraph's InMemorySaver, not a hard-coded reply: how a fork
    re-runs differs between LangGraph releases (1.2.0 replies twice), and the saver must give
    whatever the installed LangGraph gives on its own reference saver."""
    from langgraph.checkpoint.memory import InMemorySaver

    history, final = _fork_mid_history(delta_chat().compile(checkpointer=saver))
    ref_history, ref_final = _fork_mid_history(delta_chat().compile(checkpointer=InMemorySaver()))
    assert [h.values for h in history] == [h.values for h in ref_history]
    assert (final.values, final.next) == (ref_final.values, ref_final.next)
    assert final.values["messages"][: len(history[4].values["messages"]) + 1] == [
        *history[4].values["messages"],
        "edited",
    ]
    # the branch we left is intact
    graph = delta_chat().compile(checkpointer=saver)
    assert graph.get_state(history[0].config).values == history[0].values


# ---------------------------------------------------------------- prune / retention / copy / delete_for_runs


@pytest.fixture
def two(saver: PostgresSaver) -> Iterator[Any]:
    return two_delta().compile(checkpointer=saver)


def _assert_survivors_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert set(after) <= set(before)
    for cid, state in after.items():
        assert state == before[cid], cid


def test_prune_keep_latest_keeps_every_survivor_intact(
    saver: PostgresSaver, two: Any, db_dsn: str
) -> None:
    run_turns(two, "p", 13)
    saver.copy_thread("p", "p-unpruned")
    before = states(saver, two, "p")
    saver.prune(["p"], strategy="keep_latest")
    after = states(saver, two, "p")
    _assert_survivors_unchanged(before, after)
    latest = max(before)
    assert latest in after
    assert len(after) < len(before), "nothing was pruned"
    # a kept ancestor is there only because a DeltaChannel needs it: every survivor is reachable
    ids = set(after)
    parents = {
        r[0]: r[1]
        for r in rows(
            db_dsn,
            "SELECT checkpoint_id, parent_checkpoint_id FROM pgsaver_checkpoints WHERE thread_id = 'p'",
        )
    }
    assert all(cid == latest or any(parents.get(o) == cid for o in ids) for cid in ids)
    # no blob or write is left that no survivor references
    orphans = rows(
        db_dsn,
        """SELECT count(*) FROM pgsaver_writes w WHERE thread_id = 'p' AND NOT EXISTS (
        SELECT 1 FROM pgsaver_checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_id = w.checkpoint_id)""",
    )
    assert orphans == [(0,)]
    # the graph continues exactly as on the unpruned copy
    run_turns(two, "p", 4, "more")
    run_turns(two, "p-unpruned", 4, "more")
    assert two.get_state(cfg("p")).values == two.get_state(cfg("p-unpruned")).values
    # pruning again is a no-op for the survivors
    kept = states(saver, two, "p")
    saver.prune(["p"])
    _assert_survivors_unchanged(kept, states(saver, two, "p"))


def test_prune_delete_and_bad_input(saver: PostgresSaver, two: Any) -> None:
    run_turns(two, "gone", 2)
    run_turns(two, "stays", 2)
    saver.prune(["gone"], strategy="delete")
    assert saver.get_tuple(cfg("gone")) is None
    assert saver.get_tuple(cfg("stays")) is not None
    with pytest.raises(InvalidInputError, match="list of thread ids"):
        saver.prune("stays")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="unknown prune strategy"):
        saver.prune(["stays"], strategy="keep_oldest")
    assert len(list(saver.list(cfg("stays")))) > 1  # nothing happened


def test_retention_keep_last_with_dry_run(saver: PostgresSaver, two: Any) -> None:
    for t in ("r1", "r2", "r3"):
        run_turns(two, t, 14)  # b snapshots every 5th update, written every other turn
    before = {t: states(saver, two, t) for t in ("r1", "r2", "r3")}
    plan = saver.retention(keep_last=4, dry_run=True)
    assert plan.dry_run
    assert plan.checkpoints > 0
    assert plan.bytes > 0
    assert plan.threads == 3
    assert {t: states(saver, two, t) for t in before} == before  # a dry run deletes nothing
    seen: list[Any] = []
    done = saver.retention(keep_last=4, thread_batch=2, batch=3, progress=seen.append)
    assert (done.checkpoints, done.writes, done.blobs, done.threads) == (
        plan.checkpoints,
        plan.writes,
        plan.blobs,
        plan.threads,
    )
    assert done.batches > 3
    assert len(seen) == 2
    assert done.last_thread_id == "r3"
    for t, b in before.items():
        after = states(saver, two, t)
        _assert_survivors_unchanged(b, after)
        assert sorted(b)[-4:] == sorted(after)[-4:] or set(sorted(b)[-4:]) <= set(after)


def test_retention_deletes_idle_threads_and_resumes(
    saver: PostgresSaver, two: Any, db_dsn: str
) -> None:
    for t in ("idle-a", "idle-b", "active"):
        run_turns(two, t, 2)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_checkpoints SET created_at = now() - interval '40 days' WHERE thread_id LIKE 'idle-%'"
        )
    plan = saver.retention(idle_for=timedelta(days=30), dry_run=True)
    assert plan.threads == 2
    assert plan.checkpoints > 0
    # resume after the first thread: only idle-b goes
    done = saver.retention(idle_for=timedelta(days=30), start_after="idle-a")
    assert done.threads == 1
    assert saver.get_tuple(cfg("idle-a")) is not None
    assert saver.get_tuple(cfg("idle-b")) is None
    done = saver.retention(idle_for=timedelta(days=30))
    assert done.threads == 1
    assert saver.get_tuple(cfg("idle-a")) is None
    assert saver.get_tuple(cfg("active")) is not None
    assert rows(db_dsn, "SELECT count(*) FROM pgsaver_blobs WHERE thread_id LIKE 'idle-%'") == [
        (0,)
    ]
    with pytest.raises(InvalidInputError, match="keep_last"):
        saver.retention()
    with pytest.raises(InvalidInputError, match="idle_for"):
        saver.retention(idle_for=5)  # type: ignore[arg-type]


def test_copy_thread_continues_identically(saver: PostgresSaver, two: Any) -> None:
    run_turns(two, "src", 7)
    before = states(saver, two, "src")
    saver.copy_thread("src", "dst")
    assert states(saver, two, "dst") == before
    assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("dst"))] == sorted(
        before, reverse=True
    )
    run_turns(two, "src", 3, "more")
    run_turns(two, "dst", 3, "more")
    assert two.get_state(cfg("src")).values == two.get_state(cfg("dst")).values
    # a non-empty target is refused, and nothing is copied
    n_dst = len(list(saver.list(cfg("dst"))))
    with pytest.raises(ThreadNotEmptyError, match="overwrite=True"):
        saver.copy_thread("src", "dst")
    assert len(list(saver.list(cfg("dst")))) == n_dst
    # overwrite replaces it
    run_turns(two, "other", 1)
    saver.copy_thread("other", "dst", overwrite=True)
    assert states(saver, two, "dst") == states(saver, two, "other")
    # a missing source copies nothing, and names it
    assert saver.copy_thread("no-such-thread", "empty-target") == Report(missing=["no-such-thread"])
    assert saver.get_tuple(cfg("empty-target")) is None
    with pytest.raises(InvalidInputError, match="same thread"):
        saver.copy_thread("src", "src")


def test_delete_for_runs_rolls_back_the_latest_run(saver: PostgresSaver, two: Any) -> None:
    run_turns(two, "d", 6)
    before = states(saver, two, "d")
    state_before_last_run = two.get_state(cfg("d")).values
    run_turns(two, "d", 1, "last")
    saver.delete_for_runs(["last-0"])
    after = states(saver, two, "d")
    assert after == before
    assert two.get_state(cfg("d")).values == state_before_last_run


def test_delete_for_runs_refuses_to_break_delta_state(saver: PostgresSaver, two: Any) -> None:
    run_turns(two, "mid", 4)
    before = states(saver, two, "mid")
    with pytest.raises(DeltaDependencyError) as info:
        saver.delete_for_runs(["run-1"])
    assert info.value.dependents
    assert all(d[0] == "mid" for d in info.value.dependents)
    assert "nothing was deleted" in str(info.value)
    assert states(saver, two, "mid") == before
    # deleting the dependent runs too is fine
    saver.delete_for_runs(["run-1", "run-2", "run-3"])
    after = states(saver, two, "mid")
    _assert_survivors_unchanged(before, after)
    assert len(after) < len(before)


async def test_async_lifecycle(asaver: AsyncPostgresSaver) -> None:
    graph = two_delta().compile(checkpointer=asaver)
    for i in range(11):
        await graph.ainvoke({"a": [f"in{i}"]}, cfg("ap", run=f"run-{i}"))
    before_last = (await graph.aget_state(cfg("ap"))).values
    await graph.ainvoke({"a": ["last"]}, cfg("ap", run="run-last"))
    latest = (await graph.aget_state(cfg("ap"))).values
    await asaver.acopy_thread("ap", "ap-copy")
    assert (await graph.aget_state(cfg("ap-copy"))).values == latest
    # rolling back the last run on the copy
    await asaver.adelete_for_runs(["run-last"])
    assert (await graph.aget_state(cfg("ap-copy"))).values == before_last
    assert (await graph.aget_state(cfg("ap"))).values == before_last  # both threads held that run
    await graph.ainvoke({"a": ["last"]}, cfg("ap", run="run-again"))
    latest = (await graph.aget_state(cfg("ap"))).values
    await asaver.aprune(["ap"])
    assert (await graph.aget_state(cfg("ap"))).values == latest
    report = await asaver.aretention(keep_last=1, thread_ids=["ap-copy"], dry_run=True)
    assert report.checkpoints > 0
    done = await asaver.aretention(keep_last=1, thread_ids=["ap-copy"])
    assert done.checkpoints == report.checkpoints
    assert (await graph.aget_state(cfg("ap-copy"))).values == before_last
    await asaver.aprune(["ap", "ap-copy"], strategy="delete")
    assert await asaver.aget_tuple(cfg("ap")) is None


# ---------------------------------------------------------------- unknown thread ids


def tables(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the saver's tables, whole: any change shows."""
    with psycopg.connect(dsn) as conn:
        return {
            t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)  # fixed names
            for t in ("pgsaver_checkpoints", "pgsaver_writes", "pgsaver_blobs")
        }


COUNTS = ("threads", "checkpoints", "writes", "blobs", "bytes")


def counts(report: Report) -> tuple[int, ...]:
    return tuple(getattr(report, c) for c in COUNTS)


def _unknown_id_calls(saver: Any) -> dict[str, Any]:
    """Every lifecycle call given a list of thread ids, with two unknown ones (a coroutine
    function each for an AsyncPostgresSaver)."""
    ids = ["nope-b", "nope-a", "nope-b"]
    a = "a" if isinstance(saver, AsyncPostgresSaver) else ""
    prune, retention = getattr(saver, a + "prune"), getattr(saver, a + "retention")
    return {
        "prune delete": lambda: prune(ids, strategy="delete"),
        "prune delete dry run": lambda: prune(ids, strategy="delete", dry_run=True),
        "prune keep_latest": lambda: prune(ids),
        "prune keep_latest dry run": lambda: prune(ids, dry_run=True),
        "retention keep_last": lambda: retention(keep_last=1, thread_ids=ids),
        "retention dry run": lambda: retention(keep_last=1, thread_ids=ids, dry_run=True),
        "retention idle": lambda: retention(idle_for=timedelta(seconds=1), thread_ids=ids),
        "retention idle dry run": lambda: retention(
            idle_for=timedelta(seconds=1), keep_last=1, thread_ids=ids, dry_run=True
        ),
    }


def test_unknown_thread_ids_are_named_never_raised_and_change_nothing(
    saver: PostgresSaver, two: Any, db_dsn: str
) -> None:
    run_turns(two, "known", 6)
    before = tables(db_dsn)
    for name, call in _unknown_id_calls(saver).items():
        report = call()
        assert report.missing == ["nope-a", "nope-b"], name
        assert counts(report) == (0, 0, 0, 0, 0), name
        assert json.loads(json.dumps(report.as_dict()))["missing"] == ["nope-a", "nope-b"], name
        assert tables(db_dsn) == before, name
    # copy_thread of a missing source: nothing copied, and the target left as it is, with
    # overwrite too (and no ThreadNotEmptyError: there is nothing to copy into it)
    for target, overwrite in (("fresh", False), ("known", False), ("known", True)):
        report = saver.copy_thread("nope-a", target, overwrite=overwrite)
        assert report == Report(missing=["nope-a"]), (target, overwrite)
        assert tables(db_dsn) == before, (target, overwrite)
    # delete_thread returns None, as LangGraph's does: an unknown id is a silent no-op
    assert saver.delete_thread("nope-a") is None  # type: ignore[func-returns-value]
    assert tables(db_dsn) == before


def test_known_ids_beside_unknown_ones_are_processed_and_the_unknown_named(
    saver: PostgresSaver, two: Any, db_dsn: str
) -> None:
    for t in ("k1", "k2", "k3"):
        run_turns(two, t, 14)
    k2_before = states(saver, two, "k2")
    plan = saver.prune(["x", "k1"], strategy="delete", dry_run=True)
    done = saver.prune(["x", "k1"], strategy="delete")
    assert plan.missing == done.missing == ["x"]
    # (bytes aside: threads_size and delete_threads measure rows a few bytes apart)
    assert counts(plan)[:4] == counts(done)[:4]
    assert done.threads == 1
    assert done.checkpoints > 0
    assert saver.get_tuple(cfg("k1")) is None
    plan = saver.prune(["k2", "y", "x"], dry_run=True)
    done = saver.prune(["k2", "y", "x"])
    assert plan.missing == done.missing == ["x", "y"]
    assert counts(plan) == counts(done)
    assert done.checkpoints > 0
    _assert_survivors_unchanged(k2_before, states(saver, two, "k2"))
    # retention names the unknown ids once, whatever the pages
    seen: list[Report] = []
    plan = saver.retention(
        keep_last=2, thread_ids=["z", "k3", "k1", "a"], thread_batch=1, dry_run=True
    )
    done = saver.retention(
        keep_last=2, thread_ids=["z", "k3", "k1", "a"], thread_batch=1, progress=seen.append
    )
    assert plan.missing == done.missing == ["a", "k1", "z"]  # k1 was deleted above
    assert counts(plan) == counts(done)
    assert done.checkpoints > 0
    assert [r.last_thread_id for r in seen] == ["k3"]  # one page: the only known thread
    assert seen[0].missing == ["a", "k1", "z"]
    # an id at or before start_after is skipped, not looked for
    assert saver.retention(keep_last=2, thread_ids=["a", "k3"], start_after="b").missing == []
    # a known source copies, with nothing missing
    assert saver.copy_thread("k3", "k3-copy").missing == []


async def test_async_unknown_thread_ids_are_named_never_raised(
    asaver: AsyncPostgresSaver, db_dsn: str
) -> None:
    graph = two_delta().compile(checkpointer=asaver)
    for i in range(14):
        await graph.ainvoke({"a": [f"in{i}"]}, cfg("known", run=f"run-{i}"))
    before = tables(db_dsn)
    for name, call in _unknown_id_calls(asaver).items():
        report = await call()
        assert report.missing == ["nope-a", "nope-b"], name
        assert counts(report) == (0, 0, 0, 0, 0), name
        assert tables(db_dsn) == before, name
    for target, overwrite in (("fresh", False), ("known", False), ("known", True)):
        report = await asaver.acopy_thread("nope-a", target, overwrite=overwrite)
        assert report == Report(missing=["nope-a"]), (target, overwrite)
    assert await asaver.adelete_thread("nope-a") is None  # type: ignore[func-returns-value]
    assert tables(db_dsn) == before
    # mixed: the known thread is processed, the unknown one named
    await asaver.acopy_thread("known", "known-2")
    plan = await asaver.aprune(["known", "nope"], dry_run=True)
    done = await asaver.aprune(["known", "nope"])
    assert plan.missing == done.missing == ["nope"]
    assert counts(plan) == counts(done)
    assert done.checkpoints > 0
    done = await asaver.aretention(keep_last=1, thread_ids=["nope", "known-2"])
    assert done.missing == ["nope"]
    assert done.checkpoints > 0
    done = await asaver.aprune(["known", "known-2", "nope"], strategy="delete")
    assert (done.threads, done.missing) == (2, ["nope"])
    assert await asaver.aget_tuple(cfg("known")) is None


# ---------------------------------------------------------------- concurrency


def test_two_prunes_and_a_writer_at_once(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, max_size=6) as saver:
        graph = two_delta().compile(checkpointer=saver)
        run_turns(graph, "busy", 6)
        errors: list[BaseException] = []
        stop = threading.Event()

        def writer() -> None:
            try:
                for i in range(12):
                    graph.invoke({"a": [f"live{i}"]}, cfg("busy", run=f"live-{i}"))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                stop.set()

        def pruner() -> None:
            try:
                while not stop.is_set():
                    saver.prune(["busy"])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        run_threads([writer, pruner, pruner], timeout=240)
        assert not errors, errors
        final = graph.get_state(cfg("busy")).values
        assert final["n"] == 18
        assert final["a"][-2:] == ["a18", "echo18"]
        assert len(final["a"]) == 18 * 2 + 18  # one input, one bump and one echo write per turn
        # and every survivor is still consistent
        for cid in states(saver, graph, "busy"):
            graph.get_state(cfg("busy", cid=cid))


# ---------------------------------------------------------------- the per-thread lock protocol


def test_put_on_a_deleted_parent_fails_loudly(saver: PostgresSaver, db_dsn: str) -> None:
    """The parent went with its values: a child that keeps one of them unchanged is refused."""
    from langgraph_pg_saver import ParentCheckpointMissingError

    first = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
    saver.delete_thread("t")
    with pytest.raises(ParentCheckpointMissingError, match="nothing was written"):
        saver.put(first, checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 1}), {}, {"b": 1})
    assert rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(0,)]
    assert rows(db_dsn, "SELECT count(*) FROM pgsaver_blobs") == [(0,)]


@pytest.fixture(params=[5, None], ids=["prepared", "unprepared"])
def lock_saver(db_dsn: str, request: pytest.FixtureRequest) -> Iterator[PostgresSaver]:
    """The saver of the lock-protocol tests, as it runs direct (put_new) and where nothing is
    prepared (put through migration 0006's function)."""
    with PostgresSaver.from_conn_string(db_dsn, max_size=4, prepare_threshold=request.param) as s:
        yield s


def _lock_waiters(dsn: str) -> int:
    return int(
        rows(dsn, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0][0]
    )


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_put_waiting_on_a_delete_of_its_parent_sees_how_it_ended(
    lock_saver: PostgresSaver, db_dsn: str, outcome: str
) -> None:
    """A put that started while a deleter held the thread's lock must see the delete once the lock
    is free, though its own snapshot predates that commit: nothing written when the parent went with
    a value the child keeps, a normal put when the delete was rolled back."""
    saver = lock_saver
    from langgraph_pg_saver import ParentCheckpointMissingError
    from langgraph_pg_saver.db.sql import raw_queries

    lock_class = int(raw_queries()["_lock_class"].strip())
    first = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
    result: list[Any] = []

    def put_child() -> None:
        try:
            # keeps "a" unchanged: the value the delete removes with the parent
            child = checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 1})
            result.append(saver.put(first, child, {}, {"b": 1}))
        except Exception as exc:
            result.append(exc)

    deleter = psycopg.connect(db_dsn)
    try:
        deleter.execute("SELECT pg_advisory_xact_lock(%s, hashtext('t'))", (lock_class,))
        deleter.execute("DELETE FROM pgsaver_blobs WHERE thread_id = 't'")
        deleter.execute("DELETE FROM pgsaver_checkpoints WHERE thread_id = 't'")
        worker = threading.Thread(target=put_child)
        worker.start()
        for _ in range(600):
            if _lock_waiters(db_dsn) or not worker.is_alive():
                break
            threading.Event().wait(0.05)
        assert worker.is_alive(), f"put did not wait for the thread's lock: {result}"
        deleter.commit() if outcome == "commit" else deleter.rollback()
        worker.join(timeout=60)
    finally:
        deleter.close()
    assert len(result) == 1
    if outcome == "commit":
        assert isinstance(result[0], ParentCheckpointMissingError)
        assert rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(0,)]
        assert rows(db_dsn, "SELECT count(*) FROM pgsaver_blobs") == [(0,)]
    else:
        assert not isinstance(result[0], Exception), result[0]
        child = saver.get_tuple(result[0])
        assert child is not None
        assert child.checkpoint["channel_values"] == {"a": 1, "b": 2}
        assert child.parent_config is not None
        assert (
            child.parent_config["configurable"]["checkpoint_id"]
            == first["configurable"]["checkpoint_id"]
        )


def test_an_ordinary_put_leaves_its_parent_row_untouched(
    lock_saver: PostgresSaver, db_dsn: str
) -> None:
    """The usual put only reads its parent (a row lock would cost a page write and a WAL record)."""
    saver = lock_saver
    first = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
    saver.put(first, checkpoint({"a": 2}, {"a": 2}), {}, {"a": 2})
    parent = first["configurable"]["checkpoint_id"]
    assert rows(
        db_dsn, "SELECT xmax::text FROM pgsaver_checkpoints WHERE checkpoint_id = %s", parent
    ) == [("0",)]


def test_put_on_a_parent_touched_before_still_works(lock_saver: PostgresSaver, db_dsn: str) -> None:
    """A parent whose row carries an old locker's or updater's id takes the locking path."""
    saver = lock_saver
    first = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
    with psycopg.connect(db_dsn) as conn:  # the thread's rows (on Citus: its shard's)
        conn.execute("SELECT 1 FROM pgsaver_checkpoints WHERE thread_id = 't' FOR KEY SHARE")
    assert rows(db_dsn, "SELECT xmax::text <> '0' FROM pgsaver_checkpoints") == [(True,)]
    second = saver.put(first, checkpoint({"a": 2}, {"a": 2}), {}, {"a": 2})
    again = saver.put(first, checkpoint({"a": 3}, {"a": 3}), {}, {"a": 3})  # a sibling: second fork
    for cfg_, want in ((second, 2), (again, 3)):
        tup = saver.get_tuple(cfg_)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": want}


def _fork_of(tup: Any, n: int) -> tuple[Any, Any, dict[str, Any]]:
    """A checkpoint as LangGraph would write it when forking from ``tup``: same channels and
    DeltaChannel counters, a new value for ``n``."""
    from langgraph.checkpoint.base.id import uuid6

    cp = dict(tup.checkpoint)
    cp["id"] = str(uuid6(clock_seq=n))
    version = "9" * 32 + f".{n:016d}"
    cp["channel_versions"] = {**tup.checkpoint["channel_versions"], "n": version}
    cp["channel_values"] = {**tup.checkpoint["channel_values"], "n": n}
    return cp, dict(tup.metadata), {"n": version}


def _in_flight_put(
    db_dsn: str, parent: Any, fork: tuple[Any, Any, dict[str, Any]]
) -> psycopg.Connection[Any]:
    """A put inside an open transaction: it holds the thread's shared lock until commit."""
    conn = psycopg.connect(db_dsn)
    conn.execute("SELECT 1")  # the saver joins this transaction
    PostgresSaver(conn).put(parent, *fork)
    return conn


def test_prune_waits_for_an_in_flight_put_and_keeps_what_it_needs(
    saver: PostgresSaver, two: Any, db_dsn: str
) -> None:
    run_turns(two, "race", 14)
    saver.copy_thread("race", "race-ref")
    history = list(saver.list(cfg("race")))
    old = history[len(history) // 2]  # a fork from the middle of the thread, as update_state does
    fork = _fork_of(old, 99)
    writer = _in_flight_put(db_dsn, old.config, fork)
    try:
        done = threading.Event()
        worker = threading.Thread(target=lambda: (saver.prune(["race"]), done.set()))
        worker.start()
        assert not done.wait(1.0), "prune did not wait for the in-flight put"
        writer.commit()
        worker.join(timeout=60)
        assert done.is_set()
    finally:
        writer.close()
    newest = saver.get_tuple(cfg("race"))
    assert newest is not None
    assert newest.checkpoint["id"] == fork[0]["id"]
    # the same fork on the unpruned copy rebuilds the same state
    ref_parent = {"configurable": {**old.config["configurable"], "thread_id": "race-ref"}}
    saver.put(ref_parent, *_fork_of(old, 99))
    assert two.get_state(cfg("race")).values == two.get_state(cfg("race-ref")).values
    assert two.get_state(cfg("race")).values["n"] == 99


def test_idle_retention_spares_a_thread_written_meanwhile(
    saver: PostgresSaver, two: Any, db_dsn: str
) -> None:
    run_turns(two, "sleepy", 2)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgsaver_checkpoints SET created_at = now() - interval '90 days'")
    latest = saver.get_tuple(cfg("sleepy"))
    assert latest is not None
    writer = _in_flight_put(db_dsn, latest.config, _fork_of(latest, 7))
    try:
        result: list[Any] = []
        worker = threading.Thread(
            target=lambda: result.append(saver.retention(idle_for=timedelta(days=30)))
        )
        worker.start()
        worker.join(1.0)
        assert worker.is_alive(), "retention did not wait for the in-flight put"
        writer.commit()
        worker.join(timeout=60)
    finally:
        writer.close()
    assert result
    assert result[0].threads == 0
    tup = saver.get_tuple(cfg("sleepy"))
    assert tup is not None
    assert tup.checkpoint["channel_values"]["n"] == 7


def test_prune_keeps_a_pending_interrupt_resumable(saver: PostgresSaver) -> None:
    from graphs import approval
    from langgraph.types import Command

    graph = approval().compile(checkpointer=saver)
    for i in range(3):
        graph.invoke({"request": f"r{i}", "answer": ""}, cfg("hitl"))
        graph.invoke(Command(resume=f"yes{i}"), cfg("hitl"))
    graph.invoke({"request": "last", "answer": ""}, cfg("hitl"))
    paused = graph.get_state(cfg("hitl"))
    assert paused.next == ("ask",)
    saver.prune(["hitl"])
    assert len(list(saver.list(cfg("hitl")))) == 1
    after = graph.get_state(cfg("hitl"))
    assert after.next == ("ask",)
    assert after.tasks[0].interrupts[0].value == {"question": "approve last?"}
    assert graph.invoke(Command(resume="ok"), cfg("hitl")) == {"request": "last", "answer": "ok"}


def test_retention_keep_last_then_the_graph_continues(saver: PostgresSaver, two: Any) -> None:
    run_turns(two, "ret", 14)
    saver.copy_thread("ret", "ret-ref")
    saver.retention(keep_last=2, thread_ids=["ret"])
    run_turns(two, "ret", 3, "more")
    run_turns(two, "ret-ref", 3, "more")
    assert two.get_state(cfg("ret")).values == two.get_state(cfg("ret-ref")).values
