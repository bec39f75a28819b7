-- Portal sessions that last apart from their links and are renewed while in
-- use (crates/hookline-store/src/portal.rs, docs/portal.md "Sessions").
ALTER TABLE portal_codes ADD COLUMN session_secs BIGINT;  -- how long the session it opens lasts between renewals; NULL (codes made before): until the link's end
ALTER TABLE api_keys ADD COLUMN renew_secs BIGINT;        -- a portal session's: a renewal extends it this long from then, never past 12 h after sign-in; NULL: not renewable
