-- As record-at-end.sql, with the happy path's delivery and its one attempt
-- in one row: a first-try success is one insert (the delivery, with its
-- attempt's status, timing and detail); an attempts row is written only for
-- deliveries that needed more than one. Ids as Hookline's text ULIDs.
SELECT create_events();
CREATE TABLE event_queue (event_id text PRIMARY KEY, due_at bigint NOT NULL,
  leased_until bigint, lease_token text) WITH (fillfactor = 70);
CREATE INDEX event_queue_due ON event_queue (due_at) WHERE leased_until IS NULL;
CREATE INDEX event_queue_leased ON event_queue (leased_until) WHERE leased_until IS NOT NULL;
CREATE TABLE deliveries (id text PRIMARY KEY, app_id text NOT NULL, event_id text NOT NULL,
  endpoint_id text NOT NULL, created_at bigint NOT NULL, state text NOT NULL,
  attempts int NOT NULL, last_attempt_at bigint, last_status int, duration_ms int,
  detail text, updated_at bigint NOT NULL);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_by_event ON deliveries (event_id);

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
    RETURNING event_id)
  INSERT INTO deliveries SELECT ulid('dlv_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', done.event_id,
    p.id, now_ms(), 'succeeded', 1, now_ms(), 200, 3, detail(), now_ms()
  FROM done CROSS JOIN endpoints_sim p $$;
