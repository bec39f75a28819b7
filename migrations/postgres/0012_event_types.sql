-- The event type catalog (crates/hookline-store/src/event_types.rs): one for
-- the deployment, managed by admins, read by everyone with a key.
CREATE TABLE event_types (
    name         TEXT PRIMARY KEY,
    description  TEXT NOT NULL,
    schema       TEXT,              -- a JSON Schema of the payload; NULL: any payload
    example      TEXT,              -- an example payload (JSON): what a test send sends
    deprecated   BOOLEAN NOT NULL DEFAULT false,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
