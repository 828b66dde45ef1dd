-- 0001: the three tables that carry the state.
-- Every primary key leads with thread_id so that one thread's rows sit together (and the tables can later
-- be distributed by thread_id). Key columns use the "C" collation: it orders like Python's str
-- comparison (code points), which LangGraph's ids and writes_sort_key assume, and it is the cheapest.

CREATE TABLE IF NOT EXISTS {schema}.pgsaver_checkpoints (
    thread_id            text COLLATE "C" NOT NULL,
    checkpoint_ns        text COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id        text COLLATE "C" NOT NULL,
    parent_checkpoint_id text COLLATE "C",
    run_id               text COLLATE "C",
    -- the checkpoint body (everything but channel values and versions), serialized by the saver's serde
    type                 text NOT NULL,
    checkpoint           bytea NOT NULL,
    -- channel -> version; joins the blobs table, keeps int/str/float versions as they were given
    channel_versions     jsonb NOT NULL,
    -- filterable metadata; strings with NUL characters are stored without them here ...
    metadata             jsonb NOT NULL,
    -- ... and the exact metadata is kept here (serde-encoded) whenever the JSON form would lose anything
    metadata_exact       bytea,
    created_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);

-- delete_for_runs and run-level reporting
CREATE INDEX IF NOT EXISTS pgsaver_checkpoints_run_id_idx
    ON {schema}.pgsaver_checkpoints (run_id) WHERE run_id IS NOT NULL;

-- list(None, filter=...) across threads
CREATE INDEX IF NOT EXISTS pgsaver_checkpoints_metadata_idx
    ON {schema}.pgsaver_checkpoints USING gin (metadata jsonb_path_ops);

-- One row per channel version. type 'empty' marks a version that has no stored value (a DeltaChannel
-- between snapshots): it differs from a stored None, whose type is 'null'.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_blobs (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
    channel       text COLLATE "C" NOT NULL,
    version       text COLLATE "C" NOT NULL,
    type          text NOT NULL,
    blob          bytea,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);

-- Node outputs (pending writes). Special channels (error, scheduled, interrupt, resume) use negative idx.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_writes (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    idx           integer NOT NULL,
    channel       text COLLATE "C" NOT NULL,
    type          text NOT NULL,
    blob          bytea,
    task_path     text COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
