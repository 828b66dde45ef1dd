-- Named queries ("-- name: x"), loaded by langgraph_pg_saver/db/sql.py. Placeholders, all "{name}":
--   {schema}  the saver's quoted schema;
--   {_name}   the fragment "_name", included in place (fragments start with "_");
--   {slot}    any other name: filled per call by Queries.render from named fragments, never from
--             caller text: {where} (the _w_* predicates AND-ed), {blob_rows} / {write_rows} (the
--             rows as arrays, or as a VALUES list of scalar rows).
-- A fragment that uses aliases or CTEs of the statement it is included in says so under "Expects".
-- Parameters are psycopg named placeholders; arrays and bytea use %(x)b (binary): arrays sent as
-- text are escaped literals that psycopg builds and Postgres parses.

-- name: _lock_class
-- First key of our per-thread advisory locks ("lgps"); the second is hashtext(thread_id). put and
-- put_writes hold the lock shared; lifecycle batches take it exclusively before they read, so they see
-- every write that was in flight and no write lands in the middle of a batch.
1818718323

-- name: _guard
-- The CTE guard: the thread's advisory lock held shared (put, put_writes), for the statement's
-- transaction. Expects the parameter thread_id. Filter on "(SELECT count(*) FROM guard) = 1" to read
-- only once the lock is held.
guard AS (
    SELECT pg_advisory_xact_lock_shared({_lock_class}, hashtext(%(thread_id)s))
)

-- name: _guard__citus
-- On Citus: the guard as part of a statement Citus runs whole on the thread's worker (the LIMIT 0
-- read of the thread's shard names it; a CTE reading no table would run on the coordinator, and
-- could not carry a void column there), so the lock is the one the lifecycle jobs take there.
guard AS (
    SELECT count(pg_advisory_xact_lock_shared({_lock_class}, hashtext(%(thread_id)s))::text) AS n
    FROM (SELECT 1) AS one
    LEFT JOIN (SELECT 1 FROM {schema}.pgsaver_checkpoints AS g
               WHERE g.thread_id = %(thread_id)s LIMIT 0) AS g ON true
)

-- name: put
-- Blobs for the channels whose version changed, and the checkpoint row, in one statement; a
-- checkpoint stored again (a retried put) takes the new row, blobs already stored are kept.
{_put_checked}, new_blobs AS (
    {_put_blobs}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
){parts}
{_put_row}
{_put_row_upsert}
RETURNING {_put_status}

-- name: put_new
-- put for the usual case: a new checkpoint whose blobs are new (versions carry a random part), in
-- autocommit. Plain INSERTs skip ON CONFLICT's speculative insertion; when a row exists after all,
-- the unique violation ends this statement's own transaction, nothing of it stays, and the driver
-- runs put instead.
{_put_checked}, new_blobs AS (
    {_put_blobs}
){parts}
{_put_row}
RETURNING {_put_status}

-- name: put_plain
-- put with the parent check inline (_put_checked_plain), for a schema without migration 0011's
-- pgsaver_parent_stored (a deployment whose code is newer than its last setup()) or a role that
-- may not execute it: the driver sends it, with put_new_plain, once the function cannot be called.
{_put_checked_plain}, new_blobs AS (
    {_put_blobs}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
){parts}
{_put_row}
{_put_row_upsert}
RETURNING 1

-- name: put_new_plain
-- put_new with the parent check inline (see put_plain).
{_put_checked_plain}, new_blobs AS (
    {_put_blobs}
){parts}
{_put_row}
RETURNING 1

-- name: put_call
-- put_new as a call of migration 0006's function (in migration 0014's form, with the status), for a connection that prepares nothing (behind a
-- pooler): this short statement is all that is parsed and planned per call; the function's own
-- statements are planned once per server session. Its one row is false when the parent is not
-- stored (the saver then tries put_orphan). A bare SELECT of the call, the shape Citus delegates
-- to the worker of the function's distribution argument (docs/scaling.md).
SELECT {schema}.pgsaver_put(
    %(thread_id)s::text, %(checkpoint_ns)s::text, %(checkpoint_id)s::text,
    %(parent_checkpoint_id)s::text, %(run_id)s::text, %(type)s::text, %(checkpoint)b::bytea,
    %(channel_versions)s::jsonb, %(metadata)s::jsonb, %(metadata_exact)b::bytea,
    %(blob_channels)b::text[], %(blob_versions)b::text[], %(blob_types)b::text[],
    %(blob_values)b::bytea[], %(status)s::text)

-- name: put_call_parts
-- put_call for a put with parts (list values stored as their elements): migration 0015's form of
-- pgsaver_put, which stores them too.
SELECT {schema}.pgsaver_put(
    %(thread_id)s::text, %(checkpoint_ns)s::text, %(checkpoint_id)s::text,
    %(parent_checkpoint_id)s::text, %(run_id)s::text, %(type)s::text, %(checkpoint)b::bytea,
    %(channel_versions)s::jsonb, %(metadata)s::jsonb, %(metadata_exact)b::bytea,
    %(blob_channels)b::text[], %(blob_versions)b::text[], %(blob_types)b::text[],
    %(blob_values)b::bytea[], %(status)s::text, %(part_keys)b::bytea[], %(part_blobs)b::bytea[])

