"""Loads the SQL under ``sql/`` once and renders it for one Postgres schema.

The wheel carries a copy of ``sql/`` inside the package (``langgraph_pg_saver/sql``); an editable
install or a checkout reads the top-level ``sql/`` directory instead.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg import sql

from langgraph_pg_saver.errors import InvalidSchemaNameError

_PACKAGE = Path(__file__).resolve().parent.parent
_PACKAGED = _PACKAGE / "sql"
_CHECKOUT = _PACKAGE.parent / "sql"
#: the schema a saver or store uses unless told otherwise
DEFAULT_SCHEMA = "public"

# A Postgres identifier we are willing to quote: letters, digits, underscores, at most 63 bytes.
_SCHEMA_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_NAME_RE = re.compile(r"^-- name: (\S+)\s*$", re.MULTILINE)
_MIGRATION_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


class CustomPlan(bytes):
    """A statement the driver sends unprepared, so the server plans it for each call's parameter
    values (list() across threads: read_tuples_capped, read_tuples_global), and with the tables
    as large as they are then (PLANNED_PER_CALL)."""

    __slots__ = ()


#: statements always sent unprepared (CustomPlan): rare ones, cheap to plan, whose generic plan,
#: made once by a session while the tables were small (after statistics of empty tables), would
#: keep a sequential scan of the tables as they grow (docs/performance.md, "Statistics of empty
#: tables"): delete_thread (0.03 ms to plan), put_orphan (a put whose parent is not stored),
#: pending_sends (checkpoints of format below 4); and the store's search and list_namespaces,
#: whose generic plan scans at any size (a namespace prefix that may be NULL, a LIKE pattern
#: given as a parameter: nothing an index can take until the values are known); the node cache's
#: clear (a flag for "everything" ORed with the namespaces: a generic plan scans) and sweep
PLANNED_PER_CALL = frozenset(
    {
        "delete_thread",
        "put_orphan",
        "pending_sends",
        "store_search",
        "store_prefixes",
        "cache_clear",
        "cache_sweep",
    }
)


class StatsPlan(bytes):
    """A statement prepared only on a connection that found its family's tables large enough for
    a generic plan made on them to stay on the indexes (``db/policy.stats_trusted``); elsewhere
    sent unprepared, so planned per call at the tables' size then (docs/performance.md,
    "Statistics of empty tables"). ``family`` indexes the check's answer: 0 the checkpoint
    tables, 1 the store's, 2 the node cache's; ``schema``: whose tables (a pool may serve savers of several)."""

    family = 0
    schema = DEFAULT_SCHEMA


class StoreStatsPlan(StatsPlan):
    """A StatsPlan of the store's table (pgsaver_store)."""

    family = 1


class CacheStatsPlan(StatsPlan):
    """A StatsPlan of the node cache's table (pgsaver_cache)."""

    family = 2


#: the hot statements whose generic plan, made while the tables were small, would keep a scan of
#: them as they grow: prepared only on a connection that found the tables large (StatsPlan);
#: get_tuple's call its function there instead (cached plans under enable_seqscan = off)
PLANNED_BY_STATS = {
    **dict.fromkeys(
        (
            "get_tuple",
            "get_tuple_id",
            "read_tuples",
            "read_tuples_per_ns",
            "read_tuples_keys",
            "read_tuples_recent",
            "list_keys",
            "list_keys_recent",
        ),
        StatsPlan,
    ),
    **dict.fromkeys(
        ("store_get", "store_refresh", "store_delete", "store_put_delete", "store_write"),
        StoreStatsPlan,
    ),
    **dict.fromkeys(("cache_get", "cache_get_one"), CacheStatsPlan),
}


def _kind(name: str, text: bytes, schema: str) -> bytes:
    """``text`` as the bytes subclass that tells the driver how to prepare statement ``name``
    of ``schema``."""
    if name in PLANNED_PER_CALL:
        return CustomPlan(text)
    kind = PLANNED_BY_STATS.get(name)
    if kind is None:
        return text
    plan = kind(text)
    plan.schema = schema
    return plan


