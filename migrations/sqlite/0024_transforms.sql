-- Transformations (hookline_core::transform): the endpoint's `transform`
-- column (0022) now holds a preset's name or a jq program, which a publish's
-- snapshot carries with the endpoint's description (the program's input
-- names it): a change of either moves the endpoint's config_version (0020),
-- so no snapshot sends with an old transform. (SQLite keeps no list of dead
-- reasons: `transform_error` needs no change.)
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
)
BEGIN
    UPDATE endpoints SET config_version = OLD.config_version + 1 WHERE id = NEW.id;
END;
