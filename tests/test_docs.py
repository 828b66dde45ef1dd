"""Every code block of the README and the user guide, run against a real Postgres, so that none can
rot: Python blocks as files (their output compared where the docs show it, FastAPI apps driven by a
test client), shell commands and the cron line and the CronJob's command against a prepared
database, SQL in a transaction that is rolled back, captured command output compared in shape.

A block's treatment comes from its language and from an HTML comment on the line before it
(`<!-- test: ... -->`, invisible when rendered): `output` (this text block is what the Python block
before it prints), `fastapi METHOD /path STATUS, ...`, `vector` (run on the server with pgvector),
`official` (the official saver's and store's tables hold threads and items first), `threads`
(threads thread-1 and thread-2 exist first), `shape` (captured `$ command` output of doctor: each
line's status and check), `capture` (captured `$ command` output, compared whole but for the
numbers, ids and times a run changes). A block that no rule covers fails the test."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from graphs import approval, delta_chat, two_nodes

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


OPENER = re.compile(r"^([ \t]*)(```+|~~~+)[ \t]*([\w-]*)[ \t]*$")
DIRECTIVE = re.compile(r"<!-- test: (.*?) -->\s*$")
DIRECTIVES = {"output", "fastapi", "vector", "official", "threads", "shape", "capture"}


def blocks(path: Path) -> list[Block]:
    """Every fenced block (``` or ~~~, indented or not); an indented code block (four spaces,
    no fence) is refused, since no rule could tell what it is."""
    lines = path.read_text().split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = OPENER.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip() == fence),
            None,
        )
        assert end is not None, f"{path.name}:{i + 1}: a fence that is never closed"
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end]) + "\n"
        before = "\n".join(lines[max(0, i - 3) : i])
        d = DIRECTIVE.search(before)
        directive = d.group(1).strip() if d else ""
        name = directive.split()[0] if directive else ""
        assert not name or name in DIRECTIVES, f"{path.name}:{i + 1}: unknown directive {name!r}"
        block = Block(path, i + 1, lang, code, directive)
        if name == "output":
            assert found, f"{block.id}: an output block with no block before it"
            assert found[-1].lang == "python", f"{block.id}: output of a {found[-1].lang} block"
            assert not found[-1].directive.startswith("fastapi"), f"{block.id}: of an app"
            assert found[-1].output is None, f"{block.id}: two output blocks"
            found[-1].output = block.code
        else:
            found.append(block)
        i = end + 1
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
            graph.invoke({"bar": ["x"]}, {"configurable": {"thread_id": thread}})
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


def capture_database(dsn: str) -> None:
    """What the captured output shows: thread-1 and thread-2, and ticket-9 waiting on an
    approval."""
    fill_threads(dsn)
    with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
        graph = approval().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "ticket-9"}, "metadata": {"tenant": "acme"}}
        graph.invoke({"request": "the refund of order 42", "answer": ""}, config)


#: what a run changes in captured output: times, dates, ids, sizes, counts and durations
_VARYING = re.compile(
    r"\d{4}-\d\d-\d\d[T ][\d:.+]+(?:Z|[+-]\d\d:?\d\d)?"  # timestamps
    r"|\d\d-\d\d \d\d:\d\d:\d\d"  # history's times
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # uuids
    r"|…?[0-9a-f-]{12,}"  # ids shown by their end
    r"|\d+(?:\.\d+)?(?:e[+-]?\d+)?(?: ?(?:B|kB|MB|GB)\b)?"  # numbers and sizes
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b"  # the days of a growth chart
)
#: table drawing, and a chart's bars (their length follows the numbers)
_BOX = re.compile(r"[\u2500-\u259f]+")


def captured_words(text: str) -> list[str]:
    """The output's words, with what a run changes replaced by #, and the table drawing left
    out (a wider value moves the columns, not the words)."""
    return _VARYING.sub("#", _BOX.sub(" ", text)).split()


def run_text_capture(block: Block, dsn: str) -> None:
    """Captured output of `$ langgraph-pg-saver ...` commands, run again on a database holding
    what capture_database stores: the same words but for the numbers, ids and times."""
    parts = re.split(r"^\$ ", block.code, flags=re.M)[1:]
    assert parts, block.id
    for part in parts:
        command, *shown = part.rstrip("\n").split("\n")
        words = shlex.split(command)
        assert words[0] == "langgraph-pg-saver", command
        env = {"LANGGRAPH_PG_DSN": dsn, "COLUMNS": "120"}
        out = run([sys.executable, "-m", "langgraph_pg_saver", *words[1:]], env)
        assert out.returncode == 0, (block.id, command, out.stderr)
        want = captured_words("\n".join(shown))
        assert captured_words(out.stdout) == want, (block.id, command, out.stdout)


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
            method, path, status, *expect = request.split(maxsplit=3)
            response = client.request(method, path)
            assert response.status_code == int(status), (block.id, request, response.text)
            for text in expect:  # what the response must say, when the directive names it
                assert text.strip("'") in response.text, (block.id, request, response.text)


def commands(code: str) -> Iterator[str]:
    for line in code.splitlines():
        line = line.split(" #", 1)[0].strip() if not line.startswith("#") else ""
        if line:
            yield line


def project_extras() -> tuple[str, list[str]]:
    """The package's name and extras, from pyproject.toml (Python 3.11+), else as installed."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        meta = importlib.metadata.metadata("langgraph-pg-saver")
        return meta["Name"], meta.get_all("Provides-Extra") or []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["name"], list(project["optional-dependencies"])


#: the variables a command in the docs may set before it; those holding a DSN get the test's
ENV_NAMES = {"LANGGRAPH_PG_DSN", "LANGGRAPH_PG_SCHEMA", "DSN"}


def run_shell_line(line: str, block: Block, dsn: str) -> None:
    words = shlex.split(line)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, _, value = words.pop(0).partition("=")
        assert key in ENV_NAMES, f"{block.id}: {key} is not a variable the tools read"
        env[key] = dsn if value.startswith("postgresql://") else value
    program, args = words[0], words[1:]
    if program == "make" and args[:1] == ["demo"]:  # the demo, for real, on the test database
        extra = [a for a in args[1:] if a.startswith("ARGS=")]
        assert len(extra) == len(args) - 1, (block.id, line)
        out = run(["make", "demo", f"DSN={dsn}", *extra], env)
        assert out.returncode == 0, (block.id, line, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr, (block.id, out.stderr)
    elif program == "make":  # the other targets: that make knows them (make test would recurse)
        out = run(["make", "-n", *args], env)
        assert out.returncode == 0, (block.id, line, out.stderr)
    elif program == "pip":
        assert args[0] == "install", line
        name, extras = project_extras()
        for req in args[1:]:
            m = re.fullmatch(r"([\w-]+)(?:\[([\w,]+)\])?", req)
            assert m, (block.id, req)
            assert m.group(1) == name, req
            for extra in (m.group(2) or "").split(","):
                assert not extra or extra in extras, (block.id, extra)
    elif program == "langgraph-pg-saver":
        args = [dsn if a.startswith("postgresql://") else a for a in args]
        out = run(
            [sys.executable, "-m", "langgraph_pg_saver", *args], {"LANGGRAPH_PG_DSN": dsn, **env}
        )
        assert out.returncode == 0, (block.id, line, out.stdout, out.stderr)
    else:
        pytest.fail(f"{block.id}: no rule runs {line!r}")


def shape(line: str) -> list[str]:
    """What must match in a line of doctor's output: its status and check, and for the pooler
    check what it found (values such as round trips and versions differ between machines)."""
    words = line.split()
    return words[:7] if words[1:2] == ["pooler:"] else words[:2]


def run_text_shape(block: Block, dsn: str, bouncer_dsn: Callable[[], str]) -> None:
    """Captured output: each `$ command` runs (one on port 6432 through a real PgBouncer in
    transaction mode), and prints the lines the docs show, in their order."""
    parts = re.split(r"^\$ ", block.code, flags=re.M)[1:]
    assert parts, block.id
    for part in parts:
        command, *shown = part.rstrip("\n").split("\n")
        words = shlex.split(command)
        target = [w for w in words if w.startswith("postgresql://")]
        via = bouncer_dsn() if target and ":6432/" in target[0] else dsn
        words = [via if w.startswith("postgresql://") else w for w in words]
        assert words[0] == "langgraph-pg-saver", command
        out = run([sys.executable, "-m", "langgraph_pg_saver", *words[1:]], {})
        assert out.returncode == 0, (block.id, command, out.stderr)
        real = [shape(line) for line in out.stdout.splitlines() if line.strip()]
        want = [shape(line) for line in shown if line.strip()]
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
    if "groups" in doc:
        # Prometheus alerting rules: each has a name and an expression, and every metric of ours
        # it names is one that `status --prometheus` prints
        command = [sys.executable, "-m", "langgraph_pg_saver", "status", "--prometheus"]
        out = run(command, {"LANGGRAPH_PG_DSN": dsn})
        assert out.returncode == 0, (block.id, out.stderr)
        printed = {
            line.split("{")[0] for line in out.stdout.splitlines() if not line.startswith("#")
        }
        for group in doc["groups"]:
            for rule in group["rules"]:
                assert rule["alert"], rule
                named = set(re.findall(r"langgraph_pg_saver_\w+", rule["expr"]))
                assert named, rule
                assert named <= printed, (block.id, named - printed)
        return
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
        dsn = request.getfixturevalue("empty_db_dsn")
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

        def bouncer_dsn() -> str:
            return str(request.getfixturevalue("bouncer").dsn(dsn))

        run_text_shape(block, dsn, bouncer_dsn)
    elif block.lang == "text" and directive == "capture":
        capture_database(dsn)
        run_text_capture(block, dsn)
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