#: the named fragments a {where} slot is made of: _w_<name>
#: the suffix of a query or fragment that replaces its namesake on Citus (Queries(citus=True))
CITUS_SUFFIX = "__citus"
#: ... and on a schema without migration 0015's table (Queries(lists=False))
NOLISTS_SUFFIX = "__nolists"
#: ... and on a schema without migration 0018's record of deleted threads (Queries(deleted=False))
NODELETED_SUFFIX = "__nodeleted"
WHERE_FRAGMENTS = ("thread", "ns", "id", "before", "filter", "after")
#: row slots: how a statement's rows travel, as arrays or as a VALUES list of scalar rows; for each,
#: the fragment of the arrays, the VALUES wrapper (with its own {rows} slot) and one row (with {i})
ROW_SLOTS = {
    "blob_rows": ("_blob_arrays", "_blob_values", "_blob_row"),
    "write_rows": ("_write_arrays", "_write_values", "_write_row"),
}
#: every slot a statement may have
SLOTS = frozenset(
    {
        "where",
        "scan",
        "walk",
        "claim",
        "parts",
        "status",
        "cap",
        "vtype",
        "vop",
        "vdist",
        *ROW_SLOTS,
    }
)
#: put's {status} slot: the status a root checkpoint gives its thread (migration 0014), as a
#: constant of the statement (Citus could not type it as a parameter of its RETURNING)
PUT_STATUSES = {None: "NULL", "pending": "'pending'", "idle": "'idle'"}
#: how many of the newest checkpoints the first phase of list() across threads walks ({walk}): a
#: constant in the statement, so that even a generic plan knows the walk is short: a hidden or
#: parameter limit is costed as a tenth of the table, and the joins that read the chosen
#: checkpoints' values and writes were then planned for that many rows)
WALKS = (200, 1000, 5000)
#: how many checkpoints a page of a long list() reads (a list without a limit, or with one above
#: this: checkpoint/reading.page_select), so that no statement reads a whole long thread: a role's
#: statement_timeout applies to each statement. Measured on a 50,000-checkpoint chat thread (five
#: values and two writes a checkpoint, about 1 KB of text a value; tests/test_statement_timeout):
#: 500 checkpoints of one namespace took 27 ms (median) and up to 105 ms on a busy machine, 500 of a
#: thread's namespaces merged 57 and 142 ms, 2,000 in one statement 130 ms, the whole thread 4.4 s.
#: Pages of 250: 11 ms median, 19 ms at most (the whole thread in 203 statements, 2.2 s on the
#: server): far below a 250 ms statement_timeout for checkpoints several times larger, for about
#: 1 ms of round trip and planning per page.
LIST_PAGE = 250
#: what read_tuples_per_ns reads ({cap}): the smallest of these at least the limit (a page:
#: LIST_PAGE), a constant of the statement (see there why)
LIST_CAPS = (10, 100, LIST_PAGE)
#: the values of the store's vector slots: {vtype} a column type, {vop} a distance type
VECTOR_SLOTS = {
    "vtype": ("vector", "halfvec"),
    "vop": ("cosine", "l2", "inner_product"),
    "vdist": ("cosine", "l2", "inner_product"),
}


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


def _fill(text: str, values: dict[str, str]) -> str:
    """Replace the ``{name}`` placeholders of ``text`` that ``values`` names; others stay."""
    return _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


