-- 0017: LangGraph's node cache on Postgres (PostgresCache, langgraph_pg_saver/cache.py).
-- additive: a new table, which code that knows 0001-0016 never reads.
-- An entry is a node's cached result: its namespace (the tuple LangGraph gives, stored as its JSON
-- array text, so that any strings are kept apart exactly), its key, the serde's type and bytes
-- (compressed, or sealed by a KeyringSerializer, as the savers store values), and when it expires
-- (NULL: never). Reads leave out expired entries; the cache's sweep deletes them, one worker at a
-- time. On Citus the table stays on the coordinator, as the store's do.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_cache (
    ns         text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    type       text NOT NULL,
    blob       bytea NOT NULL,
    expires_at timestamptz,
    PRIMARY KEY (ns, key)
);

-- values are compressed by the client where it pays (as the savers' are, migration 0002): kept in
-- the row, out of line only when the row does not fit a page
ALTER TABLE {schema}.pgsaver_cache ALTER COLUMN blob SET STORAGE MAIN;
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        BEGIN
            EXECUTE 'ALTER TABLE {schema}.pgsaver_cache ALTER COLUMN blob SET COMPRESSION lz4';
        EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
            RAISE NOTICE 'lz4 is not available on this server: keeping the default compression';
        END;
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS pgsaver_cache_expires_idx
    ON {schema}.pgsaver_cache (expires_at) WHERE expires_at IS NOT NULL;

-- Whoever may read and write the values may use the cache (a role granted pgsaver_blobs by name;
-- default privileges cover the table already).
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.grantee, a.privilege_type
        FROM pg_catalog.pg_class AS c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.oid = '{schema}.pgsaver_blobs'::regclass AND a.grantee <> c.relowner
          AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
    LOOP
        IF r.grantee = 0 THEN
            EXECUTE format('GRANT %s ON {schema}.pgsaver_cache TO PUBLIC', r.privilege_type);
        ELSE
            -- regrole's text is the role's name quoted where it needs it: %s, not %I
            EXECUTE format('GRANT %s ON {schema}.pgsaver_cache TO %s', r.privilege_type,
                           r.grantee::regrole::text);
        END IF;
    END LOOP;
END
$$;
