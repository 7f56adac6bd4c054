-- Strict tags (docs/guarantees.md, "Strict tags"): the one server that serves each strict tag.
-- `version` moves on every write (a takeover, a renewal, a release): another server takes the
-- tag over only after it saw the same version for a whole lease plus a margin on its own
-- boot-time clock, and only with a compare-and-set on that version (src/segment/strict). No
-- wall clock is stored or compared. `peer_key` is what a forwarding server presents to the
-- owner (read from this row: only a server with the database knows it).
CREATE TABLE IF NOT EXISTS leafid_strict_owner (
    biz_tag  VARCHAR(128) NOT NULL PRIMARY KEY,
    owner    VARCHAR(64)  NULL,
    address  VARCHAR(255) NULL,
    peer_key VARCHAR(64)  NULL,
    epoch    BIGINT       NOT NULL,
    lease_ms BIGINT       NOT NULL DEFAULT 0,
    version  BIGINT       NOT NULL
);
