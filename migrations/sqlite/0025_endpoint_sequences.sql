-- Gap-proof sequence numbers (docs/api.md, "Sequence numbers"): every
-- delivery made for an endpoint gets the next of the endpoint's numbers, in
-- the publish's one write.
--
-- `endpoint_sequences` is the counter, a row per endpoint upserted by each
-- publish that reaches it: its row lock lasts until the publish commits, so
-- numbers follow commit order, and a publish that writes nothing (a stale
-- snapshot, a key taken) takes none. A table of its own, not a column of
-- `endpoints`, whose rows turns lock: a publish never waits behind a turn.
CREATE TABLE endpoint_sequences (
    endpoint_id TEXT PRIMARY KEY,
    last_seq    INTEGER NOT NULL
);

-- One row per publish and endpoint: the deliveries numbered first_seq,
-- first_seq + 1, … (comma-separated ids, each naming its event and place),
-- so a range of numbers is found by the primary key. Written once; retention
-- removes them with the history, endpoint by endpoint from the oldest.
CREATE TABLE sequence_runs (
    endpoint_id TEXT NOT NULL,
    first_seq   INTEGER NOT NULL,
    deliveries  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, first_seq)
);

-- Each event's numbers, by its targets' places (comma-separated; written
-- once with the event): a claim reads a delivery's beside the body.
ALTER TABLE events ADD COLUMN seqs TEXT;

-- Whether the number is also in the signed envelope (`seq`). Endpoints made
-- before it existed keep today's envelope; new ones get it (the API's default).
ALTER TABLE endpoints ADD COLUMN seq_in_body INTEGER NOT NULL DEFAULT 0;

-- The snapshot a publish sends with carries it: a change moves config_version.
DROP TRIGGER endpoint_config_version;
CREATE TRIGGER endpoint_config_version AFTER UPDATE ON endpoints FOR EACH ROW
WHEN (
    OLD.url IS NOT NEW.url
    OR OLD.secret IS NOT NEW.secret
    OR OLD.previous_secret IS NOT NEW.previous_secret
    OR OLD.previous_secret_until IS NOT NEW.previous_secret_until
    OR OLD.headers IS NOT NEW.headers
    OR OLD.auth IS NOT NEW.auth
    OR OLD.enabled IS NOT NEW.enabled
    OR OLD.paused IS NOT NEW.paused
    OR OLD.retry_base_ms IS NOT NEW.retry_base_ms
    OR OLD.retry_cap_ms IS NOT NEW.retry_cap_ms
    OR OLD.max_attempts IS NOT NEW.max_attempts
    OR OLD.max_age_secs IS NOT NEW.max_age_secs
    OR OLD.rate_limit_per_sec IS NOT NEW.rate_limit_per_sec
    OR OLD.max_in_flight IS NOT NEW.max_in_flight
    OR OLD.ordering_on_dead IS NOT NEW.ordering_on_dead
    OR OLD.breaker_state IS NOT NEW.breaker_state
    OR OLD.next_probe_at IS NOT NEW.next_probe_at
    OR OLD.probe_until IS NOT NEW.probe_until
    OR OLD.event_types IS NOT NEW.event_types
    OR OLD.payload_filter IS NOT NEW.payload_filter
    OR OLD.app_id IS NOT NEW.app_id
    OR OLD.transform IS NOT NEW.transform
    OR OLD.description IS NOT NEW.description
    OR OLD.seq_in_body IS NOT NEW.seq_in_body
)
BEGIN
    UPDATE endpoints SET config_version = OLD.config_version + 1 WHERE id = NEW.id;
END;
