-- Hookline core schema (SQLite). Times are unix milliseconds (INTEGER);
-- booleans are 0/1. The PostgreSQL schema is the same table for table.

CREATE TABLE apps (
    id          TEXT PRIMARY KEY,
    uid         TEXT UNIQUE,          -- the producer's own name for the app, optional
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE endpoints (
    id                      TEXT PRIMARY KEY,
    app_id                  TEXT NOT NULL,
    url                     TEXT NOT NULL,
    description             TEXT NOT NULL,
    event_types             TEXT,     -- JSON array of accepted types; NULL accepts all
    enabled                 INTEGER NOT NULL,
    secret                  TEXT NOT NULL,
    retry_base_ms           INTEGER,  -- per-endpoint overrides of the retry policy
    retry_cap_ms            INTEGER,
    max_attempts            INTEGER,
    max_age_secs            INTEGER,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL
);
-- Fan-out and listing: an app's endpoints.
CREATE INDEX endpoints_by_app ON endpoints (app_id, id);

CREATE TABLE events (
    id            TEXT PRIMARY KEY,
    app_id        TEXT NOT NULL,
    event_type    TEXT NOT NULL,
    ordering_key  TEXT,
    body          BLOB NOT NULL,      -- the Standard Webhooks envelope, sent byte for byte
    created_at    INTEGER NOT NULL
);
CREATE INDEX events_by_app ON events (app_id, id);

CREATE TABLE deliveries (
    id                TEXT PRIMARY KEY,
    app_id            TEXT NOT NULL,
    event_id          TEXT NOT NULL,
    endpoint_id       TEXT NOT NULL,
    state             TEXT NOT NULL,  -- pending | in_flight | succeeded | dead
    due_at            INTEGER NOT NULL, -- pending: next attempt; in_flight: lease expiry
    lease_token       TEXT,           -- the claim that holds an in_flight delivery
    attempts          INTEGER NOT NULL, -- attempts in the current round
    round_started_at  INTEGER NOT NULL, -- creation or last replay: max_age counts from here
    last_attempt_at   INTEGER,
    dead_reason       TEXT,
    dead_at           INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
-- The claim: due work in due order. Partial, so finished deliveries cost nothing.
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE state IN ('pending', 'in_flight');
CREATE INDEX deliveries_by_event ON deliveries (event_id);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, state);
-- The DLQ, newest first per app.
CREATE INDEX deliveries_dlq ON deliveries (app_id, dead_at, id) WHERE state = 'dead';

CREATE TABLE attempts (
    id               TEXT PRIMARY KEY,
    delivery_id      TEXT NOT NULL,
    app_id           TEXT NOT NULL,
    endpoint_id      TEXT NOT NULL,
    attempt_number   INTEGER NOT NULL, -- 1-based within the delivery's round
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    status_code      INTEGER,
    response_body    TEXT,             -- truncated
    error_kind       TEXT,             -- set when no response arrived
    error_message    TEXT,
    verdict          TEXT NOT NULL,    -- delivered | retry | dead
    next_attempt_at  INTEGER,
    dead_reason      TEXT
);
CREATE INDEX attempts_by_delivery ON attempts (delivery_id, id);

CREATE TABLE idempotency_keys (
    app_id       TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    status       INTEGER NOT NULL,
    response     BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (app_id, key)
);
-- Retention deletes by age.
CREATE INDEX idempotency_by_age ON idempotency_keys (created_at);

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    key_hash    TEXT NOT NULL UNIQUE,  -- SHA-256 of the key; the key itself is never stored
    app_id      TEXT,                  -- NULL: an admin key
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
