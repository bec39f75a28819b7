-- Polling endpoints (docs/api.md, "Polling endpoints"): an endpoint whose URL
-- is `poll:` is sent nothing; its receiver fetches its deliveries by number
-- and commits what it handled. A commit moves the endpoint's deliveries up to
-- the cursor to `succeeded`; this is where the cursor stands, never moving
-- back.
CREATE TABLE poll_cursors (
    endpoint_id   TEXT PRIMARY KEY,
    committed_seq BIGINT NOT NULL,
    committed_at  BIGINT NOT NULL
);
