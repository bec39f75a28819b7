-- Gap-proof sequence numbers (docs/api.md, "Sequence numbers"): every
-- delivery made for an endpoint gets the next of the endpoint's numbers, in
-- the publish's one write.
--
-- `endpoint_sequences` is the counter, a row per endpoint upserted by each
-- publish that reaches it: its row lock lasts until the publish commits, so
-- numbers follow commit order, and a publish that writes nothing (a stale
-- snapshot, a key taken) takes none. A table of its own, not a column of
-- `endpoints`, whose rows turns lock: a publish never waits behind a turn.
-- Its updates touch no index (HOT; the fill factor leaves them room).
CREATE TABLE endpoint_sequences (
    endpoint_id TEXT PRIMARY KEY,
    last_seq    BIGINT NOT NULL
) WITH (fillfactor = 50);

-- One row per publish and endpoint: the deliveries numbered first_seq,
-- first_seq + 1, … (comma-separated ids, each naming its event and place),
-- so a range of numbers is found by the primary key. Written once; retention
-- removes them with the history, endpoint by endpoint from the oldest.
CREATE TABLE sequence_runs (
    endpoint_id TEXT NOT NULL,
    first_seq   BIGINT NOT NULL,
    deliveries  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, first_seq)
);

-- Each event's numbers, by its targets' places (comma-separated; written
-- once with the event): a claim reads a delivery's beside the body.
ALTER TABLE events ADD COLUMN seqs TEXT;

-- Whether the number is also in the signed envelope (`seq`). Endpoints made
-- before it existed keep today's envelope; new ones get it (the API's default).
ALTER TABLE endpoints ADD COLUMN seq_in_body BOOLEAN NOT NULL DEFAULT FALSE;

-- The snapshot a publish sends with carries it: a change moves config_version.
DROP TRIGGER endpoint_config_version ON endpoints;
CREATE TRIGGER endpoint_config_version BEFORE UPDATE ON endpoints FOR EACH ROW
WHEN (
    OLD.url IS DISTINCT FROM NEW.url
    OR OLD.secret IS DISTINCT FROM NEW.secret
    OR OLD.previous_secret IS DISTINCT FROM NEW.previous_secret
    OR OLD.previous_secret_until IS DISTINCT FROM NEW.previous_secret_until
    OR OLD.headers IS DISTINCT FROM NEW.headers
    OR OLD.auth IS DISTINCT FROM NEW.auth
    OR OLD.enabled IS DISTINCT FROM NEW.enabled
    OR OLD.paused IS DISTINCT FROM NEW.paused
    OR OLD.retry_base_ms IS DISTINCT FROM NEW.retry_base_ms
    OR OLD.retry_cap_ms IS DISTINCT FROM NEW.retry_cap_ms
    OR OLD.max_attempts IS DISTINCT FROM NEW.max_attempts
    OR OLD.max_age_secs IS DISTINCT FROM NEW.max_age_secs
    OR OLD.rate_limit_per_sec IS DISTINCT FROM NEW.rate_limit_per_sec
    OR OLD.max_in_flight IS DISTINCT FROM NEW.max_in_flight
    OR OLD.ordering_on_dead IS DISTINCT FROM NEW.ordering_on_dead
    OR OLD.breaker_state IS DISTINCT FROM NEW.breaker_state
    OR OLD.next_probe_at IS DISTINCT FROM NEW.next_probe_at
    OR OLD.probe_until IS DISTINCT FROM NEW.probe_until
    OR OLD.event_types IS DISTINCT FROM NEW.event_types
    OR OLD.payload_filter IS DISTINCT FROM NEW.payload_filter
    OR OLD.app_id IS DISTINCT FROM NEW.app_id
    OR OLD.transform IS DISTINCT FROM NEW.transform
    OR OLD.description IS DISTINCT FROM NEW.description
    OR OLD.seq_in_body IS DISTINCT FROM NEW.seq_in_body
)
EXECUTE FUNCTION endpoint_config_changed();
