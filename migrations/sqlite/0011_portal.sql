-- The customer portal (docs/portal.md): each app's portal settings, and the
-- one-time codes of portal links (crates/hookline-store/src/portal.rs). A code
-- is stored only as its SHA-256; exchanging it marks it used and makes the
-- session, an app-scoped key in api_keys.
ALTER TABLE apps ADD COLUMN portal TEXT;    -- JSON PortalSettings; NULL: defaults

CREATE TABLE portal_codes (
    code_hash     TEXT PRIMARY KEY,
    app_id        TEXT NOT NULL,
    capabilities  TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,         -- the code's and its session's end
    used_at       INTEGER
);
CREATE INDEX portal_codes_app ON portal_codes (app_id);
