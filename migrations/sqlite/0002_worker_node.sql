-- uid-generator's WORKER_NODE table in SQLite types (`disposable` worker strategy).
CREATE TABLE IF NOT EXISTS WORKER_NODE (
    ID          INTEGER PRIMARY KEY AUTOINCREMENT,
    HOST_NAME   TEXT    NOT NULL,
    PORT        TEXT    NOT NULL,
    TYPE        INTEGER NOT NULL,
    LAUNCH_DATE TEXT    NOT NULL,
    MODIFIED    TEXT    NOT NULL,
    CREATED     TEXT    NOT NULL
);

-- Leased worker ids (the `lease` strategy).
CREATE TABLE IF NOT EXISTS leafid_worker_lease (
    worker_id         INTEGER NOT NULL PRIMARY KEY,
    host_name         TEXT    NOT NULL,
    port              TEXT    NOT NULL,
    owner             TEXT    NOT NULL,
    lease_until_ms    INTEGER NOT NULL,
    last_timestamp_ms INTEGER NOT NULL
);
