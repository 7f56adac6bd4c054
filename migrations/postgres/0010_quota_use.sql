-- Caller quotas (docs/deploy.md, "Caller tokens and quotas"): how many ids of a formatted tag's
-- period each caller token has been granted, by every server together. A server takes its share
-- in chunks with a conditional update that never lets `used` pass the token's limit, so the
-- token's ids across all servers stay within it (src/service/quota.rs).
CREATE TABLE IF NOT EXISTS leafid_quota_use (
    token_name VARCHAR(64)  NOT NULL,
    biz_tag    VARCHAR(128) NOT NULL,
    period     VARCHAR(16)  NOT NULL,
    used       BIGINT       NOT NULL,
    PRIMARY KEY (token_name, biz_tag, period)
);
