-- Batching (docs/api.md, "Batching"): an HTTP endpoint may be sent up to
-- max_events of its deliveries in one request, after at most max_wait_ms —
-- `{"max_events": N, "max_wait_ms": M}`, NULL when it is sent one by one. The
-- dispatcher gathers a batch from what it leased; nothing else is stored.
ALTER TABLE endpoints ADD COLUMN batch TEXT;

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
    OR OLD.batch IS DISTINCT FROM NEW.batch
)
EXECUTE FUNCTION endpoint_config_changed();
