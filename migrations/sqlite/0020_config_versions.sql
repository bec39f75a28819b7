-- What a publish reads of an app and its endpoints comes from a snapshot kept
-- in memory (docs/engine-v4.md, "The publish: one write"), checked inside the
-- publish's one write against these counters: a snapshot that no longer
-- matches writes nothing, and the publish reads the app again and goes again.
--
-- An app's counter moves with every change of the app (`update_app` sets it).
ALTER TABLE apps ADD COLUMN config_version INTEGER NOT NULL DEFAULT 0;

-- An endpoint's moves with every change of a column a publish acts on: where
-- and how to send, its switches, its retry and concurrency settings, what it
-- subscribes to, and the breaker's state and probe times. Not with the columns
-- that change on the hot path and that a publish does not read (the breaker's
-- failure count and cooldown, the rate limiter's clock, the last error): those
-- would make every snapshot stale under failures. (The trigger's own UPDATE
-- changes none of these columns, so it does not fire itself.)
ALTER TABLE endpoints ADD COLUMN config_version INTEGER NOT NULL DEFAULT 0;

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
)
BEGIN
    UPDATE endpoints SET config_version = OLD.config_version + 1 WHERE id = NEW.id;
END;
