-- The format of a formatted tag (src/shapes): prefix, date part, sequence width and alphabet,
-- check character, reset and time zone, as JSON. Fixed for the tag's name for good: a row is
-- never updated nor deleted (deleting the tag keeps it, like a tombstone), because ids written
-- under two formats could read alike. The server compares the stored spelling of biz_tag
-- exactly, whatever the collation.
CREATE TABLE IF NOT EXISTS leafid_tag_format (
    biz_tag    VARCHAR(128)  NOT NULL,
    format     VARCHAR(1024) NOT NULL,
    created_at TIMESTAMP     NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (biz_tag)
) ENGINE = InnoDB;

-- biz_tag compares exactly as leaf_alloc.biz_tag does (a table Leaf created keeps its own
-- character set and collation), as in leafid_tag_tombstone: copy them from the live column.
SET @leafid_biz_tag_charset = (
    SELECT CONCAT('CHARACTER SET ', CHARACTER_SET_NAME, ' COLLATE ', COLLATION_NAME)
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'leaf_alloc' AND COLUMN_NAME = 'biz_tag'
);
SET @leafid_ddl = CONCAT(
    'ALTER TABLE leafid_tag_format MODIFY biz_tag VARCHAR(128) ',
    COALESCE(@leafid_biz_tag_charset, ''),
    ' NOT NULL'
);
PREPARE leafid_stmt FROM @leafid_ddl;
EXECUTE leafid_stmt;
DEALLOCATE PREPARE leafid_stmt;
