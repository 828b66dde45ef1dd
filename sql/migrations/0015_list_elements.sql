-- 0015: lists stored as their elements (list_storage="elements"; codec/elements.py).
-- additive: a new table, new functions, and the functions that read values (0007/0011 as 0012
-- left them) and delete a thread (0014) replaced with the same signatures, result columns and
-- settings; code that knows 0001-0014 runs unchanged against it. Values written in the element
-- encoding (type 'pgsaver.list') can only be read by code that knows it: turn list_storage on once
-- every worker runs this release (docs/guide.md, "Lists stored as their elements").
-- pgsaver_elements holds a thread's parts (an element's msgpack bytes, or a frame's: several
-- elements' bytes one after the other), each once, keyed by the thread and the digest the list
-- values name. A list value's blob is b'L', the length h of its msgpack array header, the header,
-- then 16-byte keys (from byte 3 + h, counted from 1); a read returns h, the header, then each
-- part as stored after its 4-byte length, in key order, each part looked up by its primary key
-- (NULL when a part is missing), and the client decompresses the parts and joins them.
-- The client stores each part as a byte saying how, then its bytes (a zstd frame where that pays);
-- the server stores them as the values (0002: MAIN storage, in the row and out of line only when
-- the row does not fit a page; lz4 where the server has it, for the parts stored as they are).
-- Skipped on a table Citus has distributed already (this script run again), which refuses these
-- settings.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_elements (
    thread_id text COLLATE "C" NOT NULL,
    key       bytea NOT NULL,
    blob      bytea NOT NULL,
    PRIMARY KEY (thread_id, key)
);

DO $$
DECLARE
    distributed boolean := false;
    r record;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
            INTO distributed USING '{schema}.pgsaver_elements'::regclass;
    END IF;
    IF NOT distributed THEN
        ALTER TABLE {schema}.pgsaver_elements
            ALTER COLUMN thread_id SET STORAGE MAIN,
            ALTER COLUMN key SET STORAGE MAIN,
            ALTER COLUMN blob SET STORAGE MAIN;
        IF current_setting('server_version_num')::int >= 140000 THEN
            BEGIN
                EXECUTE 'ALTER TABLE {schema}.pgsaver_elements ALTER COLUMN blob SET COMPRESSION lz4';
            EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
                RAISE NOTICE 'lz4 is not available on this server: keeping the default compression';
            END;
        END IF;
    END IF;
    -- Whoever may read and write the values may read and write their parts: every statement that
    -- reads values names this table (a role granted pgsaver_blobs by name, before this migration,
    -- would otherwise fail every get_tuple after it; default privileges cover it already).
    FOR r IN
        SELECT a.grantee, a.privilege_type
        FROM pg_catalog.pg_class AS c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.oid = '{schema}.pgsaver_blobs'::regclass AND a.grantee <> c.relowner
          AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
    LOOP
        IF r.grantee = 0 THEN
            EXECUTE format('GRANT %s ON {schema}.pgsaver_elements TO PUBLIC', r.privilege_type);
        ELSE
            -- regrole's text is the role's name quoted where it needs it: %s, not %I
            EXECUTE format('GRANT %s ON {schema}.pgsaver_elements TO %s', r.privilege_type,
                           r.grantee::regrole::text);
        END IF;
    END LOOP;
END
$$;

