"""Every code block of the README and the user guide, run against a real Postgres, so that none can
rot: Python blocks as files (their output compared where the docs show it, FastAPI apps driven by a
test client), shell commands and the cron line and the CronJob's command against a prepared
database, SQL in a transaction that is rolled back, captured command output compared in shape.

A block's treatment comes from its language and from an HTML comment on the line before it
(`<!-- test: ... -->`, invisible when rendered): `output` (this text block is what the Python block
before it prints), `fastapi METHOD /path STATUS, ...`, `vector` (run on the server with pgvector),
`official` (the official saver's and store's tables hold threads and items first), `threads`
(threads thread-1 and thread-2 exist first), `shape` (captured `$ command` output). A block that no
rule covers fails the test."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from conftest import _create_db, _drop_db
from graphs import delta_chat, two_nodes
from pgserver import Server

from langgraph_pg_saver import PostgresSaver

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", ROOT / "docs" / "guide.md")
KEYS = {"LGPS_KEY_2026_12": "11" * 32, "LGPS_KEY_2027_01": "22" * 32}


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str
    directive: str
    output: str | None = None  # the text block that follows it, marked `output`

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}:{self.lang}"


FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
DIRECTIVE = re.compile(r"<!-- test: (.*?) -->\n*$")


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found: list[Block] = []
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        d = DIRECTIVE.search(before[-300:])
        directive = d.group(1).strip() if d else ""
        block = Block(path, before.count("\n") + 1, m.group(1), m.group(2), directive)
        if directive == "output":
            assert found, f"{block.id}: an output block with no block before it"
            assert found[-1].output is None, f"{block.id}: two output blocks"
            found[-1].output = block.code
            continue
        found.append(block)
    return found


ALL = [b for path in DOCS for b in blocks(path)]


def test_the_docs_have_blocks_and_every_one_is_covered() -> None:
    assert len(ALL) > 25
    langs = {b.lang for b in ALL}
    assert langs <= {"python", "bash", "sql", "cron", "yaml", "text"}, langs
    guide = (ROOT / "docs" / "guide.md").read_text()
    assert "docs/guide.md" in (ROOT / "README.md").read_text()
    # the README's quick starts are the guide's, word for word
    for block in blocks(ROOT / "README.md"):
        if block.lang == "python":
            assert block.code in guide, f"{block.id} differs from the guide's quick start"


def test_every_error_class_is_in_the_troubleshooting_table() -> None:
    import langgraph_pg_saver
    from langgraph_pg_saver import errors

    guide = (ROOT / "docs" / "guide.md").read_text()
    table = guide[guide.index("## 15. Troubleshooting") :]
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, errors.PgSaverError):
            assert f"| `{name}`" in table, name
            assert name in langgraph_pg_saver.__all__, name


# --------------------------------------------------------------------------- databases


@pytest.fixture
def fresh(pg_server: Server) -> Iterator[str]:
    name = _create_db(pg_server)
    try:
        yield pg_server.dsn_for(name)
    finally:
        _drop_db(pg_server, name)


def fill_threads(dsn: str) -> None:
    with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
        saver.setup()
        graph = delta_chat().compile(checkpointer=saver)
        for thread in ("thread-1", "thread-2"):
            for _ in range(6):
                graph.invoke({"messages": ["hi"]}, {"configurable": {"thread_id": thread}})


OFFICIAL_THREADS = ("old-1", "old-2")


def fill_official(dsn: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
    from langgraph.store.postgres import PostgresStore as OfficialStore

    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = OfficialSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        graph = two_nodes().compile(checkpointer=saver)
        for thread in OFFICIAL_THREADS:
            graph.invoke({"log": ["x"]}, {"configurable": {"thread_id": thread}})
        store = OfficialStore(conn)  # type: ignore[arg-type]
        store.setup()
        for i in range(3):
            store.put(("users", "u1"), f"k{i}", {"n": i})


def official_states(dsn: str) -> list[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver

    with psycopg.connect(dsn, autocommit=True) as conn:
        graph = two_nodes().compile(checkpointer=OfficialSaver(conn))  # type: ignore[arg-type]
        return [
            graph.get_state({"configurable": {"thread_id": t}}).values for t in OFFICIAL_THREADS
        ]


def our_states(dsn: str) -> list[Any]:
    with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        return [
            graph.get_state({"configurable": {"thread_id": t}}).values for t in OFFICIAL_THREADS
        ]


def cli_database(dsn: str) -> None:
    """What the command-line examples act on: our schema with threads, and the official tables."""
    fill_threads(dsn)
    fill_official(dsn)


# --------------------------------------------------------------------------- runners


def run(
    command: list[str], env: dict[str, str], cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("LANGGRAPH_PG", "PG"))}
    full.update(env)
    return subprocess.run(
        command, capture_output=True, text=True, timeout=180, check=False, env=full, cwd=cwd
    )


def run_python(block: Block, dsn: str, tmp_path: Path) -> None:
    file = tmp_path / "example.py"
    file.write_text(block.code)
    out = run([sys.executable, "-W", "error", str(file)], {"DB_URI": dsn, **KEYS}, tmp_path)
    assert out.returncode == 0, f"{block.id}\n{out.stdout}\n{out.stderr}"
    assert out.stderr == "", f"{block.id} wrote to stderr:\n{out.stderr}"
    if block.output is not None:
        assert out.stdout.rstrip("\n") == block.output.rstrip("\n"), block.id


def run_fastapi(block: Block, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    monkeypatch.setenv("DB_URI", dsn)
    file = tmp_path / "app_example.py"
    file.write_text(block.code)
    spec = importlib.util.spec_from_file_location("app_example", file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    requests = block.directive.removeprefix("fastapi").split(",")
    with TestClient(module.app) as client:  # runs the lifespan: setup(), then shutdown
        for request in requests:
            method, path, status = request.split()
            response = client.request(method, path)
            assert response.status_code == int(status), (block.id, request, response.text)
            if path.startswith("/chat"):
                assert response.json()["reply"], response.json()


def commands(code: str) -> Iterator[str]:
    for line in code.splitlines():
        line = line.split(" #", 1)[0].strip() if not line.startswith("#") else ""
        if line:
            yield line


def run_shell_line(line: str, block: Block, dsn: str) -> None:
    words = shlex.split(line)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    program, args = words[0], words[1:]
    if program == "make":
        out = run(["make", "-n", *args], {})
        assert out.returncode == 0, (block.id, line, out.stderr)
    elif program == "pip":
        assert args[0] == "install", line
        meta = importlib.metadata.metadata("langgraph-pg-saver")  # as installed from pyproject
        extras = meta.get_all("Provides-Extra") or []
        for req in args[1:]:
            m = re.fullmatch(r"([\w-]+)(?:\[([\w,]+)\])?", req)
            assert m, (block.id, req)
            assert m.group(1) == meta["Name"], req
            for extra in (m.group(2) or "").split(","):
                assert not extra or extra in extras, (block.id, extra)
    elif program == "langgraph-pg-saver":
        args = [dsn if a.startswith("postgresql://") else a for a in args]
        out = run([sys.executable, "-m", "langgraph_pg_saver", *args], {"LANGGRAPH_PG_DSN": dsn})
        assert out.returncode == 0, (block.id, line, out.stdout, out.stderr)
    else:
        pytest.fail(f"{block.id}: no rule runs {line!r}")


def run_text_shape(block: Block, dsn: str) -> None:
    """Captured output: each `$ command` runs, and prints the lines the docs show, in their order
    (the first word and the check's name; values differ from machine to machine)."""
    parts = re.split(r"^\$ ", block.code, flags=re.M)[1:]
    assert parts, block.id
    for part in parts:
        command, *shown = part.rstrip("\n").split("\n")
        words = [dsn if w.startswith("postgresql://") else w for w in shlex.split(command)]
        assert words[0] == "langgraph-pg-saver", command
        out = run([sys.executable, "-m", "langgraph_pg_saver", *words[1:]], {})
        assert out.returncode == 0, (block.id, command, out.stderr)
        real = [line.split()[1] for line in out.stdout.splitlines() if line.strip()]
        want = [line.split()[1] for line in shown if line.strip()]
        assert want == real, (block.id, command, out.stdout)


def run_sql(block: Block, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(block.code)  # type: ignore[arg-type]  # the docs' text, as an administrator runs it
        conn.rollback()  # roles are cluster-wide: leave none behind


def run_cron(block: Block, dsn: str) -> None:
    for line in commands(block.code):
        fields = line.split()
        assert all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5]), line
        command = " ".join(fields[5:]).split(">>", 1)[0]
        run_shell_line(command, block, dsn)


