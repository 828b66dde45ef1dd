"""Every reference to a checkpoint table in the per-thread reads compares its thread with the thread
asked for (migration 0012), not only with the thread of a row read before: a deployment sharded by
thread_id (Citus) runs a read on one node only when each reference names the thread itself. On a
single server the rows are the same (tests/test_put_call.py, tests/test_stale_plans.py); these
checks catch a lookup that goes back to joining on the thread without a sharded cluster."""

from __future__ import annotations

import re

import psycopg
import pytest

from langgraph_pg_saver.db.sql import Queries

TABLES = ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes")

#: a FROM or JOIN of one of our tables, schema-qualified, with its alias
_REFERENCE = re.compile(
    r"\b(?:FROM|JOIN)\s+(?:\"?\w+\"?\.)?(" + "|".join(TABLES) + r")\s+AS\s+(\w+)", re.IGNORECASE
)
#: a join of two rows on the thread (x.thread_id = w.thread_id)
_THREAD_JOIN = re.compile(r"\b\w+\.thread_id\s*=\s*\w+\.thread_id\b")


def references(text: str) -> list[tuple[str, str, str]]:
    """Each reference to one of our tables in ``text``: the table, its alias and the text from it
    to the next reference (where its conditions are)."""
    found = list(_REFERENCE.finditer(text))
    return [
        (
            m.group(1),
            m.group(2),
            text[m.end() : found[i + 1].start() if i + 1 < len(found) else None],
        )
        for i, m in enumerate(found)
    ]


def assert_filtered(name: str, text: str, thread: str, expected: int) -> None:
    refs = references(text)
    assert len(refs) == expected, f"{name}: {len(refs)} references to the tables, not {expected}"
    named = re.findall(r"\b(?:" + "|".join(TABLES) + r")\b", text)
    assert len(named) == expected, f"{name}: a reference to the tables without FROM/JOIN ... AS"
    for table, alias, rest in refs:
        condition = re.compile(rf"\b{alias}\.thread_id\s*=\s*{re.escape(thread)}")
        assert condition.search(rest), (
            f"{name}: {table} AS {alias} has no {alias}.thread_id = {thread}"
        )
    assert not _THREAD_JOIN.search(text), f"{name} joins on thread_id: {_THREAD_JOIN.findall(text)}"


@pytest.mark.parametrize(
    ("function", "expected", "settings"),
    [
        # both forms (latest, by id): the checkpoint, its values, its writes
        ("pgsaver_get_tuple", 6, ["search_path=pg_catalog, pg_temp", "enable_seqscan=off"]),
        # the target (both forms), the walk's two steps and their value checks, writes and values
        (
            "pgsaver_delta_history",
            8,
            [
                "search_path=pg_catalog, pg_temp",
                "enable_seqscan=off",
                "enable_hashjoin=off",
                "enable_mergejoin=off",
            ],
        ),
    ],
)
def test_the_functions_filter_every_reference_by_the_thread(
    db_dsn: str, function: str, expected: int, settings: list[str]
) -> None:
    with psycopg.connect(db_dsn) as conn:
        found = conn.execute(
            "SELECT p.prosrc, p.proconfig FROM pg_proc AS p"
            " JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'public' AND p.proname = %s",
            (function,),
        ).fetchall()
    assert len(found) == 1
    body, config = found[0]
    assert_filtered(function, body, "p_thread", expected)
    assert config == settings  # as 0011 left them: 0012 replaced the bodies only


@pytest.mark.parametrize(
    ("name", "slots", "expected"),
    [
        ("get_tuple", {}, 3),
        ("get_tuple_id", {}, 3),
        # the target, the walk's two steps and their value checks, writes and values
        ("delta_history", {"where": ("thread", "ns")}, 7),
        ("delta_history", {"where": ("thread", "ns", "id")}, 7),
    ],
)
def test_the_statements_the_functions_mirror_filter_by_the_thread(
    name: str, slots: dict[str, tuple[str, ...]], expected: int
) -> None:
    text = Queries("public").render(name, **slots).decode()
    target = re.compile(r"\(SELECT %\(thread_id\)s::text\)")
    # delta_history's target compares with the parameter hidden from the planner (_w_thread)
    assert_filtered(name, target.sub("%(thread_id)s", text), "%(thread_id)s", expected)


def test_list_of_a_thread_skips_through_its_namespaces_by_the_thread() -> None:
    text = Queries("public").render("read_tuples_per_ns", where=("thread",), cap=10).decode()
    recursive = text[text.index("UNION ALL") : text.index("), k AS MATERIALIZED")]
    assert re.search(r"c\.thread_id\s*=\s*%\(thread_id\)s", recursive), recursive
