-- Bulk replays of the DLQ (crates/hookline-store/src/replays.rs): a job per
-- request, worked in batches by whichever process holds its lease, its progress
-- committed with each batch so a restart resumes where it stopped.
CREATE TABLE replay_jobs (
    id              TEXT PRIMARY KEY,
    app_id          TEXT NOT NULL,
    filter          TEXT NOT NULL,    -- the DLQ filter, as canonical JSON: the same request is the same text
    state           TEXT NOT NULL,    -- running | completed | cancelled
    total           INTEGER NOT NULL, -- dead deliveries matching when it started
    done            INTEGER NOT NULL, -- of those, reached so far
    replayed        INTEGER NOT NULL, -- moved back to pending by this job
    cutoff          INTEGER NOT NULL, -- only deliveries dead at or before this (its start)
    cursor_dead_at  INTEGER,          -- the last delivery reached, in (dead_at, id) order
    cursor_id       TEXT,
    lease_until     INTEGER NOT NULL, -- the worker's lease; 0: not taken yet
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
-- One running job per app and filter: asking again while it runs finds it.
CREATE UNIQUE INDEX replay_jobs_running ON replay_jobs (app_id, filter) WHERE state = 'running';
-- Workers look for running jobs whose lease ran out.
CREATE INDEX replay_jobs_to_work ON replay_jobs (lease_until) WHERE state = 'running';
