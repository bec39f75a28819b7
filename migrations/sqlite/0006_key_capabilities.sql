-- App-scoped keys carry what they may do and when they stop working
-- (crates/hookline-store/src/keys.rs, hookline_core::access).
ALTER TABLE api_keys ADD COLUMN capabilities TEXT;   -- comma-separated names; NULL: every one (admin keys, and app keys made before this)
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;  -- NULL: never
-- Revoking every key of an app, and listing them.
CREATE INDEX api_keys_by_app ON api_keys (app_id, id);
