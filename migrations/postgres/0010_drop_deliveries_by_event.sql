-- no-transaction
-- deliveries_by_app (0007) does its work.
DROP INDEX CONCURRENTLY IF EXISTS deliveries_by_event;
