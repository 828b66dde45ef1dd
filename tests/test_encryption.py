"""Encryption: LangGraph's EncryptedSerializer works as with the official saver; our
KeyringSerializer seals every value bound to its place, rotates keys, protects metadata."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.types.json
import pytest
from graphs import delta_chat, two_nodes
from helpers import checkpoint, config, run_threads
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    DecryptionError,
    EncryptionKeyError,
    InvalidInputError,
    KeyringSerializer,
    PostgresSaver,
    Report,
)

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "top-secret-value-4242"


def raw_bytes(dsn: str) -> bytes:
    """Every stored bytea and the text form of every row, concatenated."""
    with psycopg.connect(dsn) as conn:
        chunks: list[bytes] = []
        for table in ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes"):
            for (row,) in conn.execute(
                f"SELECT t::text FROM {table} AS t"
            ).fetchall():  # fixed names
                chunks.append(str(row).encode())
        for (blob,) in conn.execute(
            "SELECT blob FROM pgsaver_blobs UNION ALL SELECT blob FROM pgsaver_writes"
        ):
            if blob is not None:
                chunks.append(bytes(blob))
        for (body,) in conn.execute("SELECT checkpoint FROM pgsaver_checkpoints"):
            chunks.append(bytes(body))
    return b"\n".join(chunks)


def test_encrypted_values_round_trip_and_are_not_stored_in_plaintext(db_dsn: str) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        cp = checkpoint({"msg": SECRET, "nested": {"deep": [SECRET]}})
        stored = saver.put(config("t"), cp, {"step": 1}, cp["channel_versions"])
        saver.put_writes(stored, [("msg", SECRET + "-write")], "task")
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"msg": SECRET, "nested": {"deep": [SECRET]}}
        assert tup.pending_writes == [("task", "msg", SECRET + "-write")]

        graph = two_nodes().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "g"}}
        graph.invoke({"foo": SECRET, "bar": [SECRET]}, cfg)
        assert graph.get_state(cfg).values == {"foo": "b", "bar": [SECRET, "a", "b"]}

    stored_bytes = raw_bytes(db_dsn)
    assert SECRET.encode() not in stored_bytes
    with psycopg.connect(db_dsn) as conn:
        types = {
            r[0]
            for r in conn.execute(
                "SELECT type FROM pgsaver_blobs UNION SELECT type FROM pgsaver_writes"
            )
        }
    assert types <= {"msgpack+aes", "null+aes", "empty"}, types

    # without the key the data is unreadable rather than silently wrong
    with PostgresSaver.from_conn_string(db_dsn) as plain:
        try:
            tup = plain.get_tuple(config("t"))
        except Exception:
            tup = None
        assert tup is None or tup.checkpoint["channel_values"].get("msg") != SECRET


# --------------------------------------------------------------------------- KeyringSerializer

K1, K2 = b"1" * 32, b"2" * 32
API_KEY = "sk-live-do-not-store-4242"


def keyring(*ids: str, **kw: Any) -> KeyringSerializer:
    keys = {"k1": K1, "k2": K2}
    return KeyringSerializer({i: keys[i] for i in ids}, **kw)


def history(saver: Any, thread_id: str, builder: Any = two_nodes) -> list[Any]:
    graph = builder().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread_id}}
    return [
        (s.values, s.next, s.metadata, s.config["configurable"]["checkpoint_id"])
        for s in graph.get_state_history(cfg)
    ]


def run_graph(saver: Any, thread_id: str, builder: Any = two_nodes, turns: int = 1) -> None:
    graph = builder().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread_id, "user_api_key": API_KEY}}
    for i in range(turns):
        graph.invoke({"foo": f"in-{i}", "bar": [SECRET]} if builder is two_nodes else {}, cfg)


def stored_headers(dsn: str) -> set[bytes]:
    """The key-id headers of every sealed value (bodies, blobs, writes, sealed metadata)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT blob FROM pgsaver_blobs WHERE type <> 'empty' "
            "UNION ALL SELECT blob FROM pgsaver_writes UNION ALL SELECT checkpoint FROM "
            "pgsaver_checkpoints UNION ALL SELECT substring(metadata_exact FROM "
            "position('\\x0a'::bytea IN metadata_exact) + 1) FROM pgsaver_checkpoints "
            "WHERE metadata_exact IS NOT NULL"
        ).fetchall()
    return {bytes(r[0])[:7] for r in rows}


