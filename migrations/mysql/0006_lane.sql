-- Regions (docs/deploy.md#12-regions-lanes): which lane slot this database is, written once by the
-- first server of its region and never changed. Every id it leases is mapped into that slot's
-- blocks (src/segment/lanes), so two databases with two slots never hand out one id.
CREATE TABLE IF NOT EXISTS leafid_lane (
    id         BIGINT    NOT NULL,
    slot       BIGINT    NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    CHECK (id = 1),
    CHECK (slot >= 0 AND slot < 8)
) ENGINE = InnoDB;
