-- uid-generator's WORKER_NODE table (its DDL, made idempotent): one row per start for the
-- `disposable` worker strategy; the row's ID is the worker id.
CREATE TABLE IF NOT EXISTS WORKER_NODE (
    ID          BIGINT      NOT NULL AUTO_INCREMENT COMMENT 'auto increment id',
    HOST_NAME   VARCHAR(64) NOT NULL COMMENT 'host name',
    PORT        VARCHAR(64) NOT NULL COMMENT 'port',
    TYPE        INT         NOT NULL COMMENT 'node type: ACTUAL or CONTAINER',
    LAUNCH_DATE DATE        NOT NULL COMMENT 'launch date',
    MODIFIED    TIMESTAMP   NOT NULL COMMENT 'modified time',
    CREATED     TIMESTAMP   NOT NULL COMMENT 'created time',
    PRIMARY KEY (ID)
) COMMENT = 'DB WorkerID Assigner for UID Generator', ENGINE = InnoDB;

-- Leased worker ids (the `lease` strategy): reused after expiry, never while held.
CREATE TABLE IF NOT EXISTS leafid_worker_lease (
    worker_id         BIGINT      NOT NULL,
    host_name         VARCHAR(64) NOT NULL,
    port              VARCHAR(64) NOT NULL,
    owner             VARCHAR(64) NOT NULL,
    lease_until_ms    BIGINT      NOT NULL,
    last_timestamp_ms BIGINT      NOT NULL,
    PRIMARY KEY (worker_id)
) ENGINE = InnoDB;