def test_keyring_serializer_stores_nothing_in_clear_not_even_configurable_values(
    db_dsn: str,
) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        run_graph(saver, "t")
        cp = checkpoint({"msg": SECRET})
        stored = saver.put(config("p"), cp, {"step": 1, "note": SECRET}, cp["channel_versions"])
        saver.put_writes(stored, [("msg", SECRET), ("__error__", SECRET)], "task")
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"msg": SECRET}
        assert tup.metadata == {"step": 1, "note": SECRET}
        assert sorted(w[2] for w in tup.pending_writes) == [SECRET, SECRET]
        states = history(saver, "t")
    # the metadata LangGraph copied from configurable comes back whole
    assert all(meta.get("user_api_key") == API_KEY for _, _, meta, _ in states)
    assert states[0][0] == {"foo": "b", "bar": [SECRET, "a", "b"]}
    raw = raw_bytes(db_dsn)
    assert SECRET.encode() not in raw
    assert API_KEY.encode() not in raw
    assert stored_headers(db_dsn) == {b"LGE1\x02k1"}
    with psycopg.connect(db_dsn) as conn:
        keys = {k for (m,) in conn.execute("SELECT metadata FROM pgsaver_checkpoints") for k in m}
        types = {t for (t,) in conn.execute("SELECT type FROM pgsaver_writes")}
    # only LangGraph's own keys stay in clear, for list(filter=...) in SQL
    assert keys <= {"source", "step", "parents", "run_id"}, keys
    assert types
    assert all(t.endswith("+aead") for t in types), types


async def test_async_keyring_serializer_round_trips_and_seals(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "a", "user_api_key": API_KEY}}
        await graph.ainvoke({"foo": "x", "bar": [SECRET]}, cfg)
        state = await graph.aget_state(cfg)
        assert state.values == {"foo": "b", "bar": [SECRET, "a", "b"]}
        assert state.metadata is not None
        assert state.metadata["user_api_key"] == API_KEY
        found = [t async for t in saver.alist(None, filter={"user_api_key": API_KEY})]
        assert len(found) == 4
        report = await saver.areencrypt()
        assert report.checkpoints == report.writes == report.blobs == 0
        plan = await saver.areencrypt(full=True, dry_run=True)
        done = await saver.areencrypt(full=True)
        assert plan == dataclasses.replace(done, dry_run=True, batches=0, last_thread_id=None)
        assert plan.checkpoints == 4
        assert await saver.areencrypt("nope") == Report(missing=["nope"])
    raw = raw_bytes(db_dsn)
    assert SECRET.encode() not in raw
    assert API_KEY.encode() not in raw


