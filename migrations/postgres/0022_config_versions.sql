-- What a publish reads of an app and its endpoints comes from a snapshot kept
-- in memory (docs/engine-v4.md, "The publish: one write"), checked inside the
-- publish's one write against these counters: a snapshot that no longer
-- matches writes nothing, and the publish reads the app again and goes again.
--
-- An app's counter moves with every change of the app (`update_app` sets it).
ALTER TABLE apps ADD COLUMN config_version BIGINT NOT NULL DEFAULT 0;

-- An endpoint's moves with every change of a column a publish acts on: where
-- and how to send, its switches, its retry and concurrency settings, what it
-- subscribes to, and the breaker's state and probe times. Not with the columns
-- that change on the hot path and that a publish does not read (the breaker's
-- failure count and cooldown, the rate limiter's clock, the last error): those
-- would make every snapshot stale under failures.
ALTER TABLE endpoints ADD COLUMN config_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION endpoint_config_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.config_version := OLD.config_version + 1;
    RETURN NEW;
END
$$;

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
)
EXECUTE FUNCTION endpoint_config_changed();
