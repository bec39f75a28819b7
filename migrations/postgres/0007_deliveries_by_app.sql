-- no-transaction
-- The dashboard's listing of an app's deliveries, newest first
-- (crates/hookline-store/src/listing.rs). Built CONCURRENTLY, so delivery goes on
-- while it builds; that needs its own migration outside a transaction, one
-- statement per file. (If a build is interrupted, drop the INVALID index and
-- start again: IF NOT EXISTS would keep it.)
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_by_app ON deliveries (app_id, id);
