-- Leased deliveries leave the lanes (docs/architecture.md, "The queue and its
-- indexes"). A lane's due index holds pending deliveries only; a delivery in
-- flight is in its own index, keyed by the end of its lease, and a dispatcher
-- turn reads that index only over the leases that ended since its last turn.
-- On PostgreSQL a row's old versions stay in an index until vacuum removes
-- them, and while any transaction holds back the xmin horizon it cannot: a
-- claim that walked one index over pending and leased rows walked every
-- delivery finished since then (light load's p99 grew ~30 ms a minute).
DROP INDEX deliveries_due_fresh;
DROP INDEX deliveries_due_retry;
CREATE INDEX deliveries_due_fresh ON deliveries (due_at) WHERE state = 'pending' AND attempts = 0;
CREATE INDEX deliveries_due_retry ON deliveries (due_at) WHERE state = 'pending' AND attempts > 0;
CREATE INDEX deliveries_leased ON deliveries (due_at) WHERE state = 'in_flight';
-- An endpoint's pending deliveries (the fair pass, a breaker's queue moves).
-- `endpoint_id IS NOT NULL` holds of every row: it is written so that only a
-- statement naming an endpoint can use this index, and no planner reads a lane
-- (which names none) through it because its statistics say the table is small.
DROP INDEX deliveries_endpoint_pending;
CREATE INDEX deliveries_endpoint_pending ON deliveries (endpoint_id, due_at)
    WHERE state = 'pending' AND endpoint_id IS NOT NULL;
