-- no-transaction
-- An endpoint's deliveries, newest first by their event (the listings), replacing
-- deliveries_by_endpoint (endpoint_id) (0009), whose statements it serves. As 0007.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_of_endpoint ON deliveries (endpoint_id, event_id, id);
