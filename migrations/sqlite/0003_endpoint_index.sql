-- An index on (endpoint_id, state) is rewritten on every state change of every
-- delivery; (endpoint_id) never changes after insert. Per-state questions about
-- one endpoint's deliveries are rare (health, deletion) and filter the rows.
DROP INDEX deliveries_by_endpoint;
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id);
