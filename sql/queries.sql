-- Named queries. "{schema}" is replaced by the saver's quoted schema; "{_name}" includes the fragment
-- "_name"; "{where}" is filled by the loader with fragments named "_w_*" (never with caller text).
-- Parameters are psycopg named placeholders.

-- name: put
-- Blobs for the channels whose version changed, and the checkpoint row, in one statement.
WITH new_blobs AS (
    INSERT INTO {schema}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, b.channel, b.version, b.type, b.blob
    FROM unnest(%(blob_channels)s::text[], %(blob_versions)s::text[], %(blob_types)s::text[],
                %(blob_values)s::bytea[]) AS b (channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
)
INSERT INTO {schema}.pgsaver_checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id,
    type, checkpoint, channel_versions, metadata, metadata_exact
) VALUES (
    %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s, %(run_id)s,
    %(type)s, %(checkpoint)s, %(channel_versions)s::jsonb, %(metadata)s::jsonb, %(metadata_exact)s
)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
    run_id = EXCLUDED.run_id,
    type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint,
    channel_versions = EXCLUDED.channel_versions,
    metadata = EXCLUDED.metadata,
    metadata_exact = EXCLUDED.metadata_exact

-- name: put_writes
-- Ordinary writes keep their first value (a retried task writes the same rows again); special
-- channels (negative idx) take the latest value.
INSERT INTO {schema}.pgsaver_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.blob
FROM unnest(%(idxs)s::integer[], %(channels)s::text[], %(types)s::text[],
            %(values)s::bytea[]) AS w (idx, channel, type, blob)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel,
    type = EXCLUDED.type,
    blob = EXCLUDED.blob,
    task_path = EXCLUDED.task_path
WHERE EXCLUDED.idx < 0

-- name: select_tuples
-- Checkpoints with their channel values and pending writes, newest first: get_tuple and list.
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint,
       c.channel_versions, c.metadata, c.metadata_exact,
       b.channels, b.types, b.blobs,
       w.task_ids, w.channels, w.types, w.blobs
FROM (
    SELECT * FROM {schema}.pgsaver_checkpoints AS c
    WHERE {where}
    ORDER BY c.checkpoint_id DESC
    LIMIT %(limit)s
) AS c
LEFT JOIN LATERAL (
    SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types, array_agg(bl.blob) AS blobs
    FROM jsonb_each_text(c.channel_versions) AS cv (channel, version)
    JOIN {schema}.pgsaver_blobs AS bl
      ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
     AND bl.channel = cv.channel AND bl.version = cv.version
    WHERE bl.type <> 'empty'
) AS b ON true
LEFT JOIN LATERAL (
    SELECT array_agg(wr.task_id ORDER BY wr.task_path, wr.task_id, wr.idx) AS task_ids,
           array_agg(wr.channel ORDER BY wr.task_path, wr.task_id, wr.idx) AS channels,
           array_agg(wr.type ORDER BY wr.task_path, wr.task_id, wr.idx) AS types,
           array_agg(wr.blob ORDER BY wr.task_path, wr.task_id, wr.idx) AS blobs
    FROM {schema}.pgsaver_writes AS wr
    WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
      AND wr.checkpoint_id = c.checkpoint_id
) AS w ON true
ORDER BY c.checkpoint_id DESC

-- name: _w_thread
c.thread_id = %(thread_id)s

-- name: _w_ns
c.checkpoint_ns = %(checkpoint_ns)s

-- name: _w_id
c.checkpoint_id = %(checkpoint_id)s

-- name: _w_before
c.checkpoint_id < %(before)s

-- name: _w_filter
c.metadata @> %(filter)s::jsonb

-- name: delete_thread
WITH deleted_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs WHERE thread_id = %(thread_id)s
), deleted_writes AS (
    DELETE FROM {schema}.pgsaver_writes WHERE thread_id = %(thread_id)s
)
DELETE FROM {schema}.pgsaver_checkpoints WHERE thread_id = %(thread_id)s

-- name: migrations_applied
SELECT version FROM {schema}.pgsaver_migrations ORDER BY version

-- name: migrations_lock
SELECT pg_advisory_xact_lock(%(key)s)

-- name: schema_exists
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s)

-- name: schema_create
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: migrations_bootstrap
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migrations_record
INSERT INTO {schema}.pgsaver_migrations (version, name) VALUES (%(version)s, %(name)s)
