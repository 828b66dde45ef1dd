"""Moving history over from ``langgraph-checkpoint-postgres``: its tables (``checkpoints``,
``checkpoint_blobs``, ``checkpoint_writes``, in a schema of the same database) into ours. No I/O
here: a step generator the savers drive, and the statements it runs.

Blobs and writes are the same bytes in both (the same serializer's ``(type, bytes)``), so they are
copied in SQL. A checkpoint is JSON there and serialized here: the body (everything but its
channel values and versions) is serialized with the saver's serde, its inline values (the official
saver keeps strings and numbers in the checkpoint JSON) become blobs, its metadata goes through the
rules of ``_metadata``. Threads go in id order, ``thread_batch`` at a time, one transaction each,
under our per-thread locks; a row already here is left as it is (idempotent: an interrupted import
resumes by running again, or with ``start_after``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import sql

from . import _core, _metadata
from ._lifecycle import Report, Step, Steps, Stmt, _batch_size, _locked
from ._sql import Queries, queries_for


class Source:
    """The official saver's tables in ``schema``."""

    def __init__(self, schema: str) -> None:
        queries_for(schema)  # the schema= option's rule for the name
        self.schema = schema
        s = sql.Identifier(schema).as_string()
        self.tables = {
            n: f"{s}.{n}" for n in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        }

    def exists(self) -> Stmt:
        return Stmt(
            b"SELECT to_regclass(%(c)s) IS NOT NULL AND to_regclass(%(b)s) IS NOT NULL"
            b" AND to_regclass(%(w)s) IS NOT NULL",
            {
                "c": self.tables["checkpoints"],
                "b": self.tables["checkpoint_blobs"],
                "w": self.tables["checkpoint_writes"],
            },
        )

    def threads_after(self) -> bytes:
        c = self.tables["checkpoints"]
        return f"""
WITH RECURSIVE t AS (
    (SELECT thread_id FROM {c} WHERE thread_id > %(after)s ORDER BY thread_id LIMIT 1)
    UNION ALL
    SELECT (SELECT thread_id FROM {c} WHERE thread_id > t.thread_id ORDER BY thread_id LIMIT 1)
    FROM t WHERE t.thread_id IS NOT NULL
)
SELECT thread_id FROM t WHERE thread_id IS NOT NULL LIMIT %(limit)s
""".encode()

    def checkpoints(self) -> bytes:
        return f"""
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata
FROM {self.tables["checkpoints"]}
WHERE thread_id = ANY (%(thread_ids)s::text[])
ORDER BY thread_id, checkpoint_ns, checkpoint_id
""".encode()

    def counts(self) -> bytes:
        t = self.tables
        return f"""
SELECT (SELECT count(DISTINCT thread_id) FROM {t["checkpoints"]} WHERE thread_id = ANY (%(thread_ids)s::text[])),
       (SELECT count(*) FROM {t["checkpoints"]} WHERE thread_id = ANY (%(thread_ids)s::text[])),
       (SELECT count(*) FROM {t["checkpoint_writes"]} WHERE thread_id = ANY (%(thread_ids)s::text[])),
       (SELECT count(*) FROM {t["checkpoint_blobs"]} WHERE thread_id = ANY (%(thread_ids)s::text[]))
""".encode()

    def copy(self, q: Queries) -> bytes:
        """Blobs and writes copied in SQL, the converted checkpoints and inline values inserted."""
        t = self.tables
        s = q.schema_sql
        return f"""
WITH blobs AS (
    INSERT INTO {s}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.blob
    FROM {t["checkpoint_blobs"]} AS b
    WHERE b.thread_id = ANY (%(thread_ids)s::text[])
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING 1
), inline AS (
    INSERT INTO {s}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT * FROM unnest(%(i_threads)s::text[], %(i_nss)s::text[], %(i_channels)s::text[],
                         %(i_versions)s::text[], %(i_types)s::text[], %(i_blobs)s::bytea[])
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING 1
), writes AS (
    INSERT INTO {s}.pgsaver_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel,
           coalesce(w.type, 'empty'), w.blob, w.task_path
    FROM {t["checkpoint_writes"]} AS w
    WHERE w.thread_id = ANY (%(thread_ids)s::text[])
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    RETURNING 1
), checkpoints AS (
    INSERT INTO {s}.pgsaver_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
        channel_versions, metadata, metadata_exact
    )
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent, c.run_id, c.type, c.body,
           c.versions::jsonb, c.metadata::jsonb, c.exact
    FROM unnest(%(c_threads)s::text[], %(c_nss)s::text[], %(c_ids)s::text[],
                %(c_parents)s::text[], %(c_runs)s::text[], %(c_types)s::text[],
                %(c_bodies)s::bytea[], %(c_versions)s::text[], %(c_metadata)s::text[],
                %(c_exacts)s::bytea[])
        AS c(thread_id, checkpoint_ns, checkpoint_id, parent, run_id, type, body, versions,
             metadata, exact)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM writes),
       (SELECT count(*) FROM blobs) + (SELECT count(*) FROM inline)
""".encode()