-- name: put_orphan
-- put's second try, when put inserted nothing: its parent is not stored (never was: tests, tools and
-- imports put such checkpoints; or was deleted by a prune or delete, before or during the put). The
-- checkpoint goes in only if its state is whole without any ancestor: every channel it keeps
-- unchanged still has its stored value, none of them and none of its new ones a version without a
-- value (a DeltaChannel between snapshots, rebuilt from ancestors' writes). Those values are locked
-- FOR KEY SHARE (which skips a row deleted since the snapshot and holds off a deleter until this
-- commits). A parent that is there after all (stored meanwhile) is locked and used as by put.
-- Only this rare path pays the second statement; put itself stays as lean as it was.
WITH {_guard}, parent AS (
  SELECT 1 FROM {schema}.pgsaver_checkpoints p
  WHERE (SELECT count(*) FROM guard) = 1
    AND p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(checkpoint_ns)s
    AND p.checkpoint_id = %(parent_checkpoint_id)s
  FOR KEY SHARE OF p
), needed AS (
  SELECT e.key, e.value FROM jsonb_each_text(%(channel_versions)s::jsonb) e
  WHERE (SELECT count(*) FROM guard) = 1
    AND e.key NOT IN (SELECT b.channel FROM {blob_rows})
), kept AS (
  SELECT 1 FROM needed n
  CROSS JOIN LATERAL (
    SELECT 1 FROM {schema}.pgsaver_blobs bl
    WHERE bl.thread_id = %(thread_id)s AND bl.checkpoint_ns = %(checkpoint_ns)s
      AND bl.channel = n.key AND bl.version = n.value AND bl.type <> 'empty'
    FOR KEY SHARE OF bl
  ) x
), allowed AS (
  SELECT 1 FROM guard
  WHERE (EXISTS (SELECT 1 FROM parent)
     OR NOT EXISTS (SELECT 1 FROM {blob_rows} WHERE b.type = 'empty')
        AND (SELECT count(*) FROM needed) = (SELECT count(*) FROM kept) AND {_orphan_live})
    AND {claim}
), new_blobs AS (
    {_put_blobs}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
){parts}
{_put_row}
{_put_row_upsert}
RETURNING {_put_status}

-- name: _orphan_live
-- put_orphan's last condition: no record of migration 0018 says the thread was deleted after the
-- parent was stored (a run that started before the delete), read by pgsaver_deleted_at after the
-- lock, with its own snapshot. Nothing is stored then, and the saver raises ThreadDeletedError
-- (refuse_checkpoint).
{schema}.pgsaver_deleted_at(%(thread_id)s::text, %(parent_checkpoint_id)s::text) IS NULL

-- name: _orphan_live__citus
-- On Citus (no function reading distributed tables in a statement on a shard): the record read
-- in the statement.
NOT EXISTS (SELECT FROM {schema}.pgsaver_deleted_threads d WHERE d.thread_id = %(thread_id)s
 AND (d.last_checkpoint_id >= %(parent_checkpoint_id)s OR %(parent_checkpoint_id)s = ANY (d.refused)))

-- name: _orphan_live__nodeleted
true

-- name: _put_status
-- What put, put_new and put_orphan return for the row they stored (none when they stored none):
-- migration 0014's upkeep of the thread's status row (the stored row's columns, and the slot
-- {status} a constant: Citus could not type parameters here), given the status the saver read from the
-- checkpoint ('pending' when it schedules nodes, 'idle' when it schedules none, NULL for a
-- subgraph's namespace); true. The plain forms (put_plain, put_new_plain), for a schema or role
-- without the functions, leave the row alone.
{schema}.pgsaver_put_status(thread_id, checkpoint_ns, checkpoint_id, {status}::text)

-- name: _put_status__citus
-- On Citus: nothing (a function reading distributed tables cannot run inside a statement on a
-- shard). The puts that keep the status row there are the calls of pgsaver_put, which Citus
-- delegates whole to the thread's worker, and a guarded put (single_writer=True), which the
-- saver follows with put_status_mark; not an upsert after a unique violation (a retried put of
-- the same checkpoint) nor a put on a connection that prepares (the caller's own).
-- (The slot stays, so that the statement is rendered as on one server.)
{status}::text IS NULL OR true

-- name: _put_checked
-- Mirrored by migration 0006's pgsaver_put (put_call): a change here needs a migration replacing it.
-- The head of put's WITH list (the statement continues with ", name AS (...)"). Defines the CTEs
-- guard (the thread's shared advisory lock) and allowed: one row if the parent still exists (or
-- there is none). Expects the parameters thread_id, checkpoint_ns, parent_checkpoint_id. The slot
-- {claim} is "true", or, for a guarded put (single_writer=True), _claim: the call of migration
-- 0004's pgsaver_claim_head, which raises unless the parent is its namespace's newest checkpoint.
-- A parent that is not there makes put insert nothing; the saver then tries put_orphan, which stores
-- the checkpoint only if its state is whole without its ancestors (or raises).
--
-- The parent is read by migration 0011's pgsaver_parent_stored, filtering guard's row: so after the
-- lock is held (a VOLATILE function is never a one-time filter evaluated before the scan), with a
-- snapshot of its own, taken after that wait. It reads the parent's raw xmax: a deleter, committed
-- or not, leaves its id there, and the lifecycle deleters hold this lock exclusively, so none can
-- start until this statement commits. An xmax of 0 therefore proves the parent is still there. Any
-- other xmax (a delete, an update, an earlier row lock) takes the slow path: FOR KEY SHARE, which
-- waits for a deleter still running and rechecks the latest row version. Locking only then saves a
-- page write and a WAL record per put. A function rather than a CTE, because its plan is made under
-- its own enable_seqscan = off: the CTE's lookup, in the generic plan a prepared put_new keeps from
-- its sixth call, was a sequential scan whenever that call came while the table was small (after an
-- ANALYZE of the empty tables), and stayed one as the table grew. delete_thread (migration 0016's
-- function) takes the lock exclusively too, so it deletes this checkpoint after it commits; its
-- statement form (a schema before 0016, or a role that may not execute the function) takes none,
-- and one that starts after this read deletes the parent and leaves this checkpoint
-- (docs/guide.md "Retention", Limits).
WITH {_guard}, allowed AS (
    SELECT 1 AS ok FROM guard
    WHERE {schema}.pgsaver_parent_stored(
              %(thread_id)s::text, %(checkpoint_ns)s::text, %(parent_checkpoint_id)s::text)
      AND {claim}
)

-- name: _put_checked_plain
-- _put_checked with the parent read in the statement, as before migration 0011: "seen" reads the
-- parent after the lock (the one-time filter on guard runs first) with the statement's snapshot,
-- which is older than the wait, and keeps its raw xmax, with the same proof as pgsaver_parent_stored;
-- "locked" is its slow path. Its plan is the statement's: after statistics of empty tables, a
-- prepared put_new_plain may scan the checkpoints (docs/performance.md, "Statistics of empty
-- tables"); only a schema or role without the function runs it.
WITH {_guard}, seen AS (
    SELECT p.xmax = '0'::xid AS untouched FROM {schema}.pgsaver_checkpoints AS p
    WHERE (SELECT count(*) FROM guard) = 1
      AND p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(checkpoint_ns)s
      AND p.checkpoint_id = %(parent_checkpoint_id)s
), locked AS (
    SELECT 1 FROM {schema}.pgsaver_checkpoints AS p
    WHERE EXISTS (SELECT 1 FROM seen WHERE NOT seen.untouched)
      AND p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(checkpoint_ns)s
      AND p.checkpoint_id = %(parent_checkpoint_id)s
    FOR KEY SHARE OF p
), allowed AS (
    SELECT 1 AS ok FROM guard
    WHERE (%(parent_checkpoint_id)s::text IS NULL
       OR EXISTS (SELECT 1 FROM seen WHERE seen.untouched)
       OR EXISTS (SELECT 1 FROM locked))
      AND {claim}
)

-- name: _put_parts
-- The {parts} slot of a put whose list values are stored as their elements (codec/elements.py):
-- the parts they name, as arrays sorted by key (two puts that share parts insert them in one
-- order); a part stored already is kept. Another CTE of put's WITH list; without parts, empty.
, new_parts AS (
    INSERT INTO {schema}.pgsaver_elements (thread_id, key, blob)
    SELECT %(thread_id)s, p.key, p.blob
    FROM allowed, unnest(%(part_keys)b::bytea[], %(part_blobs)b::bytea[]) AS p (key, blob)
    ON CONFLICT (thread_id, key) DO NOTHING
)

-- name: _claim
{schema}.pgsaver_claim_head(%(thread_id)s, %(checkpoint_ns)s, %(parent_checkpoint_id)s,
                            %(checkpoint_id)s)

-- name: _put_blobs
-- Expects the CTE allowed (_put_checked). The slot {blob_rows} is the row source b (channel, version,
-- type, blob): up to checkpoint/writing.VALUES_MAX_ROWS values travel as scalar parameters of a VALUES list
-- (_blob_values of _blob_row, {i} the row's position; one statement per count), which psycopg dumps
-- in C; more, or none, travel as arrays (_blob_arrays).
INSERT INTO {schema}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, b.channel, b.version, b.type, b.blob
    FROM allowed, {blob_rows}

-- name: _blob_arrays
unnest(%(blob_channels)b::text[], %(blob_versions)b::text[], %(blob_types)b::text[],
       %(blob_values)b::bytea[]) AS b (channel, version, type, blob)

-- name: _blob_values
(VALUES {rows}) AS b (channel, version, type, blob)

-- name: _blob_row
(%(bc{i})s::text, %(bv{i})s::text, %(bt{i})s::text, %(bb{i})b::bytea)

-- name: _put_row_upsert
-- A checkpoint stored again (a retried put) takes the new row.
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
    run_id = EXCLUDED.run_id,
    type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint,
    channel_versions = EXCLUDED.channel_versions,
    metadata = EXCLUDED.metadata,
    metadata_exact = EXCLUDED.metadata_exact

-- name: _put_row
-- Expects the CTE allowed (_put_checked).
INSERT INTO {schema}.pgsaver_checkpoints (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id,
    type, checkpoint, channel_versions, metadata, metadata_exact
)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(parent_checkpoint_id)s, %(run_id)s,
       %(type)s, %(checkpoint)b, %(channel_versions)s::jsonb, %(metadata)s::jsonb, %(metadata_exact)b
FROM allowed

-- name: put_writes
-- Ordinary writes keep their first value (a retried task writes the same rows again); special
-- channels (negative idx) take the latest value. A row another run wrote (a resume answering the
-- next interrupt of a task) is replaced: the earlier run id goes onto replaced_run_ids, so that
-- delete_for_runs knows deleting this run cannot bring the earlier row back.
{_writes_insert}
{_writes_upsert}

-- name: put_writes_new
-- put_writes for the usual case: ordinary writes (no special channel) of a task that has not
-- written yet, in autocommit. A plain INSERT skips ON CONFLICT's speculative insertion; in the rare
-- case that a row exists (a retried call), the unique violation ends this statement's own
-- transaction and the driver runs put_writes instead, which keeps the first values, as it would
-- have.
{_writes_insert}

-- name: put_writes_plain
-- put_writes calling none of our functions, for a role that may not execute migration 0018's
-- pgsaver_check_deleted (or a schema without it): the record of deletes read in the statement
-- (_writes_live_plain).
{_writes_insert_plain}
{_writes_upsert}

-- name: put_writes_new_plain
-- put_writes_new calling none of our functions (see put_writes_plain).
{_writes_insert_plain}

-- name: _writes_upsert
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel,
    type = EXCLUDED.type,
    blob = EXCLUDED.blob,
    task_path = EXCLUDED.task_path,
    run_id = EXCLUDED.run_id,
    replaced_run_ids = CASE
        WHEN {schema}.pgsaver_writes.run_id IS NOT DISTINCT FROM EXCLUDED.run_id
            THEN {schema}.pgsaver_writes.replaced_run_ids
        ELSE array_append({schema}.pgsaver_writes.replaced_run_ids, {schema}.pgsaver_writes.run_id)
    END
WHERE EXCLUDED.idx < 0

-- name: put_writes_call
-- put_writes as a call of migration 0013's function, for a connection that prepares nothing
-- (behind a pooler; on Citus, which delegates the call to the thread's worker, where the lock
-- it takes is the one the lifecycle jobs take there). The writes as arrays, whatever their
-- number; the same rows as put_writes and put_writes_new store.
SELECT {schema}.pgsaver_put_writes(
    %(thread_id)s::text, %(checkpoint_ns)s::text, %(checkpoint_id)s::text, %(task_id)s::text,
    %(task_path)s::text, %(run_id)s::text, %(idxs)b::integer[], %(channels)b::text[],
    %(types)b::text[], %(values)b::bytea[])

-- name: _writes_insert
-- run_id: the run of the call's config (checkpoint/keys.run_id_of), as put stores it for checkpoints.
WITH {_guard}, {_writes_live}
{_writes_rows}

-- name: _writes_insert_plain
WITH {_guard}, {_writes_live_plain}
{_writes_rows}

-- name: _writes_rows
-- Expects the CTE live (one row, or none when the writes may not go in).
INSERT INTO {schema}.pgsaver_writes (
    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob, run_id
)
SELECT %(thread_id)s, %(checkpoint_ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
       w.idx, w.channel, w.type, w.blob, %(run_id)s::text
FROM live, {write_rows}

-- name: _writes_live
-- put_writes' CTE live: guard's row once migration 0018's pgsaver_check_deleted let the writes in
-- (it raises LGD01 for a checkpoint of a deleted thread, docs/guide.md "Deleting a thread while a
-- run goes on"). Filtering guard's row, it runs after the lock is held, with its own snapshot.
live AS (
    SELECT 1 FROM guard
    WHERE {schema}.pgsaver_check_deleted(
              %(thread_id)s::text, %(checkpoint_ns)s::text, %(checkpoint_id)s::text)
)

-- name: _writes_live__citus
-- On Citus (no function reading distributed tables can run in a statement on a shard) the writes
-- go through migration 0018's pgsaver_put_writes, which Citus runs on the thread's worker and
-- which raises; this statement runs only where that function cannot be called: the check in it.
{_writes_live_plain}

-- name: _writes_live_plain
-- _writes_live without the function: no row when a record of migration 0018 covers the
-- checkpoint and it is not stored, so the late writes are dropped without an error. Read with
-- the statement's snapshot (taken before the lock: a delete that commits while the write waits
-- is not seen).
live AS (
    SELECT 1 FROM guard
    WHERE NOT EXISTS (
        SELECT FROM {schema}.pgsaver_deleted_threads AS d
        WHERE d.thread_id = %(thread_id)s
          AND (d.last_checkpoint_id >= %(checkpoint_id)s OR %(checkpoint_id)s = ANY (d.refused))
          AND NOT EXISTS (
              SELECT FROM {schema}.pgsaver_checkpoints AS c
              WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s
                AND c.checkpoint_id = %(checkpoint_id)s))
)

-- name: _writes_live__nodeleted
-- Without migration 0018 (this release before its setup()): no record to check.
live AS (SELECT 1 FROM guard)

-- name: _writes_live_plain__nodeleted
live AS (SELECT 1 FROM guard)

-- name: _write_arrays
-- The writes as arrays, for any number and special channels (their own idx); up to
-- checkpoint/writing.VALUES_MAX_ROWS ordinary writes (idx = position) travel as a VALUES list instead
-- (_write_values of _write_row), as the channel values of put do.
unnest(%(idxs)b::integer[], %(channels)b::text[], %(types)b::text[],
       %(values)b::bytea[]) AS w (idx, channel, type, blob)

-- name: _write_values
(VALUES {rows}) AS w (idx, channel, type, blob)

-- name: _write_row
({i}, %(wc{i})s::text, %(wt{i})s::text, %(wb{i})b::bytea)

-- name: lock_threads
-- Exclusive per-thread locks for one lifecycle batch, always taken in the same order (no deadlocks
-- between two jobs); waits for in-flight put/put_writes on these threads to commit.
SELECT count(pg_advisory_xact_lock({_lock_class}, h))
FROM (SELECT DISTINCT hashtext(t) AS h FROM unnest(%(thread_ids)b::text[]) AS t ORDER BY 1) AS k

-- name: citus_lock_thread
-- On Citus, lock_threads for one thread, %(thread_id)s, exclusive (%(exclusive)s) or shared: a
-- router statement (the LIMIT 0 read of the thread's shard names the thread's worker, reading
-- nothing) that takes the lock on that worker, where the puts and put_writes of the thread take
-- theirs (their calls run there). Held until the lifecycle job's transaction ends. The jobs lock
-- their threads one statement each, in thread id order: two jobs never wait for each other in a
-- circle.
SELECT count(CASE WHEN %(exclusive)s::boolean
                  THEN pg_advisory_xact_lock({_lock_class}, hashtext(%(thread_id)s::text))::text
                  ELSE pg_advisory_xact_lock_shared({_lock_class}, hashtext(%(thread_id)s::text))::text
             END)
FROM (SELECT 1) AS one
LEFT JOIN (SELECT 1 FROM {schema}.pgsaver_checkpoints AS c
           WHERE c.thread_id = %(thread_id)s LIMIT 0) AS t ON true

-- name: lock_copy
-- copy_thread's first statement: the target's lock exclusive (puts to it and other copies into it
-- wait), the source's shared (its puts go on; a prune, retention or delete_for_runs of it waits
-- for the copy, whose batches read the source with snapshots of their own), in lock_threads'
-- order (by hash), so that copies and lifecycle jobs never deadlock.
SELECT count(pg_advisory_xact_lock({_lock_class}, k.h)) FILTER (WHERE k.exclusive),
       count(pg_advisory_xact_lock_shared({_lock_class}, k.h)) FILTER (WHERE NOT k.exclusive)
FROM (SELECT hashtext(%(target)s) AS h, true AS exclusive
      UNION ALL
      SELECT hashtext(%(source)s), false
      ORDER BY 1, 2 DESC) AS k

-- name: _runs_threads
-- The threads holding rows of the given runs: their checkpoints, and their writes to special
-- channels (a run that resumed an interrupt and stopped at the next one stored nothing else), both
-- found by index (pgsaver_checkpoints_run_id_idx, pgsaver_writes_run_id_idx).
SELECT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
WHERE c.run_id = ANY (%(run_ids)b::text[])
UNION
SELECT w.thread_id FROM {schema}.pgsaver_writes AS w
WHERE w.run_id = ANY (%(run_ids)b::text[]) AND w.idx < 0

-- name: lock_threads_of_runs
-- delete_for_runs' first statement: the threads of the runs (_runs_threads), locked exclusively in
-- the order of lock_threads; returns them, sorted. The delete that follows in the transaction works
-- on these threads only: a thread a run wrote to after this statement read is left alone.
WITH t AS MATERIALIZED (
    {_runs_threads}
), locked AS (
    SELECT count(pg_advisory_xact_lock({_lock_class}, h)) AS n
    FROM (SELECT DISTINCT hashtext(thread_id) AS h FROM t ORDER BY 1) AS k
)
SELECT ARRAY(SELECT thread_id FROM t ORDER BY 1) FROM locked

-- name: runs_threads
-- delete_for_runs(dry_run=True)'s first statement: the threads of the runs, sorted, not locked.
SELECT ARRAY(SELECT thread_id FROM ({_runs_threads}) AS t ORDER BY 1)

-- name: get_tuple
-- The latest checkpoint of a thread's namespace, with its values and pending writes (_tuple_rows).
-- The keys are compared plainly, not hidden from the planner as list()'s are: a LIMIT 1 on the
-- primary key costs the same in a custom and a generic plan, so there is no replanning to prevent.
-- Mirrored by pgsaver_get_tuple (migration 0007, replaced by 0012): a change here (or in
-- _tuple_rows) needs a migration replacing it.
WITH c AS MATERIALIZED (
    SELECT {_tuple_columns}
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s
    ORDER BY c.checkpoint_id DESC
    LIMIT 1
)
{_tuple_rows}

-- name: get_tuple_id
-- get_tuple for one checkpoint id.
WITH c AS MATERIALIZED (
    SELECT {_tuple_columns}
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(checkpoint_ns)s
      AND c.checkpoint_id = %(checkpoint_id)s
)
{_tuple_rows}

-- name: get_tuple_call
-- get_tuple and get_tuple_id as a call of migration 0007's function (as 0012 replaced it), for a
-- connection that prepares nothing (behind a pooler); checkpoint_id NULL: the latest. The same
-- rows, in the same order.
SELECT * FROM {schema}.pgsaver_get_tuple(
    %(thread_id)s::text, %(checkpoint_ns)s::text, %(checkpoint_id)s::text)

-- name: _list_value
-- Expects bl (a pgsaver_blobs row). Its value as a read returns it: the blob, or for a list stored
-- as its elements (type 'pgsaver.list', codec/elements.py) what the client assembles the list
-- from (compress.assembled): h, then the msgpack array header the blob holds (h bytes from its
-- third), then each part its 16-byte keys name (r.i: where each key starts) as stored, after its
-- 4-byte length, in order, each looked up by the
-- primary key (LATERAL ... OFFSET 0: never a hash of the thread's parts); NULL when a part is
-- missing, which the read refuses (CorruptValueError). The same expression is in migration 0016's
-- functions. The planner takes generate_series for 1,000 rows, and the statement's cost above
-- jit_above_cost (get_tuple then spent 300 ms compiling): the always-true range on r.i is taken
-- as a 1-in-200 filter. The parts are concatenated in the order the join yields them, the keys'
-- order: its outer side is the series (a LATERAL lookup can only be a nested loop), which yields
-- in order; an ORDER BY in the aggregate sorted the parts' bytes and doubled its time. The header
-- goes in with the first part (r.i at the first key): put in front of the aggregate's result, it
-- cost one more copy of the whole list (0.5 ms at 350 kB).
CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 string_agg(CASE n WHEN 1 THEN substr(bl.blob, 2, i - 2) ELSE '' END || int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(bl.blob, 1), length(bl.blob) - 15, 16) WITH ORDINALITY AS r (i, n)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = bl.thread_id AND e.key = substr(bl.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END

-- name: _list_value_thread
-- _list_value in a statement that reads the one thread %(thread_id)s: the parts' thread compared
-- with the parameter (so that Citus sees every table reference read one thread; the functions of
-- migration 0015 hold this form).
CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 string_agg(CASE n WHEN 1 THEN substr(bl.blob, 2, i - 2) ELSE '' END || int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(bl.blob, 1), length(bl.blob) - 15, 16) WITH ORDINALITY AS r (i, n)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = %(thread_id)s AND e.key = substr(bl.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END

-- name: _list_value__nolists
-- A schema without migration 0015 (this release's code before its setup()): no parts to read,
-- and none stored (the savers then store lists whole). A list value another process stored as
-- its elements reads as NULL, which the read refuses (CorruptValueError) rather than misread.
CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob END

-- name: _list_value_thread__nolists
CASE WHEN bl.type <> 'pgsaver.list' THEN bl.blob END

-- name: _tuple_columns
-- Expects c (a pgsaver_checkpoints row).
c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint,
c.channel_versions, c.metadata, c.metadata_exact

-- name: _tuple_rows
-- Expects the CTE c (_tuple_columns of the one checkpoint to read, of thread %(thread_id)s). Its
-- values and pending writes:
-- read_tuples does the same for many checkpoints; for one, there is no value shared between
-- checkpoints to fold (no DISTINCT), only a few rows to sort, and no thread or namespace to repeat
-- on every row. Values and writes are looked up by primary key through LATERAL ... OFFSET 0, so no
-- statistics can turn a lookup into a hash of the thread's values. Each lookup compares the
-- thread with the parameter rather than with c's (the same value): a sharded deployment (Citus,
-- distributed by thread_id) then sees that every table reference reads one thread. Rows:
--   kind 0: channel, version, type, value (the channel's value at this checkpoint's version);
--   kind 1: task id, channel, type, value, task path, idx (a pending write, in writes_sort_key order);
--   kind 2: checkpoint id, parent id, type, body, channel_versions, metadata, metadata_exact, thread,
--           namespace.
SELECT 2 AS kind, c.checkpoint_id AS a, c.parent_checkpoint_id AS b, c.type, c.checkpoint AS body,
       NULL::text AS task_path, NULL::integer AS idx, c.channel_versions, c.metadata, c.metadata_exact,
       c.thread_id, c.checkpoint_ns
FROM c
UNION ALL
SELECT 0, e.key, e.value, s.type, s.blob, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM c
CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS e
CROSS JOIN LATERAL (
    SELECT bl.type, {_list_value_thread} AS blob
    FROM {schema}.pgsaver_blobs AS bl
    WHERE bl.thread_id = %(thread_id)s AND bl.checkpoint_ns = c.checkpoint_ns
      AND bl.channel = e.key AND bl.version = e.value AND bl.type <> 'empty'
    OFFSET 0
) AS s
UNION ALL
SELECT 1, wr.task_id, wr.channel, wr.type, wr.blob, wr.task_path, wr.idx, NULL, NULL, NULL, NULL, NULL
FROM c AS k
CROSS JOIN LATERAL (
    -- _writes_of_k, of the thread %(thread_id)s
    SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = k.checkpoint_ns
      AND w.checkpoint_id = k.checkpoint_id
    OFFSET 0
) AS wr
-- writes in writes_sort_key order, compared as in read_tuples (the columns are COLLATE "C": byte
-- order in the database's encoding); a sort of a dozen rows
ORDER BY kind, task_path, a, idx

-- name: read_tuples
-- list: the checkpoints chosen by {where}, newest first, as rows of three kinds, so that
-- psycopg parses plain columns (C loaders) rather than arrays of bytea (several times slower):
--   kind 0: a channel value (thread, namespace, channel, version, type, blob), once however many of the
--           chosen checkpoints share it (a step changes a few channels);
--   kind 1: a pending write (thread, namespace, checkpoint, task, type, blob, channel), in writes_sort_key
--           order within its checkpoint;
--   kind 2: a checkpoint; the client finds its values by channel and version_key(version), which is
--           the text Postgres prints for the version (jsonb_each_text in cv), so they match exactly.
-- The keys are chosen first (narrow rows to sort); then every value and write is fetched through its
-- primary key, one correlated lookup per key (LATERAL ... OFFSET 0 cannot become a hash join), so the
-- plan stays the same whatever the statistics say: a generic plan once estimated 126 chosen keys for
-- a filter and hashed the whole writes table on every list() call. The order is list()'s: id
-- descending, then thread and namespace (within one namespace no more than the primary key's
-- backward walk), a total order, so that a page can start after the last key of the one before.
WITH k AS MATERIALIZED (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {where}
    ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns
    LIMIT (SELECT %(limit)s::bigint)
), {_read_body_thread}

-- name: read_tuples_recent
-- list() across threads with a limit (list(None, filter=..., limit=n)), first phase: the newest
-- checkpoints (the {scan} predicates: before) walked newest first on migration 0008's
-- pgsaver_checkpoints_id_idx, {walk} of them (200, 1,000 or 5,000: at least 20 × n where it can;
-- _sql.WALKS says why a constant), and the first n
-- that pass the filter. When n pass, they are the answer (no match is newer than the walk's last
-- row): a filter the newest checkpoints mostly match ends after about n / its density rows, however
-- large the table, and whatever the statistics say of the filter. A plain prepared statement: the
-- walk is the only plan. When fewer pass, the saver runs read_tuples_capped instead.
WITH k AS MATERIALIZED (
    SELECT r.thread_id, r.checkpoint_ns, r.checkpoint_id FROM ({_recent}) AS r
), {_read_body}

-- name: list_keys_recent
-- list_keys across threads with a limit, first phase (as read_tuples_recent).
{_recent}

-- name: _recent
-- The first phase's walk (read_tuples_recent): the keys and metadata of the first n of the newest
-- checkpoints that pass {where}.
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
FROM (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {scan}
    ORDER BY c.checkpoint_id DESC
    LIMIT {walk}
) AS c
WHERE {where}
-- list()'s total order (ids that tie, as copies of a thread have them, by thread and namespace)
ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns
LIMIT (SELECT %(limit)s::bigint)

-- name: _recent__citus
-- On Citus: _recent with its limit plain (Citus takes no subquery in a LIMIT across shards).
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
FROM (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {scan}
    ORDER BY c.checkpoint_id DESC
    LIMIT {walk}
) AS c
WHERE {where}
-- list()'s total order (ids that tie, as copies of a thread have them, by thread and namespace)
ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns
LIMIT %(limit)s::bigint

-- name: read_tuples_capped
-- list() across threads with a limit, second phase, after a first whose walk found fewer than the
-- limit: every match when there are fewer than 5,000 (the planner finds them as it thinks cheapest
-- for a filter of that many: the GIN index for a selective one, a scan that stops at the cap for a
-- common one), sorted, the newest n read; nothing when there are 5,000 or more (the saver then runs
-- read_tuples_global). However old the matches are, fewer than 5,000 of them cost their own number,
-- not the walk down to them past newer checkpoints that do not match. Sent unprepared (CustomPlan).
WITH m AS MATERIALIZED (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {where}
    LIMIT 5000
), k AS MATERIALIZED (
    SELECT m.thread_id, m.checkpoint_ns, m.checkpoint_id FROM m
    WHERE (SELECT count(*) FROM m) < 5000
    ORDER BY m.checkpoint_id DESC, m.thread_id, m.checkpoint_ns
    LIMIT %(limit)s::bigint
), {_read_body}

-- name: list_keys_capped
-- list_keys across threads with a limit, second phase, as read_tuples_capped.
WITH m AS MATERIALIZED (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {where}
    LIMIT 5000
)
SELECT m.thread_id, m.checkpoint_ns, m.checkpoint_id, m.metadata, m.metadata_exact FROM m
WHERE (SELECT count(*) FROM m) < 5000
ORDER BY m.checkpoint_id DESC, m.thread_id, m.checkpoint_ns
LIMIT %(limit)s::bigint

-- name: read_tuples_global
-- list() across threads, third phase (or the only one, without a limit): read_tuples over the whole
-- table with the filter and the limit visible to the planner, sent unprepared (a custom plan at
-- every call: the driver's CustomPlan), so the plan fits the filter at hand: where the statistics
-- say its matches are dense, a walk of pgsaver_checkpoints_id_idx newest first that stops at the
-- limit; where they are sparse, the GIN index and a sort of the matches. (The planner cannot know
-- that a filter's matches are all older than the newest rows, which the first phase found: a dense
-- filter then walks down to them.) Planning costs a millisecond or two; a plan kept from another
-- filter could cost the whole table. Ordered as read_tuples (ids that tie, as copies of a thread
-- keep them, by thread and namespace).
WITH k AS MATERIALIZED (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {where}
    ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns
    LIMIT %(limit)s::bigint
), {_read_body}

-- name: list_keys_global
-- list_keys across threads, third phase, planned as read_tuples_global is.
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
FROM {schema}.pgsaver_checkpoints AS c
WHERE {where}
ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns
LIMIT %(limit)s::bigint

-- name: list_keys
-- The first step of list() for a filter its prefilter cannot select exactly (a None, a bool, a
-- list or dict value): the keys and metadata of the candidates, newest first, for the saver to
-- check; read_tuples_keys then reads the checkpoints that match. In read_tuples' order.
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.metadata, c.metadata_exact
FROM {schema}.pgsaver_checkpoints AS c
WHERE {where}
ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns
LIMIT (SELECT %(limit)s::bigint)

-- name: read_tuples_keys
-- read_tuples for checkpoints given by key (list_keys's matches).
WITH k AS MATERIALIZED (
    SELECT k.thread_id COLLATE "C" AS thread_id, k.checkpoint_ns COLLATE "C" AS checkpoint_ns,
           k.checkpoint_id COLLATE "C" AS checkpoint_id
    FROM unnest(%(thread_ids)b::text[], %(checkpoint_nss)b::text[], %(checkpoint_ids)b::text[])
        AS k(thread_id, checkpoint_ns, checkpoint_id)
), {_read_body}

-- name: read_tuples_keys__citus
-- On Citus: the checkpoints given by key of one thread, %(thread_id)s (the saver groups the keys
-- by thread: a statement per thread, each run on its worker).
WITH k AS MATERIALIZED (
    SELECT %(thread_id)s::text COLLATE "C" AS thread_id,
           k.checkpoint_ns COLLATE "C" AS checkpoint_ns, k.checkpoint_id COLLATE "C" AS checkpoint_id
    FROM unnest(%(checkpoint_nss)b::text[], %(checkpoint_ids)b::text[])
        AS k(checkpoint_ns, checkpoint_id)
), {_read_body_thread}

-- name: read_tuples_per_ns
-- read_tuples for a thread without a namespace: the newest checkpoints of each of the thread's
-- namespaces (found by skipping through the primary key: a few index probes) merged, so a long thread
-- is not read and sorted whole to return its newest few. {cap}: how many it reads, a constant
-- (db/sql.LIST_CAPS: the smallest at least the limit; the saver keeps the limit's first): with a
-- hidden limit, the planner took a tenth of each namespace's rows for a hundred namespaces (a
-- recursive CTE's guess) and costed list(limit=3) of a 50,000-checkpoint thread past
-- jit_above_cost: 0.3 s of JIT compilation for a millisecond of work.
WITH RECURSIVE ns AS (
    (SELECT c.checkpoint_ns FROM {schema}.pgsaver_checkpoints AS c
     WHERE c.thread_id = (SELECT %(thread_id)s::text) ORDER BY c.checkpoint_ns LIMIT 1)
    UNION ALL
    SELECT (SELECT c.checkpoint_ns FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id = (SELECT %(thread_id)s::text) AND c.checkpoint_ns > ns.checkpoint_ns
              AND c.thread_id = %(thread_id)s  -- the same thread, as a sharded deployment sees it
            ORDER BY c.checkpoint_ns LIMIT 1)
    FROM ns WHERE ns.checkpoint_ns IS NOT NULL
), k AS MATERIALIZED (
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id
    FROM ns
    CROSS JOIN LATERAL (
        SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.checkpoint_ns = ns.checkpoint_ns AND {where}
        ORDER BY c.checkpoint_id DESC
        LIMIT {cap}
    ) AS x
    ORDER BY x.checkpoint_id DESC, x.checkpoint_ns
    LIMIT {cap}
), {_read_body_thread}

-- name: read_tuples_per_ns__citus
-- read_tuples_per_ns on Citus: the thread compared plainly in every reference (a recursive CTE
-- must filter on the distribution column for Citus to run it on the thread's worker).
WITH RECURSIVE ns AS (
    (SELECT c.checkpoint_ns FROM {schema}.pgsaver_checkpoints AS c
     WHERE c.thread_id = %(thread_id)s ORDER BY c.checkpoint_ns LIMIT 1)
    UNION ALL
    SELECT (SELECT c.checkpoint_ns FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns > ns.checkpoint_ns
            ORDER BY c.checkpoint_ns LIMIT 1)
    FROM ns WHERE ns.checkpoint_ns IS NOT NULL
), k AS MATERIALIZED (
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id
    FROM ns
    CROSS JOIN LATERAL (
        SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.checkpoint_ns = ns.checkpoint_ns AND {where}
        ORDER BY c.checkpoint_id DESC
        LIMIT {cap}
    ) AS x
    ORDER BY x.checkpoint_id DESC, x.checkpoint_ns
    LIMIT {cap}
), {_read_body_thread}

-- name: _read_body_thread
-- _read_body for the checkpoints of one thread, %(thread_id)s (read_tuples, read_tuples_per_ns):
-- the same text on one server.
{_read_body}

-- name: _read_body_thread__citus
-- On Citus: _read_body with every lookup compared with the thread parameter rather than with k's
-- (the same value), so that Citus sees each table reference read one thread and runs the whole
-- statement on its worker.
kc AS MATERIALIZED (
    SELECT k.thread_id, k.checkpoint_ns, k.checkpoint_id, c.parent_checkpoint_id, c.type,
           c.checkpoint, c.channel_versions, c.metadata, c.metadata_exact
    FROM k
    CROSS JOIN LATERAL (
        SELECT c.parent_checkpoint_id, c.type, c.checkpoint, c.channel_versions, c.metadata,
               c.metadata_exact
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = k.checkpoint_ns
          AND c.checkpoint_id = k.checkpoint_id
        OFFSET 0
    ) AS c
), cv AS (
    SELECT DISTINCT kc.thread_id, kc.checkpoint_ns, e.key COLLATE "C" AS channel,
           e.value COLLATE "C" AS version
    FROM kc
    CROSS JOIN LATERAL jsonb_each_text(kc.channel_versions) AS e
    -- Always true. The planner assumes 100 rows from any set-returning function, so a filter's
    -- generic plan (hundreds of chosen keys, a hundred channels each) was estimated above
    -- jit_above_cost and spent tens of milliseconds compiling; each of these is taken as a 1-in-3 filter.
    WHERE octet_length(e.key) >= 0 AND length(e.key) >= 0
)
SELECT 0 AS kind, v.thread_id, v.checkpoint_ns, v.channel AS checkpoint_id, v.version AS ref,
       s.type, s.blob, NULL::text AS write_channel, NULL::text AS task_path, NULL::integer AS idx,
       NULL::jsonb, NULL::jsonb, NULL::bytea
FROM cv AS v
CROSS JOIN LATERAL (
    SELECT bl.type, {_list_value_thread} AS blob
    FROM {schema}.pgsaver_blobs AS bl
    WHERE bl.thread_id = %(thread_id)s AND bl.checkpoint_ns = v.checkpoint_ns
      AND bl.channel = v.channel AND bl.version = v.version AND bl.type <> 'empty'
    -- one primary-key lookup per distinct value, never a hash of the thread's blobs
    OFFSET 0
) AS s
UNION ALL
SELECT 1, k.thread_id, k.checkpoint_ns, k.checkpoint_id, wr.task_id,
       wr.type, wr.blob, wr.channel, wr.task_path, wr.idx,
       NULL, NULL, NULL
FROM k
CROSS JOIN LATERAL (
    SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = k.checkpoint_ns
      AND w.checkpoint_id = k.checkpoint_id
    OFFSET 0
) AS wr
UNION ALL
SELECT 2, kc.thread_id, kc.checkpoint_ns, kc.checkpoint_id, kc.parent_checkpoint_id,
       kc.type, kc.checkpoint, NULL, NULL, NULL,
       kc.channel_versions, kc.metadata, kc.metadata_exact
FROM kc
ORDER BY kind, checkpoint_id DESC, thread_id, checkpoint_ns, task_path, ref, idx

-- name: _read_body
-- The rest of read_tuples. Expects the CTE k (thread_id, checkpoint_ns, checkpoint_id) of the chosen
-- checkpoints, newest first, and continues the statement's WITH list. Columns: kind, thread, namespace, checkpoint id | channel, parent id | task id | version,
-- type, body | blob, write channel, task path, idx, channel_versions, metadata, metadata_exact.
-- kc reads each chosen checkpoint row once, for its versions (cv) and for its kind-2 row; k stays
-- narrow, so choosing among many candidates
-- (a filter, or a thread's many namespaces) sorts keys, not bodies.
kc AS MATERIALIZED (
    SELECT k.thread_id, k.checkpoint_ns, k.checkpoint_id, c.parent_checkpoint_id, c.type,
           c.checkpoint, c.channel_versions, c.metadata, c.metadata_exact
    FROM k
    CROSS JOIN LATERAL (
        SELECT c.parent_checkpoint_id, c.type, c.checkpoint, c.channel_versions, c.metadata,
               c.metadata_exact
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = k.thread_id AND c.checkpoint_ns = k.checkpoint_ns
          AND c.checkpoint_id = k.checkpoint_id
        OFFSET 0
    ) AS c
), cv AS (
    SELECT DISTINCT kc.thread_id, kc.checkpoint_ns, e.key COLLATE "C" AS channel,
           e.value COLLATE "C" AS version
    FROM kc
    CROSS JOIN LATERAL jsonb_each_text(kc.channel_versions) AS e
    -- Always true. The planner assumes 100 rows from any set-returning function, so a filter's
    -- generic plan (hundreds of chosen keys, a hundred channels each) was estimated above
    -- jit_above_cost and spent tens of milliseconds compiling; each of these is taken as a 1-in-3 filter.
    WHERE octet_length(e.key) >= 0 AND length(e.key) >= 0
)
SELECT 0 AS kind, v.thread_id, v.checkpoint_ns, v.channel AS checkpoint_id, v.version AS ref,
       s.type, s.blob, NULL::text AS write_channel, NULL::text AS task_path, NULL::integer AS idx,
       NULL::jsonb, NULL::jsonb, NULL::bytea
FROM cv AS v
CROSS JOIN LATERAL (
    SELECT bl.type, {_list_value} AS blob
    FROM {schema}.pgsaver_blobs AS bl
    WHERE bl.thread_id = v.thread_id AND bl.checkpoint_ns = v.checkpoint_ns
      AND bl.channel = v.channel AND bl.version = v.version AND bl.type <> 'empty'
    -- one primary-key lookup per distinct value, never a hash of the thread's blobs
    OFFSET 0
) AS s
UNION ALL
SELECT 1, k.thread_id, k.checkpoint_ns, k.checkpoint_id, wr.task_id,
       wr.type, wr.blob, wr.channel, wr.task_path, wr.idx,
       NULL, NULL, NULL
FROM k
{_writes_of_k}
UNION ALL
SELECT 2, kc.thread_id, kc.checkpoint_ns, kc.checkpoint_id, kc.parent_checkpoint_id,
       kc.type, kc.checkpoint, NULL, NULL, NULL,
       kc.channel_versions, kc.metadata, kc.metadata_exact
FROM kc
ORDER BY kind, checkpoint_id DESC, thread_id, checkpoint_ns, task_path, ref, idx

-- name: _writes_of_k
-- Expects k (thread_id, checkpoint_ns, checkpoint_id). The pending writes of checkpoint k, by primary
-- key: a correlated lookup per checkpoint (OFFSET 0 keeps it from becoming a hash of the writes
-- table).
CROSS JOIN LATERAL (
    SELECT w.task_id, w.type, w.blob, w.channel, w.task_path, w.idx
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns
      AND w.checkpoint_id = k.checkpoint_id
    OFFSET 0
) AS wr

-- The predicates of a {where} slot (_sql.WHERE_FRAGMENTS). Each expects c (a pgsaver_checkpoints
-- row). The keys are compared with (SELECT %(x)s::text), which the planner cannot see through (as
-- the hidden limits): a custom plan then costs what the generic plan costs, and a prepared
-- statement settles on the generic one. With the values visible, a table of a few long threads made
-- every custom plan look cheaper (the thread's row count in the statistics, a limit of 20), and
-- Postgres planned list() anew on every call, a third of its time. The plans stay on the primary
-- key either way (test_indexes, test_list_and_prepare).

-- name: _w_thread
c.thread_id = (SELECT %(thread_id)s::text)

-- name: _w_thread__citus
-- On Citus (Queries(citus=True)): the thread compared plainly, the distribution column's value
-- that routes the statement to the thread's worker (nothing is prepared there, so there is no
-- choice of plan to steer).
c.thread_id = %(thread_id)s

-- name: _w_ns
c.checkpoint_ns = (SELECT %(checkpoint_ns)s::text)

-- name: _w_ns__citus
-- On Citus: compared plainly (nothing is prepared there).
c.checkpoint_ns = %(checkpoint_ns)s

-- name: _w_id
c.checkpoint_id = (SELECT %(checkpoint_id)s::text)

-- name: _w_id__citus
-- On Citus: compared plainly (nothing is prepared there).
c.checkpoint_id = %(checkpoint_id)s

-- name: _w_before
c.checkpoint_id < (SELECT %(before)s::text)

-- name: _w_before__citus
-- On Citus: compared plainly (nothing is prepared there).
c.checkpoint_id < %(before)s

-- name: _w_after
-- A page of a long list() (checkpoint/reading.page_select): the checkpoints after the last one of
-- the page before in read_tuples' order (id descending, then thread and namespace). The first
-- conjunct bounds the primary key's (or the id index's) walk; the rest breaks ties of ids.
c.checkpoint_id <= (SELECT %(after_id)s::text)
AND (c.checkpoint_id < (SELECT %(after_id)s::text)
     OR (c.thread_id, c.checkpoint_ns) > ((SELECT %(after_thread)s::text), (SELECT %(after_ns)s::text)))

-- name: _w_after__citus
-- On Citus: _w_after compared plainly.
c.checkpoint_id <= %(after_id)s::text
AND (c.checkpoint_id < %(after_id)s::text
     OR (c.thread_id, c.checkpoint_ns) > (%(after_thread)s::text, %(after_ns)s::text))

-- name: _w_filter
-- The candidates of a metadata filter (checkpoint/metadata.plan_filter); the saver checks each exactly.
c.metadata @> %(filter)s::jsonb

-- name: pending_sends
-- For checkpoints of format 4 and older (LangGraph then kept Send packets as writes of its parent):
-- the __pregel_tasks writes of the given parent checkpoints, in writes_sort_key order. Run only
-- when such a checkpoint was read.
SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.type, w.blob, w.task_id, w.idx, w.task_path
FROM unnest(%(thread_ids)b::text[], %(checkpoint_nss)b::text[], %(checkpoint_ids)b::text[])
    AS p (thread_id, checkpoint_ns, checkpoint_id)
JOIN {schema}.pgsaver_writes AS w
  ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
 AND w.checkpoint_id = p.checkpoint_id
WHERE w.channel = '__pregel_tasks'
ORDER BY w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_path, w.task_id, w.idx

-- name: delete_thread_call
-- delete_thread as a call of migration 0014's function: the same deletes, and the thread's status
-- row, in one round trip (a bare call: Citus runs it on the thread's worker). Where the function
-- cannot be called, delete_thread.
SELECT {schema}.pgsaver_delete_thread(%(thread_id)s::text)

-- name: delete_thread
-- The thread's rows, the delete recorded first (_record_deleted: the record sees the checkpoints
-- the deletes remove, all reading one snapshot).
WITH {_record_deleted}, deleted_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs WHERE thread_id = %(thread_id)s
), deleted_elements AS (
    DELETE FROM {schema}.pgsaver_elements WHERE thread_id = %(thread_id)s
), deleted_writes AS (
    DELETE FROM {schema}.pgsaver_writes WHERE thread_id = %(thread_id)s
)
DELETE FROM {schema}.pgsaver_checkpoints WHERE thread_id = %(thread_id)s

-- name: delete_thread__nolists
-- delete_thread without migration 0015's table.
WITH deleted_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs WHERE thread_id = %(thread_id)s
), deleted_writes AS (
    DELETE FROM {schema}.pgsaver_writes WHERE thread_id = %(thread_id)s
)
DELETE FROM {schema}.pgsaver_checkpoints WHERE thread_id = %(thread_id)s

-- name: _record_deleted
-- Migration 0018's record of a delete (CTE recorded): the thread and the newest checkpoint id it
-- holds, in any namespace; nothing for a thread without checkpoints. A thread deleted again keeps
-- the newer id, and the new time (EXCLUDED's default: Citus allows no now() in DO UPDATE).
recorded AS (
    INSERT INTO {schema}.pgsaver_deleted_threads AS d (thread_id, last_checkpoint_id)
    SELECT c.thread_id, max(c.checkpoint_id) FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(thread_id)s GROUP BY c.thread_id
    {_recorded_again}
)

-- name: _record_deleted__nodeleted
recorded AS (SELECT 1)

-- name: _recorded_again
ON CONFLICT (thread_id) DO UPDATE SET
    last_checkpoint_id = greatest(d.last_checkpoint_id, EXCLUDED.last_checkpoint_id),
    deleted_at = EXCLUDED.deleted_at

-- name: record_deleted
-- delete_thread in short statements (lifecycle.delete_thread, after a statement_timeout): the
-- record, under the thread's lock, before the deletes.
WITH {_record_deleted}
SELECT 1

-- name: refuse_checkpoint
-- After put_orphan stored nothing, under the thread's exclusive lock: the record of a delete
-- that came after the put's parent was stored (none: the parent is missing for another reason).
-- The record now names this checkpoint among the refused, so its writes are refused as well
-- (a new run's ids, newer than the delete too, are not); those that came before it (put_writes
-- may run first) are deleted by refused_writes. Returns the delete's time.
UPDATE {schema}.pgsaver_deleted_threads AS d
SET refused = CASE WHEN %(checkpoint_id)s::text = ANY (d.refused) THEN d.refused
                   ELSE array_append(d.refused, %(checkpoint_id)s::text) END
WHERE d.thread_id = %(thread_id)s
  AND (d.last_checkpoint_id >= %(parent_checkpoint_id)s OR %(parent_checkpoint_id)s = ANY (d.refused))
RETURNING d.deleted_at

-- name: refused_writes
-- The writes of a checkpoint refuse_checkpoint refused, deleted in the same transaction.
DELETE FROM {schema}.pgsaver_writes AS w
WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = %(checkpoint_ns)s
  AND w.checkpoint_id = %(checkpoint_id)s

-- name: late_subgraphs
-- After a refusal (refuse_checkpoint; put_writes' LGD01), under the thread's exclusive lock: the
-- namespaces a late run's subgraphs stored after the delete. A subgraph's first checkpoint has no
-- parent to check, so it is stored; here every checkpoint of such a namespace names (LangGraph's
-- metadata "parents" -> '') a root checkpoint that the record covers (deleted with the thread, or
-- refused since) and that is not stored (a copy or import into the deleted id keeps older ids;
-- a worker's clock may lag). Their checkpoints, writes and values go, and each namespace's newest
-- id joins the record's refused (what a subgraph still running names next: its put's parent, its
-- writes' checkpoint); a namespace with any checkpoint of another root stays whole. Returns how
-- many checkpoints went.
WITH d AS (
    SELECT r.last_checkpoint_id, r.refused FROM {schema}.pgsaver_deleted_threads AS r
    WHERE r.thread_id = %(thread_id)s
), late AS (
    SELECT c.checkpoint_ns, max(c.checkpoint_id) AS newest
    FROM {schema}.pgsaver_checkpoints AS c CROSS JOIN d
    WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns <> ''
    GROUP BY c.checkpoint_ns
    HAVING bool_and(coalesce(
        (d.last_checkpoint_id >= (c.metadata -> 'parents' ->> '')
         OR (c.metadata -> 'parents' ->> '') = ANY (d.refused))
        AND NOT EXISTS (
            SELECT 1 FROM {schema}.pgsaver_checkpoints AS o
            WHERE o.thread_id = %(thread_id)s AND o.checkpoint_ns = ''
              AND o.checkpoint_id = (c.metadata -> 'parents' ->> '')
        ), false))
), gone_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = %(thread_id)s AND b.checkpoint_ns IN (SELECT checkpoint_ns FROM late)
), gone_writes AS (
    DELETE FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns IN (SELECT checkpoint_ns FROM late)
), gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns IN (SELECT checkpoint_ns FROM late)
    RETURNING 1
), noted AS (
    UPDATE {schema}.pgsaver_deleted_threads AS r
    SET refused = r.refused || ARRAY(SELECT newest FROM late)
    WHERE r.thread_id = %(thread_id)s AND EXISTS (SELECT 1 FROM late)
)
SELECT count(*) FROM gone

-- name: forget_deleted
-- Retention's last step: the records of deletes older than %(keep)s, at most %(batch)s per
-- statement (oldest first).
WITH doomed AS (
    SELECT d.thread_id FROM {schema}.pgsaver_deleted_threads AS d
    WHERE d.deleted_at < now() - %(keep)s::interval
    ORDER BY d.deleted_at LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_deleted_threads AS d
    WHERE d.thread_id IN (SELECT thread_id FROM doomed)
    RETURNING 1
)
SELECT count(*) FROM gone

-- name: forget_deleted__citus
-- On Citus, one statement on every shard (no LIMIT over distributed rows): the records are small.
WITH gone AS (
    DELETE FROM {schema}.pgsaver_deleted_threads AS d
    WHERE d.deleted_at < now() - %(keep)s::interval
    RETURNING 1
)
SELECT count(*) FROM gone

-- name: refresh_status
-- A thread's status row set again from what is stored (migration 0014), after a job changed its
-- checkpoints: a delete, copy_thread's target, delete_for_runs, an import. A bare call: Citus runs
-- it on the thread's worker.
SELECT {schema}.pgsaver_refresh_status(%(thread_id)s::text)

-- name: gc_elements
-- The parts of a thread (lists stored as their elements) that no stored value names any more,
-- deleted (migration 0015's pgsaver_gc_elements; a bare call: Citus runs it on the thread's
-- worker). Each lifecycle job runs it, in its own transaction, for the threads whose values it
-- deleted or copied.
SELECT {schema}.pgsaver_gc_elements(%(thread_id)s::text)

-- name: gc_elements__nolists
-- Without migration 0015: no parts to collect.
SELECT %(thread_id)s::text IS NULL

-- name: put_status_mark
-- After put_writes of a task's write to __interrupt__ or __error__ at a root checkpoint: the
-- thread's status row says so (migration 0014; nothing when the checkpoint is not the thread's
-- newest root checkpoint).
SELECT {schema}.pgsaver_put_status(%(thread_id)s::text, %(checkpoint_ns)s::text,
                                   %(checkpoint_id)s::text, %(status)s::text)

-- name: _status_rule
-- A thread's status, read from its newest root checkpoint (alias c): migration 0014's rule, as
-- its pgsaver_refresh_status reads it ('idle' where that returns no row). Readers check with it
-- every row of the status table they return.
CASE
    WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                 WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
                   AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__error__')
        THEN 'error'
    WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                 WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
                   AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__interrupt__')
        THEN 'interrupted'
    -- each trigger channel's value probed by the primary key (OFFSET 0 keeps the probe a
    -- subplan: no statistics make it a scan of the thread's values)
    WHEN EXISTS (SELECT 1 FROM jsonb_each_text(c.channel_versions) AS e
                 WHERE (e.key = '__start__' OR starts_with(e.key, 'branch:to:'))
                   AND EXISTS (SELECT 1 FROM {schema}.pgsaver_blobs AS b
                               WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = ''
                                 AND b.channel = e.key AND b.version = e.value
                                 AND b.type <> 'empty'
                               OFFSET 0))
        THEN 'pending'
    ELSE 'idle'
END

-- name: _status_rule__citus
-- On Citus (whose planner fails on jsonb_each_text's columns in this correlated subquery):
-- _status_rule with the trigger channels' values found among the thread's root blobs of those
-- channels, each compared with the checkpoint's version of it.
CASE
    WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                 WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
                   AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__error__')
        THEN 'error'
    WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                 WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
                   AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__interrupt__')
        THEN 'interrupted'
    WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_blobs AS b
                 WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = ''
                   AND (b.channel = '__start__'
                        OR (b.channel >= 'branch:to:' AND b.channel < 'branch:to;'))
                   AND b.version = c.channel_versions ->> b.channel
                   AND b.type <> 'empty')
        THEN 'pending'
    ELSE 'idle'
END

-- name: _next_nodes__citus
ARRAY(SELECT CASE WHEN b.channel = '__start__' THEN b.channel ELSE substr(b.channel, 11) END
      FROM {schema}.pgsaver_blobs AS b
      WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = ''
        AND (b.channel = '__start__' OR (b.channel >= 'branch:to:' AND b.channel < 'branch:to;'))
        AND b.version = c.channel_versions ->> b.channel
        AND b.type <> 'empty'
      ORDER BY 1)

-- name: _next_nodes
-- The nodes the root checkpoint c schedules: its trigger channels that hold a value (each probed
-- by the primary key, as in _status_rule).
ARRAY(SELECT CASE WHEN e.key = '__start__' THEN e.key ELSE substr(e.key, 11) END
      FROM jsonb_each_text(c.channel_versions) AS e
      WHERE (e.key = '__start__' OR starts_with(e.key, 'branch:to:'))
        AND EXISTS (SELECT 1 FROM {schema}.pgsaver_blobs AS b
                    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = ''
                      AND b.channel = e.key AND b.version = e.value AND b.type <> 'empty'
                    OFFSET 0)
      ORDER BY 1)

-- name: _thread_filters
-- search_threads' filters on a thread's newest root checkpoint c: its metadata, how long it has
-- been idle (or how recently active), and a namespace it has checkpoints in (%(ns)s itself or
-- one below it, 'ns:<task id>' or 'ns|...': three ranges of the primary key).
(%(metadata)s::jsonb IS NULL OR c.metadata @> %(metadata)s::jsonb)
AND (%(idle_for)s::interval IS NULL OR c.created_at < now() - %(idle_for)s::interval)
AND (%(active_within)s::interval IS NULL OR c.created_at >= now() - %(active_within)s::interval)
AND (%(ns)s::text IS NULL OR EXISTS (
    SELECT 1 FROM {schema}.pgsaver_checkpoints AS x
    WHERE x.thread_id = c.thread_id
      AND (x.checkpoint_ns = %(ns)s
           OR (x.checkpoint_ns >= %(ns)s::text || ':' AND x.checkpoint_ns < %(ns)s::text || ';')
           OR (x.checkpoint_ns >= %(ns)s::text || '|' AND x.checkpoint_ns < %(ns)s::text || '}'))))

-- name: _status_rows
-- threads_by_status' rows of the status table after the cursor: those of the status asked for
-- ('pending', 'interrupted', 'error': few), and the 'pending' ones when another is asked for; each
-- scan newest first by (status, checkpoint_id, thread_id), sorted together (a few rows).
SELECT x.thread_id, x.checkpoint_id, x.since FROM {schema}.pgsaver_thread_status AS x
WHERE x.status = %(status)s::text
  AND (%(after_id)s::text IS NULL
       OR (x.checkpoint_id, x.thread_id) < (%(after_id)s::text, %(after_thread)s::text))
UNION ALL
SELECT x.thread_id, x.checkpoint_id, x.since FROM {schema}.pgsaver_thread_status AS x
WHERE x.status = 'pending' AND %(status)s::text <> 'pending'
  AND (%(after_id)s::text IS NULL
       OR (x.checkpoint_id, x.thread_id) < (%(after_id)s::text, %(after_thread)s::text))

-- name: threads_by_status
-- search_threads(status='pending' | 'interrupted' | 'error'): the status table's rows of that
-- status (_status_rows), newest first by the checkpoint at which each took it, each checked
-- against its thread's newest root checkpoint (_threads_page); with the rows that say 'pending'
-- too when the status asked for is another (a thread whose interrupt or error was stored but not
-- yet marked, if its worker died between the two calls).
WITH s AS NOT MATERIALIZED (
    {_status_rows}
)
{_threads_page}

-- name: threads_recent
-- search_threads() without a status, or of 'idle', and without a metadata filter: the status
-- table's rows newest first, one backward scan of its (checkpoint_id, thread_id) index (idle
-- threads are most of the table: a scan that stops at the page, not a sort of every row), with
-- those that may be of the status asked for ('idle' and 'pending' for 'idle': a row whose run's
-- end was not recorded), each checked against its thread's newest root checkpoint
-- (_threads_page).
WITH s AS NOT MATERIALIZED (
    SELECT x.thread_id, x.checkpoint_id, x.since FROM {schema}.pgsaver_thread_status AS x
    WHERE (%(status)s::text IS NULL OR x.status IN ('idle', 'pending'))
      AND (%(after_id)s::text IS NULL
           OR (x.checkpoint_id, x.thread_id) < (%(after_id)s::text, %(after_thread)s::text))
)
{_threads_page}

-- name: _threads_page
-- A page of threads from the rows s (thread_id, checkpoint_id: where the thread took its status,
-- since) of the status table, in the order of s's index: each row's thread at its newest root
-- checkpoint (a LIMIT 1 probe of the primary key), classified by _status_rule, kept if it is of
-- the status asked for (any, for NULL) and passes the filters. Reads as many rows as the page
-- needs where the status and filters match most of them, whatever the length of the threads.
SELECT r.thread_id, r.status, r.checkpoint_id, r.created_at, r.metadata, r.metadata_exact,
       r.since, r.next, r.position
FROM (
    -- the row's thread_id (the index's), not c's: the page's order is then the index's
    SELECT s.thread_id, {_status_rule} AS status, c.checkpoint_id, c.created_at, c.metadata,
           c.metadata_exact, s.since, {_next_nodes} AS next, s.checkpoint_id AS position
    FROM s
    CROSS JOIN LATERAL (
        SELECT h.* FROM {schema}.pgsaver_checkpoints AS h
        WHERE h.thread_id = s.thread_id AND h.checkpoint_ns = ''
        ORDER BY h.checkpoint_id DESC
        LIMIT 1
    ) AS c
    WHERE {_thread_filters}
) AS r
WHERE %(status)s::text IS NULL OR r.status = %(status)s::text
ORDER BY r.position DESC, r.thread_id DESC
LIMIT %(limit)s

-- name: _threads_page__citus
-- On Citus: the thread's newest root checkpoint as the one without a newer (Citus plans no
-- LIMIT in a lateral subquery) among those from the row's on (one, or a running run's: never a
-- long thread's all; a thread whose row names a checkpoint not stored yet, a mark that came
-- before its checkpoint, is left out until it is), the rule in a subquery's select list. The
-- rule is behind the join's own conditions (its CASE): a condition on the status is then checked
-- only where a row meets its thread's checkpoints, whatever order a shard's plan gives the join's
-- conditions, never on each checkpoint of a shard first (what a shard's plan did with the
-- statistics of empty tables: the rule run for every checkpoint of a long thread).
SELECT r.thread_id, r.status, r.checkpoint_id, r.created_at, r.metadata, r.metadata_exact,
       r.since, r.next, r.position
FROM (
    SELECT c.thread_id,
           CASE WHEN c.thread_id = s.thread_id AND c.checkpoint_id >= s.checkpoint_id
                THEN {_status_rule} END AS status,
           c.checkpoint_id, c.created_at, c.metadata,
           c.metadata_exact, s.since, {_next_nodes} AS next, s.checkpoint_id AS position
    FROM s
    JOIN {schema}.pgsaver_checkpoints AS c
      ON c.thread_id = s.thread_id AND c.checkpoint_ns = '' AND c.checkpoint_id >= s.checkpoint_id
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_checkpoints AS n
                      WHERE n.thread_id = c.thread_id AND n.checkpoint_ns = ''
                        AND n.checkpoint_id > c.checkpoint_id)
      AND {_thread_filters}
) AS r
WHERE %(status)s::text IS NULL OR r.status = %(status)s::text
ORDER BY r.position DESC, r.thread_id DESC
LIMIT %(limit)s

-- name: threads_walk
-- search_threads(metadata=...) of every status, or 'idle': the root checkpoints newest first
-- (migration 0008's index on the id, read backwards), each thread once, at its newest (the probe
-- of the primary key for a newer one), classified by _status_rule. A metadata filter that matches
-- few threads is read through the metadata's GIN index, as the planner finds cheaper; one that
-- matches many walks the checkpoints newest first (all of a long thread's that are newer than
-- the page's last thread).
SELECT r.thread_id, r.status, r.checkpoint_id, r.created_at, r.metadata, r.metadata_exact,
       (SELECT s.since FROM {schema}.pgsaver_thread_status AS s
        WHERE s.thread_id = r.thread_id AND r.status <> 'idle'),
       r.next, r.position
FROM (
    SELECT c.thread_id, {_status_rule} AS status, c.checkpoint_id, c.created_at, c.metadata,
           c.metadata_exact, {_next_nodes} AS next, c.checkpoint_id AS position
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.checkpoint_ns = ''
      AND NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_checkpoints AS n
                      WHERE n.thread_id = c.thread_id AND n.checkpoint_ns = ''
                        AND n.checkpoint_id > c.checkpoint_id)
      AND (%(after_id)s::text IS NULL
           OR (c.checkpoint_id, c.thread_id) < (%(after_id)s::text, %(after_thread)s::text))
      AND {_thread_filters}
) AS r
WHERE %(status)s::text IS NULL OR r.status = %(status)s::text
ORDER BY r.position DESC, r.thread_id DESC
LIMIT %(limit)s

-- name: thread_sizes
-- The checkpoints and bytes (rows of all four tables, as ops_threads measures them) of the
-- threads of a page of search_threads.
SELECT x.thread_id, sum(x.checkpoints)::bigint, sum(x.bytes)::bigint
FROM (
    SELECT c.thread_id, count(*) AS checkpoints, sum(pg_column_size(c.*)) AS bytes
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])
    GROUP BY c.thread_id
    UNION ALL
    SELECT w.thread_id, 0, sum(pg_column_size(w.*))
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = ANY (%(thread_ids)b::text[])
    GROUP BY w.thread_id
    UNION ALL
    SELECT b.thread_id, 0, sum(pg_column_size(b.*))
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = ANY (%(thread_ids)b::text[])
    GROUP BY b.thread_id
    UNION ALL
    SELECT e.thread_id, 0, e.bytes FROM {_elements_sizes_by_thread} AS e
    WHERE e.thread_id = ANY (%(thread_ids)b::text[])
) AS x
GROUP BY x.thread_id

-- name: thread_status_writes
-- The writes to __interrupt__ and __error__ of the newest root checkpoints of a page of
-- search_threads (the interrupts' values, the errors); the pairs are matched by the reader.
SELECT w.thread_id, w.checkpoint_id, w.channel, w.task_id, w.idx, w.task_path, w.type, w.blob
FROM {schema}.pgsaver_writes AS w
WHERE w.thread_id = ANY (%(thread_ids)b::text[]) AND w.checkpoint_ns = ''
  AND w.checkpoint_id = ANY (%(checkpoint_ids)b::text[])
  AND w.channel IN ('__interrupt__', '__error__')
ORDER BY w.thread_id, w.task_path, w.task_id, w.idx

-- name: thread_status_counts
-- Threads per status as the status table records them (not checked row by row: a gauge).
-- Idle threads are not counted (their rows are most of the table).
SELECT s.status, count(*)::bigint FROM {schema}.pgsaver_thread_status AS s
WHERE s.status IN ('pending', 'interrupted', 'error')
GROUP BY s.status

-- name: migrations_applied
-- Each applied version, and whether it is additive (code that knows only earlier migrations may run
-- against it). to_jsonb reads the flag from a table that an older release created without it.
-- Each row also says whether the database has the citus extension (setup()'s fast path: one
-- query, and it knows whether to check the schema's distribution).
SELECT m.version, coalesce((to_jsonb(m) ->> 'additive')::boolean, false),
       EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
FROM {schema}.pgsaver_migrations AS m
ORDER BY m.version

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

-- name: migrations_bootstrap_additive
-- The additive flag (_migrate.pending), for new tables and for those of releases before it; runs
-- under the migration lock, after migrations_bootstrap and before any migration is recorded.
ALTER TABLE {schema}.pgsaver_migrations ADD COLUMN IF NOT EXISTS additive boolean NOT NULL DEFAULT false

-- name: migrations_record
INSERT INTO {schema}.pgsaver_migrations (version, name, additive)
VALUES (%(version)s, %(name)s, %(additive)s)

-- ============================================================================ Citus

-- name: citus_installed
-- Whether this database has the citus extension: setup() then distributes the schema
-- (citus_distribute), and the driver sends the forms of our statements that Citus routes to the
-- thread's worker (docs/scaling.md); and whether migrations 0015's and 0018's tables are there
-- (first_check says why).
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus'),
       to_regclass('{schema}.pgsaver_elements') IS NOT NULL,
       to_regclass('{schema}.pgsaver_deleted_threads') IS NOT NULL

-- name: _citus_tables
-- Our tables that Citus distributes by thread_id, co-located with the checkpoints (the first),
-- in the order they are distributed. The store's tables stay on the coordinator and the
-- migrations table is a reference table (docs/scaling.md, "What setup() distributes").
ARRAY['pgsaver_checkpoints', 'pgsaver_blobs', 'pgsaver_writes', 'pgsaver_imports',
      'pgsaver_thread_status', 'pgsaver_elements', 'pgsaver_deleted_threads']

-- name: _citus_functions
-- Our functions Citus runs where the thread's rows are: each of the schema's functions with a
-- p_thread argument (migrations 0004, 0006, 0007, 0011, 0012 and later).
SELECT p.oid, p.oid::regprocedure::text AS signature FROM pg_proc AS p
WHERE p.pronamespace = '{schema}'::regnamespace AND starts_with(p.proname, 'pgsaver_')
  AND NOT starts_with(p.proname, 'pgsaver_store_') AND 'p_thread' = ANY (p.proargnames)

-- name: citus_missing
-- Only where citus is installed: what of the schema is not yet distributed as setup() would
-- distribute it: each table (distributed by thread_id, or the migrations table as a reference
-- table) and each function (by p_thread), by name. Empty: the schema is distributed.
SELECT t.name FROM unnest({_citus_tables}) AS t (name)
WHERE to_regclass('{schema}.' || t.name) IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM pg_dist_partition AS d
                  WHERE d.logicalrelid = to_regclass('{schema}.' || t.name) AND d.partmethod = 'h')
UNION ALL
SELECT 'pgsaver_migrations' WHERE NOT EXISTS (
    SELECT 1 FROM pg_dist_partition AS d
    WHERE d.logicalrelid = '{schema}.pgsaver_migrations'::regclass AND d.partmethod = 'n')
UNION ALL
SELECT f.signature FROM ({_citus_functions}) AS f
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_object AS o
                  WHERE o.classid = 'pg_proc'::regclass AND o.objid = f.oid
                    AND o.distribution_argument_index IS NOT NULL)
ORDER BY 1

-- name: citus_distribution
-- Only where citus is installed: how each of the schema's tables is placed (citus_tables:
-- distributed, reference, or not there: local on the coordinator), by what column, in how many
-- shards; and which functions are distributed. setup(check=True), saver.distribution() and
-- doctor read it.
SELECT 'table' AS kind, c.relname::text AS name, coalesce(t.citus_table_type, 'local') AS placement,
       t.distribution_column::text AS distributed_by, t.shard_count::integer AS shards
FROM pg_class AS c
LEFT JOIN citus_tables AS t ON t.table_name = c.oid
WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind IN ('r', 'p')
  AND starts_with(c.relname, 'pgsaver_')
UNION ALL
SELECT 'function', f.signature,
       CASE WHEN o.distribution_argument_index IS NULL THEN 'local' ELSE 'distributed' END,
       CASE WHEN o.distribution_argument_index IS NULL THEN NULL ELSE 'p_thread' END, NULL
FROM ({_citus_functions}) AS f
LEFT JOIN pg_dist_object AS o ON o.classid = 'pg_proc'::regclass AND o.objid = f.oid
ORDER BY 1 DESC, 2

-- name: citus_distribute
-- setup() where citus is installed, after the migrations (their own transaction): distribute
-- what citus_missing lists, each step skipped when done already (several workers may run it;
-- setup()'s migration lock orders them). A table holding rows (a database distributed after it
-- was used) has them moved to its shards, and the copies left on the coordinator removed.
DO $citus$
DECLARE
    rel regclass;
    held boolean;
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;  -- one server (setup --sql's script runs this everywhere): nothing to do
    END IF;
    -- one connection per node for the whole transaction: distributing a function after a table
    -- in one transaction needs it
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition AS d
                   WHERE d.logicalrelid = '{schema}.pgsaver_migrations'::regclass) THEN
        PERFORM create_reference_table('{schema}.pgsaver_migrations');
        -- its rows were copied to every node: no copy left on the coordinator's own table
        PERFORM truncate_local_data_after_distributing_table('{schema}.pgsaver_migrations');
    END IF;
    FOR r IN SELECT t.name, t.n FROM unnest({_citus_tables}) WITH ORDINALITY AS t (name, n)
             ORDER BY t.n LOOP
        rel := to_regclass('{schema}.' || r.name);
        IF rel IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pg_dist_partition AS d WHERE d.logicalrelid = rel) THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', rel) INTO held;
            PERFORM create_distributed_table(rel::text, 'thread_id', colocate_with =>
                CASE WHEN r.n = 1 THEN 'default' ELSE '{schema}.pgsaver_checkpoints' END);
            IF held THEN
                PERFORM truncate_local_data_after_distributing_table(rel);
            END IF;
        END IF;
    END LOOP;
    FOR r IN SELECT f.signature FROM ({_citus_functions}) AS f
             WHERE NOT EXISTS (SELECT 1 FROM pg_dist_object AS o
                               WHERE o.classid = 'pg_proc'::regclass AND o.objid = f.oid
                                 AND o.distribution_argument_index IS NOT NULL) LOOP
        PERFORM create_distributed_function(r.signature::regprocedure, 'p_thread',
                                            colocate_with => '{schema}.pgsaver_checkpoints');
    END LOOP;
END
$citus$

-- name: citus_shard_options
-- After citus_distribute has committed (the shards of a table distributed in a transaction are
-- not visible to the connections run_command_on_shards opens): migration 0003's estimate of the
-- writes' checkpoint_id, which Citus neither copies to the shards nor lets ALTER TABLE set on a
-- distributed table, set on each shard of pgsaver_writes (a no-op without citus; run again, it
-- changes nothing). A shard it could not reach is a warning: the estimate helps plans, it is not
-- needed for correct answers.
DO $citus$
DECLARE
    failed text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition
               WHERE logicalrelid = '{schema}.pgsaver_writes'::regclass) THEN
        SELECT array_agg(x.result) INTO failed
        -- chr(37) || 's': run_command_on_shards's shard name placeholder, spelled so that the
        -- statement holds no percent sign (sent with parameters or without, printed by setup --sql)
        FROM run_command_on_shards('{schema}.pgsaver_writes',
                                   'ALTER TABLE ' || chr(37) || 's ALTER COLUMN checkpoint_id '
                                   || 'SET (n_distinct = -0.1)')
            AS x
        WHERE NOT x.success;
        IF failed IS NOT NULL THEN
            RAISE WARNING USING MESSAGE = 'the writes'' estimate (migration 0003) is not set on '
                || cardinality(failed) || ' shards: ' || failed[1];
        END IF;
    END IF;
END
$citus$

-- name: citus_shard_estimates
-- doctor, on a distributed schema: of the shards of pgsaver_writes, how many lack migration 0003's
-- estimate (citus_shard_options set it on the shards setup() made; a shard a rebalance moved comes
-- without it), and how many there are.
SELECT count(*) FILTER (WHERE NOT x.success OR x.result NOT LIKE '%%n_distinct=-0.1%%'), count(*)
FROM run_command_on_shards('{schema}.pgsaver_writes',
    'SELECT attoptions::text FROM pg_attribute WHERE attrelid = ''%%s''::regclass '
    || 'AND attname = ''checkpoint_id''') AS x

-- ============================================================================ DeltaChannel history

-- name: delta_history
-- Mirrored by pgsaver_delta_history (migration 0011, replaced by 0012; delta_history_call, what
-- the saver sends where it can), _x_stores_thread_k included: a change here needs a migration
-- replacing it. Every row the walk reads is of the thread %(thread_id)s, and each lookup compares
-- the thread with that parameter (not with the row's, the same value), so that a sharded
-- deployment (Citus, distributed by thread_id) sees that every table reference reads one thread.
-- One round trip: walk the parent chain of the target checkpoint (not its siblings), per channel up to
-- the nearest ancestor that stores a value for it. Rows: kind 0 = a write at an ancestor (the target's
-- own writes are excluded), kind 1 = a seed value; depth 0 is the target's parent. The last four
-- columns (thread, namespace, checkpoint, version) are each value's place, which a KeyringSerializer
-- checks.
-- The target is chosen by {where} with get_tuple's predicates, hidden from the planner like list()'s:
-- for a LIMIT 1 on the primary key that changes no plan, and its few microseconds are nothing here
-- (get_tuple, where they are a share of the call, compares plainly).
WITH RECURSIVE target AS (
    SELECT c.thread_id, c.checkpoint_ns, c.parent_checkpoint_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE {where}
    ORDER BY c.checkpoint_id DESC
    LIMIT 1
), walk AS (
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, x.channel_versions,
           0 AS depth, w.needing AS wanted,
           ARRAY(SELECT k FROM unnest(w.needing) AS k WHERE NOT ({_x_stores_thread_k})) COLLATE "C" AS remaining
    FROM target AS t
    -- OFFSET 0 hides the array's length from the planner: estimated from its value, a custom plan
    -- looked cheaper than the generic one, so Postgres planned every call anew
    CROSS JOIN (SELECT %(channels)b::text[] COLLATE "C" AS needing OFFSET 0) AS w
    JOIN {schema}.pgsaver_checkpoints AS x
      ON x.thread_id = %(thread_id)s AND x.checkpoint_ns = t.checkpoint_ns
     AND x.checkpoint_id = t.parent_checkpoint_id
    UNION ALL
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, x.channel_versions,
           w.depth + 1, w.remaining,
           ARRAY(SELECT k FROM unnest(w.remaining) AS k WHERE NOT ({_x_stores_thread_k})) COLLATE "C"
    FROM walk AS w
    JOIN {schema}.pgsaver_checkpoints AS x
      ON x.thread_id = %(thread_id)s AND x.checkpoint_ns = w.checkpoint_ns
     AND x.checkpoint_id = w.parent_checkpoint_id
    WHERE cardinality(w.remaining) > 0
      AND w.depth < 10000000  -- a guard against a parent cycle in corrupted data
)
SELECT 0 AS kind, w.depth, wr.task_path, wr.task_id, wr.idx, wr.channel, wr.type, wr.blob,
       w.thread_id, w.checkpoint_ns, w.checkpoint_id, NULL::text AS version
FROM walk AS w
JOIN {schema}.pgsaver_writes AS wr
  ON wr.thread_id = %(thread_id)s AND wr.checkpoint_ns = w.checkpoint_ns AND wr.checkpoint_id = w.checkpoint_id
WHERE wr.channel = ANY (w.wanted)
UNION ALL
SELECT 1 AS kind, w.depth, NULL, NULL, NULL, ch.name, s.type, s.blob,
       w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.channel_versions ->> ch.name
FROM walk AS w
CROSS JOIN LATERAL unnest(w.wanted) AS ch (name)
CROSS JOIN LATERAL (
    -- a lookup by the whole primary key, whatever the table statistics say
    SELECT bl.type, {_list_value_thread} AS blob
    FROM {schema}.pgsaver_blobs AS bl
    WHERE bl.thread_id = %(thread_id)s AND bl.checkpoint_ns = w.checkpoint_ns
      AND bl.channel = ch.name AND bl.version = w.channel_versions ->> ch.name AND bl.type <> 'empty'
      AND NOT (ch.name = ANY (w.remaining))  -- only channels whose walk stops here
    OFFSET 0
) AS s
ORDER BY 1, 2 DESC, 3, 4, 5

-- name: delta_history_call
-- delta_history as a call of migration 0011's function (as 0012 replaced it), which holds its two forms (checkpoint_id
-- NULL: the latest) and plans them under enable_seqscan = off: the same rows, in the same order.
SELECT * FROM {schema}.pgsaver_delta_history(
    %(thread_id)s::text, %(checkpoint_ns)s::text, %(checkpoint_id)s::text, %(channels)b::text[])

-- ============================================================================ lifecycle

-- name: _on_threads_b
-- Nothing on one server. On Citus (the __citus form): b's thread among %(thread_ids)s, which
-- there is one thread (the lifecycle runs a thread at a time), so that every table reference of
-- the statement names it and Citus runs the statement on the thread's worker.
/* one server: the join on thread_id says it */

-- name: _on_threads_b__citus
AND b.thread_id = ANY (%(thread_ids)b::text[])

-- name: _on_threads_c
-- Nothing on one server. On Citus (the __citus form): c's thread among %(thread_ids)s, which
-- there is one thread (the lifecycle runs a thread at a time), so that every table reference of
-- the statement names it and Citus runs the statement on the thread's worker.
/* one server: the join on thread_id says it */

-- name: _on_threads_c__citus
AND c.thread_id = ANY (%(thread_ids)b::text[])

-- name: _on_threads_pw
-- Nothing on one server. On Citus (the __citus form): pw's thread among %(thread_ids)s, which
-- there is one thread (the lifecycle runs a thread at a time), so that every table reference of
-- the statement names it and Citus runs the statement on the thread's worker.
/* one server: the join on thread_id says it */

-- name: _on_threads_pw__citus
AND pw.thread_id = ANY (%(thread_ids)b::text[])

-- name: _on_threads_r
-- Nothing on one server. On Citus (the __citus form): r's thread among %(thread_ids)s, which
-- there is one thread (the lifecycle runs a thread at a time), so that every table reference of
-- the statement names it and Citus runs the statement on the thread's worker.
/* one server: the join on thread_id says it */

-- name: _on_threads_r__citus
AND r.thread_id = ANY (%(thread_ids)b::text[])

-- name: _on_threads_w
-- Nothing on one server. On Citus (the __citus form): w's thread among %(thread_ids)s, which
-- there is one thread (the lifecycle runs a thread at a time), so that every table reference of
-- the statement names it and Citus runs the statement on the thread's worker.
/* one server: the join on thread_id says it */

-- name: _on_threads_w__citus
AND w.thread_id = ANY (%(thread_ids)b::text[])

-- name: _on_threads_x
-- Nothing on one server. On Citus (the __citus form): x's thread among %(thread_ids)s, which
-- there is one thread (the lifecycle runs a thread at a time), so that every table reference of
-- the statement names it and Citus runs the statement on the thread's worker.
/* one server: the join on thread_id says it */

-- name: _on_threads_x__citus
AND x.thread_id = ANY (%(thread_ids)b::text[])

-- name: _x_stores_k
-- Expects x (a pgsaver_checkpoints row) and k (a channel name). Checkpoint x stores a value for channel k: it has a version of k whose blob is not the 'empty'
-- marker. A scalar subquery by the whole primary key: Postgres cannot turn it into a hash of all the
-- thread's blobs (as it may with EXISTS when statistics are stale).
coalesce((
    SELECT b.type <> 'empty' FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = x.thread_id AND b.checkpoint_ns = x.checkpoint_ns
      AND b.channel = k AND b.version = x.channel_versions ->> k {_on_threads_b}
), false)

-- name: _x_stores_thread_k
-- _x_stores_k for a checkpoint x of the thread %(thread_id)s (delta_history), compared with the
-- parameter (see delta_history).
coalesce((
    SELECT b.type <> 'empty' FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = %(thread_id)s AND b.checkpoint_ns = x.checkpoint_ns
      AND b.channel = k AND b.version = x.channel_versions ->> k
), false)

-- name: _x_delta
-- Expects x (a pgsaver_checkpoints row). The DeltaChannels LangGraph counts in checkpoint x's metadata (counters_since_delta_snapshot) that
-- have a version at x: LangGraph rebuilds only versioned channels, and the counters also list
-- channels never written.
ARRAY(
    SELECT d FROM jsonb_object_keys(
        CASE WHEN jsonb_typeof(x.metadata -> 'counters_since_delta_snapshot') = 'object'
             THEN x.metadata -> 'counters_since_delta_snapshot' ELSE '{}'::jsonb END
    ) AS d
    WHERE x.channel_versions ? d
)

-- name: _x_needing
-- Expects x (a pgsaver_checkpoints row) and w (its child's walk row, with needing). The channels x's
-- parent must supply: those inherited from x's descendants (w.needing) plus x's own
-- DeltaChannels, less what x stores. Sorted and distinct, so equal sets compare equal.
ARRAY(
    SELECT DISTINCT k FROM unnest(w.needing || {_x_delta}) AS k
    WHERE NOT ({_x_stores_k})
    ORDER BY k
) COLLATE "C"

-- name: _x_reads_parent_sends
-- Expects x (a pgsaver_checkpoints row). x reads its parent's __pregel_tasks writes (Send packets)
-- as its own value of that channel, as a checkpoint of format below 4 does (pending_sends): its
-- parent has such writes and x has no version of the channel. The format is inside the serialized
-- body, out of SQL's sight; a checkpoint of format 4 whose parent sent has a version of it (the
-- sends were applied to the channel), so it is never taken for one.
(NOT (x.channel_versions ? '__pregel_tasks') AND EXISTS (
    SELECT 1 FROM {schema}.pgsaver_writes AS pw
    WHERE pw.thread_id = x.thread_id AND pw.checkpoint_ns = x.checkpoint_ns
      AND pw.checkpoint_id = x.parent_checkpoint_id AND pw.channel = '__pregel_tasks'
      {_on_threads_pw}
))

-- name: _walk_row
-- Expects x (a pgsaver_checkpoints row) and w (its child's walk row). The columns of a keep-set walk
-- row: x's keys and parent, the channels x's parent must supply, and whether x reads its parent's
-- Send packets.
x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, {_x_needing},
{_x_reads_parent_sends}

-- name: _walk_up
-- Expects w (a walk row). The join of w's parent, while w still needs DeltaChannel values or Send
-- packets from it.
JOIN {schema}.pgsaver_checkpoints AS x
  ON x.thread_id = w.thread_id AND x.checkpoint_ns = w.checkpoint_ns
 AND x.checkpoint_id = w.parent_checkpoint_id {_on_threads_x}
WHERE cardinality(w.needing) > 0 OR w.sends

-- name: _walk_heads
-- Expects a CTE heads (thread_id, checkpoint_ns, checkpoint_id). The start of a keep-set walk:
-- each head as x, with nothing needed from its child (w).
FROM heads AS h
CROSS JOIN (SELECT ARRAY[]::text[] COLLATE "C" AS needing) AS w
JOIN {schema}.pgsaver_checkpoints AS x
  ON x.thread_id = h.thread_id AND x.checkpoint_ns = h.checkpoint_ns AND x.checkpoint_id = h.checkpoint_id
 {_on_threads_x}

-- name: _keep_last_set
-- keep_last as a thread's root history. CTEs (use as WITH RECURSIVE {_keep_last_set}):
--   nss:       every namespace of the given threads, with its owner: the root checkpoint whose task
--              ran it (LangGraph's metadata "parents" -> '', as of its newest checkpoint), for the
--              namespace of one subgraph call ("name:<task id>", the last "|" part); NULL for the
--              root namespace, for a namespace whose checkpoints name no owner, and for a
--              subgraph compiled with checkpointer=True ("name": its state lives on across calls); and
--              whether that owner is pending (see sub_walk);
--   heads:     the newest keep_last checkpoints of every namespace;
--   root_walk: the newest keep_last root checkpoints of each thread, plus every ancestor their
--              DeltaChannels need, back to the nearest stored value of each channel, transitively
--              (a kept ancestor's own DeltaChannels too); "needing" = channels the parent supplies;
--   sub_walk:  the same from the newest keep_last checkpoints of each subgraph namespace whose
--              owner is kept (get_state(subgraphs=True) of a kept root checkpoint reads them, and
--              resuming an interrupt inside a subgraph loads them), or that names no owner, or
--              whose owner is pending: newer than the thread's newest root checkpoint, so not
--              deleted (keep-last keeps the newest) but still being saved (LangGraph runs a step's
--              tasks, subgraphs included, while it saves that step's checkpoint in the background);
--              a namespace whose owner is gone or not kept is not kept at all;
--   keep:      the union;
--   doomed:    every other checkpoint of the threads, with its owner and the order batches delete
--              in (see prune_keep_last_batch).
nss AS (
    SELECT n.thread_id, n.checkpoint_ns, o.owner,
           o.owner COLLATE "C" > coalesce((
               SELECT max(r.checkpoint_id) FROM {schema}.pgsaver_checkpoints AS r
               WHERE r.thread_id = n.thread_id AND r.checkpoint_ns = '' {_on_threads_r}
           ), '') AS pending
    FROM (
        SELECT DISTINCT c.thread_id, c.checkpoint_ns
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = ANY (%(thread_ids)b::text[])
    ) AS n
    LEFT JOIN LATERAL (
        SELECT c.metadata -> 'parents' ->> '' AS owner
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = n.thread_id AND c.checkpoint_ns = n.checkpoint_ns {_on_threads_c}
        ORDER BY c.checkpoint_id DESC
        LIMIT 1
    ) AS o ON n.checkpoint_ns ~ ':[^|]*$'
),
heads AS (
    SELECT n.thread_id, n.checkpoint_ns, n.owner, n.pending, h.checkpoint_id
    FROM nss AS n
    CROSS JOIN LATERAL (
        SELECT c.checkpoint_id
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = n.thread_id AND c.checkpoint_ns = n.checkpoint_ns {_on_threads_c}
        ORDER BY c.checkpoint_id DESC
        LIMIT %(keep_last)s
    ) AS h
),
root_walk (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, needing, sends) AS (
    SELECT {_walk_row} {_walk_heads}
    WHERE h.checkpoint_ns = ''
    UNION
    SELECT {_walk_row} FROM root_walk AS w {_walk_up}
),
sub_walk (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, needing, sends) AS (
    SELECT {_walk_row} {_walk_heads}
    WHERE h.checkpoint_ns <> ''
      AND (h.owner IS NULL OR h.pending OR EXISTS (
          SELECT 1 FROM root_walk AS r
          WHERE r.thread_id = h.thread_id AND r.checkpoint_ns = '' AND r.checkpoint_id = h.owner
      ))
    UNION
    SELECT {_walk_row} FROM sub_walk AS w {_walk_up}
),
keep AS (
    SELECT thread_id, checkpoint_ns, checkpoint_id FROM root_walk
    UNION
    SELECT thread_id, checkpoint_ns, checkpoint_id FROM sub_walk
),
doomed AS (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, n.owner,
           -- the root checkpoint a row goes with: itself, or its namespace's owner
           coalesce(n.owner, c.checkpoint_id) AS anchor,
           -- 0 for the root namespace, else how deep the subgraph is nested
           CASE WHEN c.checkpoint_ns = '' THEN 0
                ELSE 1 + length(c.checkpoint_ns) - length(replace(c.checkpoint_ns, '|', '')) END AS depth
    FROM {schema}.pgsaver_checkpoints AS c
    JOIN nss AS n ON n.thread_id = c.thread_id AND n.checkpoint_ns = c.checkpoint_ns
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])
      AND NOT EXISTS (
          SELECT 1 FROM keep AS k
          WHERE k.thread_id = c.thread_id AND k.checkpoint_ns = c.checkpoint_ns
            AND k.checkpoint_id = c.checkpoint_id
      )
)

-- name: prune_keep_last_batch
-- Delete at most %(batch)s checkpoints (with their writes) of the doomed (see _keep_last_set), so
-- that what stays after this batch commits reads exactly as before: newest first (a checkpoint
-- before its ancestors: checkpoint ids grow with time, as LangGraph's "latest" assumes), a root
-- checkpoint before the subgraph checkpoints it owns (get_state(subgraphs=True) reads them), the
-- shallower subgraph first. "held": picked rows that a row staying still needs (the parent of a
-- doomed row not picked, the subgraph rows of a root checkpoint not picked, transitively); with ids
-- in time order there are none, but ids given out of order must not break a survivor either.
-- Returns the threads touched, counts, bytes, and how many doomed checkpoints are left.
WITH RECURSIVE {_keep_last_set},
pick AS (
    SELECT * FROM doomed
    ORDER BY thread_id, anchor DESC, depth, checkpoint_id DESC
    LIMIT %(batch)s
),
unpicked AS (
    SELECT d.* FROM doomed AS d
    WHERE NOT EXISTS (
        SELECT 1 FROM pick AS p
        WHERE p.thread_id = d.thread_id AND p.checkpoint_ns = d.checkpoint_ns
          AND p.checkpoint_id = d.checkpoint_id
    )
),
held (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id) AS (
    SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id
    FROM pick AS p
    WHERE EXISTS (
        SELECT 1 FROM unpicked AS u
        WHERE u.thread_id = p.thread_id AND u.checkpoint_ns = p.checkpoint_ns
          AND u.parent_checkpoint_id = p.checkpoint_id
    ) OR (p.owner IS NOT NULL AND EXISTS (
        SELECT 1 FROM unpicked AS u
        WHERE u.thread_id = p.thread_id AND u.checkpoint_ns = '' AND u.checkpoint_id = p.owner
    ))
    UNION
    SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id
    FROM held AS h
    JOIN pick AS p
      ON p.thread_id = h.thread_id
     AND ((p.checkpoint_ns = h.checkpoint_ns AND p.checkpoint_id = h.parent_checkpoint_id)
          OR (h.checkpoint_ns = '' AND p.owner = h.checkpoint_id))
),
batch AS (
    SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id FROM pick AS p
    EXCEPT
    SELECT h.thread_id, h.checkpoint_ns, h.checkpoint_id FROM held AS h
),
deleted_writes AS (
    DELETE FROM {schema}.pgsaver_writes AS w
    USING batch AS b
    WHERE w.thread_id = b.thread_id AND w.checkpoint_ns = b.checkpoint_ns AND w.checkpoint_id = b.checkpoint_id
      {_on_threads_w}
    RETURNING pg_column_size(w.*) AS size
),
deleted AS (
    DELETE FROM {schema}.pgsaver_checkpoints AS c
    USING batch AS b
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint_id = b.checkpoint_id
      {_on_threads_c}
    RETURNING c.thread_id, pg_column_size(c.*) AS size
)
SELECT ARRAY(SELECT DISTINCT thread_id FROM deleted),
       (SELECT count(*) FROM deleted),
       (SELECT count(*) FROM deleted_writes),
       coalesce((SELECT sum(size) FROM deleted), 0) + coalesce((SELECT sum(size) FROM deleted_writes), 0),
       (SELECT count(*) FROM doomed) - (SELECT count(*) FROM deleted)

-- name: citus_prune_pick
-- On Citus, prune_keep_last_batch in two statements (a data-modifying CTE makes Citus plan each
-- CTE apart, and a recursive one then needs a table filtered by thread): this one picks the batch
-- of the one thread %(thread_ids)s as prune_keep_last_batch does, and returns its keys and how
-- many checkpoints are doomed; citus_prune_delete deletes them, in the same transaction.
WITH RECURSIVE {_keep_last_set},
pick AS (
    SELECT * FROM doomed
    ORDER BY thread_id, anchor DESC, depth, checkpoint_id DESC
    LIMIT %(batch)s
),
unpicked AS (
    SELECT d.* FROM doomed AS d
    WHERE NOT EXISTS (
        SELECT 1 FROM pick AS p
        WHERE p.thread_id = d.thread_id AND p.checkpoint_ns = d.checkpoint_ns
          AND p.checkpoint_id = d.checkpoint_id
    )
),
held (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id) AS (
    SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id
    FROM pick AS p
    WHERE EXISTS (
        SELECT 1 FROM unpicked AS u
        WHERE u.thread_id = p.thread_id AND u.checkpoint_ns = p.checkpoint_ns
          AND u.parent_checkpoint_id = p.checkpoint_id
    ) OR (p.owner IS NOT NULL AND EXISTS (
        SELECT 1 FROM unpicked AS u
        WHERE u.thread_id = p.thread_id AND u.checkpoint_ns = '' AND u.checkpoint_id = p.owner
    ))
    UNION
    SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id
    FROM held AS h
    JOIN pick AS p
      ON p.thread_id = h.thread_id
     AND ((p.checkpoint_ns = h.checkpoint_ns AND p.checkpoint_id = h.parent_checkpoint_id)
          OR (h.checkpoint_ns = '' AND p.owner = h.checkpoint_id))
),
batch AS (
    SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id FROM pick AS p
    EXCEPT
    SELECT h.thread_id, h.checkpoint_ns, h.checkpoint_id FROM held AS h
)
SELECT array_agg(b.checkpoint_ns), array_agg(b.checkpoint_id), (SELECT count(*) FROM doomed)
FROM batch AS b

-- name: citus_prune_delete
-- The second statement of citus_prune_pick: the picked checkpoints of the thread %(thread_ids)s
-- (namespaces %(nss)s, ids %(ids)s) and their writes deleted, their sizes read first (the thread
-- is locked: nothing writes it between the two); the row prune_keep_last_batch returns, with
-- %(doomed)s doomed before this batch.
WITH b AS MATERIALIZED (
    SELECT * FROM unnest(%(nss)b::text[], %(ids)b::text[]) AS b (checkpoint_ns, checkpoint_id)
), sized AS MATERIALIZED (
    SELECT (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM {schema}.pgsaver_writes AS w
            WHERE w.thread_id = ANY (%(thread_ids)b::text[])
              AND (w.checkpoint_ns, w.checkpoint_id) IN (SELECT b.checkpoint_ns, b.checkpoint_id FROM b))
         + (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id = ANY (%(thread_ids)b::text[])
              AND (c.checkpoint_ns, c.checkpoint_id) IN (SELECT b.checkpoint_ns, b.checkpoint_id FROM b))
           AS bytes
), deleted_writes AS (
    DELETE FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = ANY (%(thread_ids)b::text[])
      AND (w.checkpoint_ns, w.checkpoint_id) IN (SELECT b.checkpoint_ns, b.checkpoint_id FROM b)
    RETURNING 1
), deleted AS (
    DELETE FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])
      AND (c.checkpoint_ns, c.checkpoint_id) IN (SELECT b.checkpoint_ns, b.checkpoint_id FROM b)
    RETURNING c.thread_id
)
SELECT ARRAY(SELECT DISTINCT thread_id FROM deleted),
       (SELECT count(*) FROM deleted),
       (SELECT count(*) FROM deleted_writes),
       CASE WHEN (SELECT count(*) FROM deleted) > 0 THEN (SELECT bytes FROM sized) ELSE 0 END,
       %(doomed)s::bigint - (SELECT count(*) FROM deleted)

-- name: prune_keep_last_plan
-- Dry run of prune_keep_last_batch + prune_blobs: what would go, without deleting.
WITH RECURSIVE {_keep_last_set},
gone_writes AS (
    SELECT pg_column_size(w.*) AS size
    FROM {schema}.pgsaver_writes AS w
    JOIN doomed AS d
      ON w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns AND w.checkpoint_id = d.checkpoint_id
    WHERE w.thread_id = ANY (%(thread_ids)b::text[])
),
gone AS (
    SELECT c.thread_id, pg_column_size(c.*) AS size
    FROM {schema}.pgsaver_checkpoints AS c
    JOIN doomed AS d
      ON c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns AND c.checkpoint_id = d.checkpoint_id
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])
),
refs AS (
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM keep AS k
    JOIN {schema}.pgsaver_checkpoints AS c
      ON c.thread_id = k.thread_id AND c.checkpoint_ns = k.checkpoint_ns AND c.checkpoint_id = k.checkpoint_id
      {_on_threads_c}
    CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS v
),
gone_blobs AS (
    SELECT pg_column_size(b.*) AS size
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = ANY (%(thread_ids)b::text[])
      AND NOT EXISTS (
          SELECT 1 FROM refs AS r
          WHERE r.thread_id = b.thread_id AND r.checkpoint_ns = b.checkpoint_ns
            AND r.channel = b.channel AND r.version = b.version
      )
)
, {_no_gone_elements}
{_report_gone}

