"""The ops library without a database: it imports without the CLI's extra, LangGraph's next-node
rule, and the hints errors carry for the command line."""

from __future__ import annotations

import subprocess
import sys

from langgraph_pg_saver.errors import (
    NO_STRICT_HINT,
    DecryptionError,
    PgSaverError,
    SchemaMissingError,
    SchemaOutdatedError,
    ThreadNotEmptyError,
)
from langgraph_pg_saver.ops import next_nodes


def test_ops_imports_without_click_or_rich() -> None:
    code = (
        "import sys; sys.modules['click'] = None; sys.modules['rich'] = None\n"
        "from langgraph_pg_saver import ops\n"
        "assert 'click' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
        "print(ops.status.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "status"


def test_next_nodes_are_the_triggers_newer_than_their_node_has_seen() -> None:
    checkpoint = {
        "channel_versions": {"__start__": 2, "branch:to:b": 3, "branch:to:c": 1, "foo": 5},
        "channel_values": {"__start__": {}, "branch:to:b": None, "foo": "x"},
        "versions_seen": {"__start__": {"__start__": 1}, "b": {"branch:to:b": 3}},
    }
    # __start__ is newer than seen; b has seen its version; c's value was consumed
    assert next_nodes(checkpoint) == ["__start__"]
    checkpoint["versions_seen"] = {"__start__": {"__start__": 2}}
    assert next_nodes(checkpoint) == ["b"]
    # string versions (LangGraph's default) compare as text when they do not compare otherwise
    assert next_nodes(
        {
            "channel_versions": {"branch:to:x": "00002.1"},
            "channel_values": {"branch:to:x": None},
            "versions_seen": {"x": {"branch:to:x": "00001.9"}},
        }
    ) == ["x"]
    assert next_nodes({}) == []


def test_errors_carry_their_hint_in_both_words() -> None:
    outdated = SchemaOutdatedError("public", [1], [2, 3])
    assert "Run setup() (or `langgraph-pg-saver setup`) with a role" in str(outdated)
    assert outdated.cli_message() == (
        "checkpoint schema 'public' is at migration 1; missing migrations [2, 3]. "
        "Run `langgraph-pg-saver setup` with a role that may create tables in that schema."
    )
    taken = ThreadNotEmptyError("t")
    assert str(taken).endswith("Pass overwrite=True to replace them.")
    assert taken.cli_message().endswith("nothing was copied. pass --overwrite to replace them.")
    strict = DecryptionError.unsealed("channel 'x'", "stored unencrypted (type 'json')", "values")
    assert strict.hint is NO_STRICT_HINT
    assert strict.where == "channel 'x'"
    assert "(pass strict=False to read such values while" in str(strict)
    assert "(pass --no-strict to read such values while" in strict.cli_message()
    missing = SchemaMissingError("tenant")
    assert "run setup() with schema='tenant'" in str(missing)
    assert missing.cli_message() == (
        "schema 'tenant' has no langgraph-pg-saver tables: run `langgraph-pg-saver --schema "
        "tenant setup`, or pass the right --schema / --dsn"
    )
    assert PgSaverError("no hint here").cli_message() == "no hint here"
