-- One row for a first-try success (docs/engine-v4.md, step 3). A delivery row
-- written at its first attempt's outcome (a `fanout` target's) carries that
-- attempt in these columns instead of an `attempts` row: the happy path writes
-- one row, not two. `attempts` holds every other attempt (a materialized
-- delivery's, the second and later, and one whose row another lease holder
-- wrote first). Listings merge the two (crates/hookline-store/src/deliveries.rs).
ALTER TABLE deliveries
    ADD COLUMN first_attempt_id      TEXT,   -- NULL: no attempt in the row
    ADD COLUMN first_started_at      BIGINT,
    ADD COLUMN first_duration_ms     BIGINT,
    ADD COLUMN first_status          BIGINT,
    ADD COLUMN first_response_body   TEXT,
    ADD COLUMN first_error_kind      TEXT,
    ADD COLUMN first_error_message   TEXT,
    ADD COLUMN first_verdict         TEXT,
    ADD COLUMN first_next_attempt_at BIGINT,
    ADD COLUMN first_dead_reason     TEXT,
    ADD COLUMN first_detail          TEXT;
-- An endpoint's attempts, newest first, are an index walk here beside
-- `attempts_by_endpoint`; the key still leads with the endpoint, for its
-- deliveries. Written once, with the row.
DROP INDEX deliveries_by_endpoint;
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, first_attempt_id);
-- An attempt by its id (`GET /v1/apps/{app}/attempts/{id}`).
CREATE INDEX deliveries_first_attempt ON deliveries (first_attempt_id)
    WHERE first_attempt_id IS NOT NULL;