-- name: prune_blobs
-- Blobs of the given threads that no remaining checkpoint references.
WITH refs AS (
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM {schema}.pgsaver_checkpoints AS c
    CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS v
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])
),
deleted AS (
    DELETE FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = ANY (%(thread_ids)b::text[])
      AND NOT EXISTS (
          SELECT 1 FROM refs AS r
          WHERE r.thread_id = b.thread_id AND r.checkpoint_ns = b.checkpoint_ns
            AND r.channel = b.channel AND r.version = b.version
      )
    RETURNING pg_column_size(b.*) AS size
)
SELECT count(*), coalesce(sum(size), 0) FROM deleted

-- name: prune_blobs__citus
-- On Citus: prune_blobs with the doomed blobs (and their sizes) read first, then deleted by key
-- (no STABLE function in a RETURNING clause there); one thread, %(thread_ids)s.
WITH refs AS MATERIALIZED (
    SELECT DISTINCT c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM {schema}.pgsaver_checkpoints AS c
    CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS v
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])
), doomed AS MATERIALIZED (
    SELECT b.checkpoint_ns, b.channel, b.version, pg_column_size(b.*) AS size
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = ANY (%(thread_ids)b::text[])
      AND (b.checkpoint_ns, b.channel, b.version) NOT IN (
          SELECT r.checkpoint_ns, r.channel, r.version FROM refs AS r)
), deleted AS (
    DELETE FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = ANY (%(thread_ids)b::text[])
      AND (b.checkpoint_ns, b.channel, b.version) IN (
          SELECT d.checkpoint_ns, d.channel, d.version FROM doomed AS d)
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted),
       CASE WHEN (SELECT count(*) FROM deleted) > 0 THEN (SELECT sum(size) FROM doomed) ELSE 0 END

