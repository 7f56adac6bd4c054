-- The high-water mark of every deleted tag: creating the tag again below it would issue its
-- ids a second time, so create refuses (an explicit max_id at or above it is the override).
-- biz_tag compares exactly as leaf_alloc.biz_tag does: both are VARCHAR(128) in the database's
-- default collation (MySQL needed a copy of Leaf's column collation; here both columns are
-- leafid's own).
CREATE TABLE IF NOT EXISTS leafid_tag_tombstone (
    biz_tag    VARCHAR(128) NOT NULL,
    max_id     BIGINT       NOT NULL,
    deleted_at TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (biz_tag)
);
