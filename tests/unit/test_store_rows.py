"""The row positions named in store/rows.py match the SQL that produces the rows (sql/queries.sql
and the import's statements in store/rules.py's SourceTables): each name is the alias (or the
column) at that position of the statement's select list, and every shape has its declared width.
The parsing is test_rows.py's (the checkpoint side's rows)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pytest
from test_rows import Q, check

from langgraph_pg_saver.store import rows as _rows
from langgraph_pg_saver.store import rules as _rules
from langgraph_pg_saver.store.rules import SourceTables

SOURCE = SourceTables("public")
SPEC = _rules.index_spec({"dims": 3, "embed": lambda texts: [[0.0] * 3 for _ in texts]})

#: every statement whose rows the store reads by position, and the shape of its rows
STATEMENTS: dict[str, tuple[type, Callable[[], str]]] = {
    "store_get": (_rows.ItemRow, lambda: Q["store_get"].decode()),
    "store_search": (_rows.ItemRow, lambda: Q["store_search"].decode()),
    "store_unscored": (_rows.ItemRow, lambda: Q["store_unscored"].decode()),
    "source_rows": (_rows.ItemRow, lambda: SOURCE.rows("public").decode()),
    "store_vector_search": (
        _rows.NearRow,
        lambda: Q.render("store_vector_search", vtype="vector", vop="cosine").decode(),
    ),
    "store_vector_search_halfvec_l2": (
        _rows.NearRow,
        lambda: Q.render("store_vector_search", vtype="halfvec", vop="l2").decode(),
    ),
    "store_nearest": (
        _rows.NearestRow,
        lambda: Q.render("store_nearest", vdist="cosine").decode(),
    ),
    "store_vector_hashes": (_rows.HashRow, lambda: Q["store_vector_hashes"].decode()),
    "store_prefixes": (_rows.PrefixRow, lambda: Q["store_prefixes"].decode()),
    "store_sweep": (_rows.SweepRow, lambda: Q["store_sweep"].decode()),
    "store_write": (_rows.WriteRow, lambda: Q.render("store_write", vtype="vector").decode()),
    "source_exists": (_rows.SourceRow, lambda: SOURCE.exists().decode()),
    "source_items": (_rows.ImportRow, lambda: SOURCE.items("public").decode()),
    "source_items_vectors": (_rows.ImportRow, lambda: SOURCE.items("public", SPEC).decode()),
}


def _positions(shape: type) -> dict[str, int]:
    return {
        name: value
        for name, value in vars(shape).items()
        if name.isupper() and name != "WIDTH" and isinstance(value, int)
    }


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_store_rows(name: str) -> None:
    shape, sql = STATEMENTS[name]
    check(shape, sql())


def test_every_shape_is_checked() -> None:
    """Each class of store/rows.py is a statement's (checked above) or ScoredRow (below)."""
    shapes = {
        v for v in vars(_rows).values() if isinstance(v, type) and v.__module__ == _rows.__name__
    }
    checked = {shape for shape, _ in STATEMENTS.values()}
    assert shapes - checked == {_rows.ScoredRow}


def test_scored_and_near_rows_begin_with_an_items_columns() -> None:
    """The store passes ``row[:ItemRow.WIDTH]`` of a NearRow on as a ScoredRow's item, and
    row_to_item reads any of the three as an item."""
    item = _positions(_rows.ItemRow)
    for shape in (_rows.NearRow, _rows.ScoredRow):
        assert {k: v for k, v in _positions(shape).items() if k in item} == item, shape
    assert _rows.ScoredRow.SCORE == _rows.ItemRow.WIDTH
    assert _rows.ScoredRow.WIDTH == _rows.ItemRow.WIDTH + 1
    assert _rows.NearRow.DISTANCE >= _rows.ItemRow.WIDTH


def test_row_to_item_reads_by_the_names() -> None:
    created, updated = datetime(2024, 1, 1, tzinfo=timezone.utc), datetime.now(timezone.utc)
    row = ("a.b", "k", {"x": 1}, None, created, updated, None)
    item = _rules.row_to_item(row)
    assert (item.namespace, item.key, item.value) == (("a", "b"), "k", {"x": 1})
    assert (item.created_at, item.updated_at) == (created, updated)
    exact = ("a", "k", {"x": 1.0}, '{"x": 1}', created, updated, None, 0.5)
    scored = _rules.row_to_item(exact, search=True)
    assert scored.value == {"x": 1}
    assert scored.score == 0.5  # type: ignore[attr-defined]


def test_the_check_catches_a_column_swapped_or_added() -> None:
    sql = Q["store_search"].decode()
    swapped = sql.replace("s.value, s.value_exact", "s.value_exact, s.value", 1)
    assert swapped != sql
    with pytest.raises(AssertionError):
        check(_rows.ItemRow, swapped)
    near = Q.render("store_vector_search", vtype="vector", vop="cosine").decode()
    added = near.replace("f.distance, c.given", "f.distance, NULL AS extra, c.given")
    assert added != near
    with pytest.raises(AssertionError):
        check(_rows.NearRow, added)