-- name: delete_threads
-- Every row of the given threads -- with idle_for, only of those still idle (checked again under the
-- retention job's locks); returns what went, and which threads.
WITH chosen AS (
    SELECT t.thread_id
    FROM unnest(%(thread_ids)b::text[]) AS t (thread_id)
    WHERE %(idle_for)s::interval IS NULL OR NOT EXISTS (
        SELECT 1 FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = t.thread_id AND c.created_at >= now() - %(idle_for)s::interval
    )
), gone_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING pg_column_size(pgsaver_blobs.*) AS size
), gone_writes AS (
    DELETE FROM {schema}.pgsaver_writes WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING pg_column_size(pgsaver_writes.*) AS size
), gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING thread_id, checkpoint_id, pg_column_size(pgsaver_checkpoints.*) AS size
), {_gone_elements}, {_records_gone}
{_report_gone},
       -- the threads deleted, sorted: a retention job prunes the others it found idle (written since)
       ARRAY(SELECT DISTINCT thread_id FROM gone ORDER BY 1)

-- name: delete_threads__citus
-- On Citus (no STABLE function in a RETURNING clause, no correlated subquery beside unnest): the
-- threads chosen, their rows' sizes read, then deleted; the same report as delete_threads. The
-- sizes are of the rows the deletes remove: the threads are locked exclusively, so nothing
-- writes them between the two.
WITH chosen AS MATERIALIZED (
    SELECT t.thread_id
    FROM unnest(%(thread_ids)b::text[]) AS t (thread_id)
    WHERE %(idle_for)s::interval IS NULL OR t.thread_id <> ALL (ARRAY(
        SELECT DISTINCT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = ANY (%(thread_ids)b::text[])
          AND c.created_at >= now() - %(idle_for)s::interval))
), sized AS MATERIALIZED (
    SELECT (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM {schema}.pgsaver_blobs AS b
            WHERE b.thread_id IN (SELECT thread_id FROM chosen))
         + (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM {schema}.pgsaver_writes AS w
            WHERE w.thread_id IN (SELECT thread_id FROM chosen))
         + (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id IN (SELECT thread_id FROM chosen))
         + {_elements_bytes_chosen} AS bytes
), {_gone_elements_citus}, gone_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING 1
), gone_writes AS (
    DELETE FROM {schema}.pgsaver_writes WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING 1
), gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING thread_id, checkpoint_id
), {_records_gone}
SELECT (SELECT count(DISTINCT thread_id) FROM gone),
       (SELECT count(*) FROM gone),
       (SELECT count(*) FROM gone_writes),
       (SELECT count(*) FROM gone_blobs),
       CASE WHEN (SELECT count(*) FROM gone) > 0 THEN (SELECT bytes FROM sized) ELSE 0 END,
       ARRAY(SELECT DISTINCT thread_id FROM gone ORDER BY 1)

