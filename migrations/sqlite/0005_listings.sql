-- The dashboard's listings walk these, newest first (crates/hookline-store/src/listing.rs):
-- an app's deliveries, and an endpoint's (which also serves every statement that
-- read the endpoint index it replaces). One more index entry per delivery than
-- before: docs/BENCHMARKS.md measures what it costs the hot path.
CREATE INDEX deliveries_by_app ON deliveries (app_id, id);
CREATE INDEX deliveries_of_endpoint ON deliveries (endpoint_id, id);
DROP INDEX deliveries_by_endpoint;
