-- Transformations (hookline_core::transform): a delivery whose endpoint's
-- transform failed is dead with the reason `transform_error`. The endpoint's
-- `transform` column (0024) now holds a preset's name or a jq program.
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