-- name: _records_gone
-- delete_threads' CTE recorded: migration 0018's record of each thread deleted (_record_deleted),
-- from the checkpoints the CTE gone deleted.
recorded AS (
    INSERT INTO {schema}.pgsaver_deleted_threads AS d (thread_id, last_checkpoint_id)
    SELECT g.thread_id, max(g.checkpoint_id) FROM gone AS g GROUP BY g.thread_id
    {_recorded_again}
)

-- name: _records_gone__nodeleted
recorded AS (SELECT 1)

-- name: _report_gone
-- A lifecycle report from the CTEs gone (thread_id, size), gone_writes (size), gone_blobs (size)
-- and gone_elements (size: the parts of lists stored as their elements, counted in bytes only):
-- threads, checkpoints, writes, blobs, bytes.
SELECT (SELECT count(DISTINCT thread_id) FROM gone),
       (SELECT count(*) FROM gone),
       (SELECT count(*) FROM gone_writes),
       (SELECT count(*) FROM gone_blobs),
       coalesce((SELECT sum(size) FROM gone), 0) + coalesce((SELECT sum(size) FROM gone_writes), 0)
           + coalesce((SELECT sum(size) FROM gone_blobs), 0)
           + coalesce((SELECT sum(size) FROM gone_elements), 0)

-- name: _no_gone_elements
-- For a report (_report_gone) of a job whose parts gc_elements deletes afterwards: none here.
gone_elements AS (SELECT 0 AS size WHERE false)

-- name: _gone_elements
-- delete_threads' CTE: the parts of the chosen threads, deleted (also of a thread left with
-- values but no checkpoint).
gone_elements AS (
    DELETE FROM {schema}.pgsaver_elements WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING pg_column_size(pgsaver_elements.*) AS size
)

-- name: _gone_elements__nolists
gone_elements AS (SELECT 0 AS size WHERE false)

-- name: _gone_elements_citus
-- delete_threads__citus' CTE: _gone_elements, its sizes read by _elements_bytes_chosen first.
gone_elements AS (
    DELETE FROM {schema}.pgsaver_elements WHERE thread_id IN (SELECT thread_id FROM chosen)
    RETURNING 1
)

-- name: _gone_elements_citus__nolists
gone_elements AS (SELECT 1 WHERE false)

-- name: _elements_bytes_chosen
-- The bytes of the parts of the threads in CTE chosen.
(SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id IN (SELECT thread_id FROM chosen))

-- name: _elements_bytes_chosen__nolists
0

-- name: _elements_bytes_of_threads
-- The bytes of the parts of the threads %(thread_ids)s.
coalesce((SELECT sum(pg_column_size(e.*)) FROM {schema}.pgsaver_elements AS e
          WHERE e.thread_id = ANY (%(thread_ids)b::text[])), 0)

-- name: _elements_bytes_of_threads__nolists
0

-- name: _elements_bytes_of_per
-- The bytes of the parts of thread per.thread_id.
coalesce((SELECT sum(pg_column_size(e.*)) FROM {schema}.pgsaver_elements AS e
          WHERE e.thread_id = per.thread_id), 0)

-- name: _elements_bytes_of_per__nolists
0

-- name: _elements_sizes_by_thread
-- The bytes of each thread's parts (lists stored as their elements) as a subquery (thread_id,
-- bytes) to join by thread.
(SELECT e.thread_id, sum(pg_column_size(e.*)) AS bytes FROM {schema}.pgsaver_elements AS e
 GROUP BY e.thread_id)

-- name: _elements_sizes_by_thread__nolists
(SELECT NULL::text AS thread_id, 0::bigint AS bytes WHERE false)

-- name: missing_threads
-- Of the given thread ids, those that hold no checkpoint (an index-only probe of the primary key
-- each, for short lists): the ids a lifecycle call names in its report (Report.missing). A thread
-- exists while it holds a checkpoint.
SELECT t.thread_id
FROM unnest(%(thread_ids)b::text[]) AS t (thread_id)
WHERE NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_checkpoints AS c WHERE c.thread_id = t.thread_id)
ORDER BY 1

-- name: missing_threads__citus
-- On Citus: the threads found first (one query over the shards holding the given threads: Citus
-- runs no correlated subquery beside a set-returning function), then those of the ids not found.
SELECT t.thread_id
FROM unnest(%(thread_ids)b::text[]) AS t (thread_id)
WHERE t.thread_id <> ALL (ARRAY(
    SELECT DISTINCT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = ANY (%(thread_ids)b::text[])))
ORDER BY 1

-- name: threads_size
-- Dry run of delete_threads.
SELECT (SELECT count(DISTINCT thread_id) FROM {schema}.pgsaver_checkpoints WHERE thread_id = ANY (%(thread_ids)b::text[])),
       (SELECT count(*) FROM {schema}.pgsaver_checkpoints WHERE thread_id = ANY (%(thread_ids)b::text[])),
       (SELECT count(*) FROM {schema}.pgsaver_writes WHERE thread_id = ANY (%(thread_ids)b::text[])),
       (SELECT count(*) FROM {schema}.pgsaver_blobs WHERE thread_id = ANY (%(thread_ids)b::text[])),
       coalesce((SELECT sum(pg_column_size(c.*)) FROM {schema}.pgsaver_checkpoints AS c WHERE c.thread_id = ANY (%(thread_ids)b::text[])), 0)
           + coalesce((SELECT sum(pg_column_size(w.*)) FROM {schema}.pgsaver_writes AS w WHERE w.thread_id = ANY (%(thread_ids)b::text[])), 0)
           + coalesce((SELECT sum(pg_column_size(b.*)) FROM {schema}.pgsaver_blobs AS b WHERE b.thread_id = ANY (%(thread_ids)b::text[])), 0)
           + {_elements_bytes_of_threads}

-- name: gin_pending_list_small
-- copy_thread's transaction: the metadata GIN index's pending list of new entries is merged into
-- the index when it passes 256 kB rather than the default 4 MB. A merge runs inside the insert
-- that fills the list: of 4 MB it took a 2,000-row batch from 13 ms to 116 ms (past 250 ms on a
-- busy server); of 256 kB, the worst batch takes 30-40 ms. Transaction-local.
SELECT set_config('gin_pending_list_limit', '256kB', true)

-- name: copy_target_used
-- copy_thread, batched: whether the target holds a checkpoint (then nothing is copied).
SELECT EXISTS (SELECT 1 FROM {schema}.pgsaver_checkpoints WHERE thread_id = %(target)s)

-- The batches of copy_thread (checkpoint/lifecycle.copy_thread): the next %(batch)s rows of the
-- source in primary-key order after %(after)s (the last key of the batch before, as text; NULL for
-- the first), copied under the target's thread id with identical ids. All run in one
-- transaction, so the copy is as atomic as one statement, and each statement stays short (a role's
-- statement_timeout applies per statement). Each returns how many it copied, how many it read
-- (fewer than %(batch)s: the last batch) and the last key it read.
-- Each statement reads the source with a snapshot of its own (READ COMMITTED), while the source's
-- puts go on (lock_copy holds its lock shared: no prune or retention of it runs meanwhile). So the
-- checkpoints go first, then their writes, then the values: a put stores its values with its
-- checkpoint, so the values of every checkpoint copied are there for the later statements; the
-- checkpoints copied are closed under parents (ids grow with time: a checkpoint put after its
-- namespace's batches ran is newer than every one they copied, and so are its children); writes
-- are copied only for the checkpoints copied; a value of a checkpoint put meanwhile may be copied
-- without its checkpoint (unreferenced, as prune leaves none; harmless).

-- copy_thread with overwrite, batched as the copy is (in its transaction, under the target's
-- lock, before it): the target's next %(batch)s rows of a table after %(after)s deleted. Keys in
-- order, after the last one deleted: a scan from the start would walk again, at every batch, over
-- the index entries of the rows this transaction deleted already. The rows go by ctid (a TID
-- scan: the join back by key was planned as a scan of the whole thread).

-- name: clear_blobs_batch
WITH picked AS MATERIALIZED (
    SELECT b.ctid, b.checkpoint_ns, b.channel, b.version
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = %(target)s
      AND (%(after)s::text[] IS NULL
           OR (b.checkpoint_ns, b.channel, b.version)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3]))
    ORDER BY b.checkpoint_ns, b.channel, b.version
    LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_blobs WHERE ctid = ANY (ARRAY(SELECT p.ctid FROM picked AS p))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.channel, p.version] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.channel DESC, p.version DESC LIMIT 1)

-- name: clear_blobs_batch__citus
-- On Citus (no delete by ctid there): clear_blobs_batch, the picked rows deleted by key.
WITH picked AS MATERIALIZED (
    SELECT b.checkpoint_ns, b.channel, b.version
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = %(target)s
      AND (%(after)s::text[] IS NULL
           OR (b.checkpoint_ns, b.channel, b.version)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3]))
    ORDER BY b.checkpoint_ns, b.channel, b.version
    LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = %(target)s
      AND (b.checkpoint_ns, b.channel, b.version) IN (SELECT p.checkpoint_ns, p.channel, p.version FROM picked AS p)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.channel, p.version] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.channel DESC, p.version DESC LIMIT 1)

-- name: clear_writes_batch
WITH picked AS MATERIALIZED (
    SELECT w.ctid, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(target)s
      AND (%(after)s::text[] IS NULL
           OR (w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3],
                 (%(after)s::text[])[4]::integer))
    ORDER BY w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_writes WHERE ctid = ANY (ARRAY(SELECT p.ctid FROM picked AS p))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx::text] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC, p.task_id DESC, p.idx DESC LIMIT 1)

-- name: clear_writes_batch__citus
-- On Citus (no delete by ctid there): clear_writes_batch, the picked rows deleted by key.
WITH picked AS MATERIALIZED (
    SELECT w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(target)s
      AND (%(after)s::text[] IS NULL
           OR (w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3],
                 (%(after)s::text[])[4]::integer))
    ORDER BY w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(target)s
      AND (w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx) IN (SELECT p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx FROM picked AS p)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx::text] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC, p.task_id DESC, p.idx DESC LIMIT 1)

-- name: clear_checkpoints_batch
WITH picked AS MATERIALIZED (
    SELECT c.ctid, c.checkpoint_ns, c.checkpoint_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(target)s
      AND (%(after)s::text[] IS NULL
           OR (c.checkpoint_ns, c.checkpoint_id)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2]))
    ORDER BY c.checkpoint_ns, c.checkpoint_id
    LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints WHERE ctid = ANY (ARRAY(SELECT p.ctid FROM picked AS p))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC LIMIT 1)

-- name: clear_checkpoints_batch__citus
-- On Citus (no delete by ctid there): clear_checkpoints_batch, the picked rows deleted by key.
WITH picked AS MATERIALIZED (
    SELECT c.checkpoint_ns, c.checkpoint_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(target)s
      AND (%(after)s::text[] IS NULL
           OR (c.checkpoint_ns, c.checkpoint_id)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2]))
    ORDER BY c.checkpoint_ns, c.checkpoint_id
    LIMIT %(batch)s
), gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(target)s
      AND (c.checkpoint_ns, c.checkpoint_id) IN (SELECT p.checkpoint_ns, p.checkpoint_id FROM picked AS p)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC LIMIT 1)

-- name: copy_blobs_batch
WITH picked AS MATERIALIZED (
    SELECT b.checkpoint_ns, b.channel, b.version, b.type, b.blob
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id = %(source)s
      AND (%(after)s::text[] IS NULL
           OR (b.checkpoint_ns, b.channel, b.version)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3]))
    ORDER BY b.checkpoint_ns, b.channel, b.version
    LIMIT %(batch)s
), copied AS (
    INSERT INTO {schema}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(target)s, p.checkpoint_ns, p.channel, p.version, p.type, p.blob FROM picked AS p
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM copied), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.channel, p.version] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.channel DESC, p.version DESC LIMIT 1)

-- name: copy_elements_batch
-- copy_thread's parts (lists stored as their elements): every part of the source, by key; the
-- target's status refresh then deletes those no copied value names (gc_elements).
WITH picked AS MATERIALIZED (
    SELECT e.key, e.blob
    FROM {schema}.pgsaver_elements AS e
    WHERE e.thread_id = %(source)s
      AND (%(after)s::text[] IS NULL OR e.key > decode((%(after)s::text[])[1], 'hex'))
    ORDER BY e.key
    LIMIT %(batch)s
), copied AS (
    INSERT INTO {schema}.pgsaver_elements (thread_id, key, blob)
    SELECT %(target)s, p.key, p.blob FROM picked AS p
    ON CONFLICT (thread_id, key) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM copied), (SELECT count(*) FROM picked),
       (SELECT ARRAY[encode(p.key, 'hex')] FROM picked AS p ORDER BY p.key DESC LIMIT 1)

-- name: copy_elements_batch__nolists
-- Without migration 0015: no parts to copy (nothing changed, nothing read).
SELECT 0, 0, NULL::text[]
FROM (SELECT %(source)s::text, %(target)s::text, %(after)s::text[], %(batch)s::integer) AS p

-- name: copy_writes_batch
WITH picked AS MATERIALIZED (
    SELECT w.*
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(source)s
      -- a probe per write (OFFSET 0: never a join driven by the target's checkpoints, which
      -- the statistics do not know yet, and which took 110 s for the batches of one thread)
      AND EXISTS (SELECT 1 FROM {schema}.pgsaver_checkpoints AS t
                  WHERE t.thread_id = %(target)s AND t.checkpoint_ns = w.checkpoint_ns
                    AND t.checkpoint_id = w.checkpoint_id
                  OFFSET 0)
      AND (%(after)s::text[] IS NULL
           OR (w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3],
                 (%(after)s::text[])[4]::integer))
    ORDER BY w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    LIMIT %(batch)s
), copied AS (
    INSERT INTO {schema}.pgsaver_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path,
        run_id, replaced_run_ids
    )
    SELECT %(target)s, p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx, p.channel, p.type,
           p.blob, p.task_path, p.run_id, p.replaced_run_ids
    FROM picked AS p
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM copied), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx::text] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC, p.task_id DESC, p.idx DESC LIMIT 1)

-- name: copy_writes_batch__citus
-- On Citus (source and target on different workers: no join of the two): the target's copied
-- checkpoints read by an uncorrelated subquery, which Citus runs on the target's worker first.
WITH picked AS MATERIALIZED (
    SELECT w.*
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = %(source)s
      AND (w.checkpoint_ns, w.checkpoint_id) IN (
          SELECT t.checkpoint_ns, t.checkpoint_id FROM {schema}.pgsaver_checkpoints AS t
          WHERE t.thread_id = %(target)s)
      AND (%(after)s::text[] IS NULL
           OR (w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2], (%(after)s::text[])[3],
                 (%(after)s::text[])[4]::integer))
    ORDER BY w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    LIMIT %(batch)s
), copied AS (
    INSERT INTO {schema}.pgsaver_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path,
        run_id, replaced_run_ids
    )
    SELECT %(target)s, p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx, p.channel, p.type,
           p.blob, p.task_path, p.run_id, p.replaced_run_ids
    FROM picked AS p
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM copied), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id, p.task_id, p.idx::text] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC, p.task_id DESC, p.idx DESC LIMIT 1)

-- name: copy_checkpoints_batch
-- The source's checkpoints copied are locked FOR KEY SHARE until the copy commits: delete_thread
-- takes no advisory lock, and one of the source that committed between this batch and the writes'
-- and values' batches would leave the copy with checkpoints whose values and writes are gone. It
-- now waits for the copy (its deletes of values and writes, not committed, are still seen by the
-- later batches); one that deleted first is waited for, and its rows are not copied.
WITH picked AS MATERIALIZED (
    SELECT c.*
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = %(source)s
      AND (%(after)s::text[] IS NULL
           OR (c.checkpoint_ns, c.checkpoint_id)
              > ((%(after)s::text[])[1], (%(after)s::text[])[2]))
    ORDER BY c.checkpoint_ns, c.checkpoint_id
    LIMIT %(batch)s
    FOR KEY SHARE OF c
), copied AS (
    INSERT INTO {schema}.pgsaver_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
        channel_versions, metadata, metadata_exact, created_at
    )
    SELECT %(target)s, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id, p.run_id, p.type,
           p.checkpoint, p.channel_versions, p.metadata, p.metadata_exact, now()
    FROM picked AS p
    RETURNING 1
)
SELECT (SELECT count(*) FROM copied), (SELECT count(*) FROM picked),
       (SELECT ARRAY[p.checkpoint_ns, p.checkpoint_id] FROM picked AS p
        ORDER BY p.checkpoint_ns DESC, p.checkpoint_id DESC LIMIT 1)

-- name: _ns_task
-- Expects x (a row with checkpoint_ns). The task id in the first part of a subgraph's namespace
-- ("node:<task id>|..."): the root graph's task whose call of the subgraph stored it.
split_part(split_part(x.checkpoint_ns, '|', 1), ':', 2)

-- name: _runs_doomed
-- What delete_for_runs deletes, as CTEs (after WITH), and why it may refuse. Expects the parameters
-- run_ids and thread_ids (the runs' threads: lock_threads_of_runs / runs_threads); every lookup
-- stays within those threads. Rules: docs/design.md (section 8) and docs/guide.md ("Deleting runs").
--   tagged: the runs' checkpoints; run_writes: the runs' writes (migration 0009), wherever they sit.
--   doomed: tagged, plus the checkpoints without a run id of a subgraph namespace whose root task
--     wrote only rows that go (LangChain gives a top-level config "run_id" to the root graph only:
--     such a run's subgraph checkpoints carry none).
--   doomed_writes: every write of a doomed checkpoint; the runs' writes on surviving checkpoints
--     (elsewhere); and, for rows written before migration 0009 (no run id), the DeltaChannel
--     writes a durability="exit" run stored on the checkpoint it started from, when every child of
--     that checkpoint goes (LangGraph's synthetic task ids: the first group "ffffffff", or the
--     superstep after the checkpoint's: its step + 1 or + 2, as eight digits).
--   delta_dependents: surviving checkpoints that would read their DeltaChannels differently: a
--     child of a doomed checkpoint with a DeltaChannel it does not store, or a child of a checkpoint
--     losing writes to a DeltaChannel the child does not store.
--   entangled: rows that cannot be told apart from those of runs that stay: a special write that
--     replaced another run's (replaced_run_ids), and a subgraph namespace of a task another run
--     also wrote to, holding checkpoints without a run id that these runs did not tag.
tagged AS MATERIALIZED (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.run_id
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.run_id = ANY (%(run_ids)b::text[]) AND c.thread_id = ANY (%(thread_ids)b::text[])
),
run_writes AS MATERIALIZED (
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.run_id,
           w.replaced_run_ids
    FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = ANY (%(thread_ids)b::text[]) AND w.run_id = ANY (%(run_ids)b::text[])
),
-- root tasks with a write that goes: at a doomed root checkpoint, or of the runs
doomed_tasks AS MATERIALIZED (
    SELECT w.thread_id, w.task_id
    FROM tagged AS t
    JOIN {schema}.pgsaver_writes AS w
      ON w.thread_id = t.thread_id AND w.checkpoint_ns = t.checkpoint_ns AND w.checkpoint_id = t.checkpoint_id
    WHERE t.checkpoint_ns = ''
    UNION
    SELECT r.thread_id, r.task_id FROM run_writes AS r WHERE r.checkpoint_ns = ''
),
-- subgraph namespaces holding checkpoints without a run id, of such a task; shared: the task has
-- root writes that stay (it sits on a checkpoint that stays, and other runs wrote for it too)
sub_tasks AS MATERIALIZED (
    SELECT s.thread_id, s.checkpoint_ns, s.task_id,
           EXISTS (
               SELECT 1 FROM {schema}.pgsaver_writes AS w
               WHERE w.thread_id = s.thread_id AND w.checkpoint_ns = '' AND w.task_id = s.task_id
                 AND (w.run_id IS NULL OR NOT w.run_id = ANY (%(run_ids)b::text[]))
                 AND NOT EXISTS (
                     SELECT 1 FROM tagged AS t
                     WHERE t.thread_id = w.thread_id AND t.checkpoint_ns = ''
                       AND t.checkpoint_id = w.checkpoint_id
                 )
           ) AS shared
    FROM (
        SELECT DISTINCT x.thread_id, x.checkpoint_ns, {_ns_task} AS task_id
        FROM {schema}.pgsaver_checkpoints AS x
        WHERE x.thread_id = ANY (%(thread_ids)b::text[]) AND x.checkpoint_ns <> ''
          AND x.run_id IS NULL
    ) AS s
    WHERE EXISTS (
        SELECT 1 FROM doomed_tasks AS d WHERE d.thread_id = s.thread_id AND d.task_id = s.task_id
    )
),
doomed AS MATERIALIZED (
    SELECT thread_id, checkpoint_ns, checkpoint_id FROM tagged
    UNION
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id
    FROM sub_tasks AS s
    JOIN {schema}.pgsaver_checkpoints AS c
      ON c.thread_id = s.thread_id AND c.checkpoint_ns = s.checkpoint_ns
    WHERE NOT s.shared AND c.run_id IS NULL
),
-- surviving checkpoints with a doomed child, and whether all their children go
anchors AS MATERIALIZED (
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, c.parent_checkpoint_id AS checkpoint_id
    FROM doomed AS d
    JOIN {schema}.pgsaver_checkpoints AS c
      ON c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns AND c.checkpoint_id = d.checkpoint_id
    WHERE c.parent_checkpoint_id IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM doomed AS e
          WHERE e.thread_id = c.thread_id AND e.checkpoint_ns = c.checkpoint_ns
            AND e.checkpoint_id = c.parent_checkpoint_id
      )
),
doomed_writes AS MATERIALIZED (
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.run_id,
           w.replaced_run_ids, false AS elsewhere
    FROM doomed AS d
    JOIN {schema}.pgsaver_writes AS w
      ON w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns AND w.checkpoint_id = d.checkpoint_id
    UNION ALL
    SELECT r.thread_id, r.checkpoint_ns, r.checkpoint_id, r.task_id, r.idx, r.channel, r.run_id,
           r.replaced_run_ids, true
    FROM run_writes AS r
    WHERE NOT EXISTS (
        SELECT 1 FROM doomed AS d
        WHERE d.thread_id = r.thread_id AND d.checkpoint_ns = r.checkpoint_ns AND d.checkpoint_id = r.checkpoint_id
    )
    UNION ALL
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.run_id,
           w.replaced_run_ids, true
    FROM anchors AS a
    JOIN {schema}.pgsaver_checkpoints AS p
      ON p.thread_id = a.thread_id AND p.checkpoint_ns = a.checkpoint_ns AND p.checkpoint_id = a.checkpoint_id
    CROSS JOIN LATERAL (
        SELECT CASE WHEN jsonb_typeof(p.metadata -> 'step') = 'number'
                    THEN (p.metadata ->> 'step')::numeric END AS step
    ) AS s
    JOIN {schema}.pgsaver_writes AS w
      ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns AND w.checkpoint_id = p.checkpoint_id
    WHERE w.run_id IS NULL
      AND split_part(w.task_id, '-', 1) IN (
          'ffffffff',
          to_char(s.step + 1, CASE WHEN s.step + 1 < 0 THEN 'FM0000000' ELSE 'FM00000000' END),
          to_char(s.step + 2, CASE WHEN s.step + 2 < 0 THEN 'FM0000000' ELSE 'FM00000000' END)
      )
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.pgsaver_checkpoints AS k
          WHERE k.thread_id = p.thread_id AND k.checkpoint_ns = p.checkpoint_ns
            AND k.parent_checkpoint_id = p.checkpoint_id
            AND NOT EXISTS (
                SELECT 1 FROM doomed AS d
                WHERE d.thread_id = k.thread_id AND d.checkpoint_ns = k.checkpoint_ns
                  AND d.checkpoint_id = k.checkpoint_id
            )
      )
),
delta_dependents AS (
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, d.checkpoint_id AS needs
    FROM doomed AS d
    JOIN {schema}.pgsaver_checkpoints AS x
      ON x.thread_id = d.thread_id AND x.checkpoint_ns = d.checkpoint_ns
     AND x.parent_checkpoint_id = d.checkpoint_id
    WHERE x.thread_id = ANY (%(thread_ids)b::text[]) AND NOT EXISTS (
        SELECT 1 FROM doomed AS e
        WHERE e.thread_id = x.thread_id AND e.checkpoint_ns = x.checkpoint_ns AND e.checkpoint_id = x.checkpoint_id
    )
      AND (EXISTS (SELECT 1 FROM unnest({_x_delta}) AS k WHERE NOT ({_x_stores_k}))
           OR {_x_reads_parent_sends})
    UNION
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, g.checkpoint_id
    FROM (
        SELECT DISTINCT thread_id, checkpoint_ns, checkpoint_id, channel
        FROM doomed_writes WHERE elsewhere
    ) AS g
    JOIN {schema}.pgsaver_checkpoints AS x
      ON x.thread_id = g.thread_id AND x.checkpoint_ns = g.checkpoint_ns
     AND x.parent_checkpoint_id = g.checkpoint_id
    CROSS JOIN LATERAL (SELECT g.channel AS k) AS ch
    WHERE x.thread_id = ANY (%(thread_ids)b::text[]) AND NOT EXISTS (
        SELECT 1 FROM doomed AS e
        WHERE e.thread_id = x.thread_id AND e.checkpoint_ns = x.checkpoint_ns AND e.checkpoint_id = x.checkpoint_id
    )
      -- a DeltaChannel of the child (listed in its counters, with a version or not) it does not
      -- store, or the Send packets a child of format below 4 reads as its value
      AND ((jsonb_typeof(x.metadata -> 'counters_since_delta_snapshot') = 'object'
            AND x.metadata -> 'counters_since_delta_snapshot' ? ch.k
            AND NOT ({_x_stores_k}))
           OR (ch.k = '__pregel_tasks' AND NOT (x.channel_versions ? '__pregel_tasks')))
),
entangled AS (
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.run_id,
           w.replaced_run_ids
    FROM doomed_writes AS w
    WHERE w.elsewhere AND EXISTS (
        SELECT 1 FROM unnest(w.replaced_run_ids) AS r (id)
        WHERE r.id IS NULL OR NOT r.id = ANY (%(run_ids)b::text[])
    )
    UNION ALL
    SELECT DISTINCT s.thread_id, s.checkpoint_ns, NULL, s.task_id, NULL, r.run_id, NULL::text[]
    FROM sub_tasks AS s
    JOIN run_writes AS r
      ON r.thread_id = s.thread_id AND r.checkpoint_ns = '' AND r.task_id = s.task_id
    WHERE s.shared
      -- a run that tagged rows of the subgraph passed its id down (config metadata): its rows
      -- there carry it, and the rows without one are another run's
      AND NOT EXISTS (
          SELECT 1 FROM tagged AS t
          WHERE t.thread_id = s.thread_id AND t.checkpoint_ns = s.checkpoint_ns AND t.run_id = r.run_id
      )
      AND NOT EXISTS (
          SELECT 1 FROM run_writes AS o
          WHERE o.thread_id = s.thread_id AND o.checkpoint_ns = s.checkpoint_ns AND o.run_id = r.run_id
      )
),
missing AS (
    SELECT ARRAY(
        SELECT r FROM unnest(%(run_ids)b::text[]) AS r
        WHERE NOT EXISTS (SELECT 1 FROM tagged AS t WHERE t.run_id = r)
          AND NOT EXISTS (SELECT 1 FROM run_writes AS w WHERE w.run_id = r)
        ORDER BY 1
    ) AS ids
),
refs AS (
    -- the values the surviving checkpoints of the threads that lose checkpoints reference
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM {schema}.pgsaver_checkpoints AS c
    CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS v
    WHERE c.thread_id IN (SELECT thread_id FROM doomed)
      AND NOT EXISTS (
          SELECT 1 FROM doomed AS d
          WHERE d.thread_id = c.thread_id AND d.checkpoint_ns = c.checkpoint_ns AND d.checkpoint_id = c.checkpoint_id
      )
)

-- name: _runs_result
-- The rows delete_for_runs and its plan return, from the CTEs of _runs_doomed and gone (thread_id,
-- size), gone_writes (thread_id, size), gone_blobs (size):
--   kind 0: checkpoints, writes, blobs, threads, bytes, the run ids that matched nothing;
--   kind 1: a surviving checkpoint (thread, namespace, id) and the checkpoint it needs (a doomed
--           one, or one whose writes go);
--   kind 2: entangled rows: thread, namespace, checkpoint (NULL: a subgraph namespace), task,
--           channel, run id, the run ids its write replaced.
SELECT 0 AS kind, NULL::text AS thread_id, NULL::text AS checkpoint_ns, NULL::text AS checkpoint_id,
       NULL::text AS a, NULL::text AS channel, NULL::text AS run_id, NULL::text[] AS replaced,
       (SELECT count(*) FROM gone) AS checkpoints, (SELECT count(*) FROM gone_writes) AS writes,
       (SELECT count(*) FROM gone_blobs) AS blobs,
       (SELECT count(*) FROM (SELECT thread_id FROM gone UNION SELECT thread_id FROM gone_writes) AS t),
       coalesce((SELECT sum(size) FROM gone), 0) + coalesce((SELECT sum(size) FROM gone_writes), 0)
           + coalesce((SELECT sum(size) FROM gone_blobs), 0),
       (SELECT ids FROM missing)
UNION ALL
SELECT 1, thread_id, checkpoint_ns, checkpoint_id, needs, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL
FROM delta_dependents
UNION ALL
SELECT 2, thread_id, checkpoint_ns, checkpoint_id, task_id, channel, run_id, replaced_run_ids,
       NULL, NULL, NULL, NULL, NULL, NULL
FROM entangled

-- name: delete_for_runs
-- Every row the runs wrote (_runs_doomed), then the values no surviving checkpoint references -- unless
-- that would change a surviving checkpoint (delta_dependents) or cannot be told apart from another
-- run's rows (entangled): then nothing is deleted and those are returned (_runs_result).
WITH {_runs_doomed},
allowed AS (
    SELECT NOT EXISTS (SELECT 1 FROM delta_dependents) AND NOT EXISTS (SELECT 1 FROM entangled) AS ok
),
gone_writes AS (
    DELETE FROM {schema}.pgsaver_writes AS w
    USING doomed_writes AS d, allowed
    WHERE allowed.ok AND w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
      AND w.checkpoint_id = d.checkpoint_id AND w.task_id = d.task_id AND w.idx = d.idx
    RETURNING w.thread_id, pg_column_size(w.*) AS size
),
gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints AS c
    USING doomed AS d, allowed
    WHERE allowed.ok AND c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns
      AND c.checkpoint_id = d.checkpoint_id
    RETURNING c.thread_id, pg_column_size(c.*) AS size
),
gone_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs AS b
    USING allowed
    WHERE allowed.ok AND b.thread_id IN (SELECT thread_id FROM doomed)
      AND NOT EXISTS (
          SELECT 1 FROM refs AS r
          WHERE r.thread_id = b.thread_id AND r.checkpoint_ns = b.checkpoint_ns
            AND r.channel = b.channel AND r.version = b.version
      )
    RETURNING pg_column_size(b.*) AS size
)
{_runs_result}

