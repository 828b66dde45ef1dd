"""Generate the synchronous twin of an async module: ``python tools/async_to_sync.py [--check]``.

The async classes are the only source; each sync module listed in ``TARGETS`` is written from its
async source, headed "generated from ...: do not edit", and formatted with ruff. ``--check`` writes
nothing and exits 1 when a generated file differs from what its source gives (CI runs it).

Why tokens and not an AST: ``ast.unparse`` drops every comment and re-lays out the whole file, so the
generated code would lose the comments that say why, and reading the two files side by side would be
hard. Working on the token stream changes only what must change and keeps everything else, comments
and layout included, as written; ruff then re-wraps the lines that got shorter. ``unasync`` works the
same way, but it maps whole directories with a fixed rule set and has no way to drop the code that
exists on one side only (the async saver's bridge for sync calls, loop binding) or to add lines that
exist only in the sync module; that is most of what this tool needs beyond renaming.

The rules, applied to the source:

* ``async def`` / ``async with`` / ``async for`` lose ``async``; ``await`` is dropped: in code, and in
  strings and comments only inside literal spans (````async with saver````), so prose keeps its words;
* names in ``RENAMES`` (and a target's own renames) are replaced, as whole words, in code, strings
  and comments (so docstrings and error messages name the sync classes and methods);
* lines between ``# [async-only]`` and ``# [/async-only]`` are dropped;
* lines between ``# [sync-only]`` and ``# [/sync-only]`` are written to the sync module uncommented
  (in the async source they are comments: ``# import threading`` becomes ``import threading``).

The marker lines themselves are dropped from the output; blocks do not nest.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: async name -> sync name, for every generated module
RENAMES: dict[str, str] = {
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncCursor": "Cursor",
    "AsyncIterator": "Iterator",
    "asynccontextmanager": "contextmanager",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "AsyncLifoConnectionPool": "LifoConnectionPool",
    "AsyncDriver": "Driver",
    "driver_async": "driver",
    "schema_async": "schema",
    "owner_async": "owner",
    "AsyncPoolOwner": "PoolOwner",
    "saver_async": "saver",
    "store_async": "store",
}


@dataclass(frozen=True)
class Target:
    source: str
    target: str
    renames: dict[str, str] = field(default_factory=dict)


class GenerateError(Exception):
    pass


def coroutine_twins(source: str, class_name: str) -> dict[str, str]:
    """``a<name>`` -> ``<name>`` for each public coroutine method ``a<name>`` of ``class_name``
    in ``source`` (read, not imported: the sync module it imports may be stale or missing). The
    async saver bridges the same methods for sync callers (``bridged`` in its module)."""
    tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                item.name: item.name[1:]
                for item in node.body
                if isinstance(item, ast.AsyncFunctionDef)
                and item.name.startswith("a")
                and not item.name.startswith("_")
            }
    raise GenerateError(f"{source}: no class {class_name}")


_SAVER_SOURCE = "langgraph_pg_saver/checkpoint/saver_async.py"

TARGETS = (
    Target("langgraph_pg_saver/db/driver_async.py", "langgraph_pg_saver/db/driver.py"),
    Target("langgraph_pg_saver/db/schema_async.py", "langgraph_pg_saver/db/schema.py"),
    Target("langgraph_pg_saver/db/owner_async.py", "langgraph_pg_saver/db/owner.py"),
    Target(
        _SAVER_SOURCE,
        "langgraph_pg_saver/checkpoint/saver.py",
        {
            "AsyncPostgresSaver": "PostgresSaver",
            **coroutine_twins(_SAVER_SOURCE, "AsyncPostgresSaver"),
        },
    ),
    Target(
        "langgraph_pg_saver/store/store_async.py",
        "langgraph_pg_saver/store/store.py",
        {
            "AsyncPostgresStore": "PostgresStore",
            "AsyncStoreBase": "SyncStoreBase",
            "abatch": "batch",
            "aimport_official": "import_official",
            "aembed_documents": "embed_documents",
            "aembed_query": "embed_query",
        },
    ),
)

_MARKERS = {
    "# [async-only]": "async",
    "# [/async-only]": None,
    "# [sync-only]": "sync",
    "# [/sync-only]": None,
}
_UNCOMMENT = re.compile(r"^(\s*)# ?")
_ASYNC_KEYWORDS = ("def", "with", "for")


def _blocks(text: str, source: str) -> str:
    """Apply the async-only / sync-only blocks."""
    out: list[str] = []
    mode: str | None = None
    opened_at = 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if stripped in _MARKERS:
            new = _MARKERS[stripped]
            if (new is None) == (mode is None):
                raise GenerateError(f"{source}:{number}: unbalanced or nested block marker")
            mode, opened_at = new, number
            continue
        if mode == "async":
            continue
        if mode == "sync":
            if stripped and not stripped.startswith("#"):
                raise GenerateError(f"{source}:{number}: a [sync-only] line must be a comment")
            line = _UNCOMMENT.sub(r"\1", line, count=1)
        out.append(line)
    if mode is not None:
        raise GenerateError(f"{source}:{opened_at}: block marker never closed")
    return "".join(out)


_KEYWORDS_IN_TEXT = re.compile(r"\bawait\s+|\basync\s+(?=(?:def|with|for)\b)")
_LITERAL_SPAN = re.compile(r"``.+?``", re.DOTALL)


def _apply_text(text: str, names: re.Pattern[str] | None, renames: dict[str, str]) -> str:
    """The rules for the text of a string or a comment: keywords inside ````literal```` spans only,
    names everywhere."""
    text = _LITERAL_SPAN.sub(lambda m: _KEYWORDS_IN_TEXT.sub("", m.group(0)), text)
    if names is not None:
        text = names.sub(lambda m: renames[m.group(1)], text)
    return text


def _tokens(text: str, renames: dict[str, str]) -> str:
    """Token-level rules: keywords, names, and the text of strings and comments."""
    # line starts as tokenize counts lines (only "\n" ends one; str.splitlines would also split on
    # form feeds and other separators inside strings and comments)
    starts = [0]
    for line in io.StringIO(text).readlines():
        starts.append(starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    names = (
        re.compile(
            r"\b(" + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True)) + r")\b"
        )
        if renames
        else None
    )
    textual = {tokenize.STRING, tokenize.COMMENT}
    fstring_middle = getattr(tokenize, "FSTRING_MIDDLE", None)
    if fstring_middle is not None:
        textual.add(fstring_middle)
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    edits: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.NAME:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if tok.string == "await" or (
                tok.string == "async" and nxt is not None and nxt.string in _ASYNC_KEYWORDS
            ):
                assert nxt is not None
                edits.append((offset(tok.start), offset(nxt.start), ""))
            elif tok.string in renames:
                edits.append((offset(tok.start), offset(tok.end), renames[tok.string]))
        elif tok.type in textual:
            new = _apply_text(tok.string, names, renames)
            if new != tok.string:
                edits.append((offset(tok.start), offset(tok.end), new))
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return text


def _ruff(text: str, filename: str) -> str:
    """Sort the imports (renames change their order), turn ``for x in y: yield x`` into ``yield
    from y`` (an async generator cannot use it; the sync twin should), and format, with the project's
    settings."""
    for args in (
        ["check", "--fix", "--unsafe-fixes", "--select", "I,UP028", "--quiet", "--exit-zero"],
        ["format", "--quiet"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *args, "--stdin-filename", filename, "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if done.returncode != 0:
            raise GenerateError(
                f"ruff {args[0]} failed on the output for {filename}:\n{done.stderr}"
            )
        text = done.stdout
    return text


_EMPTY_ISORT_REGION = re.compile(r"^# isort: off\n(?:[ \t]*\n)*# isort: on\n", re.MULTILINE)


def generate(target: Target) -> str:
    source = (ROOT / target.source).read_text(encoding="utf-8")
    renames = {**RENAMES, **target.renames}
    body = _tokens(_blocks(source, target.source), renames)
    # an import region kept apart for its async-only imports, now empty
    body = _EMPTY_ISORT_REGION.sub("", body)
    header = (
        f"# generated from {target.source} by tools/async_to_sync.py: do not edit\n"
        f"# (change {target.source}, then run `make generate`)\n"
    )
    return _ruff(header + body, target.target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    args = parser.parse_args(argv)
    stale = []
    for target in TARGETS:
        text = generate(target)
        path = ROOT / target.target
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(target)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {target.target} from {target.source}")
    for target in stale:
        print(
            f"{target.target} is stale: it differs from what {target.source} generates; "
            "run `make generate` and commit the result",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
