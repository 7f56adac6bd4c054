-- Leaf's leaf_alloc table in PostgreSQL types, column for column (docs/postgres.md shows it
-- beside Leaf's MySQL DDL): VARCHAR(128), BIGINT, INT (integer), VARCHAR(256), and the MySQL
-- TIMESTAMP (an instant stored in UTC) as timestamptz. PostgreSQL has no ON UPDATE
-- CURRENT_TIMESTAMP: every leafid statement that changes a row sets update_time itself.
CREATE TABLE IF NOT EXISTS leaf_alloc (
    biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
    max_id      BIGINT       NOT NULL DEFAULT 1,
    step        INT          NOT NULL,
    description VARCHAR(256) DEFAULT NULL,
    update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (biz_tag)
);
