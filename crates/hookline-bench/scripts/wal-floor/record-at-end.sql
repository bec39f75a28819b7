-- Lazy fan-out, recorded at the end: a publish writes the event and one queue
-- row for it (not one per endpoint); the claim leases events, and each
-- endpoint's delivery is written once, when its outcome is known, beside its
-- attempt. A failure would write the delivery then, with its retry in the
-- queue; the happy path never updates a delivery.
SELECT create_events();
CREATE TABLE event_queue (event_id text PRIMARY KEY, due_at bigint NOT NULL,
  leased_until bigint, lease_token text) WITH (fillfactor = 70);
CREATE INDEX event_queue_due ON event_queue (due_at) WHERE leased_until IS NULL;
CREATE INDEX event_queue_leased ON event_queue (leased_until) WHERE leased_until IS NOT NULL;
CREATE TABLE deliveries (id text PRIMARY KEY, app_id text NOT NULL, event_id text NOT NULL,
  endpoint_id text NOT NULL, ordering_key text, sequence bigint, created_at bigint NOT NULL,
  state text NOT NULL, attempts int NOT NULL, last_attempt_at bigint, last_status int,
  dead_reason text, dead_at bigint, updated_at bigint NOT NULL) WITH (fillfactor = 80);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_by_event ON deliveries (event_id);
SELECT create_attempts();

CREATE FUNCTION publish(events int) RETURNS void LANGUAGE sql AS $$
  WITH e AS (
    INSERT INTO events SELECT ulid('msg_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', 'order.paid', NULL,
      payload(), now_ms() FROM generate_series(1, events) RETURNING id, created_at)
  INSERT INTO event_queue (event_id, due_at) SELECT id, created_at FROM e $$;

CREATE FUNCTION claim(n int) RETURNS void LANGUAGE sql AS $$
  UPDATE event_queue q SET leased_until = now_ms() + 30000, lease_token = 'lease_01M915N4ZG9C70'
  FROM (SELECT event_id FROM event_queue WHERE leased_until IS NULL
        ORDER BY due_at LIMIT n / 10 FOR UPDATE SKIP LOCKED) c WHERE q.event_id = c.event_id $$;

CREATE FUNCTION complete(n int) RETURNS void LANGUAGE sql AS $$
  WITH done AS (
    DELETE FROM event_queue WHERE event_id IN (
      SELECT event_id FROM event_queue WHERE leased_until IS NOT NULL
      ORDER BY leased_until LIMIT n / 10)
    RETURNING event_id),
  d AS (
    INSERT INTO deliveries (id, app_id, event_id, endpoint_id, created_at, state, attempts,
      last_attempt_at, last_status, updated_at)
    SELECT ulid('dlv_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', done.event_id, p.id, now_ms(),
      'succeeded', 1, now_ms(), 200, now_ms() FROM done CROSS JOIN endpoints_sim p
    RETURNING id, endpoint_id)
  INSERT INTO attempts SELECT ulid('att_'), id, 'app_01M915N4XSK9ZKENMFQ1XXVT90',
    endpoint_id, 1, now_ms(), 3, 200, '', NULL, NULL, 'delivered', NULL, NULL, detail() FROM d $$;
