-- 0002: helpers for DeltaChannel-aware history, prune, delete_for_runs and retention.

-- The channels among p_candidates whose value is not stored at one checkpoint: no version there, or a
-- version whose blob is the 'empty' marker (or missing). Sorted and distinct, so equal sets compare equal.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_unstored(
    p_thread text, p_ns text, p_versions jsonb, p_candidates text[]
) RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT k ORDER BY k), ARRAY[]::text[])
    FROM unnest(p_candidates) AS k
    WHERE NOT (p_versions ? k AND EXISTS (
          SELECT 1 FROM {schema}.pgsaver_blobs AS b
          WHERE b.thread_id = p_thread AND b.checkpoint_ns = p_ns
            AND b.channel = k AND b.version = p_versions ->> k AND b.type <> 'empty'
    ))
$$;

-- The DeltaChannels LangGraph counts in a checkpoint's metadata (counters_since_delta_snapshot) that
-- have a version at that checkpoint: the channels whose value may have to be rebuilt from ancestors'
-- writes (LangGraph replays only versioned channels; the counters also list never-written ones).
CREATE OR REPLACE FUNCTION {schema}.pgsaver_delta_channels(p_metadata jsonb, p_versions jsonb)
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN jsonb_typeof(p_metadata -> 'counters_since_delta_snapshot') = 'object'
        THEN ARRAY(
            SELECT k FROM jsonb_object_keys(p_metadata -> 'counters_since_delta_snapshot') AS k
            WHERE p_versions ? k
        )
        ELSE ARRAY[]::text[]
    END
$$;

-- Children of a checkpoint (delete_for_runs' dependency check, history trees).
CREATE INDEX IF NOT EXISTS pgsaver_checkpoints_parent_idx
    ON {schema}.pgsaver_checkpoints (thread_id, checkpoint_ns, parent_checkpoint_id);
