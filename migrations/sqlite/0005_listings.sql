-- The dashboard's listings walk these, newest first (crates/hookline-store/src/listing.rs):
-- an app's deliveries and an endpoint's, ordered by their event (ids sort by
-- time, so by when it was published). They replace the plain event and endpoint
-- indexes, whose statements they serve as well (an event's deliveries are looked
-- up with its app), so a delivery carries as many index entries as before.
CREATE INDEX deliveries_by_app ON deliveries (app_id, event_id, id);
CREATE INDEX deliveries_of_endpoint ON deliveries (endpoint_id, event_id, id);
DROP INDEX deliveries_by_event;
DROP INDEX deliveries_by_endpoint;
