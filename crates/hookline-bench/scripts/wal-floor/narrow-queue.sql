-- A narrow queue row beside a write-once delivery: the delivery row carries
-- no index on anything that changes (the DLQ would be its own table), so its
-- one update, at the terminal state, can be HOT (where its page has room: at
-- fillfactor 80 few do; narrow-queue-ff50.sql leaves room for all); what is due and its lease live in
-- `queue`, inserted at publish, updated by the claim, deleted by the completion.
SELECT create_events();
CREATE TABLE deliveries (id text PRIMARY KEY, app_id text NOT NULL, event_id text NOT NULL,
  endpoint_id text NOT NULL, ordering_key text, sequence bigint, created_at bigint NOT NULL,
  state text NOT NULL, attempts int NOT NULL, last_attempt_at bigint, last_status int,
  dead_reason text, dead_at bigint, updated_at bigint NOT NULL) WITH (fillfactor = 80);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_by_event ON deliveries (event_id);
CREATE TABLE queue (delivery_id text PRIMARY KEY, endpoint_id text NOT NULL,
  due_at bigint NOT NULL, attempts int NOT NULL, leased_until bigint, lease_token text)
  WITH (fillfactor = 70);
CREATE INDEX queue_due_fresh ON queue (due_at) WHERE leased_until IS NULL AND attempts = 0;
CREATE INDEX queue_due_retry ON queue (due_at) WHERE leased_until IS NULL AND attempts > 0;
CREATE INDEX queue_endpoint ON queue (endpoint_id, due_at) WHERE leased_until IS NULL;
CREATE INDEX queue_leased ON queue (leased_until) WHERE leased_until IS NOT NULL;
SELECT create_attempts();

CREATE FUNCTION publish(events int) RETURNS void LANGUAGE sql AS $$
  WITH e AS (
    INSERT INTO events SELECT ulid('msg_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', 'order.paid', NULL,
      payload(), now_ms() FROM generate_series(1, events) RETURNING id, created_at),
  d AS (
    INSERT INTO deliveries (id, app_id, event_id, endpoint_id, created_at, state, attempts, updated_at)
    SELECT ulid('dlv_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', e.id, p.id, e.created_at, 'pending', 0,
      e.created_at FROM e CROSS JOIN endpoints_sim p RETURNING id, endpoint_id, created_at)
  INSERT INTO queue (delivery_id, endpoint_id, due_at, attempts)
  SELECT id, endpoint_id, created_at, 0 FROM d $$;

CREATE FUNCTION claim(n int) RETURNS void LANGUAGE sql AS $$
  UPDATE queue q SET leased_until = now_ms() + 30000, lease_token = 'lease_01M915N4ZG9C70'
  FROM (SELECT delivery_id FROM queue WHERE leased_until IS NULL AND attempts = 0
        ORDER BY due_at LIMIT n FOR UPDATE SKIP LOCKED) c WHERE q.delivery_id = c.delivery_id $$;

CREATE FUNCTION complete(n int) RETURNS void LANGUAGE sql AS $$
  WITH done AS (
    DELETE FROM queue WHERE delivery_id IN (
      SELECT delivery_id FROM queue WHERE leased_until IS NOT NULL ORDER BY leased_until LIMIT n)
    RETURNING delivery_id, endpoint_id),
  a AS (
    INSERT INTO attempts SELECT ulid('att_'), delivery_id, 'app_01M915N4XSK9ZKENMFQ1XXVT90',
      endpoint_id, 1, now_ms(), 3, 200, '', NULL, NULL, 'delivered', NULL, NULL, detail() FROM done)
  UPDATE deliveries d SET state = 'succeeded', attempts = 1, last_attempt_at = now_ms(),
    last_status = 200, updated_at = now_ms()
  FROM done WHERE d.id = done.delivery_id $$;
