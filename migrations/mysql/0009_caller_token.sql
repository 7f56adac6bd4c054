-- Caller tokens (issue 44, docs/api.md#caller-tokens): who may take ids of which tags. Never the
-- token: `token_hash` is the SHA-256 of it in lowercase hex; the token is shown once, at creation.
-- `tags` is the scope list, comma-separated (tag names, prefixes ending in `*`, `*`, `snowflake`).
-- The quota columns are stored and shown, not enforced yet. A revoked row is kept (`revoked_at_ms`
-- set) so that its name is not reused silently. Times are milliseconds since the Unix epoch.
-- Names are [A-Za-z0-9._-] compared exactly: ascii_bin.
CREATE TABLE IF NOT EXISTS leafid_caller_token (
    name             VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    token_hash       CHAR(64)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tags             TEXT        CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    rate_per_sec     BIGINT      NULL,
    burst            BIGINT      NULL,
    period_share_ppm BIGINT      NULL,
    created_at_ms    BIGINT      NOT NULL,
    revoked_at_ms    BIGINT      NULL,
    PRIMARY KEY (name),
    UNIQUE KEY leafid_caller_token_hash (token_hash)
) ENGINE = InnoDB;