-- put (as 0014's pgsaver_put) with the parts of its list values, sorted by key (two puts that
-- share parts insert them in one order, so neither waits for the other in a cycle); a part
-- stored already is kept.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_put(
    p_thread text, p_ns text, p_id text, p_parent text, p_run text, p_type text,
    p_checkpoint bytea, p_versions jsonb, p_metadata jsonb, p_metadata_exact bytea,
    p_channels text[], p_blob_versions text[], p_types text[], p_blobs bytea[], p_status text,
    p_part_keys bytea[], p_part_blobs bytea[]
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $fn$
BEGIN
    IF NOT {schema}.pgsaver_put(
        p_thread, p_ns, p_id, p_parent, p_run, p_type, p_checkpoint, p_versions, p_metadata,
        p_metadata_exact, p_channels, p_blob_versions, p_types, p_blobs, p_status
    ) THEN
        RETURN false;
    END IF;
    INSERT INTO {schema}.pgsaver_elements (thread_id, key, blob)
    SELECT p_thread, p.key, p.blob FROM unnest(p_part_keys, p_part_blobs) AS p (key, blob)
    ON CONFLICT (thread_id, key) DO NOTHING;
    RETURN true;
END
$fn$;

-- The parts of a thread that no stored value names any more, deleted: what the lifecycle jobs
-- run for each thread they deleted values of, in their own transaction (after their deletes,
-- under the thread's exclusive lock: no put adds a value meanwhile). Nothing to read for a thread
-- without parts. Returns how many went.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_gc_elements(p_thread text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    gone bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_elements AS e WHERE e.thread_id = p_thread) THEN
        RETURN 0;
    END IF;
    WITH live AS MATERIALIZED (
        SELECT DISTINCT substr(b.blob, r.i, 16) AS key
        FROM {schema}.pgsaver_blobs AS b
        CROSS JOIN LATERAL generate_series(
            3 + get_byte(b.blob, 1), octet_length(b.blob) - 15, 16) AS r (i)
        WHERE b.thread_id = p_thread AND b.type = 'pgsaver.list'
          AND r.i >= 0 AND r.i < 2147483647  -- an estimate (queries.sql, _list_value)
    ), dead AS (
        DELETE FROM {schema}.pgsaver_elements AS e
        WHERE e.thread_id = p_thread AND NOT EXISTS (SELECT 1 FROM live WHERE live.key = e.key)
        RETURNING 1
    )
    SELECT count(*) INTO gone FROM dead;
    RETURN gone;
END
$fn$;

-- delete_thread in one call (as 0014's), the thread's parts included.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_delete_thread(p_thread text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $fn$
BEGIN
    DELETE FROM {schema}.pgsaver_blobs AS b WHERE b.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_elements AS e WHERE e.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_writes AS w WHERE w.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_checkpoints AS c WHERE c.thread_id = p_thread;
    PERFORM {schema}.pgsaver_refresh_status(p_thread);
END
$fn$;

-- The functions that read values (0012's), each list value assembled from its parts as the
-- statements they mirror do (queries.sql: _list_value).
CREATE OR REPLACE FUNCTION {schema}.pgsaver_get_tuple(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    kind integer, a text, b text, type text, body bytea, task_path text, idx integer,
    channel_versions jsonb, metadata jsonb, metadata_exact bytea, thread_id text,
    checkpoint_ns text
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
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
            SELECT bl.type, CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 substr(bl.blob, 2, 1 + get_byte(bl.blob, 1)) || string_agg(int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(bl.blob, 1), length(bl.blob) - 15, 16) AS r (i)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = p_thread AND e.key = substr(bl.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END AS blob
            FROM {schema}.pgsaver_blobs AS bl
            WHERE bl.thread_id = p_thread AND bl.checkpoint_ns = c.checkpoint_ns
              AND bl.channel = e.key AND bl.version = e.value AND bl.type <> 'empty'
            OFFSET 0
        ) AS s
        UNION ALL
        SELECT 1, wr.task_id, wr.channel, wr.type, wr.blob, wr.task_path, wr.idx, NULL, NULL, NULL, NULL, NULL
        FROM c AS k
        CROSS JOIN LATERAL (
            SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
            FROM {schema}.pgsaver_writes AS w
            WHERE w.thread_id = p_thread AND w.checkpoint_ns = k.checkpoint_ns
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
            SELECT bl.type, CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 substr(bl.blob, 2, 1 + get_byte(bl.blob, 1)) || string_agg(int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(bl.blob, 1), length(bl.blob) - 15, 16) AS r (i)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = p_thread AND e.key = substr(bl.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END AS blob
            FROM {schema}.pgsaver_blobs AS bl
            WHERE bl.thread_id = p_thread AND bl.checkpoint_ns = c.checkpoint_ns
              AND bl.channel = e.key AND bl.version = e.value AND bl.type <> 'empty'
            OFFSET 0
        ) AS s
        UNION ALL
        SELECT 1, wr.task_id, wr.channel, wr.type, wr.blob, wr.task_path, wr.idx, NULL, NULL, NULL, NULL, NULL
        FROM c AS k
        CROSS JOIN LATERAL (
            SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
            FROM {schema}.pgsaver_writes AS w
            WHERE w.thread_id = p_thread AND w.checkpoint_ns = k.checkpoint_ns
              AND w.checkpoint_id = k.checkpoint_id
            OFFSET 0
        ) AS wr
        ORDER BY kind, task_path, a, idx;
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION {schema}.pgsaver_delta_history(
    p_thread text, p_ns text, p_id text, p_channels text[]
)
RETURNS TABLE (
    kind integer, depth integer, task_path text, task_id text, idx integer, channel text,
    type text, blob bytea, thread_id text, checkpoint_ns text, checkpoint_id text, version text
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_parent text;
BEGIN
    -- the target (STABLE: every statement here reads the snapshot of the call)
    IF p_id IS NULL THEN
        SELECT c.parent_checkpoint_id INTO v_parent
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns
        ORDER BY c.checkpoint_id DESC
        LIMIT 1;
    ELSE
        SELECT c.parent_checkpoint_id INTO v_parent
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    END IF;
    IF v_parent IS NULL THEN
        RETURN;  -- no such checkpoint, or one without a parent: no history
    END IF;
    RETURN QUERY
    WITH RECURSIVE walk AS (
        SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, x.channel_versions,
               0 AS depth, w.needing AS wanted,
               ARRAY(SELECT k FROM unnest(w.needing) AS k WHERE NOT (coalesce((
        SELECT b.type <> 'empty' FROM {schema}.pgsaver_blobs AS b
        WHERE b.thread_id = p_thread AND b.checkpoint_ns = x.checkpoint_ns
          AND b.channel = k AND b.version = x.channel_versions ->> k
    ), false))) COLLATE "C" AS remaining
        FROM (SELECT p_channels COLLATE "C" AS needing OFFSET 0) AS w
        JOIN {schema}.pgsaver_checkpoints AS x
          ON x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.checkpoint_id = v_parent
        UNION ALL
        SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, x.channel_versions,
               w.depth + 1, w.remaining,
               ARRAY(SELECT k FROM unnest(w.remaining) AS k WHERE NOT (coalesce((
        SELECT b.type <> 'empty' FROM {schema}.pgsaver_blobs AS b
        WHERE b.thread_id = p_thread AND b.checkpoint_ns = x.checkpoint_ns
          AND b.channel = k AND b.version = x.channel_versions ->> k
    ), false))) COLLATE "C"
        FROM walk AS w
        JOIN {schema}.pgsaver_checkpoints AS x
          ON x.thread_id = p_thread AND x.checkpoint_ns = w.checkpoint_ns
         AND x.checkpoint_id = w.parent_checkpoint_id
        WHERE cardinality(w.remaining) > 0
          AND w.depth < 10000000  -- a guard against a parent cycle in corrupted data
    )
    SELECT 0 AS kind, w.depth, wr.task_path, wr.task_id, wr.idx, wr.channel, wr.type, wr.blob,
           w.thread_id, w.checkpoint_ns, w.checkpoint_id, NULL::text AS version
    FROM walk AS w
    JOIN {schema}.pgsaver_writes AS wr
      ON wr.thread_id = p_thread AND wr.checkpoint_ns = w.checkpoint_ns AND wr.checkpoint_id = w.checkpoint_id
    WHERE wr.channel = ANY (w.wanted)
    UNION ALL
    SELECT 1 AS kind, w.depth, NULL, NULL, NULL, ch.name, s.type, s.blob,
           w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.channel_versions ->> ch.name
    FROM walk AS w
    CROSS JOIN LATERAL unnest(w.wanted) AS ch (name)
    CROSS JOIN LATERAL (
        SELECT bl.type, CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 substr(bl.blob, 2, 1 + get_byte(bl.blob, 1)) || string_agg(int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(bl.blob, 1), length(bl.blob) - 15, 16) AS r (i)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = p_thread AND e.key = substr(bl.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END AS blob
        FROM {schema}.pgsaver_blobs AS bl
        WHERE bl.thread_id = p_thread AND bl.checkpoint_ns = w.checkpoint_ns
          AND bl.channel = ch.name AND bl.version = w.channel_versions ->> ch.name AND bl.type <> 'empty'
          AND NOT (ch.name = ANY (w.remaining))  -- only channels whose walk stops here
        OFFSET 0
    ) AS s
    ORDER BY 1, 2 DESC, 3, 4, 5;
END
$fn$;