def run_yaml(block: Block, dsn: str) -> None:
    doc = yaml.safe_load(block.code)
    assert doc["kind"] == "CronJob"
    assert len(doc["spec"]["schedule"].split()) == 5
    containers = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    for container in containers:
        names = [e["name"] for e in container["env"]]
        assert "LANGGRAPH_PG_DSN" in names
        run_shell_line(shlex.join(container["command"]), block, dsn)


# --------------------------------------------------------------------------- the test


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs(
    block: Block,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directive = block.directive.split()[0] if block.directive else ""
    if directive == "vector":
        dsn = request.getfixturevalue("vector_dsn")
    else:
        dsn = request.getfixturevalue("fresh")
    if directive == "threads":
        fill_threads(dsn)
    if directive == "official":
        fill_official(dsn)
    if block.lang == "python":
        if directive == "fastapi":
            run_fastapi(block, dsn, tmp_path, monkeypatch)
        else:
            run_python(block, dsn, tmp_path)
        if directive == "official":  # the import happened, and reads as the official saver reads
            assert our_states(dsn) == official_states(dsn)
    elif block.lang == "bash":
        if any(line.startswith("langgraph-pg-saver") for line in commands(block.code)):
            cli_database(dsn)
        for line in commands(block.code):
            run_shell_line(line, block, dsn)
    elif block.lang == "text" and directive == "shape":
        cli_database(dsn)
        run_text_shape(block, dsn)
    elif block.lang == "sql":
        run_sql(block, dsn)
    elif block.lang == "cron":
        cli_database(dsn)
        run_cron(block, dsn)
    elif block.lang == "yaml":
        cli_database(dsn)
        run_yaml(block, dsn)
    else:
        pytest.fail(f"{block.id}: no rule runs a {block.lang!r} block marked {block.directive!r}")
