-- PostgreSQL's own types where the first schema used SQLite's: a boolean for
-- `enabled`, and CHECK constraints that name every value an enumerated text
-- column may hold (the values of the `as_str` of each type in hookline-core),
-- so a row that no release could read is refused when it is written.
-- Times stay unix milliseconds in BIGINT on purpose: 8 bytes like timestamptz,
-- compared and indexed as cheaply, and one clock representation for the
-- policy code on both engines.
--
-- The constraints are added NOT VALID (no scan, a brief lock) and validated by
-- the next migration in its own transaction, whose lock lets reads and writes
-- go on while it scans. Nodes of releases before this one cannot run against
-- the migrated schema (they compare `enabled` with an integer): stop them
-- before the first new node migrates.
ALTER TABLE endpoints ALTER COLUMN enabled TYPE boolean USING enabled <> 0;

ALTER TABLE endpoints
    ADD CONSTRAINT endpoints_breaker_state_known
        CHECK (breaker_state IN ('closed', 'open', 'half_open')) NOT VALID,
    ADD CONSTRAINT endpoints_ordering_on_dead_known
        CHECK (ordering_on_dead IN ('skip', 'block')) NOT VALID,
    ADD CONSTRAINT endpoints_disabled_reason_known
        CHECK (disabled_reason IS NULL OR disabled_reason IN ('manual', 'gone', 'failing')) NOT VALID,
    ADD CONSTRAINT endpoints_max_in_flight_range
        CHECK (max_in_flight IS NULL OR max_in_flight BETWEEN 1 AND 1024) NOT VALID,
    ADD CONSTRAINT endpoints_rate_limit_positive
        CHECK (rate_limit_per_sec IS NULL OR rate_limit_per_sec > 0) NOT VALID;

ALTER TABLE deliveries
    ADD CONSTRAINT deliveries_state_known
        CHECK (state IN ('pending', 'in_flight', 'blocked', 'succeeded', 'dead')) NOT VALID,
    ADD CONSTRAINT deliveries_dead_reason_known
        CHECK (dead_reason IS NULL OR dead_reason IN ('retries_exhausted', 'client_error', 'redirect',
                                                      'gone', 'destination_forbidden', 'endpoint_deleted')) NOT VALID,
    ADD CONSTRAINT deliveries_dead_has_reason
        CHECK ((state = 'dead') = (dead_reason IS NOT NULL)) NOT VALID,
    ADD CONSTRAINT deliveries_in_flight_has_lease
        CHECK (state <> 'in_flight' OR lease_token IS NOT NULL) NOT VALID,
    ADD CONSTRAINT deliveries_attempts_nonnegative
        CHECK (attempts >= 0) NOT VALID;

ALTER TABLE attempts
    ADD CONSTRAINT attempts_verdict_known
        CHECK (verdict IN ('delivered', 'retry', 'dead')) NOT VALID,
    ADD CONSTRAINT attempts_error_kind_known
        CHECK (error_kind IS NULL OR error_kind IN ('timeout', 'connect', 'dns', 'tls', 'io',
                                                    'destination_forbidden')) NOT VALID,
    ADD CONSTRAINT attempts_dead_reason_known
        CHECK (dead_reason IS NULL OR dead_reason IN ('retries_exhausted', 'client_error', 'redirect',
                                                      'gone', 'destination_forbidden', 'endpoint_deleted')) NOT VALID,
    ADD CONSTRAINT attempts_number_positive
        CHECK (attempt_number >= 1) NOT VALID;