class Queries:
    """The project's SQL rendered for one schema, as ready-to-send bytes.

    ``queries.sql`` has three kinds of placeholder, all written ``{name}``:

    * ``{schema}``: the quoted schema, filled once here;
    * ``{_name}``: the fragment ``_name`` included in place, filled once here (fragments may include
      fragments);
    * any other ``{name}``: a *slot*, filled per call by :meth:`render` from named fragments, never
      from caller text: ``{where}`` with ``_w_*`` predicates AND-ed, ``{blob_rows}`` and
      ``{write_rows}`` with the rows as arrays or as a VALUES list of a given length.
    """

    def __init__(
        self, schema: str, *, citus: bool = False, lists: bool = True, deleted: bool = True
    ) -> None:
        self.schema = validate_schema(schema)
        #: the statements for a database with the citus extension: each query or fragment
        #: ``x__citus`` of queries.sql stands in for ``x`` (what Citus routes by thread)
        self.citus = citus
        #: False: the statements for a schema without migration 0015's pgsaver_elements (this
        #: release before its setup()): each ``x__nolists`` stands in for ``x``
        self.lists = lists
        #: False: the statements for a schema without migration 0018's pgsaver_deleted_threads
        #: (each ``x__nodeleted`` stands in for ``x``): deletes record nothing, writes check
        #: nothing. A schema without 0015 has no 0018 either.
        self.deleted = deleted and lists
        # the identifier is validated above; Identifier adds the quoting
        self.schema_sql = sql.Identifier(self.schema).as_string()
        raw = dict(raw_queries())
        for suffix, used in (
            (CITUS_SUFFIX, citus),
            (NODELETED_SUFFIX, not self.deleted),
            (NOLISTS_SUFFIX, not lists),
        ):
            for name in [n for n in raw if n.endswith(suffix)]:
                text = raw.pop(name)
                if used:
                    raw[name.removesuffix(suffix)] = text
        self._fragments: dict[str, str] = {}
        for name in raw:
            if name.startswith("_"):
                self._include(name, raw, ())
        self._rendered: dict[str, bytes] = {}
        self._templates: dict[str, str] = {}
        for name, text in raw.items():
            if name.startswith("_"):
                continue
            text = self._expand(text, raw, (name,))
            unknown = set(_PLACEHOLDER_RE.findall(text)) - SLOTS
            if unknown:
                raise ValueError(f"queries.sql: {name} has unknown slots {sorted(unknown)}")
            if _PLACEHOLDER_RE.search(text):
                self._templates[name] = text
            else:
                self._rendered[name] = _kind(name, text.encode(), self.schema)
        self._cache: dict[tuple[object, ...], bytes] = {}

    def _include(self, name: str, raw: dict[str, str], stack: tuple[str, ...]) -> str:
        done = self._fragments.get(name)
        if done is None:
            if name in stack:
                raise ValueError(f"queries.sql: fragments include each other: {[*stack, name]}")
            if name not in raw:
                raise KeyError(f"queries.sql: {stack[-1]} includes unknown fragment {name}")
            done = self._fragments[name] = self._expand(raw[name], raw, (*stack, name))
        return done

    def _expand(self, text: str, raw: dict[str, str], stack: tuple[str, ...]) -> str:
        def sub(m: re.Match[str]) -> str:
            key = m.group(1)
            if key == "schema":
                return self.schema_sql
            if key.startswith("_"):
                return self._include(key, raw, stack)
            return m.group(0)  # a slot, filled by render()

        return _PLACEHOLDER_RE.sub(sub, text)

    def __getitem__(self, name: str) -> bytes:
        """A statement without slots."""
        try:
            return self._rendered[name]
        except KeyError:
            if name in self._templates:
                raise KeyError(f"query {name!r} has slots: use render()") from None
            raise

    def render(self, name: str, **slots: Any) -> bytes:
        """Statement ``name`` with its slots filled: ``where=("thread", "ns")`` (the ``_w_*``
        fragments AND-ed; ``()`` is ``true``), ``blob_rows=n`` / ``write_rows=n`` (``n`` scalar rows
        of a VALUES list, or the arrays for 0), ``claim=True`` (a guarded put: ``_claim``). Made
        once per distinct call, then cached."""
        key = (name, *slots.items())
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = _kind(name, self._render(name, slots), self.schema)
        return cached

    def _render(self, name: str, slots: dict[str, Any]) -> bytes:
        if name in self._rendered and not slots:
            return self._rendered[name]
        template = self._templates.get(name)
        if template is None:
            raise KeyError(f"query {name!r} has no slots to fill")
        wanted = set(_PLACEHOLDER_RE.findall(template))
        if wanted != set(slots):
            raise KeyError(f"query {name!r} has the slots {sorted(wanted)}, not {sorted(slots)}")
        values = {slot: self._slot(slot, value) for slot, value in slots.items()}
        text = _fill(template, values)
        left = _PLACEHOLDER_RE.findall(text)
        if left:
            raise ValueError(f"query {name!r}: placeholders left after filling: {sorted(left)}")
        return text.encode()

    def _slot(self, slot: str, value: Any) -> str:
        if slot in ("where", "scan"):
            parts = [self._fragments[f"_w_{p}"] for p in value]
            return " AND ".join(f"({p})" for p in parts) if parts else "true"
        if slot == "walk":
            if value not in WALKS:
                raise ValueError(f"walk takes one of {WALKS}, not {value!r}")
            return str(value)
        if slot == "status":
            if value not in PUT_STATUSES:
                raise ValueError(
                    f"status takes one of {sorted(map(str, PUT_STATUSES))}, not {value!r}"
                )
            return PUT_STATUSES[value]
        if slot == "claim":
            if not isinstance(value, bool):
                raise ValueError(f"claim takes a bool, not {value!r}")
            return self._fragments["_claim"] if value else "true"
        if slot == "parts":
            if not isinstance(value, bool):
                raise ValueError(f"parts takes a bool, not {value!r}")
            return self._fragments["_put_parts"] if value else ""
        if slot == "cap":
            if value not in LIST_CAPS:
                raise ValueError(f"cap takes one of {LIST_CAPS}, not {value!r}")
            return str(value)
        if slot in VECTOR_SLOTS:
            if value not in VECTOR_SLOTS[slot]:
                raise ValueError(f"{slot} takes one of {VECTOR_SLOTS[slot]}, not {value!r}")
            return self._fragments[f"_{slot}_{value}"]
        if slot in ROW_SLOTS:
            arrays, wrapper, row = (self._fragments[f] for f in ROW_SLOTS[slot])
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{slot} takes a count of rows, not {value!r}")
            if value == 0:
                return arrays
            listed = ", ".join(_fill(row, {"i": str(i)}) for i in range(value))
            return _fill(wrapper, {"rows": listed})
        raise KeyError(f"unknown slot {{{slot}}}")

    def read_tuples(self, predicates: tuple[str, ...], limit: int | None = None) -> bytes:
        """list()'s statement: per namespace when a thread is given without a namespace or id (the
        newest checkpoints of each namespace, merged); without a thread, planned for each call (a
        CustomPlan: read_tuples_global, after read_tuples_recent and read_tuples_capped when there
        is a limit); else over the chosen keys. ``limit``: the call's, at most LIST_PAGE (None: a
        page, LIST_PAGE); read_tuples_per_ns reads the smallest of LIST_CAPS at least that many,
        of which the caller keeps the first ``limit``."""
        if "thread" not in predicates:
            return CustomPlan(self.render("read_tuples_global", where=predicates))
        if "ns" not in predicates and "id" not in predicates:
            want = LIST_PAGE if limit is None else limit
            cap = next((c for c in LIST_CAPS if c >= want), LIST_PAGE)
            return self.render("read_tuples_per_ns", where=predicates, cap=cap)
        return self.render("read_tuples", where=predicates)

    def list_keys(self, predicates: tuple[str, ...]) -> bytes:
        """list_keys (a filter checked by the saver); without a thread, as read_tuples."""
        if "thread" not in predicates:
            return CustomPlan(self.render("list_keys_global", where=predicates))
        return self.render("list_keys", where=predicates)

    def recent(self, name: str, predicates: tuple[str, ...], limit: int) -> bytes | None:
        """The first phase of ``read_tuples`` or ``list_keys`` across threads (``name``: which)
        for ``limit``: a walk of the newest checkpoints, the shortest of WALKS that is at least 20
        times the limit (the longest for larger limits); None within a thread, which has no such
        phase, and for a limit beyond the longest walk."""
        if "thread" in predicates or limit > WALKS[-1]:
            return None
        walk = next((w for w in WALKS if w >= 20 * limit), WALKS[-1])
        scan = tuple(p for p in predicates if p != "filter")
        if name == "read_tuples":
            return self.render("read_tuples_recent", where=predicates, scan=scan, walk=walk)
        return self.render("list_keys_recent", where=predicates, scan=scan, walk=walk)

    def capped(self, name: str, predicates: tuple[str, ...]) -> bytes | None:
        """The second phase of ``read_tuples`` or ``list_keys`` across threads with a limit: every
        match when there are fewer than 5,000, sorted; no rows when there are more (a CustomPlan).
        None within a thread."""
        if "thread" in predicates:
            return None
        if name == "read_tuples":
            return CustomPlan(self.render("read_tuples_capped", where=predicates))
        return CustomPlan(self.render("list_keys_capped", where=predicates))

    def get_tuple(self, predicates: tuple[str, ...]) -> bytes:
        """get_tuple's statement: by id, or the latest of the thread's namespace."""
        return self["get_tuple_id" if "id" in predicates else "get_tuple"]

    def names(self) -> set[str]:
        """Every named query (fragments excluded)."""
        return set(self._rendered) | set(self._templates)

    def slots(self, name: str) -> list[str]:
        """The slots statement ``name`` has, sorted (none for a statement without slots)."""
        template = self._templates.get(name)
        return sorted(set(_PLACEHOLDER_RE.findall(template))) if template else []

    def migration(self, mig: Migration) -> bytes:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) != "schema":
                raise KeyError(f"migration {mig.version}: unknown placeholder {m.group(0)}")
            return self.schema_sql

        return _PLACEHOLDER_RE.sub(sub, mig.text).encode()


@functools.cache
def queries_for(
    schema: str, *, citus: bool = False, lists: bool = True, deleted: bool = True
) -> Queries:
    return Queries(schema, citus=citus, lists=lists, deleted=deleted)
