-- 0007: get_tuple's work as a function, for connections that prepare nothing (behind a pooler).
-- additive: a new function only; code that knows 0001-0006 never calls it.
-- Unprepared, get_tuple's statement (queries.sql: get_tuple, get_tuple_id) is parsed, analysed and
-- planned at every call; a PL/pgSQL function's plans are cached by the server session whatever the
-- client prepares, so the saver sends a short call instead when the connection does not prepare.
-- Its two queries are those statements as of this migration, with the parameters as arguments
-- (p_id NULL: the latest checkpoint of the namespace), returning the same rows in the same order.
-- A later change to those statements needs a migration that replaces this function too:
-- tests/test_put_call.py compares both on the same threads.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_get_tuple(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    kind integer, a text, b text, type text, body bytea, task_path text, idx integer,
    channel_versions jsonb, metadata jsonb, metadata_exact bytea, thread_id text,
    checkpoint_ns text
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    IF p_id IS NULL THEN
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint,
        c.channel_versions, c.metadata, c.metadata_exact
            FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns
            ORDER BY c.checkpoint_id DESC
            LIMIT 1
        )
        SELECT 2 AS kind, c.checkpoint_id AS a, c.parent_checkpoint_id AS b, c.type, c.checkpoint AS body,
               NULL::text AS task_path, NULL::integer AS idx, c.channel_versions, c.metadata, c.metadata_exact,
               c.thread_id, c.checkpoint_ns
        FROM c
        UNION ALL
        SELECT 0, e.key, e.value, s.type, s.blob, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM c
        CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS e
        CROSS JOIN LATERAL (
            SELECT bl.type, bl.blob
            FROM {schema}.pgsaver_blobs AS bl
            WHERE bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
              AND bl.channel = e.key AND bl.version = e.value AND bl.type <> 'empty'
            OFFSET 0
        ) AS s
        UNION ALL
        SELECT 1, wr.task_id, wr.channel, wr.type, wr.blob, wr.task_path, wr.idx, NULL, NULL, NULL, NULL, NULL
        FROM c AS k
        CROSS JOIN LATERAL (
            SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
            FROM {schema}.pgsaver_writes AS w
            WHERE w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns
              AND w.checkpoint_id = k.checkpoint_id
            OFFSET 0
        ) AS wr
        ORDER BY kind, task_path, a, idx;
    ELSE
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint,
        c.channel_versions, c.metadata, c.metadata_exact
            FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns
              AND c.checkpoint_id = p_id
        )
        SELECT 2 AS kind, c.checkpoint_id AS a, c.parent_checkpoint_id AS b, c.type, c.checkpoint AS body,
               NULL::text AS task_path, NULL::integer AS idx, c.channel_versions, c.metadata, c.metadata_exact,
               c.thread_id, c.checkpoint_ns
        FROM c
        UNION ALL
        SELECT 0, e.key, e.value, s.type, s.blob, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM c
        CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS e
        CROSS JOIN LATERAL (
            SELECT bl.type, bl.blob
            FROM {schema}.pgsaver_blobs AS bl
            WHERE bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
              AND bl.channel = e.key AND bl.version = e.value AND bl.type <> 'empty'
            OFFSET 0
        ) AS s
        UNION ALL
        SELECT 1, wr.task_id, wr.channel, wr.type, wr.blob, wr.task_path, wr.idx, NULL, NULL, NULL, NULL, NULL
        FROM c AS k
        CROSS JOIN LATERAL (
            SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
            FROM {schema}.pgsaver_writes AS w
            WHERE w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns
              AND w.checkpoint_id = k.checkpoint_id
            OFFSET 0
        ) AS wr
        ORDER BY kind, task_path, a, idx;
    END IF;
END
$fn$;
