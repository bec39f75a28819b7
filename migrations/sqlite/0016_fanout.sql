-- Lazy fan-out (docs/engine-v4.md, step 2). A published event whose deliveries
-- have nothing to say yet writes one narrow row here instead of one delivery
-- row per endpoint. A delivery's row is written when it first has state of its
-- own: its attempt's outcome, or a reason to wait (a retry, a breaker, a full
-- endpoint, a parked one). Its id is known before (its event's, with its
-- place among `targets`: `DeliveryId::of_target`), so listings show a target
-- without a row as a pending delivery under that id.
CREATE TABLE fanout (
    event_id     TEXT PRIMARY KEY,
    app_id       TEXT NOT NULL,
    -- ',ep_a,,ep_c,': the endpoint at each place; empty where the delivery
    -- was written at the publish (or since, by an endpoint's deletion).
    targets      TEXT NOT NULL,
    n            BIGINT NOT NULL,  -- the places not empty
    due_at       BIGINT NOT NULL,  -- not leased: when due; leased: when the lease ends
    lease_token  TEXT,
    -- Leased before and given back: some targets may have rows already.
    reclaimed    BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL
);
CREATE INDEX fanout_due ON fanout (due_at) WHERE lease_token IS NULL;
CREATE INDEX fanout_leased ON fanout (due_at) WHERE lease_token IS NOT NULL;
