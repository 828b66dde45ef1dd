-- 0010: what import_official imported, so that running it again brings back nothing pruned or
-- deleted here since.
-- additive: a new table only; code that knows 0001-0009 never reads it.
-- One row per (source schema, thread, namespace) imported: last_id is the newest checkpoint id
-- imported into that namespace (checkpoint ids are time-ordered uuid6, and LangGraph itself takes the
-- greatest id as a namespace's latest), head_writes the keys ('idx:task_id') of the source's pending
-- writes at that checkpoint when it was imported. A later import copies only source checkpoints
-- newer than last_id, and at last_id only writes that were not there then. delete_thread and the
-- lifecycle operations leave these rows alone: a thread imported and deleted here stays deleted.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_imports (
    source        text COLLATE "C" NOT NULL,
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    last_id       text COLLATE "C" NOT NULL,
    head_writes   text[] NOT NULL DEFAULT '{}',
    imported_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, thread_id, checkpoint_ns)
);