-- name: delete_for_runs__citus
-- On Citus (no STABLE function in a RETURNING clause there): delete_for_runs of one thread,
-- %(thread_ids)s, its sizes left out (the saver reports delete_for_runs_plan's, read under the
-- same locks in the same transaction).
WITH {_runs_doomed},
allowed AS (
    SELECT NOT EXISTS (SELECT 1 FROM delta_dependents) AND NOT EXISTS (SELECT 1 FROM entangled) AS ok
),
gone_writes AS (
    DELETE FROM {schema}.pgsaver_writes AS w
    USING doomed_writes AS d, allowed
    WHERE allowed.ok AND w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
      AND w.checkpoint_id = d.checkpoint_id AND w.task_id = d.task_id AND w.idx = d.idx
    RETURNING w.thread_id, 0 AS size
),
gone AS (
    DELETE FROM {schema}.pgsaver_checkpoints AS c
    USING doomed AS d, allowed
    WHERE allowed.ok AND c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns
      AND c.checkpoint_id = d.checkpoint_id
    RETURNING c.thread_id, 0 AS size
),
gone_blobs AS (
    DELETE FROM {schema}.pgsaver_blobs AS b
    USING allowed
    WHERE allowed.ok AND b.thread_id IN (SELECT thread_id FROM doomed)
      AND NOT EXISTS (
          SELECT 1 FROM refs AS r
          WHERE r.thread_id = b.thread_id AND r.checkpoint_ns = b.checkpoint_ns
            AND r.channel = b.channel AND r.version = b.version
      )
    RETURNING 0 AS size
)
{_runs_result}

-- name: delete_for_runs_plan
-- delete_for_runs(dry_run=True): the same rows, counting what would go, deleting nothing.
WITH {_runs_doomed},
gone_writes AS (
    SELECT w.thread_id, pg_column_size(w.*) AS size
    FROM doomed_writes AS d
    JOIN {schema}.pgsaver_writes AS w
      ON w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
     AND w.checkpoint_id = d.checkpoint_id AND w.task_id = d.task_id AND w.idx = d.idx
),
gone AS (
    SELECT c.thread_id, pg_column_size(c.*) AS size
    FROM doomed AS d
    JOIN {schema}.pgsaver_checkpoints AS c
      ON c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns AND c.checkpoint_id = d.checkpoint_id
),
gone_blobs AS (
    SELECT pg_column_size(b.*) AS size
    FROM {schema}.pgsaver_blobs AS b
    WHERE b.thread_id IN (SELECT thread_id FROM doomed)
      AND NOT EXISTS (
          SELECT 1 FROM refs AS r
          WHERE r.thread_id = b.thread_id AND r.checkpoint_ns = b.checkpoint_ns
            AND r.channel = b.channel AND r.version = b.version
      )
)
{_runs_result}

-- name: _threads_after
-- The recursive CTE t: the distinct thread ids after %(after)s, in order, one primary-key probe
-- each (a skip scan), ending in a NULL row. Use as WITH RECURSIVE {_threads_after}.
t AS (
    (SELECT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
     WHERE c.thread_id > %(after)s ORDER BY c.thread_id LIMIT 1)
    UNION ALL
    SELECT (SELECT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id > t.thread_id ORDER BY c.thread_id LIMIT 1)
    FROM t WHERE t.thread_id IS NOT NULL
)

-- name: threads_after
-- The next distinct thread ids after a cursor, in order, by skipping through the primary key.
WITH RECURSIVE {_threads_after}
SELECT thread_id FROM t WHERE thread_id IS NOT NULL LIMIT %(limit)s

-- name: threads_after__citus
-- On Citus (a recursive CTE must name one thread): the next distinct thread ids, each shard's
-- first ones merged by the coordinator.
SELECT DISTINCT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
WHERE c.thread_id > %(after)s
ORDER BY 1
LIMIT %(limit)s

-- name: idle_threads
-- Of the given threads, those whose newest checkpoint is older than now() - idle_for.
SELECT t.thread_id
FROM unnest(%(thread_ids)b::text[]) AS t (thread_id)
WHERE EXISTS (SELECT 1 FROM {schema}.pgsaver_checkpoints AS c WHERE c.thread_id = t.thread_id)
  AND NOT EXISTS (
      SELECT 1 FROM {schema}.pgsaver_checkpoints AS c
      WHERE c.thread_id = t.thread_id AND c.created_at >= now() - %(idle_for)s::interval
  )
ORDER BY t.thread_id

-- name: idle_threads__citus
-- On Citus: idle_threads with the threads' newest checkpoints read first (one grouped query over
-- the shards holding them), as missing_threads__citus.
SELECT n.thread_id
FROM (SELECT c.thread_id, max(c.created_at) AS newest FROM {schema}.pgsaver_checkpoints AS c
      WHERE c.thread_id = ANY (%(thread_ids)b::text[]) GROUP BY c.thread_id) AS n
WHERE n.newest < now() - %(idle_for)s::interval
ORDER BY n.thread_id

-- name: set_lock_timeout
SELECT set_config('lock_timeout', %(lock_timeout)s, true)

-- name: backend_pid
-- The server process of this session. Behind a proxy that pools sessions (PgBouncer, ...) it
-- differs from the process id the connection was told at start-up, which is the proxy's own cancel
-- key: the driver then stops preparing statements on that connection (see _driver.pooler_check).
SELECT pg_backend_pid()

-- name: first_check
-- Once per connection that would prepare statements (and again, at most every
-- policy.STATS_RECHECK seconds, while a family's tables are small): backend_pid's process id, for
-- the pooler check; then whether the checkpoint tables are each at least %(pages)s pages large
-- now, and the store's table at least %(store_pages)s (policy.TRUSTED_PAGES, TRUSTED_STORE_PAGES),
-- the live size the planner costs a scan at. Only then does the connection prepare the statements whose generic
-- plan, made on smaller tables after statistics of empty ones, would keep a sequential scan
-- (db/sql.PLANNED_BY_STATS); a table not there counts as small. Last, whether the database has
-- the citus extension: such a connection prepares nothing either, and sends the calls of our
-- functions, which Citus runs on the thread's worker (docs/scaling.md); and whether migration
-- 0015's table is there (without it, the statements that read no parts: the __nolists forms);
-- whether the node cache's table is at least %(cache_pages)s pages (TRUSTED_CACHE_PAGES); and
-- whether migration 0018's record of deleted threads is there (the __nodeleted forms without it).
SELECT pg_backend_pid(),
       (SELECT count(*) = 3 FROM unnest(ARRAY[
            to_regclass('{schema}.pgsaver_checkpoints'), to_regclass('{schema}.pgsaver_blobs'),
            to_regclass('{schema}.pgsaver_writes')]) AS t(rel)
        WHERE pg_relation_size(t.rel) >= %(pages)s::bigint * current_setting('block_size')::bigint),
       coalesce(pg_relation_size(to_regclass('{schema}.pgsaver_store'))
                >= %(store_pages)s::bigint * current_setting('block_size')::bigint, false),
       EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus'),
       to_regclass('{schema}.pgsaver_elements') IS NOT NULL,
       coalesce(pg_relation_size(to_regclass('{schema}.pgsaver_cache'))
                >= %(cache_pages)s::bigint * current_setting('block_size')::bigint, false),
       to_regclass('{schema}.pgsaver_deleted_threads') IS NOT NULL

-- name: in_recovery
-- After a write the server refused as read-only (SQLSTATE 25006): whether it is a standby (in
-- recovery) or a primary whose database or role sets default_transaction_read_only.
SELECT pg_is_in_recovery()

-- name: missing_privileges
-- After a permission error: which of the privileges the runtime role needs it lacks, per table and
-- function (docs/guide.md, "Roles without DDL rights"). Names the tables of this schema; never fails on a missing one.
SELECT t.name, p.privilege
FROM unnest(ARRAY['pgsaver_checkpoints', 'pgsaver_blobs', 'pgsaver_elements', 'pgsaver_writes',
                  'pgsaver_deleted_threads', 'pgsaver_store', 'pgsaver_cache']) AS t(name)
CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p(privilege)
WHERE to_regclass(quote_ident(%(schema)s) || '.' || t.name) IS NOT NULL
  AND NOT has_table_privilege(to_regclass(quote_ident(%(schema)s) || '.' || t.name), p.privilege)
UNION ALL
SELECT 'pgsaver_thread_status', 'SELECT'
WHERE to_regclass(quote_ident(%(schema)s) || '.pgsaver_thread_status') IS NOT NULL
  AND NOT has_table_privilege(to_regclass(quote_ident(%(schema)s) || '.pgsaver_thread_status'), 'SELECT')
UNION ALL
SELECT 'pgsaver_migrations', 'SELECT'
WHERE to_regclass(quote_ident(%(schema)s) || '.pgsaver_migrations') IS NOT NULL
  AND NOT has_table_privilege(to_regclass(quote_ident(%(schema)s) || '.pgsaver_migrations'), 'SELECT')
UNION ALL
SELECT DISTINCT 'function ' || f.name, 'EXECUTE'
FROM unnest(ARRAY['pgsaver_put', 'pgsaver_get_tuple', 'pgsaver_claim_head', 'pgsaver_parent_stored',
                    'pgsaver_delta_history', 'pgsaver_put_writes', 'pgsaver_put_status',
                    'pgsaver_refresh_status', 'pgsaver_delete_thread', 'pgsaver_check_deleted',
                    'pgsaver_deleted_at']) AS f(name)
JOIN pg_proc AS pr ON pr.proname = f.name
    AND pr.pronamespace = (SELECT n.oid FROM pg_namespace AS n WHERE n.nspname = %(schema)s)
WHERE NOT has_function_privilege(pr.oid, 'EXECUTE')
UNION ALL
SELECT 'schema ' || %(schema)s, 'USAGE'
WHERE NOT has_schema_privilege(%(schema)s, 'USAGE')
ORDER BY 1, 2

-- ============================================================================ encryption (KeyringSerializer)
-- Rows of a value to seal again, in one shape for all three tables (_lifecycle.reseal_params):
--   kind 0 blob: thread, namespace, channel, version, NULL..., type, blob;
--   kind 1 write: thread, namespace, checkpoint id, task id, channel, idx, type, blob, task path;
--   kind 2 checkpoint: thread, namespace, checkpoint id, NULL, NULL, NULL, type, body, NULL, parent id,
--          channel_versions, metadata, metadata_exact.

-- name: _reseal_blob_columns
-- Expects b (a pgsaver_blobs row).
0 AS kind, b.thread_id, b.checkpoint_ns, b.channel AS a, b.version AS b, NULL::text AS channel,
NULL::integer AS idx, b.type, b.blob, NULL::text AS task_path, NULL::text AS parent,
NULL::jsonb AS channel_versions, NULL::jsonb AS metadata, NULL::bytea AS metadata_exact

-- name: _reencrypt_blob_columns
-- _reseal_blob_columns for reencrypt: a list stored as its elements unsealed (its header where a
-- sealed one has its seal, codec/elements.py) comes assembled, as a read returns it
-- (_list_value), and is sealed whole; a sealed one comes as stored (its seal made again).
0 AS kind, b.thread_id, b.checkpoint_ns, b.channel AS a, b.version AS b, NULL::text AS channel,
NULL::integer AS idx, b.type, {_reseal_blob_value} AS blob, NULL::text AS task_path,
NULL::text AS parent, NULL::jsonb AS channel_versions, NULL::jsonb AS metadata,
NULL::bytea AS metadata_exact

-- name: _reseal_blob_value
-- Expects b. _reencrypt_blob_columns's value.
CASE WHEN b.type <> 'pgsaver.list' OR {_sealed_list} THEN b.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 string_agg(CASE n WHEN 1 THEN substr(b.blob, 2, i - 2) ELSE '' END || int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(b.blob, 1), length(b.blob) - 15, 16) WITH ORDINALITY AS r (i, n)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = b.thread_id AND e.key = substr(b.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END

-- name: _reseal_blob_value__citus
-- On Citus the parts' thread is also the parameter's (%(thread_ids)s, the one thread of the batch):
-- every table reference then names it, and Citus runs the statement on the thread's worker.
CASE WHEN b.type <> 'pgsaver.list' OR {_sealed_list} THEN b.blob ELSE (
SELECT CASE WHEN count(e.blob) = count(*) THEN
 string_agg(CASE n WHEN 1 THEN substr(b.blob, 2, i - 2) ELSE '' END || int4send(length(e.blob)) || e.blob, '') END
FROM generate_series(3 + get_byte(b.blob, 1), length(b.blob) - 15, 16) WITH ORDINALITY AS r (i, n)
LEFT JOIN LATERAL (
 SELECT e.blob FROM {schema}.pgsaver_elements AS e
 WHERE e.thread_id = b.thread_id AND e.thread_id = ANY (%(thread_ids)b::text[])
   AND e.key = substr(b.blob, r.i, 16) OFFSET 0
) AS e ON true
WHERE r.i BETWEEN 0 AND 2147483647) END

-- name: _reseal_blob_value__nolists
b.blob

-- name: _sealed_list
-- Expects b (a pgsaver_blobs row of type 'pgsaver.list'): true if a KeyringSerializer sealed it
-- (its seal, a ciphertext starting 'LGE1', before its header).
substring(b.blob FROM 3 FOR 4) = '\x4c474531'::bytea

-- name: _reseal_write_columns
-- Expects w (a pgsaver_writes row).
1, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.idx, w.type, w.blob,
w.task_path, NULL, NULL, NULL, NULL

-- name: _reseal_checkpoint_columns
-- Expects c (a pgsaver_checkpoints row).
2, c.thread_id, c.checkpoint_ns, c.checkpoint_id, NULL, NULL, NULL, c.type, c.checkpoint, NULL,
c.parent_checkpoint_id, c.channel_versions, c.metadata, c.metadata_exact

-- name: copied_sealed_rows
-- copy_thread under a KeyringSerializer, after copy_thread in its transaction: the target's rows
-- that the copy inserted (the same key and the same bytes as the source's row: a row the target
-- held already has other bytes, a nonce of its own), still sealed for the source's place.
SELECT {_reseal_blob_columns}
FROM {schema}.pgsaver_blobs AS b
JOIN {schema}.pgsaver_blobs AS s
  ON s.thread_id = %(source)s AND s.checkpoint_ns = b.checkpoint_ns AND s.channel = b.channel
 AND s.version = b.version AND s.blob = b.blob
WHERE b.thread_id = %(target)s AND (b.type LIKE '%%+aead' OR (b.type = 'pgsaver.list' AND {_sealed_list}))
UNION ALL
SELECT {_reseal_write_columns}
FROM {schema}.pgsaver_writes AS w
JOIN {schema}.pgsaver_writes AS s
  ON s.thread_id = %(source)s AND s.checkpoint_ns = w.checkpoint_ns
 AND s.checkpoint_id = w.checkpoint_id AND s.task_id = w.task_id AND s.idx = w.idx AND s.blob = w.blob
WHERE w.thread_id = %(target)s AND w.type LIKE '%%+aead'
UNION ALL
SELECT {_reseal_checkpoint_columns}
FROM {schema}.pgsaver_checkpoints AS c
WHERE c.thread_id = %(target)s

-- name: copied_sealed_rows__citus
-- On Citus (the source and the target on different workers: no join of the two): the source's
-- rows read by an uncorrelated subquery (their keys and a digest of their bytes), which Citus runs
-- on the source's worker first.
SELECT {_reseal_blob_columns}
FROM {schema}.pgsaver_blobs AS b
WHERE b.thread_id = %(target)s AND (b.type LIKE '%%+aead' OR (b.type = 'pgsaver.list' AND {_sealed_list}))
  AND (b.checkpoint_ns, b.channel, b.version, md5(b.blob)) IN (
      SELECT s.checkpoint_ns, s.channel, s.version, md5(s.blob) FROM {schema}.pgsaver_blobs AS s
      WHERE s.thread_id = %(source)s AND (s.type LIKE '%%+aead' OR s.type = 'pgsaver.list'))
UNION ALL
SELECT {_reseal_write_columns}
FROM {schema}.pgsaver_writes AS w
WHERE w.thread_id = %(target)s AND w.type LIKE '%%+aead'
  AND (w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, md5(w.blob)) IN (
      SELECT s.checkpoint_ns, s.checkpoint_id, s.task_id, s.idx, md5(s.blob)
      FROM {schema}.pgsaver_writes AS s
      WHERE s.thread_id = %(source)s AND s.type LIKE '%%+aead')
UNION ALL
SELECT {_reseal_checkpoint_columns}
FROM {schema}.pgsaver_checkpoints AS c
WHERE c.thread_id = %(target)s

-- name: _reencrypt_blob_due
-- Expects b (a pgsaver_blobs row): of %(thread_id)s (NULL: any thread), a value not sealed with
-- the current key (%(header)b starts each of its ciphertexts), or any value with %(full)s. A list
-- stored as its elements ('pgsaver.list') has its seal after its first two bytes, and the
-- header of its msgpack array there when it is not sealed (then always due: sealed whole).
(%(thread_id)s::text IS NULL OR b.thread_id = %(thread_id)s)
AND b.type <> 'empty'
AND (%(full)s
     OR CASE WHEN b.type = 'pgsaver.list'
             THEN substring(b.blob FROM 3 FOR octet_length(%(header)b)) <> %(header)b
             ELSE b.type NOT LIKE '%%+aead' OR substring(b.blob FOR octet_length(%(header)b)) <> %(header)b END)

-- name: _reencrypt_write_due
-- Expects w (a pgsaver_writes row): _reencrypt_blob_due for a pending write.
(%(thread_id)s::text IS NULL OR w.thread_id = %(thread_id)s)
AND (%(full)s OR w.type NOT LIKE '%%+aead' OR substring(w.blob FOR octet_length(%(header)b)) <> %(header)b)

-- name: _reencrypt_checkpoint_due
-- Expects c (a pgsaver_checkpoints row): _reencrypt_blob_due for a checkpoint: its body, its sealed
-- metadata (missing: a row written before the KeyringSerializer), and metadata in clear with keys
-- outside plaintext_metadata.
(%(thread_id)s::text IS NULL OR c.thread_id = %(thread_id)s)
AND (%(full)s
     OR c.type NOT LIKE '%%+aead'
     OR substring(c.checkpoint FOR octet_length(%(header)b)) <> %(header)b
     OR c.metadata_exact IS NULL
     OR substring(c.metadata_exact FROM position('\x0a'::bytea IN c.metadata_exact) + 1
                  FOR octet_length(%(header)b)) <> %(header)b
     OR (jsonb_typeof(c.metadata) = 'object'
         AND EXISTS (SELECT 1 FROM jsonb_object_keys(c.metadata) AS k
                     WHERE NOT k = ANY (%(plaintext)b::text[]))))

-- name: reencrypt_plan
-- Dry run of reencrypt: how many threads (those with a checkpoint to seal again), checkpoints,
-- writes and blobs the reencrypt_* batches would seal again. Counts only: nothing is locked.
SELECT (SELECT count(DISTINCT c.thread_id) FROM {schema}.pgsaver_checkpoints AS c WHERE {_reencrypt_checkpoint_due}),
       (SELECT count(*) FROM {schema}.pgsaver_checkpoints AS c WHERE {_reencrypt_checkpoint_due}),
       (SELECT count(*) FROM {schema}.pgsaver_writes AS w WHERE {_reencrypt_write_due}),
       (SELECT count(*) FROM {schema}.pgsaver_blobs AS b WHERE {_reencrypt_blob_due})

-- name: reencrypt_blobs
-- One batch of reencrypt: the next blobs (after the key given, in primary-key order) not sealed
-- with the current key (%(header)b starts each of its ciphertexts), or all with %(full)s, locked
-- until the batch commits (NO KEY UPDATE: a put's parent check still goes through). On Citus a
-- thread at a time (%(thread_ids)s, one thread): Citus locks rows only in a statement it runs on
-- one worker.
SELECT {_reencrypt_blob_columns}
FROM {schema}.pgsaver_blobs AS b
WHERE {_reencrypt_blob_due} {_on_threads_b}
  AND (%(first)s OR (b.thread_id, b.checkpoint_ns, b.channel, b.version) > (%(k1)s, %(k2)s, %(k3)s, %(k4)s))
ORDER BY b.thread_id, b.checkpoint_ns, b.channel, b.version
LIMIT %(limit)s
FOR NO KEY UPDATE

-- name: reencrypt_writes
-- reencrypt_blobs for pending writes.
SELECT {_reseal_write_columns}
FROM {schema}.pgsaver_writes AS w
WHERE {_reencrypt_write_due} {_on_threads_w}
  AND (%(first)s OR (w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx)
                    > (%(k1)s, %(k2)s, %(k3)s, %(k4)s, %(k5)s::integer))
ORDER BY w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
LIMIT %(limit)s
FOR NO KEY UPDATE

-- name: reencrypt_checkpoints
-- reencrypt_blobs for checkpoints: the body, the sealed metadata (missing: a row written before
-- the KeyringSerializer), and metadata in clear with keys outside plaintext_metadata.
SELECT {_reseal_checkpoint_columns}
FROM {schema}.pgsaver_checkpoints AS c
WHERE {_reencrypt_checkpoint_due} {_on_threads_c}
  AND (%(first)s OR (c.thread_id, c.checkpoint_ns, c.checkpoint_id) > (%(k1)s, %(k2)s, %(k3)s))
ORDER BY c.thread_id, c.checkpoint_ns, c.checkpoint_id
LIMIT %(limit)s
FOR NO KEY UPDATE

-- name: reencrypt_elements
-- reencrypt_blobs for the parts of lists sealed as their elements (marker 2, codec/compress.py,
-- then a ciphertext that %(header)b starts when sealed with the current key), by thread and key.
SELECT e.thread_id, e.key, e.blob
FROM {schema}.pgsaver_elements AS e
WHERE (%(thread_id)s::text IS NULL OR e.thread_id = %(thread_id)s) {_on_threads_e}
  AND get_byte(e.blob, 0) = 2
  AND (%(full)s OR substring(e.blob FROM 2 FOR octet_length(%(header)b)) <> %(header)b)
  AND (%(first)s OR (e.thread_id, e.key) > (%(k1)s, %(k2)s::bytea))
ORDER BY e.thread_id, e.key
LIMIT %(limit)s
FOR NO KEY UPDATE

-- name: reencrypt_elements_plan
-- reencrypt's dry run for the parts (reencrypt_elements): how many would be sealed again.
SELECT count(*) FROM {schema}.pgsaver_elements AS e
WHERE (%(thread_id)s::text IS NULL OR e.thread_id = %(thread_id)s)
  AND get_byte(e.blob, 0) = 2
  AND (%(full)s OR substring(e.blob FROM 2 FOR octet_length(%(header)b)) <> %(header)b)

-- name: reseal_elements
-- The parts sealed again (reencrypt_elements), by primary key: how many changed.
WITH ue AS (
    UPDATE {schema}.pgsaver_elements AS e SET blob = u.blob
    FROM unnest(%(e_threads)b::text[], %(e_keys)b::bytea[], %(e_blobs)b::bytea[])
        AS u(thread_id, key, blob)
    WHERE e.thread_id = u.thread_id AND e.key = u.key {_on_threads_e}
    RETURNING 1
)
SELECT count(*) FROM ue

-- name: _on_threads_e
-- _on_threads_b for e (a pgsaver_elements row).
/* one server: the join on thread_id says it */

-- name: _on_threads_e__citus
AND e.thread_id = ANY (%(thread_ids)b::text[])

-- name: reencrypt_threads
-- reencrypt's walk on Citus, where it seals a thread at a time: the next %(limit)s threads after
-- %(after)s (from the first, the empty id included, with %(first)s) holding rows in any of the three tables (a value of a thread left without checkpoints
-- is sealed again too, as on one server), each table's first ones merged by the coordinator.
SELECT x.thread_id FROM (
    (SELECT DISTINCT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
     WHERE (%(first)s OR c.thread_id > %(after)s) ORDER BY 1 LIMIT %(limit)s)
    UNION
    (SELECT DISTINCT w.thread_id FROM {schema}.pgsaver_writes AS w
     WHERE (%(first)s OR w.thread_id > %(after)s) ORDER BY 1 LIMIT %(limit)s)
    UNION
    (SELECT DISTINCT b.thread_id FROM {schema}.pgsaver_blobs AS b
     WHERE (%(first)s OR b.thread_id > %(after)s) ORDER BY 1 LIMIT %(limit)s)
) AS x
ORDER BY 1
LIMIT %(limit)s

-- name: reseal
-- The values sealed again (_lifecycle.reseal_params), by primary key; the counts of rows changed.
-- On Citus one thread's rows (%(thread_ids)s, the thread the batch read), run on its worker.
WITH ub AS (
    UPDATE {schema}.pgsaver_blobs AS b SET type = u.type, blob = u.blob
    FROM unnest(%(b_threads)b::text[], %(b_nss)b::text[], %(b_channels)b::text[],
                %(b_versions)b::text[], %(b_types)b::text[], %(b_blobs)b::bytea[])
        AS u(thread_id, checkpoint_ns, channel, version, type, blob)
    WHERE b.thread_id = u.thread_id AND b.checkpoint_ns = u.checkpoint_ns
      AND b.channel = u.channel AND b.version = u.version {_on_threads_b}
    RETURNING 1
), uw AS (
    UPDATE {schema}.pgsaver_writes AS w SET type = u.type, blob = u.blob
    FROM unnest(%(w_threads)b::text[], %(w_nss)b::text[], %(w_ids)b::text[], %(w_tasks)b::text[],
                %(w_idxs)b::integer[], %(w_types)b::text[], %(w_blobs)b::bytea[])
        AS u(thread_id, checkpoint_ns, checkpoint_id, task_id, idx, type, blob)
    WHERE w.thread_id = u.thread_id AND w.checkpoint_ns = u.checkpoint_ns
      AND w.checkpoint_id = u.checkpoint_id AND w.task_id = u.task_id AND w.idx = u.idx {_on_threads_w}
    RETURNING 1
), uc AS (
    UPDATE {schema}.pgsaver_checkpoints AS c
    SET type = u.type, checkpoint = u.body, metadata = u.metadata::jsonb, metadata_exact = u.exact
    FROM unnest(%(c_threads)b::text[], %(c_nss)b::text[], %(c_ids)b::text[], %(c_types)b::text[],
                %(c_bodies)b::bytea[], %(c_metadata)b::text[], %(c_exact)b::bytea[])
        AS u(thread_id, checkpoint_ns, checkpoint_id, type, body, metadata, exact)
    WHERE c.thread_id = u.thread_id AND c.checkpoint_ns = u.checkpoint_ns
      AND c.checkpoint_id = u.checkpoint_id {_on_threads_c}
    RETURNING 1
)
SELECT (SELECT count(*) FROM uc), (SELECT count(*) FROM uw), (SELECT count(*) FROM ub)

-- ============================================================================ ops (the CLI)
-- Read-only statements of `langgraph-pg-saver status / threads / doctor`. They scan whole tables
-- where they must (an operator's command, never the agents' hot path).

-- name: ops_tables
-- Our tables: estimated rows, total and heap bytes, live and dead tuples, last (auto)vacuum.
SELECT t.name, greatest(c.reltuples, 0)::bigint, pg_total_relation_size(c.oid), pg_relation_size(c.oid),
       coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), greatest(s.last_vacuum, s.last_autovacuum)
FROM unnest(ARRAY['pgsaver_checkpoints', 'pgsaver_blobs', 'pgsaver_writes', 'pgsaver_elements',
                  'pgsaver_deleted_threads', 'pgsaver_store', 'pgsaver_cache',
                  'pgsaver_migrations'])
    WITH ORDINALITY AS t(name, n)
JOIN pg_class AS c ON c.oid = to_regclass(quote_ident(%(schema)s) || '.' || t.name)
LEFT JOIN pg_stat_all_tables AS s ON s.relid = c.oid
ORDER BY t.n

-- name: ops_deleted_oldest
-- doctor's look at migration 0018's records of deleted threads: the oldest delete recorded (by
-- the deleted_at index) and whether it is older than %(stale)s, which says no retention job
-- forgets them (it forgets those older than keep_deleted, 7 days by default).
SELECT min(d.deleted_at), min(d.deleted_at) < now() - %(stale)s::interval
FROM {schema}.pgsaver_deleted_threads AS d

-- name: ops_autovacuum
-- Whether autovacuum runs here: the server's settings (it needs track_counts too), and which of
-- our tables have it turned off (autovacuum_enabled among their storage options).
SELECT current_setting('autovacuum')::boolean, current_setting('track_counts')::boolean,
       coalesce(array_agg(t.name ORDER BY t.n) FILTER (WHERE EXISTS (
           SELECT 1 FROM unnest(c.reloptions) AS o(opt)
           WHERE lower(o.opt) IN ('autovacuum_enabled=false', 'autovacuum_enabled=off',
                                  'autovacuum_enabled=0', 'autovacuum_enabled=no',
                                  'autovacuum_enabled=f', 'autovacuum_enabled=n'))),
                ARRAY[]::text[])
FROM unnest(ARRAY['pgsaver_checkpoints', 'pgsaver_blobs', 'pgsaver_writes', 'pgsaver_store'])
    WITH ORDINALITY AS t(name, n)
JOIN pg_class AS c ON c.oid = to_regclass(quote_ident(%(schema)s) || '.' || t.name)

-- name: ops_store_count
-- The store's items, counted exactly (the table's estimate lags until the next ANALYZE).
SELECT count(*) FROM {schema}.pgsaver_store

-- name: ops_counts
-- Exact counts, the number of threads (skipping through the primary key), the oldest and newest
-- checkpoint.
WITH RECURSIVE t AS (
    (SELECT c.thread_id FROM {schema}.pgsaver_checkpoints AS c ORDER BY c.thread_id LIMIT 1)
    UNION ALL
    SELECT (SELECT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
            WHERE c.thread_id > t.thread_id ORDER BY c.thread_id LIMIT 1)
    FROM t WHERE t.thread_id IS NOT NULL
)
SELECT (SELECT count(*) FROM t WHERE thread_id IS NOT NULL),
       (SELECT count(*) FROM {schema}.pgsaver_checkpoints),
       (SELECT count(*) FROM {schema}.pgsaver_writes),
       (SELECT count(*) FROM {schema}.pgsaver_blobs),
       (SELECT min(created_at) FROM {schema}.pgsaver_checkpoints),
       (SELECT max(created_at) FROM {schema}.pgsaver_checkpoints)

-- name: ops_threads
-- Threads with their last activity, checkpoints and bytes (rows of all four tables), newest
-- activity first; optionally only those with a checkpoint whose metadata contains %(filter)s, or
-- idle longer than %(idle_for)s; %(order)s 'activity', 'bytes' or 'checkpoints'.
WITH per AS (
    SELECT c.thread_id, count(*) AS checkpoints, max(c.created_at) AS last_activity,
           sum(pg_column_size(c.*)) AS bytes
    FROM {schema}.pgsaver_checkpoints AS c
    GROUP BY c.thread_id
    HAVING (%(filter)s::jsonb IS NULL OR bool_or(c.metadata @> %(filter)s::jsonb))
       AND (%(idle_for)s::interval IS NULL OR max(c.created_at) < now() - %(idle_for)s::interval)
), sized AS (
    SELECT per.thread_id, per.checkpoints, per.last_activity,
           per.bytes
           + coalesce((SELECT sum(pg_column_size(w.*)) FROM {schema}.pgsaver_writes AS w
                       WHERE w.thread_id = per.thread_id), 0)
           + coalesce((SELECT sum(pg_column_size(b.*)) FROM {schema}.pgsaver_blobs AS b
                       WHERE b.thread_id = per.thread_id), 0)
           + {_elements_bytes_of_per} AS bytes
    FROM per
)
SELECT thread_id, checkpoints, bytes, last_activity
FROM sized
ORDER BY CASE %(order)s WHEN 'bytes' THEN bytes WHEN 'checkpoints' THEN checkpoints END DESC NULLS LAST,
         last_activity DESC, thread_id
LIMIT %(limit)s

-- name: ops_tables__citus
-- On Citus: ops_tables with the sizes and tuple counts of a distributed table's shards (the
-- coordinator's own table is an empty shell): citus_total_relation_size and citus_relation_size,
-- and each shard's statistics read on its worker (run_command_on_shards; the estimate of rows is
-- their live tuples); the store's tables stay on the coordinator and read as on one server.
SELECT t.name,
       CASE WHEN d.partmethod IS NULL THEN greatest(c.reltuples, 0)::bigint
            ELSE coalesce(sh.live, 0) END,
       CASE WHEN d.partmethod IS NULL THEN pg_total_relation_size(c.oid)
            ELSE citus_total_relation_size(c.oid) END,
       CASE WHEN d.partmethod IS NULL THEN pg_relation_size(c.oid)
            ELSE citus_relation_size(c.oid) END,
       coalesce(sh.live, s.n_live_tup, 0), coalesce(sh.dead, s.n_dead_tup, 0),
       CASE WHEN d.partmethod IS NULL THEN greatest(s.last_vacuum, s.last_autovacuum)
            ELSE sh.vacuumed END
