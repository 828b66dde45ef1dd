"""compression="zstd" (the default): values, writes and bodies of 512 bytes or more are stored as zstd
frames where that saves an eighth, their type marked "/zstd"; compression=None stores them as
serialized. Every saver reads both forms, encrypted or not, through every read path (get_tuple,
list, DeltaChannel history, copy_thread); a frame changed outside the saver fails loudly."""

from __future__ import annotations

import os
import random
import string
import threading
from typing import Any

import psycopg
import pytest
from graphs import delta_chat
from helpers import checkpoint, config
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    CorruptValueError,
    DecryptionError,
    KeyringSerializer,
    PostgresSaver,
)
from langgraph_pg_saver.codec import compress as _compress

rng = random.Random(3)
WORDS = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(500)]


def prose(n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def messages(k: int) -> list[Any]:
    out: list[Any] = []
    for i in range(k):
        out.append(HumanMessage(content=prose(120), id=f"h{i}"))
        out.append(AIMessage(content=prose(200), id=f"a{i}", response_metadata={"n": i}))
    return out


VALUES: dict[str, Any] = {
    "chat": messages(3),  # compressible: stored as a frame
    "small": {"n": 1, "tag": "x", "text": prose(40)},  # under 512 bytes: as serialized
    "noise": os.urandom(4096),  # does not compress: as serialized
}
SERDE = JsonPlusSerializer()


def stored(dsn: str, table: str, thread: str) -> dict[str, tuple[str, int]]:
    key = "channel" if table == "pgsaver_blobs" else "channel || ':' || idx"
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT {key}, type, length(blob) FROM {table} WHERE thread_id = %s",
            (thread,),
        ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def put_one(saver: Any, thread: str) -> Any:
    versions = {k: "1" for k in VALUES}
    cp = checkpoint(dict(VALUES), versions)
    cfg = saver.put(config(thread), cp, {"source": "loop", "step": 1}, versions)
    saver.put_writes(cfg, [("chat", messages(2)), ("small", 1)], "task-1")
    return cfg


def check_read(saver: Any, cfg: Any) -> None:
    got = saver.get_tuple(cfg)
    assert got is not None
    assert got.checkpoint["channel_values"] == VALUES
    assert [(c, v) for _, c, v in got.pending_writes] == [("chat", messages(2)), ("small", 1)]
    listed = list(saver.list(config(cfg["configurable"]["thread_id"])))
    assert [t.checkpoint["channel_values"] for t in listed] == [VALUES]
    assert listed[0].pending_writes == got.pending_writes


def test_large_values_are_stored_compressed_where_it_pays_and_read_back(db_dsn: str) -> None:
    rng.seed(11)  # messages(k) the same in every call
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        assert saver.compression == "zstd"
        saver.setup()
        cfg = put_one(saver, "z")
        rng.seed(11)
        blobs = stored(db_dsn, "pgsaver_blobs", "z")
        serialized = {k: SERDE.dumps_typed(v) for k, v in VALUES.items()}
        assert blobs["chat"][0] == "msgpack/zstd"
        assert blobs["chat"][1] < len(serialized["chat"][1]) * 0.8
        for name in ("small", "noise"):  # as serialized, unmarked
            assert blobs[name] == (serialized[name][0], len(serialized[name][1]))
        writes = stored(db_dsn, "pgsaver_writes", "z")
        assert writes["chat:0"][0] == "msgpack/zstd"
        assert writes["small:1"][0] == "msgpack"
        rng.seed(11)
        check_read(saver, cfg)
        # copy_thread copies the frames as they are; the copy reads the same
        rng.seed(11)
        saver.copy_thread("z", "z-copy")
        assert stored(db_dsn, "pgsaver_blobs", "z-copy") == blobs
        copy = saver.get_tuple(config("z-copy"))
        assert copy is not None
        rng.seed(11)
        assert copy.checkpoint["channel_values"] == VALUES


def test_list_decompresses_a_shared_value_once_and_gives_each_checkpoint_its_own(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints that keep a compressed value unchanged share its one row: list() decompresses
    it once, yet every checkpoint gets objects of its own (changing one changes no other)."""
    chat = messages(3)
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        cfg = config("shared")
        for step in range(3):
            versions = {"chat": "1", "n": str(step + 1)}
            cp = checkpoint({"chat": chat, "n": step}, versions)
            new = {"chat": "1", "n": versions["n"]} if step == 0 else {"n": versions["n"]}
            cfg = saver.put(cfg, cp, {"step": step}, new)
        assert stored(db_dsn, "pgsaver_blobs", "shared")["chat"][0] == "msgpack/zstd"
        unpacked: list[str] = []
        unpack = _compress.unpack

        def counted(type_: str, data: bytes) -> tuple[str, bytes]:
            unpacked.append(type_)
            return unpack(type_, data)

        monkeypatch.setattr(_compress, "unpack", counted)
        listed = list(saver.list(config("shared")))
    assert unpacked == ["msgpack/zstd"]  # the one frame, for three checkpoints
    assert [t.checkpoint["channel_values"]["n"] for t in listed] == [2, 1, 0]
    values = [t.checkpoint["channel_values"]["chat"] for t in listed]
    assert all(v == chat for v in values)
    assert len({id(v) for v in values}) == 3
    assert len({id(v[0]) for v in values}) == 3
    values[0].append(HumanMessage(content="only here", id="x"))
    values[0][0].content = "changed"
    assert values[1] == chat
    assert values[2] == chat


def test_compression_none_stores_as_serialized_and_every_saver_reads_both(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, compression=None) as plain:
        assert plain.compression is None
        plain.setup()
        rng.seed(11)
        plain_cfg = put_one(plain, "plain")
        with PostgresSaver.from_conn_string(db_dsn) as zstd:
            rng.seed(11)
            zstd_cfg = put_one(zstd, "zstd")
            assert {t for t, _ in stored(db_dsn, "pgsaver_blobs", "plain").values()} == {
                "msgpack",
                "bytes",
            }
            assert stored(db_dsn, "pgsaver_blobs", "zstd")["chat"][0] == "msgpack/zstd"
            for reader in (plain, zstd):
                for cfg in (plain_cfg, zstd_cfg):
                    rng.seed(11)
                    check_read(reader, cfg)


async def test_async_saver_compresses_and_reads_both(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        rng.seed(11)
        versions = {k: "1" for k in VALUES}
        cp = checkpoint(dict(VALUES), versions)
        cfg = await saver.aput(config("az"), cp, {"source": "loop"}, versions)
        await saver.aput_writes(cfg, [("chat", messages(2))], "t")
        assert stored(db_dsn, "pgsaver_blobs", "az")["chat"][0] == "msgpack/zstd"
        assert stored(db_dsn, "pgsaver_writes", "az")["chat:0"][0] == "msgpack/zstd"
        async with AsyncPostgresSaver.from_conn_string(db_dsn, compression=None) as plain:
            got = await plain.aget_tuple(cfg)
        assert got is not None
        rng.seed(11)
        assert got.checkpoint["channel_values"] == VALUES
        assert got.pending_writes == [("t", "chat", messages(2))]


def test_encrypted_values_are_compressed_before_they_are_sealed(db_dsn: str) -> None:
    keys = KeyringSerializer({"k1": b"0123456789abcdef0123456789abcdef"})
    sizes = {}
    for compression in ("zstd", None):
        thread = f"enc-{compression}"
        with PostgresSaver.from_conn_string(db_dsn, serde=keys, compression=compression) as saver:
            saver.setup()
            rng.seed(11)
            cfg = put_one(saver, thread)
            rng.seed(11)
            check_read(saver, cfg)
        sizes[compression] = stored(db_dsn, "pgsaver_blobs", thread)["chat"]
    assert sizes["zstd"][0] == "msgpack/zstd+aead"
    assert sizes[None][0] == "msgpack+aead"
    assert sizes["zstd"][1] < sizes[None][1] * 0.8
    # a sealed frame moved to another channel still fails authentication, as any sealed value
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_blobs SET blob = (SELECT blob FROM pgsaver_blobs WHERE thread_id ="
            " 'enc-zstd' AND channel = 'chat') WHERE thread_id = 'enc-zstd' AND channel = 'noise'"
        )
    with (
        PostgresSaver.from_conn_string(db_dsn, serde=keys) as saver,
        pytest.raises(DecryptionError, match="noise"),
    ):
        saver.get_tuple(config("enc-zstd"))


def test_a_changed_frame_fails_naming_its_type_and_nothing_changes(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        rng.seed(11)
        put_one(saver, "bad")
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE pgsaver_blobs SET blob = substring(blob FROM 1 FOR 40)"
                " WHERE thread_id = 'bad' AND channel = 'chat'"
            )
        before = stored(db_dsn, "pgsaver_blobs", "bad")
        with pytest.raises(CorruptValueError, match=r"'msgpack/zstd'.*changed or truncated"):
            saver.get_tuple(config("bad"))
        with pytest.raises(CorruptValueError):
            list(saver.list(config("bad")))
        assert stored(db_dsn, "pgsaver_blobs", "bad") == before


def test_deltachannel_history_reads_compressed_writes_and_snapshots(db_dsn: str) -> None:
    """The DeltaChannel's writes and snapshots, compressed, give the state an uncompressed
    thread gives (get_state folds them through delta_history)."""
    turns = [prose(400) for _ in range(7)]
    states = {}
    for compression in ("zstd", None):
        with PostgresSaver.from_conn_string(db_dsn, compression=compression) as saver:
            saver.setup()
            graph = delta_chat().compile(checkpointer=saver)
            thread = {"configurable": {"thread_id": f"delta-{compression}"}}
            for text in turns:
                graph.invoke({"messages": [text]}, thread)
            states[compression] = graph.get_state(thread).values
            history = [s.values for s in graph.get_state_history(thread)]
            states[f"{compression}-history"] = history
    assert states["zstd"] == states[None]
    assert states["zstd-history"] == states["None-history"]
    with psycopg.connect(db_dsn) as conn:
        kinds = conn.execute(
            "SELECT DISTINCT 'w', type FROM pgsaver_writes WHERE thread_id = 'delta-zstd'"
            " AND channel = 'messages' UNION SELECT DISTINCT 'b', type FROM pgsaver_blobs"
            " WHERE thread_id = 'delta-zstd' AND channel = 'messages'"
        ).fetchall()
    # the inputs' writes (2-3 KB) and the snapshots compressed; the short replies and markers not
    assert set(kinds) == {
        ("w", "msgpack/zstd"),
        ("w", "msgpack"),
        ("b", "msgpack/zstd"),
        ("b", "empty"),
    }


@pytest.mark.parametrize("bad", ["gzip", "ZSTD", True, 1])
def test_an_unknown_compression_is_refused_naming_it(db_dsn: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=f"compression must be 'zstd' or None, not {bad!r}"):
        PostgresSaver.from_conn_string(db_dsn, compression=bad)
    with pytest.raises(ValueError, match="compression must be"):
        AsyncPostgresSaver.from_conn_string(db_dsn, compression=bad)


def test_values_encrypted_by_their_serializer_are_not_compressed(db_dsn: str) -> None:
    """LangGraph's EncryptedSerializer: ciphertext does not compress, so it is stored as given."""
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        saver.setup()
        rng.seed(11)
        cfg = put_one(saver, "aes")
        assert stored(db_dsn, "pgsaver_blobs", "aes")["chat"][0] == "msgpack+aes"
        rng.seed(11)
        check_read(saver, cfg)


def test_threads_compressing_at_once_each_get_their_own_values_back() -> None:
    """The zstd contexts are per thread: 8 threads packing and unpacking different values at
    once all get their own bytes back."""
    from langgraph_pg_saver.codec import compress as _compress

    results: dict[int, bool] = {}

    def work(n: int) -> None:
        data = (prose(400) + str(n)).encode() * 3
        ok = True
        for _ in range(200):
            type_, frame = _compress.pack("msgpack", data)
            ok = (
                ok
                and type_ == "msgpack/zstd"
                and _compress.unpack(type_, frame) == ("msgpack", data)
            )
        results[n] = ok

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {n: True for n in range(8)}
