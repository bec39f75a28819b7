-- The event type catalog (crates/hookline-store/src/event_types.rs): one for
-- the deployment, managed by admins, read by everyone with a key.
CREATE TABLE event_types (
    name         TEXT PRIMARY KEY,
    description  TEXT NOT NULL,
    schema       TEXT,              -- a JSON Schema of the payload; NULL: any payload
    example      TEXT,              -- an example payload (JSON): what a test send sends
    deprecated   INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