FROM unnest(ARRAY['pgsaver_checkpoints', 'pgsaver_blobs', 'pgsaver_writes', 'pgsaver_elements',
                  'pgsaver_deleted_threads', 'pgsaver_store', 'pgsaver_cache',
                  'pgsaver_migrations'])
    WITH ORDINALITY AS t(name, n)
JOIN pg_class AS c ON c.oid = to_regclass(quote_ident(%(schema)s) || '.' || t.name)
LEFT JOIN pg_dist_partition AS d ON d.logicalrelid = c.oid
LEFT JOIN pg_stat_all_tables AS s ON s.relid = c.oid
LEFT JOIN LATERAL (
    -- a reference table's shards are copies: the first one's figures
    SELECT (sum(split_part(x.result, '|', 1)::bigint)
                FILTER (WHERE d.partmethod = 'h' OR x.first))::bigint AS live,
           (sum(split_part(x.result, '|', 2)::bigint)
                FILTER (WHERE d.partmethod = 'h' OR x.first))::bigint AS dead,
           max(nullif(split_part(x.result, '|', 3), '')::timestamptz) AS vacuumed
    FROM (SELECT c.oid WHERE d.partmethod IS NOT NULL) AS dist
    CROSS JOIN LATERAL (
        SELECT r.result, row_number() OVER () = 1 AS first
        FROM run_command_on_shards(dist.oid,
            $$SELECT concat_ws('|', n_live_tup, n_dead_tup, greatest(last_vacuum, last_autovacuum))
              FROM pg_stat_all_tables WHERE relid = '%%s'::regclass$$) AS r
        WHERE r.success
    ) AS x
) AS sh ON true
ORDER BY t.n

-- name: ops_recent
-- Recent growth and idleness: checkpoints made in the last hour and day, the bytes of their
-- rows, and the oldest of the threads' last activity (the thread idle longest). Grouped by
-- thread first (on Citus, on the shards), then summed.
SELECT coalesce(sum(t.hour), 0)::bigint, coalesce(sum(t.day), 0)::bigint,
       coalesce(sum(t.bytes), 0)::bigint, min(t.last)
FROM (
    SELECT c.thread_id,
           count(*) FILTER (WHERE c.created_at >= now() - interval '1 hour') AS hour,
           count(*) FILTER (WHERE c.created_at >= now() - interval '1 day') AS day,
           sum(pg_column_size(c.*)) FILTER (WHERE c.created_at >= now() - interval '1 day')
               AS bytes,
           max(c.created_at) AS last
    FROM {schema}.pgsaver_checkpoints AS c
    GROUP BY c.thread_id
) AS t

-- name: ops_buckets
-- Every %(unit)s of a window of %(window)s ending now, as ops_growth truncates them (the
-- session's time zone: a day across a change of the clocks is 23 or 25 hours, and the hour the
-- clocks go back comes twice, as two instants).
SELECT generate_series(date_trunc(%(unit)s, now() - %(window)s::interval),
                       date_trunc(%(unit)s, now()), ('1 ' || %(unit)s)::interval)

-- name: ops_growth
-- What was written since %(since)s, by the %(unit)s ('hour' or 'day') each checkpoint was made:
-- checkpoints, and the bytes of their rows, of the pending writes that followed each, and of the
-- channel values each stored anew (the versions its parent does not have). A scan of the
-- checkpoints (created_at has no index), with lookups by primary key.
WITH c AS (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
           c.channel_versions, date_trunc(%(unit)s, c.created_at) AS at,
           pg_column_size(c.*) AS bytes
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.created_at >= %(since)s
)
SELECT c.at, count(*),
       sum(c.bytes + coalesce(w.bytes, 0) + coalesce(b.bytes, 0))::bigint
FROM c
LEFT JOIN LATERAL (
    SELECT sum(pg_column_size(w.*)) AS bytes FROM {schema}.pgsaver_writes AS w
    WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
      AND w.checkpoint_id = c.checkpoint_id
) AS w ON true
LEFT JOIN LATERAL (
    SELECT p.channel_versions AS versions FROM {schema}.pgsaver_checkpoints AS p
    WHERE p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns
      AND p.checkpoint_id = c.parent_checkpoint_id
) AS p ON true
LEFT JOIN LATERAL (
    SELECT sum(pg_column_size(b.*)) AS bytes
    FROM jsonb_each_text(c.channel_versions) AS v(channel, version)
    JOIN {schema}.pgsaver_blobs AS b
      ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
     AND b.channel = v.channel AND b.version = v.version
    WHERE p.versions IS NULL OR (p.versions ->> v.channel) IS DISTINCT FROM v.version
) AS b ON true
GROUP BY c.at
ORDER BY c.at

-- name: ops_sizes_by
-- Threads, checkpoints and bytes (rows of all four tables) grouped by the value of metadata key
-- %(key)s on each thread's newest checkpoint (NULL: the key is not there), the largest first.
-- Each table grouped by thread, then joined by thread (on Citus, on each worker: co-located).
SELECT per.value, count(*), sum(per.checkpoints)::bigint,
       sum(per.bytes + coalesce(w.bytes, 0) + coalesce(b.bytes, 0) + coalesce(e.bytes, 0))::bigint
           AS bytes
FROM (
    SELECT c.thread_id, count(*) AS checkpoints, sum(pg_column_size(c.*)) AS bytes,
           (array_agg(c.metadata -> %(key)s ORDER BY c.created_at DESC, c.checkpoint_id DESC))[1]
               AS value
    FROM {schema}.pgsaver_checkpoints AS c
    GROUP BY c.thread_id
) AS per
LEFT JOIN (SELECT w.thread_id, sum(pg_column_size(w.*)) AS bytes
           FROM {schema}.pgsaver_writes AS w GROUP BY w.thread_id) AS w
    ON w.thread_id = per.thread_id
LEFT JOIN (SELECT b.thread_id, sum(pg_column_size(b.*)) AS bytes
           FROM {schema}.pgsaver_blobs AS b GROUP BY b.thread_id) AS b
    ON b.thread_id = per.thread_id
LEFT JOIN {_elements_sizes_by_thread} AS e ON e.thread_id = per.thread_id
GROUP BY per.value
ORDER BY bytes DESC, per.value::text NULLS LAST
LIMIT %(limit)s

-- name: ops_growth__citus
-- On Citus: ops_growth grouped by thread and hour or day on the shards, then by hour or day on
-- the coordinator; the writes and new channel values of every checkpoint grouped by checkpoint
-- and joined by it (Citus plans no function in a lateral join: jsonb_each_text runs in the
-- select list), each join co-located by thread.
SELECT g.at, sum(g.checkpoints)::bigint, sum(g.bytes)::bigint
FROM (
    SELECT c.thread_id, date_trunc(%(unit)s, c.created_at) AS at, count(*) AS checkpoints,
           sum(pg_column_size(c.*) + coalesce(w.bytes, 0) + coalesce(b.bytes, 0)) AS bytes
    FROM {schema}.pgsaver_checkpoints AS c
    LEFT JOIN (
        SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, sum(pg_column_size(w.*)) AS bytes
        FROM {schema}.pgsaver_writes AS w GROUP BY 1, 2, 3
    ) AS w ON w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
          AND w.checkpoint_id = c.checkpoint_id
    LEFT JOIN (
        SELECT v.thread_id, v.checkpoint_ns, v.checkpoint_id, sum(pg_column_size(b.*)) AS bytes
        FROM (SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id,
                     (jsonb_each_text(x.channel_versions)).key AS channel,
                     (jsonb_each_text(x.channel_versions)).value AS version
              FROM {schema}.pgsaver_checkpoints AS x
              WHERE x.created_at >= %(since)s) AS v
        JOIN {schema}.pgsaver_blobs AS b
          ON b.thread_id = v.thread_id AND b.checkpoint_ns = v.checkpoint_ns
         AND b.channel = v.channel AND b.version = v.version
        LEFT JOIN {schema}.pgsaver_checkpoints AS p
          ON p.thread_id = v.thread_id AND p.checkpoint_ns = v.checkpoint_ns
         AND p.checkpoint_id = v.parent_checkpoint_id
        WHERE (p.channel_versions ->> v.channel) IS DISTINCT FROM v.version
        GROUP BY 1, 2, 3
    ) AS b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
          AND b.checkpoint_id = c.checkpoint_id
    WHERE c.created_at >= %(since)s
    GROUP BY c.thread_id, 2
) AS g
GROUP BY g.at
ORDER BY g.at

-- name: ops_counts__citus
-- On Citus (a recursive CTE must name one thread): ops_counts, the threads counted by the shards
-- (each thread's rows are on one shard, so the coordinator adds the shards' counts).
SELECT (SELECT count(DISTINCT c.thread_id) FROM {schema}.pgsaver_checkpoints AS c),
       (SELECT count(*) FROM {schema}.pgsaver_checkpoints),
       (SELECT count(*) FROM {schema}.pgsaver_writes),
       (SELECT count(*) FROM {schema}.pgsaver_blobs),
       (SELECT min(created_at) FROM {schema}.pgsaver_checkpoints),
       (SELECT max(created_at) FROM {schema}.pgsaver_checkpoints)

-- name: ops_threads__citus
-- On Citus: ops_threads with each table grouped by thread on its shards (a correlated subquery
-- per thread is not pushed down) and the groups joined by thread, which Citus runs on each worker
-- (co-located by thread_id); the coordinator sorts and cuts.
SELECT per.thread_id, per.checkpoints,
       per.bytes + coalesce(w.bytes, 0) + coalesce(b.bytes, 0) + coalesce(e.bytes, 0) AS bytes,
       per.last_activity
FROM (
    SELECT c.thread_id, count(*) AS checkpoints, max(c.created_at) AS last_activity,
           sum(pg_column_size(c.*)) AS bytes
    FROM {schema}.pgsaver_checkpoints AS c
    GROUP BY c.thread_id
    HAVING (%(filter)s::jsonb IS NULL OR bool_or(c.metadata @> %(filter)s::jsonb))
       AND (%(idle_for)s::interval IS NULL OR max(c.created_at) < now() - %(idle_for)s::interval)
) AS per
LEFT JOIN (SELECT w.thread_id, sum(pg_column_size(w.*)) AS bytes
           FROM {schema}.pgsaver_writes AS w GROUP BY w.thread_id) AS w
    ON w.thread_id = per.thread_id
LEFT JOIN (SELECT b.thread_id, sum(pg_column_size(b.*)) AS bytes
           FROM {schema}.pgsaver_blobs AS b GROUP BY b.thread_id) AS b
    ON b.thread_id = per.thread_id
LEFT JOIN {_elements_sizes_by_thread} AS e ON e.thread_id = per.thread_id
ORDER BY CASE %(order)s WHEN 'bytes' THEN per.bytes + coalesce(w.bytes, 0) + coalesce(b.bytes, 0)
                                          + coalesce(e.bytes, 0)
                        WHEN 'checkpoints' THEN per.checkpoints END DESC NULLS LAST,
         per.last_activity DESC, per.thread_id
LIMIT %(limit)s

-- name: ops_settings
-- Server settings doctor reports on, and whether this server can compress with lz4.
SELECT current_setting('server_version'), current_setting('server_version_num')::int,
       current_setting('jit'), current_setting('default_toast_compression'),
       EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'
               AND 'lz4' = ANY (enumvals)),
       current_user

-- name: ops_compression
-- The compression of the bytea columns that hold values and bodies ('' = the server default);
-- not metadata_exact, small, and incompressible when sealed.
SELECT c.relname, a.attname, a.attcompression::text
FROM pg_attribute AS a
JOIN pg_class AS c ON c.oid = a.attrelid
WHERE a.attrelid IN (to_regclass(quote_ident(%(schema)s) || '.pgsaver_blobs'),
                     to_regclass(quote_ident(%(schema)s) || '.pgsaver_writes'),
                     to_regclass(quote_ident(%(schema)s) || '.pgsaver_checkpoints'))
  AND a.atttypid = 'bytea'::regtype AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attname <> 'metadata_exact'
ORDER BY 1, 2

-- name: ops_history_ids
-- A thread's newest %(limit)s checkpoints (NULL: all) across its namespaces, newest first (ids
-- are time-ordered): of every namespace, or of %(ns)s and the namespaces below it (a subgraph's
-- '<node>:<task id>', nested ones after a '|').
SELECT c.checkpoint_ns, c.checkpoint_id
FROM {schema}.pgsaver_checkpoints AS c
WHERE c.thread_id = %(thread_id)s
  AND (%(ns)s::text IS NULL OR c.checkpoint_ns = %(ns)s
       OR (%(ns)s <> '' AND (starts_with(c.checkpoint_ns, %(ns)s || ':')
                            OR starts_with(c.checkpoint_ns, %(ns)s || '|'))))
ORDER BY c.checkpoint_id DESC, c.checkpoint_ns
LIMIT %(limit)s

-- name: ops_checkpoint_suffix
-- The checkpoints of a thread's namespace whose id ends with %(suffix)s (a short id as history
-- prints it), at most two (two: ambiguous).
SELECT c.checkpoint_id
FROM {schema}.pgsaver_checkpoints AS c
WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(ns)s
  AND right(c.checkpoint_id, length(%(suffix)s)) = %(suffix)s
ORDER BY c.checkpoint_id
LIMIT 2

-- name: ops_run_ids
-- The run id of each checkpoint of a thread (the column delete_for_runs selects by), for history.
SELECT checkpoint_ns, checkpoint_id, run_id
FROM {schema}.pgsaver_checkpoints
WHERE thread_id = %(thread_id)s

-- name: ops_thread_count
-- How many threads sort after %(after)s (the progress bar's total), skipping through the key.
WITH RECURSIVE {_threads_after}
SELECT count(*) FROM t WHERE thread_id IS NOT NULL

-- name: ops_thread_count__citus
-- On Citus: ops_thread_count over the shards.
SELECT count(DISTINCT c.thread_id) FROM {schema}.pgsaver_checkpoints AS c
WHERE c.thread_id > %(after)s

-- name: ops_schema
-- Whether the schema exists, and whether it holds our migrations table (ops.schema_version).
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s),
       to_regclass(quote_ident(%(schema)s) || '.pgsaver_migrations') IS NOT NULL

-- name: ops_ping
-- doctor's round trip.
SELECT 1 AS lgps_ping

-- name: ops_probe
-- doctor's probe of prepared statements through a pooling proxy (sent with prepare=True).
SELECT 1 AS lgps_probe

-- name: ops_search_path
-- The session's search_path, then set to %(path)s (a quoted schema): the official saver's unqualified
-- tables, read by import-official's verification; set back with the value returned.
SELECT current_setting('search_path'), set_config('search_path', %(path)s, false)

-- name: ops_source_threads
-- The official saver's threads after %(after)s, in the schema search_path names (ops_search_path).
SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %(after)s ORDER BY 1

-- ============================================================================ the Store
-- Rows of items: prefix, key, value, value_exact, created_at, updated_at, ttl_minutes
-- (_store.row_to_item). Expired rows are left out unless %(omit_expired)s is false.

-- name: store_get
-- Items of one namespace by key.
SELECT s.prefix, s.key, s.value, s.value_exact, s.created_at, s.updated_at, s.ttl_minutes
FROM {schema}.pgsaver_store AS s
WHERE s.prefix = %(prefix)s AND s.key = ANY (%(keys)b::text[])
  AND (s.expires_at IS NULL OR s.expires_at > now() OR NOT %(omit_expired)s)

