-- Endpoint secrets are sealed at rest (crates/hookline-store/src/secrets.rs);
-- this row names the master key they are sealed with, so a process given
-- another key refuses to start. Existing secrets are sealed on the first start.
CREATE TABLE sealing (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    key_id  TEXT NOT NULL
);
