"""The row positions named in checkpoint/rows.py match the SQL that produces the rows: each name
is the alias (or the column) at that position of the statement's select list, per kind of row of
a UNION ALL, and every shape has its declared width. A column moved, added or removed in the
middle of a select list fails here."""

from __future__ import annotations

import re

import pytest

from langgraph_pg_saver.checkpoint import reading as _reading
from langgraph_pg_saver.checkpoint import rows as _rows
from langgraph_pg_saver.db import sql as _sql

Q = _sql.Queries("public")

#: columns of set-returning functions, which the SQL cannot alias in the select list:
#: jsonb_each_text(c.channel_versions) AS e yields (channel, version) pairs
SYNONYMS = {"e.key": "channel", "e.value": "version"}

_KEYWORDS = re.compile(r"\b(SELECT|FROM|UNION\s+ALL|DISTINCT|RETURN\s+QUERY)\b", re.IGNORECASE)


def _strip(sql: str) -> str:
    """The statement without comments and string literals (which may hold parentheses)."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def _top_level(sql: str) -> list[tuple[int, str]]:
    """(position, keyword) of the keywords outside every parenthesis."""
    depth, found = 0, []
    spans = {m.start(): m for m in _KEYWORDS.finditer(sql)}
    for i, ch in enumerate(sql):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and i in spans:
            found.append((i, re.sub(r"\s+", " ", spans[i].group(1).upper())))
    return found


def _split_commas(text: str) -> list[str]:
    depth, items, start = 0, [], 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def branches(sql: str) -> list[list[str]]:
    """The select lists of a statement's main SELECT and the SELECTs UNION ALL joins to it."""
    sql = _strip(sql)
    marks = _top_level(sql)
    out: list[list[str]] = []
    for n, (pos, word) in enumerate(marks):
        if word != "SELECT":
            continue
        start = pos + len("SELECT")
        end = len(sql)
        for later, later_word in marks[n + 1 :]:
            if later_word in ("FROM", "UNION ALL", "SELECT"):
                end = later
                break
        text = sql[start:end].strip()
        if text.upper().startswith("DISTINCT "):
            text = text[len("DISTINCT ") :]
        out.append(_split_commas(text))
    return out


def names_of(item: str) -> set[str]:
    """The names a select-list item answers to: its alias, and the column it reads."""
    item = item.strip().rstrip(";").strip()
    names = set()
    alias = re.search(r"\bAS\s+(\w+)\s*$", item, re.IGNORECASE)
    if alias:
        names.add(alias.group(1).lower())
        item = item[: alias.start()].strip()
    item = re.sub(r'\s+COLLATE\s+"\w+"\s*$', "", item, flags=re.IGNORECASE)
    column = re.fullmatch(r"(?:(\w+)\.)?(\w+)", item)
    if column:
        names.add(column.group(2).lower())
    if item in SYNONYMS:
        names.add(SYNONYMS[item])
    return names


def _kind(item: str) -> str:
    return re.sub(r"\s+AS\s+kind$", "", item.strip(), flags=re.IGNORECASE)


def check(shape: type, sql: str, kind: int | None = None) -> None:
    """Every position ``shape`` names is that column of ``sql`` (of its rows of ``kind``)."""
    found = branches(sql)
    assert found, f"no select list in {sql[:80]!r}"
    if kind is None:
        assert len(found) == 1, (shape.__name__, len(found))
        branch = found[0]
    else:
        matching = [b for b in found if _kind(b[0]) == str(kind)]
        assert len(matching) == 1, (shape.__name__, kind, [b[0] for b in found])
        branch = matching[0]
    first = found[0]
    positions = {
        name: value
        for name, value in vars(shape).items()
        if name.isupper() and name != "WIDTH" and isinstance(value, int)
    }
    assert positions, shape.__name__
    for b in found:
        assert len(b) == shape.WIDTH, (shape.__name__, len(b), b)
    for name, i in positions.items():
        allowed = names_of(branch[i]) | (names_of(first[i]) if kind is not None else set())
        if i == 0 and kind is not None and _kind(branch[0]) == str(kind):
            allowed.add("kind")  # a statement of one kind of row may leave it unnamed
        assert name.lower() in allowed, (
            f"{shape.__name__}.{name} = {i}, but that column of the statement is "
            f"{branch[i]!r} (answers to {sorted(allowed)})"
        )


def _get_tuple_function(version: int) -> str:
    """pgsaver_get_tuple as migration ``version`` creates it: 0007 made it, 0012 replaced it (and
    pgsaver_delta_history after it)."""
    mig = next(m for m in _sql.migrations() if m.version == version)
    return Q.migration(mig).decode().split("CREATE OR REPLACE FUNCTION")[1]


def _returned_queries(function_sql: str) -> list[str]:
    """The statements of a PL/pgSQL function's RETURN QUERY."""
    body = _strip(function_sql)
    return [m.group(1) for m in re.finditer(r"RETURN\s+QUERY(.*?);", body, re.S | re.I)]


