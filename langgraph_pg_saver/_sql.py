"""Loads the SQL under ``sql/`` once and renders it for one Postgres schema.

The wheel carries a copy of ``sql/`` inside the package (``langgraph_pg_saver/sql``); an editable
install or a checkout reads the top-level ``sql/`` directory instead.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from psycopg import sql

from .errors import InvalidSchemaNameError

_PACKAGED = Path(__file__).parent / "sql"
_CHECKOUT = Path(__file__).parent.parent / "sql"

# A Postgres identifier we are willing to quote: letters, digits, underscores, at most 63 bytes.
_SCHEMA_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_NAME_RE = re.compile(r"^-- name: (\S+)\s*$", re.MULTILINE)
_MIGRATION_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")
WHERE_FRAGMENTS = ("thread", "ns", "id", "before", "filter")
# fragments that send a statement's rows as arrays, each with a "_values" and a one-row variant
_ROW_SETS = ("_blob_rows", "_write_rows")


def sql_dir() -> Path:
    """The directory holding ``queries.sql`` and ``migrations/``."""
    if (_PACKAGED / "queries.sql").is_file():
        return _PACKAGED
    if (_CHECKOUT / "queries.sql").is_file():
        return _CHECKOUT
    raise FileNotFoundError(f"langgraph_pg_saver: no sql/ directory at {_PACKAGED} or {_CHECKOUT}")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str

    @property
    def additive(self) -> bool:
        """Marked "-- additive" in its header: code that knows only the earlier migrations runs
        unchanged against a schema that has this one (see _migrate.pending)."""
        return _ADDITIVE_RE.search(self.text) is not None


_ADDITIVE_RE = re.compile(r"^-- additive\b", re.MULTILINE)


def _strip_comments(text: str) -> str:
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return "\n".join(lines).strip()


@functools.cache
def raw_queries() -> dict[str, str]:
    """Every named query and fragment of ``queries.sql``, comments removed, placeholders kept."""
    text = (sql_dir() / "queries.sql").read_text(encoding="utf-8")
    parts = _NAME_RE.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=False):
        if name in queries:
            raise ValueError(f"queries.sql: query {name!r} is defined twice")
        queries[name] = _strip_comments(body)
    return queries


@functools.cache
def migrations() -> tuple[Migration, ...]:
    """The numbered migrations, in order. Numbers must be 1..N without gaps."""
    found: list[Migration] = []
    for path in sorted((sql_dir() / "migrations").glob("*.sql")):
        m = _MIGRATION_RE.match(path.name)
        if m is None:
            raise ValueError(f"migration file {path.name!r} is not named NNNN_name.sql")
        found.append(Migration(int(m.group(1)), m.group(2), path.read_text(encoding="utf-8")))
    for expected, mig in enumerate(found, start=1):
        if mig.version != expected:
            raise ValueError(f"migrations must be numbered 1..N; found {mig.version} at {expected}")
    return tuple(found)


def validate_schema(schema: str) -> str:
    """Return ``schema`` if it is a plain identifier we can quote safely, else raise."""
    if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
        raise InvalidSchemaNameError(schema)
    return schema


def _render(text: str, schema_sql: str, fragments: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key == "schema":
            return schema_sql
        if key in fragments:
            return fragments[key]
        raise KeyError(f"unknown placeholder {{{key}}} in SQL")

    return _PLACEHOLDER_RE.sub(sub, text)


class Queries:
    """The project's SQL rendered for one schema, as ready-to-send bytes."""

    def __init__(self, schema: str) -> None:
        self.schema = validate_schema(schema)
        # the identifier is validated above; Identifier adds the quoting
        self.schema_sql = sql.Identifier(self.schema).as_string()
        raw = raw_queries()
        # fragments may use {schema} and other fragments: render them first, in dependency order
        self._fragments: dict[str, str] = {}
        pending = {k: v for k, v in raw.items() if k.startswith("_")}
        while pending:
            ready = {
                k: v
                for k, v in pending.items()
                if all(
                    n in self._fragments or n in ("schema", "where", "rows")
                    for n in _PLACEHOLDER_RE.findall(v)
                )
                or not any(n in pending for n in _PLACEHOLDER_RE.findall(v))
            }
            if not ready:
                raise ValueError(
                    f"queries.sql: fragments include each other in a cycle: {sorted(pending)}"
                )
            for k, v in ready.items():
                self._fragments[k] = _render(
                    v, self.schema_sql, {**self._fragments, "where": "{where}", "rows": "{rows}"}
                )
                del pending[k]
        self._rendered: dict[str, bytes] = {}
        self._templates: dict[str, str] = {}
        for name, text in raw.items():
            if name.startswith("_"):
                continue
            rendered = _render(text, self.schema_sql, {**self._fragments, "where": "{where}"})
            if "{where}" in rendered:
                self._templates[name] = rendered
            else:
                self._rendered[name] = rendered.encode()
        self._where_cache: dict[tuple[str, tuple[str, ...], str], bytes] = {}
        self._rows_cache: dict[tuple[str, int], bytes] = {}

    def __getitem__(self, name: str) -> bytes:
        return self._rendered[name]

    def with_where(self, name: str, predicates: tuple[str, ...], prefix: str = "_w_") -> bytes:
        """Query ``name`` with its ``{where}`` made of the named ``_w_*`` fragments (AND-ed), or of
        the ``_wh_*`` ones that hide the values from the planner."""
        key = (name, predicates, prefix)
        cached = self._where_cache.get(key)
        if cached is None:
            parts = [self._fragments[f"{prefix}{p}"] for p in predicates]
            where = " AND ".join(f"({p})" for p in parts) if parts else "true"
            cached = self._templates[name].replace("{where}", where).encode()
            self._where_cache[key] = cached
        return cached

    def rows_variant(self, name: str, rows: int) -> bytes:
        """Query ``name`` (put, put_new, put_writes, put_writes_new) with its rows sent as a VALUES
        list of ``rows`` rows of scalar parameters instead of as arrays (see ``_blob_rows`` in
        queries.sql); with ``rows == 0``, the query as it is."""
        if rows == 0:
            return self._rendered[name]
        key = (name, rows)
        cached = self._rows_cache.get(key)
        if cached is None:
            text = self._rendered[name].decode()
            for arrays in _ROW_SETS:
                fragment = self._fragments[arrays]
                if fragment in text:
                    row = self._fragments[arrays[:-1]]  # _blob_rows -> _blob_row
                    listed = ", ".join(row.replace("#", str(i)) for i in range(rows))
                    values = self._fragments[f"{arrays}_values"].replace("{rows}", listed)
                    text = text.replace(fragment, values)
                    break
            else:
                raise KeyError(f"query {name!r} sends no rows as arrays")
            cached = self._rows_cache[key] = text.encode()
        return cached

    def read_tuples(self, predicates: tuple[str, ...]) -> bytes:
        """``read_tuples`` filtered by the named ``_wh_*`` fragments (per namespace when a thread is
        given without a namespace or id)."""
        if "thread" in predicates and "ns" not in predicates and "id" not in predicates:
            return self.with_where("read_tuples_per_ns", predicates, "_wh_")
        return self.with_where("read_tuples", predicates, "_wh_")

    def get_tuple(self, predicates: tuple[str, ...]) -> bytes:
        """``get_tuple`` (one checkpoint) filtered by the named ``_w_*`` fragments."""
        return self.with_where("get_tuple", predicates)

    def names(self) -> set[str]:
        """Every named query (fragments excluded)."""
        return set(self._rendered) | set(self._templates)

    def migration(self, mig: Migration) -> bytes:
        return _render(mig.text, self.schema_sql, {}).encode()


@functools.cache
def queries_for(schema: str) -> Queries:
    return Queries(schema)