def _swap(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(sql, params)


def test_a_moved_swapped_or_replaced_row_fails_loudly_naming_it(db_dsn: str) -> None:
    serde = keyring("k1")
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        run_graph(saver, "victim")
        run_graph(saver, "attacker")
        latest = saver.get_tuple({"configurable": {"thread_id": "victim"}})
        assert latest is not None
        victim_id = latest.config["configurable"]["checkpoint_id"]

        def read_victim() -> None:
            list(saver.list({"configurable": {"thread_id": "victim"}}))
            saver.get_tuple({"configurable": {"thread_id": "victim"}})

        read_victim()
        # the attacker's value of 'bar' put in place of the victim's (same channel and version)
        _swap(
            db_dsn,
            "UPDATE pgsaver_blobs SET blob = (SELECT blob FROM pgsaver_blobs WHERE "
            "thread_id = 'attacker' AND channel = 'bar' LIMIT 1) "
            "WHERE thread_id = 'victim' AND channel = 'bar'",
        )
        with pytest.raises(DecryptionError, match=r"channel 'bar' .* thread 'victim'") as err:
            read_victim()
        assert "failed authentication with key 'k1'" in str(err.value)
        assert "thread 'victim'" in err.value.where
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        saver.delete_thread("victim")
        run_graph(saver, "victim")
        latest = saver.get_tuple({"configurable": {"thread_id": "victim"}})
        assert latest is not None
        victim_id = latest.config["configurable"]["checkpoint_id"]
        # two checkpoint bodies of one thread swapped
        _swap(
            db_dsn,
            "UPDATE pgsaver_checkpoints AS c SET checkpoint = p.checkpoint "
            "FROM pgsaver_checkpoints AS p WHERE c.thread_id = 'victim' AND "
            "p.thread_id = 'victim' AND c.checkpoint_id = %s AND p.checkpoint_id = "
            "c.parent_checkpoint_id",
            (victim_id,),
        )
        with pytest.raises(DecryptionError, match=f"checkpoint '{victim_id}' in thread 'victim'"):
            saver.get_tuple({"configurable": {"thread_id": "victim"}})
        # sealed metadata from another checkpoint
        saver.delete_thread("victim")
        run_graph(saver, "victim")
        _swap(
            db_dsn,
            "UPDATE pgsaver_checkpoints AS c SET metadata_exact = p.metadata_exact "
            "FROM pgsaver_checkpoints AS p WHERE c.thread_id = 'victim' AND "
            "p.thread_id = 'attacker' AND p.checkpoint_id = (SELECT max(checkpoint_id) "
            "FROM pgsaver_checkpoints WHERE thread_id = 'attacker')",
        )
        with pytest.raises(DecryptionError, match="the metadata of checkpoint"):
            saver.get_tuple({"configurable": {"thread_id": "victim"}})
        # a write's index changed (two writes of one task swapped)
        saver.delete_thread("victim")
        cp = checkpoint({"msg": 1})
        stored = saver.put(config("victim"), cp, {}, cp["channel_versions"])
        saver.put_writes(stored, [("msg", "first"), ("msg", "second")], "task")
        _swap(
            db_dsn,
            "UPDATE pgsaver_writes SET idx = 1 - idx + 10 WHERE thread_id = 'victim'; "
            "UPDATE pgsaver_writes SET idx = idx - 10 WHERE thread_id = 'victim'",
        )
        with pytest.raises(DecryptionError, match=r"write to channel 'msg' \(task 'task', idx"):
            saver.get_tuple(stored)
        # an attacker's plaintext row (LangGraph's own serializer) in place of a sealed one
        plain_type, plain = JsonPlusSerializer().dumps_typed("attacker's value")
        _swap(
            db_dsn,
            "UPDATE pgsaver_writes SET type = %s, blob = %s WHERE thread_id = 'victim'",
            (plain_type, plain),
        )
        with pytest.raises(DecryptionError, match=r"stored unencrypted .* strict"):
            saver.get_tuple(stored)
    # strict=False reads plaintext: the mode for converting a database, not for running on
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1", strict=False)) as lax:
        tup = lax.get_tuple(stored)
        assert tup is not None
        assert tup.pending_writes[0][2] == "attacker's value"


def test_an_unknown_key_is_told_apart_from_a_failed_authentication(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        run_graph(saver, "t")
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k2")) as other:
        with pytest.raises(EncryptionKeyError, match="key 'k1', which the keyring does not") as e:
            other.get_tuple({"configurable": {"thread_id": "t"}})
        assert e.value.key_id == "k1"
        assert "thread 't'" in e.value.where
    wrong = KeyringSerializer({"k1": K2})  # the right id, the wrong key
    with (
        PostgresSaver.from_conn_string(db_dsn, serde=wrong) as other,
        pytest.raises(DecryptionError, match="failed authentication with key 'k1'"),
    ):
        other.get_tuple({"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize("compression", ["zstd", None])
def test_a_saver_without_the_keyring_is_told_what_it_lacks_and_nothing_changes(
    db_dsn: str, compression: Any
) -> None:
    """Rows sealed by a KeyringSerializer, read by a saver with LangGraph's serializer (a service
    deployed without the key): every read path raises a DecryptionError that says what to pass,
    not the serializer's "Unknown serialization type"; the rows stay as they were."""
    big = {"text": SECRET * 60}  # compressed before it is sealed, with compression on
    with PostgresSaver.from_conn_string(
        db_dsn, serde=keyring("k1"), compression=compression
    ) as saver:
        cp = checkpoint({"big": big, "small": SECRET})
        stored = saver.put(config("sealed"), cp, {"source": "loop"}, cp["channel_versions"])
        saver.put_writes(stored, [("big", big)], "task")
    before = raw_bytes(db_dsn)
    sealed = "serde=KeyringSerializer"
    with PostgresSaver.from_conn_string(db_dsn) as plain:
        with pytest.raises(DecryptionError, match=sealed):
            plain.get_tuple(config("sealed"))
        with pytest.raises(DecryptionError, match=sealed):
            list(plain.list(config("sealed")))
        with pytest.raises(DecryptionError, match=sealed):
            list(plain.list(None, filter={"source": "loop"}, limit=1))
    assert raw_bytes(db_dsn) == before
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        got = saver.get_tuple(config("sealed"))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"big": big, "small": SECRET}


def test_rotation_writes_with_the_newest_key_reads_any_and_reencrypt_moves_everything(
    db_dsn: str,
) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        for t in ("a", "b", "c"):
            run_graph(saver, t, turns=2)
        before = {t: history(saver, t) for t in ("a", "b", "c")}
    rotated = KeyringSerializer({"k2": K2, "k1": K1})  # the first is the current one
    with PostgresSaver.from_conn_string(db_dsn, serde=rotated) as saver:
        run_graph(saver, "d")
        assert stored_headers(db_dsn) == {b"LGE1\x02k1", b"LGE1\x02k2"}
        assert {t: history(saver, t) for t in ("a", "b", "c")} == before
        seen: list[Report] = []

        def stop_after_two(report: Report) -> None:
            seen.append(report)
            if len(seen) == 2:
                raise KeyboardInterrupt  # an operator's Ctrl-C in the middle of the job

        with pytest.raises(KeyboardInterrupt):
            saver.reencrypt(batch=5, progress=stop_after_two)
        assert seen[1].blobs == 10
        assert seen[1].batches == 2
        # resumed by running it again: what was done is found done
        report = saver.reencrypt(batch=5)
        assert report.blobs > 0
        assert report.writes > 0
        assert report.checkpoints > 0
        assert report.threads == 3  # d was written with k2 already
        assert saver.reencrypt().batches == 0
    assert stored_headers(db_dsn) == {b"LGE1\x02k2"}
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k2")) as saver:
        assert {t: history(saver, t) for t in ("a", "b", "c")} == before


def test_reencrypt_of_one_thread_touches_only_that_thread(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        run_graph(saver, "one")
        run_graph(saver, "two")
    with PostgresSaver.from_conn_string(db_dsn, serde=KeyringSerializer({"k2": K2, "k1": K1})) as s:
        before = raw_bytes(db_dsn)
        plan = s.reencrypt("one", dry_run=True)
        everything = s.reencrypt(dry_run=True)
        # an unknown thread is no error: named, and nothing is done
        assert s.reencrypt("no-such-thread") == Report(missing=["no-such-thread"])
        assert s.reencrypt("no-such-thread", dry_run=True) == Report(
            dry_run=True, missing=["no-such-thread"]
        )
        assert raw_bytes(db_dsn) == before  # the dry runs changed nothing
        report = s.reencrypt("one")
        assert report.threads == 1
        assert report.checkpoints == 4
        assert report.missing == []
        # the plan counted what the run sealed again
        counts = ("threads", "checkpoints", "writes", "blobs")
        assert [getattr(plan, c) for c in counts] == [getattr(report, c) for c in counts]
        assert plan.dry_run
        assert plan.checkpoints == 4
        assert plan.blobs > 0
        assert everything.threads == 2
        assert everything.checkpoints == 2 * plan.checkpoints
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k2")) as saver:
        assert history(saver, "one")
        with pytest.raises(EncryptionKeyError):
            history(saver, "two")


def test_a_plaintext_database_is_converted_and_then_read_strictly(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as plain:
        run_graph(plain, "old", turns=2)
        run_graph(plain, "delta", builder=delta_chat, turns=4)
        before = history(plain, "old")
        delta_before = history(plain, "delta", delta_chat)
        by_key = [t.checkpoint["id"] for t in plain.list(None, filter={"user_api_key": API_KEY})]
    lax = keyring("k1", strict=False)
    with PostgresSaver.from_conn_string(db_dsn, serde=lax) as saver:
        assert history(saver, "old") == before  # plaintext read while converting
        run_graph(saver, "new")
        report = saver.reencrypt(batch=7)
        assert report.threads == 2
    raw = raw_bytes(db_dsn)
    assert SECRET.encode() not in raw
    assert API_KEY.encode() not in raw
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as strict:
        assert history(strict, "old") == before
        assert history(strict, "delta", delta_chat) == delta_before
        after = [t.checkpoint["id"] for t in strict.list(None, filter={"user_api_key": API_KEY})]
        assert after[-len(by_key) :] == by_key  # the new thread's checkpoints come first
        # DeltaChannel ancestry still found by prune (its counters stay in clear)
        strict.prune(["delta"])
        graph = delta_chat().compile(checkpointer=strict)
        cfg = {"configurable": {"thread_id": "delta"}}
        assert graph.get_state(cfg).values == delta_before[0][0]


def test_a_database_of_langgraphs_encrypted_serializer_is_converted_with_a_fallback(
    db_dsn: str,
) -> None:
    official = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with PostgresSaver.from_conn_string(db_dsn, serde=official) as old:
        run_graph(old, "t")
        before = history(old, "t")
    with (
        PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1", strict=False)) as nofb,
        pytest.raises(DecryptionError, match="encrypted by another serializer"),
    ):
        history(nofb, "t")
    serde = keyring("k1", strict=False, fallback=official)
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        assert history(saver, "t") == before
        saver.reencrypt()
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as strict:
        assert history(strict, "t") == before
    assert stored_headers(db_dsn) == {b"LGE1\x02k1"}


def test_copy_thread_seals_the_copy_for_its_new_place(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        run_graph(saver, "src", turns=2)
        run_graph(saver, "dsrc", builder=delta_chat, turns=5)
        saver.copy_thread("src", "dst")
        saver.copy_thread("dsrc", "ddst")
        strip = [(v, n, m) for v, n, m, _ in history(saver, "src")]
        assert [(v, n, m) for v, n, m, _ in history(saver, "dst")] == strip
        assert history(saver, "ddst", delta_chat) == history(saver, "dsrc", delta_chat)
        # a copied row put back into the source is refused: it is bound to the target now
        _swap(
            db_dsn,
            "UPDATE pgsaver_blobs AS s SET blob = d.blob FROM pgsaver_blobs AS d "
            "WHERE s.thread_id = 'src' AND d.thread_id = 'dst' AND s.channel = d.channel "
            "AND s.version = d.version AND s.channel = 'bar'",
        )
        with pytest.raises(DecryptionError, match="thread 'src'"):
            history(saver, "src")
        # copying onto an existing thread with overwrite, and the rows counted once
        saver.copy_thread("dsrc", "dst", overwrite=True)
        assert history(saver, "dst", delta_chat) == history(saver, "dsrc", delta_chat)


def test_filters_on_sealed_and_plaintext_keys_match_the_in_memory_saver(db_dsn: str) -> None:
    memory = InMemorySaver()
    serde = keyring("k1", plaintext_metadata=("source", "step", "team"))
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        for i in range(6):
            cp = checkpoint({"n": i})
            meta = {"step": i, "team": f"t{i % 2}", "user": f"u{i % 3}", "ok": i % 2 == 0}
            for s in (saver, memory):
                s.put(config(f"thread-{i % 2}"), cp, meta, cp["channel_versions"])  # type: ignore[arg-type]
        for flt in (
            {"team": "t1"},
            {"user": "u2"},
            {"team": "t0", "user": "u0"},
            {"ok": True, "step": 4},
            {"user": "nobody"},
        ):
            got = [t.checkpoint["id"] for t in saver.list(None, filter=flt)]
            want = [t.checkpoint["id"] for t in memory.list(None, filter=flt)]
            assert sorted(got) == sorted(want), flt
            for limit, thread in itertools.product((1, 2), ("thread-0", "thread-1")):
                cfg = config(thread)
                got = [t.checkpoint["id"] for t in saver.list(cfg, filter=flt, limit=limit)]
                want = [t.checkpoint["id"] for t in memory.list(cfg, filter=flt, limit=limit)]
                assert got == want, (flt, limit, thread)
        with psycopg.connect(db_dsn) as conn:
            keys = {
                k for (m,) in conn.execute("SELECT metadata FROM pgsaver_checkpoints") for k in m
            }
        assert keys == {"step", "team"}


def test_the_clone_langgraph_makes_for_strict_msgpack_stays_sealed(db_dsn: str) -> None:
    serde = keyring("k1")
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        clone = saver.with_allowlist([("tests", "SomeType")])
        assert isinstance(clone.serde, KeyringSerializer)
        assert clone.serde.keyring is serde.keyring
        run_graph(clone, "t")
    assert SECRET.encode() not in raw_bytes(db_dsn)


def test_reencrypt_needs_a_keyring_serializer(saver: PostgresSaver) -> None:
    with pytest.raises(InvalidInputError, match="KeyringSerializer"):
        saver.reencrypt()


def test_reencrypt_while_agents_run_loses_nothing(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        for i in range(4):
            run_graph(saver, f"busy-{i}", turns=2)
    rotated = KeyringSerializer({"k2": K2, "k1": K1})
    with PostgresSaver.from_conn_string(db_dsn, serde=rotated, max_size=6) as saver:
        done = threading.Event()

        def agent(i: int) -> Callable[[], None]:
            def run() -> None:
                while not done.is_set():
                    run_graph(saver, f"busy-{i}")

            return run

        def ops() -> None:
            try:
                for _ in range(3):
                    saver.reencrypt(batch=4)
            finally:
                done.set()

        run_threads([agent(i) for i in range(4)] + [ops], timeout=120)
        saver.reencrypt()
        turns = [history(saver, f"busy-{i}") for i in range(4)]
    assert stored_headers(db_dsn) == {b"LGE1\x02k2"}
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k2")) as saver:
        for i in range(4):
            again = history(saver, f"busy-{i}")
            assert again == turns[i]
            # every turn is in the history and in the final state (each adds three items)
            turns_run = sum(1 for _, _, m, _ in again if m["source"] == "input")
            assert turns_run >= 3
            assert len(again[0][0]["bar"]) == 3 * turns_run


def test_what_lies_beside_a_sealed_value_is_bound_to_it_too(db_dsn: str) -> None:
    """The columns next to a sealed value that decide what it means: a write's channel, a
    value's type, a checkpoint's parent and channel versions (a rollback to an older, validly
    sealed value), and metadata kept in clear for filters."""
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:

        def fresh() -> tuple[dict[str, Any], str]:
            saver.delete_thread("t")
            cp = checkpoint({"a": "old"})
            first = saver.put(config("t"), cp, {"step": 1}, cp["channel_versions"])
            cp2 = checkpoint({"a": "new"})
            version = saver.get_next_version(cp["channel_versions"]["a"], None)
            cp2["channel_versions"] = {"a": version}
            second = saver.put(first, cp2, {"step": 2}, cp2["channel_versions"])
            saver.put_writes(second, [("a", "for-a")], "task")
            return dict(cp["channel_versions"]), second["configurable"]["checkpoint_id"]

        def latest() -> Any:
            return saver.get_tuple({"configurable": {"thread_id": "t"}})

        fresh()
        tup = latest()
        assert tup.checkpoint["channel_values"] == {"a": "new"}
        assert tup.metadata == {"step": 2}
        assert tup.pending_writes == [("task", "a", "for-a")]
        for sql, match in (
            ("UPDATE pgsaver_writes SET channel = 'b'", "write to channel 'b'"),
            ("UPDATE pgsaver_writes SET type = 'bytes+aead'", "write to channel 'a'"),
            ("UPDATE pgsaver_checkpoints SET channel_versions = %s WHERE checkpoint_id = %s", ""),
            (
                "UPDATE pgsaver_checkpoints SET parent_checkpoint_id = NULL WHERE checkpoint_id = %s",
                "",
            ),
        ):
            old_versions, second_id = fresh()
            params: tuple[Any, ...] = ()
            if "channel_versions" in sql:
                params = (psycopg.types.json.Jsonb(old_versions), second_id)
            elif "parent" in sql:
                params = (second_id,)
            _swap(db_dsn, sql, params)
            with pytest.raises(DecryptionError, match=match or f"checkpoint '{second_id}'"):
                latest()
        # metadata forged in the clear column: reads return the sealed copy
        fresh()
        _swap(db_dsn, """UPDATE pgsaver_checkpoints SET metadata = '{"step": 7}'""")
        assert latest().metadata == {"step": 2}
        # the sealed copy removed: refused in strict mode
        _swap(db_dsn, "UPDATE pgsaver_checkpoints SET metadata_exact = NULL")
        with pytest.raises(DecryptionError, match=r"the metadata of checkpoint .* unsealed"):
            latest()


def test_copy_thread_into_a_target_holding_writes_keeps_them(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        run_graph(saver, "src")
        orphan = {"configurable": {"thread_id": "dst", "checkpoint_ns": "", "checkpoint_id": "x"}}
        saver.put_writes(orphan, [("foo", "kept")], "task")
        saver.copy_thread("src", "dst")
        assert [v for v, *_ in history(saver, "dst")] == [v for v, *_ in history(saver, "src")]
        cp = checkpoint({"foo": "later"})
        cp["id"] = "x"
        saver.put(config("dst", ns=""), cp, {}, cp["channel_versions"])
        tup = saver.get_tuple(orphan)
        assert tup is not None
        assert tup.pending_writes == [("task", "foo", "kept")]


def test_plaintext_metadata_can_change_and_reencrypt_follows(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as saver:
        run_graph(saver, "t")
        assert list(saver.list(None, filter={"user_api_key": API_KEY}))  # checked after reading
    wider = keyring("k1", plaintext_metadata=("source", "step", "parents", "user_api_key"))
    with PostgresSaver.from_conn_string(db_dsn, serde=wider) as saver:
        # in SQL now, and older rows do not hold it in clear yet
        assert list(saver.list(None, filter={"user_api_key": API_KEY})) == []
        assert saver.reencrypt().checkpoints == 0  # nothing is under another key
        assert saver.reencrypt(dry_run=True).checkpoints == 0
        plan = saver.reencrypt(full=True, dry_run=True)
        report = saver.reencrypt(full=True)
        assert report.checkpoints == 4
        assert (plan.checkpoints, plan.writes, plan.blobs) == (
            report.checkpoints,
            report.writes,
            report.blobs,
        )
        assert len(list(saver.list(None, filter={"user_api_key": API_KEY}))) == 4
    with PostgresSaver.from_conn_string(db_dsn, serde=keyring("k1")) as narrower:
        # metadata in clear with a key plaintext_metadata no longer names: counted by the plan
        assert narrower.reencrypt(dry_run=True).checkpoints == 4
        assert narrower.reencrypt().checkpoints == 4  # the key goes out of the clear column
        assert len(list(narrower.list(None, filter={"user_api_key": API_KEY}))) == 4
    assert API_KEY.encode() not in raw_bytes(db_dsn)
