-- Delivery policy: circuit breakers, rate limits, ordered partitions, lanes.

-- The breaker and rate-limit state live on the endpoint row, so every node
-- reads and changes the same values under the same row lock.
ALTER TABLE endpoints ADD COLUMN breaker_state TEXT NOT NULL DEFAULT 'closed';
ALTER TABLE endpoints ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN breaker_cooldown_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN next_probe_at INTEGER;
ALTER TABLE endpoints ADD COLUMN probe_until INTEGER;
ALTER TABLE endpoints ADD COLUMN failing_since INTEGER;
ALTER TABLE endpoints ADD COLUMN last_error TEXT;
ALTER TABLE endpoints ADD COLUMN last_failure_at INTEGER;
ALTER TABLE endpoints ADD COLUMN disabled_reason TEXT;
ALTER TABLE endpoints ADD COLUMN rate_limit_per_sec INTEGER;        -- NULL: unlimited
ALTER TABLE endpoints ADD COLUMN rate_tat_us INTEGER;               -- GCRA theoretical arrival time
ALTER TABLE endpoints ADD COLUMN ordering_on_dead TEXT NOT NULL DEFAULT 'skip';

-- Ordered partitions: one sequence per (app, ordering key).
CREATE TABLE ordering_keys (
    app_id         TEXT NOT NULL,
    ordering_key   TEXT NOT NULL,
    last_sequence  INTEGER NOT NULL,
    PRIMARY KEY (app_id, ordering_key)
);
ALTER TABLE events ADD COLUMN sequence INTEGER;
ALTER TABLE deliveries ADD COLUMN ordering_key TEXT;
ALTER TABLE deliveries ADD COLUMN sequence INTEGER;
-- A partition's unfinished deliveries, in sequence order (its head, its next).
CREATE INDEX deliveries_partition ON deliveries (endpoint_id, ordering_key, sequence)
    WHERE ordering_key IS NOT NULL AND state <> 'succeeded';

-- Lanes: fresh deliveries and retries are claimed from separate indexes, so
-- new work never queues behind a backlog of retries.
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due_fresh ON deliveries (due_at) WHERE state IN ('pending', 'in_flight') AND attempts = 0;
CREATE INDEX deliveries_due_retry ON deliveries (due_at) WHERE state IN ('pending', 'in_flight') AND attempts > 0;
-- Parking and deferring an endpoint's queue.
CREATE INDEX deliveries_endpoint_pending ON deliveries (endpoint_id, due_at) WHERE state = 'pending';

-- Recent success rate per endpoint.
CREATE INDEX attempts_by_endpoint ON attempts (endpoint_id, id);
