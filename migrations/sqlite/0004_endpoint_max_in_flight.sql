-- An endpoint's own ceiling for its adaptive concurrency (requests in flight per
-- dispatcher process); NULL follows the deployment's max_in_flight_per_endpoint.
ALTER TABLE endpoints ADD COLUMN max_in_flight INTEGER;
