-- Shared by every design: ids shaped like Hookline's (a prefix and a ULID:
-- ten characters of time, then sixteen random ones), an app, ten endpoints.
CREATE SEQUENCE tick;
CREATE FUNCTION ulid(prefix text) RETURNS text LANGUAGE sql AS $$
  SELECT prefix || lpad(upper(to_hex(nextval('tick'))), 10, '0')
                || upper(substr(md5(random()::text), 1, 16)) $$;
CREATE FUNCTION now_ms() RETURNS bigint LANGUAGE sql AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
-- A 1 KiB payload as the bench sends it (random, so nothing compresses).
CREATE FUNCTION payload() RETURNS bytea LANGUAGE sql AS $$
  SELECT convert_to(string_agg(md5(random()::text), ''), 'UTF8')
  FROM generate_series(1, 32) $$;
CREATE TABLE endpoints_sim (n int PRIMARY KEY, id text NOT NULL);
INSERT INTO endpoints_sim SELECT n, ulid('ep_') FROM generate_series(1, 10) n;
-- An attempt's detail as Hookline writes it for a 200 (227 bytes).
CREATE FUNCTION detail() RETURNS text LANGUAGE sql AS $$
  SELECT '{"url":"http://127.0.0.1:35183/e3","signature":"v1,' || md5(random()::text)
      || '=","response_headers":[["content-length","0"],["date","Fri, 04 Dec 2026 18:39:22 GMT"]],'
      || '"response_truncated":false,"trigger":"first"}' $$;

-- The event and attempt tables as Hookline has them (text ids), for the designs
-- that keep them: call create_events() and create_attempts().
CREATE FUNCTION create_events() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN
CREATE TABLE events (id text PRIMARY KEY, app_id text NOT NULL, event_type text NOT NULL,
  ordering_key text, body bytea NOT NULL, created_at bigint NOT NULL);
CREATE INDEX events_by_app ON events (app_id, id);
END $f$;
CREATE FUNCTION create_attempts() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN
CREATE TABLE attempts (id text PRIMARY KEY, delivery_id text NOT NULL, app_id text NOT NULL,
  endpoint_id text NOT NULL, attempt_number bigint NOT NULL, started_at bigint NOT NULL,
  duration_ms bigint NOT NULL, status_code bigint, response_body text, error_kind text,
  error_message text, verdict text NOT NULL, next_attempt_at bigint, dead_reason text, detail text);
CREATE INDEX attempts_by_delivery ON attempts (delivery_id, id);
CREATE INDEX attempts_by_endpoint ON attempts (endpoint_id, id);
END $f$;