GET_TUPLE = {
    "get_tuple": lambda: Q.get_tuple(("thread", "ns")).decode(),
    "get_tuple_id": lambda: Q.get_tuple(("thread", "ns", "id")).decode(),
}
READ_TUPLES = {
    "read_tuples": lambda: Q.read_tuples(("thread", "ns")).decode(),
    "read_tuples_per_ns": lambda: Q.read_tuples(("thread",)).decode(),
    "read_tuples_keys": lambda: Q["read_tuples_keys"].decode(),
    "read_tuples_recent": lambda: (Q.recent("read_tuples", ("filter",), 10) or b"").decode(),
    "read_tuples_capped": lambda: (Q.capped("read_tuples", ("filter",)) or b"").decode(),
    "read_tuples_global": lambda: Q.render("read_tuples_global", where=("filter",)).decode(),
}
LIST_KEYS = {
    "list_keys": lambda: Q.list_keys(("filter",)).decode(),
    "list_keys_recent": lambda: (Q.recent("list_keys", ("filter",), 10) or b"").decode(),
    "list_keys_capped": lambda: (Q.capped("list_keys", ("filter",)) or b"").decode(),
    "list_keys_global": lambda: Q.render("list_keys_global", where=("filter",)).decode(),
}
TUPLE_KINDS = ((_rows.TupleValue, 0), (_rows.TupleWrite, 1), (_rows.TupleHead, 2))
READ_KINDS = ((_rows.ReadValue, 0), (_rows.ReadWrite, 1), (_rows.ReadHead, 2))


@pytest.mark.parametrize("name", sorted(GET_TUPLE))
def test_get_tuple_rows(name: str) -> None:
    sql = GET_TUPLE[name]()
    for shape, kind in TUPLE_KINDS:
        check(shape, sql, kind)


@pytest.mark.parametrize("version", [7, 12])
def test_get_tuple_call_rows_are_migration_0007s(version: int) -> None:
    """get_tuple_call returns the function's table, whose columns are named in RETURNS TABLE, and
    each of its two queries returns get_tuple's rows, as 0007 made it and as 0012 replaced it."""
    sql = _get_tuple_function(version)
    assert "SELECT * FROM" in Q["get_tuple_call"].decode()
    table = re.search(r"RETURNS\s+TABLE\s*\((.*?)\)\s*LANGUAGE", _strip(sql), re.S | re.I)
    assert table is not None
    columns = [c.split()[0].lower() for c in _split_commas(table.group(1))]
    queries = _returned_queries(sql)
    assert len(queries) == 2
    for query in queries:
        for shape, kind in TUPLE_KINDS:
            check(shape, query, kind)
        # the function's output names are its RETURNS TABLE's, position by position
        assert len(columns) == len(branches(query)[0])
        for i, column in enumerate(columns):
            assert column in names_of(branches(query)[0][i]), (i, column)


@pytest.mark.parametrize("name", sorted(READ_TUPLES))
def test_read_tuples_rows(name: str) -> None:
    sql = READ_TUPLES[name]()
    assert sql, name
    for shape, kind in READ_KINDS:
        check(shape, sql, kind)


@pytest.mark.parametrize("name", sorted(LIST_KEYS))
def test_list_keys_rows(name: str) -> None:
    sql = LIST_KEYS[name]()
    assert sql, name
    check(_rows.KeyRow, sql)


def test_pending_sends_rows() -> None:
    check(_rows.SendRow, Q["pending_sends"].decode())


def test_reseal_rows() -> None:
    """copied_sealed_rows holds the three kinds (the _reseal_*_columns fragments); each
    reencrypt_* batch selects one of them, the same select list (reencrypt_blobs the same
    columns)."""
    sql = Q["copied_sealed_rows"].decode()
    union = branches(sql)
    for kind in (0, 1, 2):
        check(_rows.ResealRow, sql, kind)
    # reencrypt_blobs returns a list stored as its elements unsealed assembled (its own blob
    # expression): the same columns
    check(_rows.ResealRow, Q["reencrypt_blobs"].decode(), 0)
    for kind, name in ((1, "reencrypt_writes"), (2, "reencrypt_checkpoints")):
        assert branches(Q[name].decode()) == [union[kind]], name


@pytest.mark.parametrize("name", ["delete_for_runs", "delete_for_runs_plan"])
def test_runs_rows(name: str) -> None:
    sql = Q[name].decode()
    for kind in (0, 1, 2):
        check(_rows.RunsRow, sql, kind)


def test_get_tuple_measures_the_column_of_values_and_bodies() -> None:
    assert _reading.GET_TUPLE_BYTES == _rows.TupleHead.BODY
    assert _rows.TupleValue.BLOB == _rows.TupleWrite.BLOB == _rows.TupleHead.BODY


def test_the_check_catches_a_column_added_in_the_middle() -> None:
    sql = Q.get_tuple(("thread", "ns")).decode()
    moved = sql.replace(
        "c.type, c.checkpoint AS body", "c.type, NULL AS extra, c.checkpoint AS body"
    )
    assert moved != sql
    with pytest.raises(AssertionError):
        check(_rows.TupleHead, moved, 2)
    keys = Q.list_keys(("filter",)).decode()
    swapped = keys.replace(
        "c.checkpoint_id, c.metadata, c.metadata_exact",
        "c.checkpoint_id, c.metadata_exact, c.metadata",
    )
    assert swapped != keys
    with pytest.raises(AssertionError):
        check(_rows.KeyRow, swapped)