def convert(serde: SerializerProtocol, rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The ``copy`` parameters of the official checkpoints ``rows``: each body serialized, its
    inline values as blobs, its metadata as we store it."""
    p: dict[str, list[Any]] = {
        k: []
        for k in [
            "i_threads",
            "i_nss",
            "i_channels",
            "i_versions",
            "i_types",
            "i_blobs",
            "c_threads",
            "c_nss",
            "c_ids",
            "c_parents",
            "c_runs",
            "c_types",
            "c_bodies",
            "c_versions",
            "c_metadata",
            "c_exacts",
        ]
    }
    for thread, ns, checkpoint_id, parent, checkpoint, metadata in rows:
        cp = dict(checkpoint if isinstance(checkpoint, dict) else json.loads(checkpoint))
        inline = cp.pop("channel_values", None) or {}
        versions = cp.pop("channel_versions", None) or {}
        for channel, value in inline.items():
            if channel not in versions:
                continue
            type_, data = _core.dump(serde, value, "the inline value of channel", channel)
            for key, v in (
                ("i_threads", thread),
                ("i_nss", ns),
                ("i_channels", channel),
                ("i_versions", _core.version_key(versions[channel])),
                ("i_types", type_),
                ("i_blobs", data),
            ):
                p[key].append(v)
        body_type, body = _core.dump(serde, cp, "the checkpoint body")
        meta = dict(metadata or {})
        text, lossy = _metadata.encode(meta)
        run_id = meta.get("run_id")
        for key, v in (
            ("c_threads", thread),
            ("c_nss", ns),
            ("c_ids", checkpoint_id),
            ("c_parents", parent),
            (
                "c_runs",
                str(run_id)
                if isinstance(run_id, (str, int)) and not isinstance(run_id, bool)
                else None,
            ),
            ("c_types", body_type),
            ("c_bodies", body),
            ("c_versions", json.dumps(versions)),
            ("c_metadata", text),
            ("c_exacts", _core.pack_typed(serde, meta) if lossy else None),
        ):
            p[key].append(v)
    return p


def import_official(
    q: Queries,
    serde: SerializerProtocol,
    *,
    source_schema: str,
    thread_batch: int,
    dry_run: bool,
    start_after: str,
    progress: Callable[[Report], None] | None,
) -> Steps:
    source = Source(source_schema)
    _batch_size(thread_batch)
    rows = yield Step((source.exists(),))
    if not rows or not rows[0][0]:
        from .errors import PgSaverError

        raise PgSaverError(
            f"no tables of langgraph-checkpoint-postgres (checkpoints, checkpoint_blobs, "
            f"checkpoint_writes) in schema {source_schema!r} of this database: pass "
            "source_schema= (the schema they are in)"
        )
    total = Report(dry_run=dry_run, last_thread_id=start_after or None)
    after = start_after
    while True:
        rows = yield Step((Stmt(source.threads_after(), {"after": after, "limit": thread_batch}),))
        ids = [r[0] for r in rows]
        if not ids:
            break
        if dry_run:
            rows = yield Step((Stmt(source.counts(), {"thread_ids": ids}),))
            threads, checkpoints, writes, blobs = rows[0]
            total.add(Report(int(threads), int(checkpoints), int(writes), int(blobs)))
        else:
            found = yield Step((Stmt(source.checkpoints(), {"thread_ids": ids}),))
            params = {"thread_ids": ids, **convert(serde, list(found))}
            rows = yield Step(_locked(q, ids, Stmt(source.copy(q), params)), 30.0)
            checkpoints, writes, blobs = rows[0]
            total.add(
                Report(
                    threads=len(ids),
                    checkpoints=int(checkpoints),
                    writes=int(writes),
                    blobs=int(blobs),
                    batches=1,
                )
            )
        after = ids[-1]
        total.last_thread_id = after
        if progress is not None:
            progress(Report(**{**total.as_dict()}))
        if len(ids) < thread_batch:
            break
    return total
