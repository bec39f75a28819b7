-- no-transaction
-- An endpoint's deliveries, newest first (the listings), replacing
-- deliveries_by_endpoint (endpoint_id), whose statements it serves as well. As 0007.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_of_endpoint ON deliveries (endpoint_id, id);
