-- Transformations (hookline_core::transform): a delivery whose endpoint's
-- transform failed is dead with the reason `transform_error`. The endpoint's
-- `transform` column (0024) now holds a preset's name or a jq program, which
-- a publish's snapshot carries with the endpoint's description (the
-- program's input names it): a change of either moves the endpoint's
-- config_version (0022), so no snapshot sends with an old transform.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_dead_reason_known;
ALTER TABLE deliveries
    ADD CONSTRAINT deliveries_dead_reason_known
        CHECK (dead_reason IS NULL OR dead_reason IN ('retries_exhausted', 'client_error', 'redirect',
                                                      'gone', 'destination_forbidden', 'endpoint_deleted',
                                                      'transform_error')) NOT VALID;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_dead_reason_known;

ALTER TABLE attempts DROP CONSTRAINT attempts_dead_reason_known;
ALTER TABLE attempts
    ADD CONSTRAINT attempts_dead_reason_known
        CHECK (dead_reason IS NULL OR dead_reason IN ('retries_exhausted', 'client_error', 'redirect',
                                                      'gone', 'destination_forbidden', 'endpoint_deleted',
                                                      'transform_error')) NOT VALID;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_dead_reason_known;

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
)
EXECUTE FUNCTION endpoint_config_changed();