-- name: store_refresh
-- The TTL of items read starts again (refresh_on_read). Expired ones (not swept yet) stay expired
-- where reads omit them (omit_expired); where reads return them, the read revives them, as
-- LangGraph's contract has it.
UPDATE {schema}.pgsaver_store AS s
SET expires_at = now() + s.ttl_minutes * interval '1 minute'
FROM unnest(%(prefixes)b::text[], %(keys)b::text[]) AS r(prefix, key)
WHERE s.prefix = r.prefix AND s.key = r.key AND s.ttl_minutes IS NOT NULL
  AND (s.expires_at > now() OR NOT %(omit_expired)s)

-- name: store_put
-- Items stored (the last put of a key in a batch wins, chosen by the client); created_at stays,
-- unless the item had expired.
INSERT INTO {schema}.pgsaver_store AS s
    (prefix, key, value, value_exact, created_at, updated_at, expires_at, ttl_minutes)
SELECT u.prefix, u.key, u.value::jsonb, u.value_exact, now(), now(),
       now() + u.ttl * interval '1 minute', u.ttl
FROM unnest(%(prefixes)b::text[], %(keys)b::text[], %(values)b::text[], %(exacts)b::text[],
            %(ttls)b::float8[]) AS u(prefix, key, value, value_exact, ttl)
ON CONFLICT (prefix, key) DO UPDATE
SET value = EXCLUDED.value, value_exact = EXCLUDED.value_exact, updated_at = now(),
    expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
    created_at = CASE WHEN s.expires_at <= now() THEN now() ELSE s.created_at END

-- name: store_delete
DELETE FROM {schema}.pgsaver_store AS s
USING unnest(%(prefixes)b::text[], %(keys)b::text[]) AS d(prefix, key)
WHERE s.prefix = d.prefix AND s.key = d.key

-- name: store_put_delete
-- A batch's deletes and puts (of other keys) in one statement, for a store without an index.
WITH gone AS (
    DELETE FROM {schema}.pgsaver_store AS s
    USING unnest(%(del_prefixes)b::text[], %(del_keys)b::text[]) AS d(prefix, key)
    WHERE s.prefix = d.prefix AND s.key = d.key
)
INSERT INTO {schema}.pgsaver_store AS s
    (prefix, key, value, value_exact, created_at, updated_at, expires_at, ttl_minutes)
SELECT u.prefix, u.key, u.value::jsonb, u.value_exact, now(), now(),
       now() + u.ttl * interval '1 minute', u.ttl
FROM unnest(%(prefixes)b::text[], %(keys)b::text[], %(values)b::text[], %(exacts)b::text[],
            %(ttls)b::float8[]) AS u(prefix, key, value, value_exact, ttl)
ON CONFLICT (prefix, key) DO UPDATE
SET value = EXCLUDED.value, value_exact = EXCLUDED.value_exact, updated_at = now(),
    expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
    created_at = CASE WHEN s.expires_at <= now() THEN now() ELSE s.created_at END

-- name: store_search
-- Items under a namespace prefix (%(prefix)s itself, or below it: %(below)s is its LIKE pattern;
-- NULL: every namespace) whose value contains one of the prefilter's objects (NULL: any), newest first.
SELECT s.prefix, s.key, s.value, s.value_exact, s.created_at, s.updated_at, s.ttl_minutes
FROM {schema}.pgsaver_store AS s
WHERE (%(prefix)s::text IS NULL OR s.prefix = %(prefix)s OR s.prefix LIKE %(below)s)
  AND (%(filters)b::text[] IS NULL OR s.value @> ANY (%(filters)b::text[]::jsonb[]))
  AND (s.expires_at IS NULL OR s.expires_at > now() OR NOT %(omit_expired)s)
ORDER BY s.updated_at DESC, s.prefix, s.key
LIMIT %(limit)s OFFSET %(offset)s

-- name: store_prefixes
-- The distinct namespaces holding an unexpired item, at or below %(prefix)s (NULL: all), by
-- skipping through the primary key.
WITH RECURSIVE p AS (
    (SELECT s.prefix FROM {schema}.pgsaver_store AS s
     WHERE (%(prefix)s::text IS NULL OR s.prefix = %(prefix)s OR s.prefix LIKE %(below)s)
     ORDER BY s.prefix LIMIT 1)
    UNION ALL
    SELECT (SELECT s.prefix FROM {schema}.pgsaver_store AS s
            WHERE s.prefix > p.prefix
              AND (%(prefix)s::text IS NULL OR s.prefix = %(prefix)s OR s.prefix LIKE %(below)s)
            ORDER BY s.prefix LIMIT 1)
    FROM p WHERE p.prefix IS NOT NULL
)
SELECT p.prefix FROM p
WHERE p.prefix IS NOT NULL
  AND (NOT %(omit_expired)s OR EXISTS (
      SELECT 1 FROM {schema}.pgsaver_store AS s
      WHERE s.prefix = p.prefix AND (s.expires_at IS NULL OR s.expires_at > now())))

-- name: _sweep_gone
-- The end of a TTL sweep batch (store_sweep, store_sweep_skip_locked), after its lock and batch
-- CTEs: the batch deleted by its row addresses (a TID scan): the expiry is checked again on the
-- row, not used to scan (statistics taken before the items expired made that an index scan of
-- every expired row, each compared with every address, 4x the statement's time at 10,000);
-- whether it held the sweep lock, how many it deleted and found, the last expiry found.
), gone AS (
    DELETE FROM {schema}.pgsaver_store AS s
    WHERE s.ctid = ANY ((SELECT b.ats FROM batch AS b)::tid[])
      AND coalesce(s.expires_at <= now(), false)
    RETURNING 1
)
SELECT (SELECT held FROM lock) AS held, (SELECT count(*) FROM gone) AS deleted,
       b.found, b.last
FROM batch AS b

-- name: store_sweep
-- One batch of the TTL sweep, if this statement holds the sweep lock (one sweeper at a time across
-- workers): the first %(limit)s expired items from %(after)s on (NULL: from the first), in the
-- expires_at index's order (the batch before ended there: this one does not walk past the index
-- entries of the rows it deleted), deleted by their row addresses without locking them first.
-- Whether it held the lock, how many it deleted and found, and the last expires_at found.
-- The fast path: locking the batch first (store_sweep_skip_locked) writes every row twice, its
-- lock then its delete, with their WAL; this deletes at once. A row another transaction holds
-- would make the delete wait for it: lock_timeout, set here for this statement's transaction only
-- (%(lock_timeout)s, 50ms, well below deadlock_timeout), bounds that wait, so a writer that waits
-- for a row this statement deleted (a deadlock's other half) waits at most that long; past it the
-- statement fails with lock_not_available (55P03), rolls back whole, and the sweep runs
-- store_sweep_skip_locked for this batch instead. set_config is part of "held" so that it runs
-- before any row is read (the lock CTE runs first: every other part waits for its "held"); it
-- never returns NULL, so "held" is the advisory lock's answer.
-- An item a writer changed meanwhile is checked again as it is then: Postgres follows the row to
-- its new version (EvalPlanQual) and the expiry is checked on that one (a put or a refreshing
-- read gave it a new TTL: it stays).
WITH lock AS MATERIALIZED (
    SELECT set_config('lock_timeout', %(lock_timeout)s, true) IS NOT NULL
           AND pg_try_advisory_xact_lock({_lock_class}, hashtext('store-sweep:' || %(schema)s)) AS held
), batch AS MATERIALIZED (
    -- one row: the batch's addresses, how many, the last expiry (one pass over the batch)
    SELECT array_agg(d.at) AS ats, count(*) AS found, max(d.expires_at) AS last
    FROM (
        SELECT e.ctid AS at, e.expires_at FROM {schema}.pgsaver_store AS e
        WHERE (SELECT held FROM lock) AND e.expires_at <= now()
          AND e.expires_at >= coalesce(%(after)s::timestamptz, '-infinity')
        ORDER BY e.expires_at
        LIMIT %(limit)s
    ) AS d
{_sweep_gone}

-- name: store_sweep_skip_locked
-- store_sweep for a batch whose fast path waited longer than its lock_timeout for a row another
-- transaction holds: the same batch, but locked first, skipping the rows another transaction holds
-- (left for the next sweep: this never waits behind a writer, nor deadlocks with one), then
-- deleted by their row addresses. Each row is written twice (its lock, then its delete).
WITH lock AS MATERIALIZED (
    SELECT pg_try_advisory_xact_lock({_lock_class}, hashtext('store-sweep:' || %(schema)s)) AS held
), batch AS MATERIALIZED (
    SELECT array_agg(d.at) AS ats, count(*) AS found, max(d.expires_at) AS last
    FROM (
        SELECT e.ctid AS at, e.expires_at FROM {schema}.pgsaver_store AS e
        WHERE (SELECT held FROM lock) AND e.expires_at <= now()
          AND e.expires_at >= coalesce(%(after)s::timestamptz, '-infinity')
        ORDER BY e.expires_at
        LIMIT %(limit)s
        FOR UPDATE OF e SKIP LOCKED
    ) AS d
{_sweep_gone}

-- ============================================================================ the Store: vectors
-- pgsaver_store_vectors is made by the store's setup() when it has an index (its dimension is the
-- index's): _store.index_ddl. {vtype} is the column's type (vector or halfvec), {vop} the distance
-- operator of the index's distance type.

-- name: _vtype_vector
vector

-- name: _vtype_halfvec
halfvec

-- name: _vop_cosine
<=>

-- name: _vop_l2
<->

-- name: _vop_inner_product
<#>

-- name: store_write
-- A batch's puts and deletes on a store with an index, with the vectors' bookkeeping, in one
-- statement, written only if
--   * no item of the batch changed between this statement's snapshot and its lock on the item
--     (every writer locks an item before its vectors, so the vectors read are the latest), and
--   * every field sent without an embedding (%(embeddings)s NULL: the client's text hash,
--     %(hashes)s, is taken as the stored one's) has a stored vector of that hash;
-- else nothing is written. Written: deletes (their vectors go by the foreign key), puts (an item
-- that was not there is inserted unless another writer inserted it meanwhile: that put is then
-- taken as done before the other's), then the vectors of the items put: fields no longer indexed
-- go, embedded ones are written, unchanged ones stay. Rows: whether it wrote, whether no item had
-- changed, then the fields (prefix, key, field) to embed, one a row (one row of NULLs if none).
WITH put AS (
    SELECT * FROM unnest(%(prefixes)b::text[], %(keys)b::text[], %(values)b::text[],
                         %(exacts)b::text[], %(ttls)b::float8[])
        AS u(prefix, key, value, value_exact, ttl)
), dropped AS (
    SELECT * FROM unnest(%(del_prefixes)b::text[], %(del_keys)b::text[]) AS d(prefix, key)
), field AS (
    SELECT * FROM unnest(%(f_prefixes)b::text[], %(f_keys)b::text[], %(fields)b::text[],
                         %(hashes)b::text[], %(embeddings)b::text[])
        AS n(prefix, key, field, hash, embedding)
), batch AS (
    SELECT prefix, key FROM put UNION ALL SELECT prefix, key FROM dropped
), seen AS MATERIALIZED (
    SELECT s.prefix, s.key, s.ctid AS at
    FROM {schema}.pgsaver_store AS s JOIN batch AS b ON s.prefix = b.prefix AND s.key = b.key
), locked AS MATERIALIZED (
    SELECT s.prefix, s.key, s.ctid AS at
    FROM {schema}.pgsaver_store AS s JOIN batch AS b ON s.prefix = b.prefix AND s.key = b.key
    ORDER BY s.prefix, s.key
    FOR UPDATE OF s
), still AS MATERIALIZED (
    SELECT NOT EXISTS (
        SELECT 1 FROM seen FULL JOIN locked ON seen.prefix = locked.prefix AND seen.key = locked.key
        WHERE seen.at IS DISTINCT FROM locked.at) AS still
), stale AS MATERIALIZED (
    SELECT n.prefix, n.key, n.field FROM field AS n
    WHERE n.embedding IS NULL
      AND NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_store_vectors AS v
                      WHERE v.prefix = n.prefix AND v.key = n.key AND v.field = n.field
                        AND v.text_hash = n.hash)
), ok AS MATERIALIZED (
    SELECT (SELECT still FROM still) AND NOT EXISTS (SELECT 1 FROM stale) AS ok
), removed AS (
    DELETE FROM {schema}.pgsaver_store AS s USING dropped AS d
    WHERE s.prefix = d.prefix AND s.key = d.key AND (SELECT ok FROM ok)
), updated AS (
    UPDATE {schema}.pgsaver_store AS s
    SET value = u.value::jsonb, value_exact = u.value_exact, updated_at = now(),
        expires_at = now() + u.ttl * interval '1 minute', ttl_minutes = u.ttl,
        created_at = CASE WHEN s.expires_at <= now() THEN now() ELSE s.created_at END
    FROM put AS u
    WHERE s.prefix = u.prefix AND s.key = u.key AND (SELECT ok FROM ok)
    RETURNING s.prefix, s.key
), inserted AS (
    INSERT INTO {schema}.pgsaver_store
        (prefix, key, value, value_exact, created_at, updated_at, expires_at, ttl_minutes)
    SELECT u.prefix, u.key, u.value::jsonb, u.value_exact, now(), now(),
           now() + u.ttl * interval '1 minute', u.ttl
    FROM put AS u
    WHERE (SELECT ok FROM ok)
      AND NOT EXISTS (SELECT 1 FROM seen WHERE seen.prefix = u.prefix AND seen.key = u.key)
    ON CONFLICT (prefix, key) DO NOTHING
    RETURNING prefix, key
), done AS (
    SELECT prefix, key FROM updated UNION ALL SELECT prefix, key FROM inserted
), unindexed AS (
    DELETE FROM {schema}.pgsaver_store_vectors AS v USING done AS i
    WHERE v.prefix = i.prefix AND v.key = i.key
      AND NOT EXISTS (SELECT 1 FROM field AS n
                      WHERE n.prefix = v.prefix AND n.key = v.key AND n.field = v.field)
), embedded AS (
    INSERT INTO {schema}.pgsaver_store_vectors (prefix, key, field, text_hash, embedding)
    SELECT n.prefix, n.key, n.field, n.hash, n.embedding::{vtype}
    FROM field AS n JOIN done AS i ON n.prefix = i.prefix AND n.key = i.key
    WHERE n.embedding IS NOT NULL
    ON CONFLICT (prefix, key, field) DO UPDATE
    SET text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding
)
SELECT o.ok, (SELECT still FROM still) AS still, st.prefix, st.key, st.field
FROM ok AS o LEFT JOIN stale AS st ON true

-- name: store_write_call
-- store_write through the write function setup() makes (rules.write_ddl: its body is store_write,
-- its arguments these, in this order): the server plans the statement once per session (a
-- generic plan on the primary keys, whatever the tables' statistics), not at every call.
SELECT * FROM {schema}.pgsaver_store_write_{vtype}(
    %(prefixes)b::text[], %(keys)b::text[], %(values)b::text[], %(exacts)b::text[],
    %(ttls)b::float8[], %(del_prefixes)b::text[], %(del_keys)b::text[], %(f_prefixes)b::text[],
    %(f_keys)b::text[], %(fields)b::text[], %(hashes)b::text[], %(embeddings)b::text[])

-- name: store_vector_hashes
-- The fields already embedded for the given items, with the hash of the text each came from.
SELECT v.prefix, v.key, v.field, v.text_hash
FROM {schema}.pgsaver_store_vectors AS v
JOIN unnest(%(prefixes)b::text[], %(keys)b::text[]) AS u(prefix, key)
  ON v.prefix = u.prefix AND v.key = u.key

-- name: store_vector_put
-- The vectors of the items a batch put: fields no longer indexed go; new and changed ones are
-- written (an unchanged field comes with a NULL embedding and keeps its row). The count: unchanged
-- fields whose stored vector is not of that text any more (another writer changed it after the
-- hashes were read); the store then rolls back and embeds again.
WITH gone AS (
    DELETE FROM {schema}.pgsaver_store_vectors AS v
    USING unnest(%(item_prefixes)b::text[], %(item_keys)b::text[]) AS i(prefix, key)
    WHERE v.prefix = i.prefix AND v.key = i.key
      AND NOT EXISTS (
          SELECT 1 FROM unnest(%(prefixes)b::text[], %(keys)b::text[], %(fields)b::text[])
              AS n(prefix, key, field)
          WHERE n.prefix = v.prefix AND n.key = v.key AND n.field = v.field)
), written AS (
    INSERT INTO {schema}.pgsaver_store_vectors (prefix, key, field, text_hash, embedding)
    SELECT n.prefix, n.key, n.field, n.hash, n.embedding::{vtype}
    FROM unnest(%(prefixes)b::text[], %(keys)b::text[], %(fields)b::text[], %(hashes)b::text[],
                %(embeddings)b::text[]) AS n(prefix, key, field, hash, embedding)
    WHERE n.embedding IS NOT NULL
    ON CONFLICT (prefix, key, field) DO UPDATE
    SET text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding
    RETURNING 1
)
SELECT count(*)
FROM unnest(%(prefixes)b::text[], %(keys)b::text[], %(fields)b::text[], %(hashes)b::text[],
            %(embeddings)b::text[]) AS n(prefix, key, field, hash, embedding)
WHERE n.embedding IS NULL
  AND NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_store_vectors AS v
                  WHERE v.prefix = n.prefix AND v.key = n.key AND v.field = n.field
                    AND v.text_hash = n.hash)

-- name: store_ef_search
-- For one transaction: more candidates from an ANN scan.
SELECT set_config('hnsw.ef_search', %(ef)s, true), set_config('ivfflat.probes', %(probes)s, true)

-- name: store_iterative_scan
-- For one transaction, on pgvector 0.8 or newer: an ANN scan goes on past the rows a namespace
-- filter drops, until it has its LIMIT.
SELECT set_config('hnsw.iterative_scan', 'strict_order', true),
       set_config('ivfflat.iterative_scan', 'relaxed_order', true)

-- name: store_pgvector_version
SELECT extversion FROM pg_extension WHERE extname = 'vector'

-- name: _vdist_cosine
cosine

-- name: _vdist_l2
l2

-- name: _vdist_inner_product
inner_product

-- name: store_nearest
-- A semantic search in one statement: the search function setup() made for the index's distance
-- (rules.nearest_ddl). It counts the items the prefix and prefilter select up to %(probe)s and
-- scans those exactly when fewer, else reads the %(cand)s nearest vectors of the ANN index
-- (iterative scans, hnsw.ef_search %(ef)s, ivfflat.probes %(probes)s: settings scoped to the call by its SET clauses), and
-- falls back to the exact scan when the index gives fewer than %(n)s items (with
-- ann_index_config's iterative_scan off, what the index's first candidates give is the answer,
-- and the exact scan is chosen only where it costs less than those). Rows: the %(n)s
-- nearest items (the first %(skip)s left out), then up to %(ulim)s without vectors (newest
-- first), %(total)s in all; distance NULL for those.
SELECT f.prefix, f.key, f.value, f.value_exact, f.created_at, f.updated_at, f.ttl_minutes,
       f.distance
FROM {schema}.pgsaver_store_nearest_{vdist}(
    %(query)s, %(prefix)s, %(below)s, %(filter)s::jsonb, %(omit_expired)s, %(probe)s::integer,
    %(cand)s, %(n)s, %(skip)s, %(ulim)s, %(total)s, %(ef)s, %(tuples)s, %(probes)s,
    %(scan)s::text) AS f

-- name: store_function
-- Whether a function setup() makes for an index (search, write) exists in the schema
-- (setup(check=True)).
SELECT count(*) FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s AND p.proname = %(name)s

-- name: store_setup_lock
-- setup()'s changes to the vectors' objects, one worker at a time (CREATE OR REPLACE FUNCTION
-- from two sessions at once can fail).
SELECT pg_advisory_xact_lock({_lock_class}, hashtext('store-setup:' || %(schema)s))

-- name: store_vector_search
-- The items nearest to %(query)s under a namespace prefix: the %(candidates)s nearest vectors
-- (the index's order), an item's best field, the value filter, expiry; nearest first. Then the
-- distance, how many vectors the scan gave, and how many (up to %(candidates)s) the prefix holds:
-- fewer given than held means the index scan stopped early. One row of NULLs when none is left.
WITH nearest AS MATERIALIZED (
    SELECT v.prefix, v.key, v.embedding {vop} %(query)s::{vtype} AS distance
    FROM {schema}.pgsaver_store_vectors AS v
    WHERE (%(prefix)s::text IS NULL OR v.prefix = %(prefix)s OR v.prefix LIKE %(below)s)
    ORDER BY v.embedding {vop} %(query)s::{vtype}
    LIMIT %(candidates)s
), best AS (
    SELECT n.prefix, n.key, min(n.distance) AS distance FROM nearest AS n GROUP BY n.prefix, n.key
), found AS (
    SELECT s.prefix, s.key, s.value, s.value_exact, s.created_at, s.updated_at, s.ttl_minutes,
           b.distance
    FROM best AS b
    JOIN {schema}.pgsaver_store AS s ON s.prefix = b.prefix AND s.key = b.key
    WHERE (%(filters)b::text[] IS NULL OR s.value @> ANY (%(filters)b::text[]::jsonb[]))
      AND (s.expires_at IS NULL OR s.expires_at > now() OR NOT %(omit_expired)s)
    ORDER BY b.distance, s.prefix, s.key
    -- when the prefilter is exact, only the rows asked for travel (NULL: every candidate)
    LIMIT %(rows)s
), counts AS (
    SELECT (SELECT count(*) FROM nearest) AS given,
           (SELECT count(*) FROM (
                SELECT 1 FROM {schema}.pgsaver_store_vectors AS v
                WHERE (%(prefix)s::text IS NULL OR v.prefix = %(prefix)s OR v.prefix LIKE %(below)s)
                LIMIT %(candidates)s) AS h) AS held
)
SELECT f.prefix, f.key, f.value, f.value_exact, f.created_at, f.updated_at, f.ttl_minutes,
       f.distance, c.given, c.held
FROM counts AS c
LEFT JOIN found AS f ON true
ORDER BY f.distance, f.prefix, f.key

-- name: store_unscored
-- Items under a namespace prefix that have no vector (put with index=False, or no text in the
-- indexed fields): what a semantic search returns after the scored ones, newest first.
SELECT s.prefix, s.key, s.value, s.value_exact, s.created_at, s.updated_at, s.ttl_minutes
FROM {schema}.pgsaver_store AS s
WHERE (%(prefix)s::text IS NULL OR s.prefix = %(prefix)s OR s.prefix LIKE %(below)s)
  AND (%(filters)b::text[] IS NULL OR s.value @> ANY (%(filters)b::text[]::jsonb[]))
  AND (s.expires_at IS NULL OR s.expires_at > now() OR NOT %(omit_expired)s)
  AND NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_store_vectors AS v
                  WHERE v.prefix = s.prefix AND v.key = s.key)
ORDER BY s.updated_at DESC, s.prefix, s.key
LIMIT %(limit)s OFFSET %(offset)s

-- name: store_vector_extension
CREATE EXTENSION IF NOT EXISTS vector

-- name: store_vector_column
-- The type of the vectors table's embedding column (vector(3), halfvec(1536)), or none.
SELECT format_type(a.atttypid, a.atttypmod)
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass(quote_ident(%(schema)s) || '.pgsaver_store_vectors')
  AND a.attname = 'embedding' AND NOT a.attisdropped

-- ============================================================================ the node cache
-- PostgresCache (langgraph_pg_saver/cache.py) on migration 0017's pgsaver_cache. A namespace is
-- its tuple's JSON array text; a TTL is in seconds (NULL: no expiry).

-- name: cache_get
-- The entries of the given keys (%(nss)s and %(keys)s, pairwise) that have not expired.
SELECT c.ns, c.key, c.type, c.blob
FROM unnest(%(nss)b::text[], %(keys)b::text[]) AS k (ns, key)
JOIN {schema}.pgsaver_cache AS c ON c.ns = k.ns AND c.key = k.key
WHERE c.expires_at IS NULL OR c.expires_at > now()

-- name: cache_get_one
-- cache_get of one key (what a superstep with one cached task asks): a primary-key lookup without
-- the arrays (docs/performance.md, "The node cache": a hit went from 0.36 to 0.27 ms).
SELECT c.ns, c.key, c.type, c.blob
FROM {schema}.pgsaver_cache AS c
WHERE c.ns = %(ns)s AND c.key = %(key)s AND (c.expires_at IS NULL OR c.expires_at > now())

-- name: cache_set_one
-- cache_set of one entry.
INSERT INTO {schema}.pgsaver_cache AS c (ns, key, type, blob, expires_at)
VALUES (%(ns)s, %(key)s, %(type)s, %(blob)b,
        CASE WHEN %(ttl)s::float8 IS NULL THEN NULL
             ELSE now() + make_interval(secs => %(ttl)s::float8) END)
ON CONFLICT (ns, key) DO UPDATE
SET type = excluded.type, blob = excluded.blob, expires_at = excluded.expires_at

-- name: cache_set
-- Entries written (sorted by namespace and key by the caller: two sets of the same keys lock them
-- in one order), each replacing what its key held, expired or not.
INSERT INTO {schema}.pgsaver_cache AS c (ns, key, type, blob, expires_at)
SELECT u.ns, u.key, u.type, u.blob,
       CASE WHEN u.ttl IS NULL THEN NULL ELSE now() + make_interval(secs => u.ttl) END
FROM unnest(%(nss)b::text[], %(keys)b::text[], %(types)b::text[], %(blobs)b::bytea[],
            %(ttls)b::float8[]) AS u (ns, key, type, blob, ttl)
ON CONFLICT (ns, key) DO UPDATE
SET type = excluded.type, blob = excluded.blob, expires_at = excluded.expires_at

-- name: cache_clear
-- Every entry (%(all)s), or those of the namespaces %(nss)s; how many went.
WITH gone AS (
    DELETE FROM {schema}.pgsaver_cache AS c
    WHERE %(all)s OR c.ns = ANY (%(nss)b::text[])
    RETURNING 1
)
SELECT count(*) FROM gone

-- name: cache_sweep
-- One batch of the cache's sweep, if this statement holds the sweep lock (one sweeper at a time
-- across workers): up to %(limit)s expired entries, those another transaction holds skipped (left
-- for the next sweep: it never waits behind a writer), deleted. Whether it held the lock, how
-- many it deleted.
WITH lock AS MATERIALIZED (
    SELECT pg_try_advisory_xact_lock({_lock_class}, hashtext('cache-sweep:' || %(schema)s)) AS held
), batch AS MATERIALIZED (
    SELECT c.ctid AS at FROM {schema}.pgsaver_cache AS c
    WHERE (SELECT held FROM lock) AND c.expires_at <= now()
    ORDER BY c.expires_at
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED
), gone AS (
    DELETE FROM {schema}.pgsaver_cache AS c
    WHERE c.ctid = ANY (ARRAY(SELECT at FROM batch)) AND c.expires_at <= now()
    RETURNING 1
)
SELECT (SELECT held FROM lock), (SELECT count(*) FROM gone)
