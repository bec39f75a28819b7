-- Validates the constraints 0005 added NOT VALID. In its own transaction:
-- VALIDATE CONSTRAINT scans under a SHARE UPDATE EXCLUSIVE lock, so deliveries
-- are published, claimed and recorded while it runs.
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_breaker_state_known;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_ordering_on_dead_known;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_disabled_reason_known;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_max_in_flight_range;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_rate_limit_positive;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_state_known;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_dead_reason_known;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_dead_has_reason;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_in_flight_has_lease;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_attempts_nonnegative;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_verdict_known;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_error_kind_known;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_dead_reason_known;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_number_positive;
