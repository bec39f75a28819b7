-- no-transaction
-- deliveries_of_endpoint (0008) does its work.
DROP INDEX CONCURRENTLY IF EXISTS deliveries_by_endpoint;
