-- Operational webhooks (hookline_core::operational, docs/api.md "Operational
-- webhooks"): what to tell the operator, written in the transaction that made
-- it happen and published by a loop into the internal app, then deleted.
CREATE TABLE operational_notices (
    id          TEXT PRIMARY KEY,          -- also the publish's idempotency key
    event_type  TEXT NOT NULL,
    data        TEXT NOT NULL,             -- the payload, JSON
    created_at  INTEGER NOT NULL
);
-- Dead deliveries per endpoint, second and reason: the loop adds the seconds
-- of each closed window up into one `delivery.dead` per endpoint and window.
CREATE TABLE operational_dead (
    endpoint_id      TEXT NOT NULL,
    window_index     INTEGER NOT NULL,     -- the unix second
    reason           TEXT NOT NULL,
    app_id           TEXT NOT NULL,
    count            INTEGER NOT NULL,
    last_status      INTEGER,
    last_delivery_id TEXT NOT NULL,
    last_event_id    TEXT NOT NULL,
    last_at          INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, window_index, reason)
);
