-- The leaf_alloc table of Leaf, in SQLite types. update_time is set by every UPDATE statement.
CREATE TABLE IF NOT EXISTS leaf_alloc (
    biz_tag     TEXT    NOT NULL PRIMARY KEY CHECK (length(biz_tag) <= 128),
    max_id      INTEGER NOT NULL DEFAULT 1,
    step        INTEGER NOT NULL,
    description TEXT    DEFAULT NULL,
    update_time TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- The embedded default serves Leaf's sample tag out of the box.
INSERT OR IGNORE INTO leaf_alloc (biz_tag, max_id, step, description)
VALUES ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id');
