-- The high-water mark of every deleted tag: creating the tag again below it would issue its
-- ids a second time, so create refuses (an explicit max_id at or above it is the override).
CREATE TABLE IF NOT EXISTS leafid_tag_tombstone (
    biz_tag    VARCHAR(128) NOT NULL,
    max_id     BIGINT       NOT NULL,
    deleted_at TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (biz_tag)
) ENGINE = InnoDB;

-- biz_tag compares exactly as leaf_alloc.biz_tag does (a table Leaf created keeps its own
-- character set and collation): copy them from the live column.
SET @leafid_biz_tag_charset = (
    SELECT CONCAT('CHARACTER SET ', CHARACTER_SET_NAME, ' COLLATE ', COLLATION_NAME)
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'leaf_alloc' AND COLUMN_NAME = 'biz_tag'
);
SET @leafid_ddl = CONCAT(
    'ALTER TABLE leafid_tag_tombstone MODIFY biz_tag VARCHAR(128) ',
    COALESCE(@leafid_biz_tag_charset, ''),
    ' NOT NULL'
);
PREPARE leafid_stmt FROM @leafid_ddl;
EXECUTE leafid_stmt;
DEALLOCATE PREPARE leafid_stmt;
