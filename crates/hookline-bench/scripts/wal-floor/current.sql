-- The design at d55b255: a delivery row with nine indexes, inserted pending,
-- updated to in_flight by the claim and to succeeded by the completion; an
-- attempt row with three.
SELECT create_events();
CREATE TABLE deliveries (id text PRIMARY KEY, app_id text NOT NULL, event_id text NOT NULL,
  endpoint_id text NOT NULL, state text NOT NULL, due_at bigint NOT NULL, lease_token text,
  attempts bigint NOT NULL, round_started_at bigint NOT NULL, last_attempt_at bigint,
  dead_reason text, dead_at bigint, created_at bigint NOT NULL, updated_at bigint NOT NULL,
  ordering_key text, sequence bigint);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id);
CREATE INDEX deliveries_by_event ON deliveries (event_id);
CREATE INDEX deliveries_dlq ON deliveries (app_id, dead_at, id) WHERE state = 'dead';
CREATE INDEX deliveries_due_fresh ON deliveries (due_at) WHERE state = 'pending' AND attempts = 0;
CREATE INDEX deliveries_due_retry ON deliveries (due_at) WHERE state = 'pending' AND attempts > 0;
CREATE INDEX deliveries_endpoint_pending ON deliveries (endpoint_id, due_at)
  WHERE state = 'pending' AND endpoint_id IS NOT NULL;
CREATE INDEX deliveries_leased ON deliveries (due_at) WHERE state = 'in_flight';
CREATE INDEX deliveries_partition ON deliveries (endpoint_id, ordering_key, sequence)
  WHERE ordering_key IS NOT NULL AND state <> 'succeeded';
SELECT create_attempts();

CREATE FUNCTION publish(events int) RETURNS void LANGUAGE sql AS $$
  WITH e AS (
    INSERT INTO events SELECT ulid('msg_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', 'order.paid', NULL,
      payload(), now_ms() FROM generate_series(1, events) RETURNING id, created_at)
  INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, attempts,
    round_started_at, created_at, updated_at)
  SELECT ulid('dlv_'), 'app_01M915N4XSK9ZKENMFQ1XXVT90', e.id, p.id, 'pending', e.created_at, 0,
    e.created_at, e.created_at, e.created_at FROM e CROSS JOIN endpoints_sim p $$;

CREATE FUNCTION claim(n int) RETURNS void LANGUAGE sql AS $$
  UPDATE deliveries d SET state = 'in_flight', due_at = now_ms() + 30000,
    lease_token = 'lease_01M915N4ZG9C70', updated_at = now_ms()
  FROM (SELECT id FROM deliveries WHERE state = 'pending' AND attempts = 0
        ORDER BY due_at LIMIT n FOR UPDATE SKIP LOCKED) c WHERE d.id = c.id $$;

CREATE FUNCTION complete(n int) RETURNS void LANGUAGE sql AS $$
  WITH done AS (
    SELECT id, app_id, endpoint_id FROM deliveries WHERE state = 'in_flight'
    ORDER BY due_at LIMIT n),
  a AS (
    INSERT INTO attempts SELECT ulid('att_'), id, app_id, endpoint_id, 1, now_ms(), 3, 200, '',
      NULL, NULL, 'delivered', NULL, NULL, detail() FROM done)
  UPDATE deliveries d SET state = 'succeeded', attempts = 1, last_attempt_at = now_ms(),
    lease_token = NULL, updated_at = now_ms()
  FROM done WHERE d.id = done.id $$;
