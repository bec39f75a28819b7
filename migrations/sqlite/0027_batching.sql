-- Batching (docs/api.md, "Batching"): an HTTP endpoint may be sent up to
-- max_events of its deliveries in one request, after at most max_wait_ms —
-- `{"max_events": N, "max_wait_ms": M}`, NULL when it is sent one by one. The
-- dispatcher gathers a batch from what it leased; nothing else is stored.
ALTER TABLE endpoints ADD COLUMN batch TEXT;

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
    OR OLD.batch IS NOT NEW.batch
)
BEGIN
    UPDATE endpoints SET config_version = OLD.config_version + 1 WHERE id = NEW.id;
END;
