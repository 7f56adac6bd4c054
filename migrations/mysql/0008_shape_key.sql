-- Permuted tags (docs/shapes.md#rotating-a-key): the check value of each key id's key, recorded by
-- the first server that uses the key id and never changed. Never the key: the check value is
-- AES-256 of the zero block under the key, its first 8 bytes (src/shapes/key_check.rs), which
-- reveals nothing of it. A server whose key file gives another check value refuses the key id's
-- tags (key_unavailable): two keys under one id would write colliding codes. Key ids are
-- a-z 0-9 _ only, compared exactly: ascii_bin.
CREATE TABLE IF NOT EXISTS leafid_shape_key (
    key_id      VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    check_value VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at  TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (key_id)
) ENGINE = InnoDB;
