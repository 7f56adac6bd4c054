-- Caller tokens (issue 44, docs/api.md#caller-tokens): who may take ids of which tags. Never the
-- token: `token_hash` is the SHA-256 of it in lowercase hex; the token is shown once, at creation.
-- `tags` is the scope list, comma-separated (tag names, prefixes ending in `*`, `*`, `snowflake`).
-- The quota columns are stored and shown, not enforced yet. A revoked row is kept (`revoked_at_ms`
-- set) so that its name is not reused silently. Times are milliseconds since the Unix epoch.
CREATE TABLE IF NOT EXISTS leafid_caller_token (
    name             VARCHAR(64) NOT NULL,
    token_hash       VARCHAR(64) NOT NULL UNIQUE,
    tags             TEXT        NOT NULL,
    rate_per_sec     BIGINT,
    burst            BIGINT,
    period_share_ppm BIGINT,
    created_at_ms    BIGINT      NOT NULL,
    revoked_at_ms    BIGINT,
    PRIMARY KEY (name)
);
