-- no-transaction
-- The dashboard's listing of an app's deliveries, newest first by their event
-- (crates/hookline-store/src/listing.rs); it replaces deliveries_by_event (0010),
-- whose lookups it serves with the app. Built CONCURRENTLY, so delivery goes on
-- while it builds; that needs a migration outside a transaction, one statement per
-- file. (If a build is interrupted, drop the INVALID index and start again: IF NOT
-- EXISTS would keep it.)
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_by_app ON deliveries (app_id, event_id, id);
