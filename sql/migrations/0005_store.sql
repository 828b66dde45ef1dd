-- 0005: the Store's items (PostgresStore / AsyncPostgresStore: long-term memory across threads).
-- additive: a new table only; code that knows 0001-0004 never reads it.
-- One row per item. The namespace is stored as its labels joined by '.' (labels cannot hold a '.'),
-- so every key leads with it and a namespace prefix is a primary-key range (COLLATE "C": LIKE
-- 'a.b.%' uses the index). value is jsonb, for filters; value_exact keeps the JSON text when jsonb
-- would change the value (a NUL character, a float of 1e16 or more, -0.0), and reads return it.
-- expires_at and ttl_minutes carry the TTL (NULL: never expires); reads skip expired rows.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_store (
    prefix      text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    value       jsonb NOT NULL,
    value_exact text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    ttl_minutes double precision,
    PRIMARY KEY (prefix, key)
);

-- the TTL sweep deletes by it
CREATE INDEX IF NOT EXISTS pgsaver_store_expires_at_idx
    ON {schema}.pgsaver_store (expires_at) WHERE expires_at IS NOT NULL;

-- search without a query: newest first within a namespace prefix
CREATE INDEX IF NOT EXISTS pgsaver_store_prefix_updated_idx
    ON {schema}.pgsaver_store (prefix, updated_at DESC);
