-- The high-water mark of every deleted tag: creating the tag again below it would issue its
-- ids a second time, so create refuses (an explicit max_id at or above it is the override).
CREATE TABLE IF NOT EXISTS leafid_tag_tombstone (
    biz_tag    TEXT    NOT NULL PRIMARY KEY CHECK (length(biz_tag) <= 128),
    max_id     INTEGER NOT NULL,
    deleted_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
);
