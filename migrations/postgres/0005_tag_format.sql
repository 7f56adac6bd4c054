-- The format of a formatted tag (src/shapes): prefix, date part, sequence width and alphabet,
-- check character, reset and time zone, as JSON. Fixed for the tag's name for good: a row is
-- never updated nor deleted (deleting the tag keeps it, like a tombstone), because ids written
-- under two formats could read alike.
CREATE TABLE IF NOT EXISTS leafid_tag_format (
    biz_tag    VARCHAR(128)  NOT NULL,
    format     VARCHAR(1024) NOT NULL,
    created_at TIMESTAMPTZ   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (biz_tag)
);
