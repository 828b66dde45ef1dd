"""tools/async_to_sync.py: the sync modules are what their async sources give, and its rules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "async_to_sync", ROOT / "tools" / "async_to_sync.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["async_to_sync"] = module
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.mark.parametrize("target", TOOL.TARGETS, ids=lambda t: t.target)
def test_generated_modules_are_current(target: object) -> None:
    current = (ROOT / target.target).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert current == TOOL.generate(target), (
        f"{target.target} is stale: run `make generate`"  # type: ignore[attr-defined]
    )
    assert current.startswith(f"# generated from {target.source}")  # type: ignore[attr-defined]


def test_the_saver_is_generated_with_the_bridged_methods_renamed() -> None:
    from langgraph_pg_saver.checkpoint.saver_async import AsyncPostgresSaver

    twins = TOOL.coroutine_twins(
        "langgraph_pg_saver/checkpoint/saver_async.py", "AsyncPostgresSaver"
    )
    assert twins == {f"a{name}": name for name in AsyncPostgresSaver._BRIDGED}
    (saver,) = (t for t in TOOL.TARGETS if t.target.endswith("checkpoint/saver.py"))
    assert twins.items() <= saver.renames.items()


def test_keywords_names_strings_and_comments() -> None:
    src = (
        "async def aget_tuple(pool: AsyncConnectionPool) -> None:\n"
        '    """Use ``async with AsyncConnectionPool(...)`` and ``await aget_tuple()``."""\n'
        "    async with pool.connection() as conn:  # an AsyncConnection\n"
        "        async for row in await conn.execute('awaiting aget_tuples'):\n"
        "            await aget_tuple(row)\n"
    )
    out = TOOL._tokens(TOOL._blocks(src, "x.py"), {**TOOL.RENAMES, "aget_tuple": "get_tuple"})
    assert out == (
        "def get_tuple(pool: ConnectionPool) -> None:\n"
        '    """Use ``with ConnectionPool(...)`` and ``get_tuple()``."""\n'
        "    with pool.connection() as conn:  # an Connection\n"
        "        for row in conn.execute('awaiting aget_tuples'):\n"
        "            get_tuple(row)\n"
    )


def test_blocks() -> None:
    src = (
        "a = 1\n"
        "# [async-only]\n"
        "import asyncio\n"
        "# [/async-only]\n"
        "# [sync-only]\n"
        "# import threading\n"
        "#\n"
        "#     indented = True\n"
        "# [/sync-only]\n"
        "b = 2\n"
    )
    assert TOOL._blocks(src, "x.py") == "a = 1\nimport threading\n\n    indented = True\nb = 2\n"


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("# [async-only]\nx = 1\n", "never closed"),
        ("# [/async-only]\n", "unbalanced"),
        ("# [async-only]\n# [sync-only]\n# [/sync-only]\n# [/async-only]\n", "nested"),
        ("# [sync-only]\nx = 1\n# [/sync-only]\n", "must be a comment"),
    ],
)
def test_bad_blocks_are_refused(src: str, message: str) -> None:
    with pytest.raises(TOOL.GenerateError, match=message):
        TOOL._blocks(src, "x.py")


def test_prose_keeps_its_words_and_form_feeds_shift_nothing() -> None:
    src = '"""we await the pool; use ``async with pool`` and ``await x()``"""\n'
    assert (
        TOOL._tokens(src, TOOL.RENAMES)
        == '"""we await the pool; use ``with pool`` and ``x()``"""\n'
    )
    src = "x = 1  # a\x0cb\nasync def f(c: AsyncConnection) -> None:\n    await c.close()\n"
    assert TOOL._tokens(src, TOOL.RENAMES) == (
        "x = 1  # a\x0cb\ndef f(c: Connection) -> None:\n    c.close()\n"
    )
