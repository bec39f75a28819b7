-- What an attempt sent and got, for the dashboard's attempt detail
-- (crates/hookline-store/src/complete.rs writes them; NULL on older rows).
ALTER TABLE attempts ADD COLUMN url TEXT;                -- where it went (the endpoint's URL may change later)
-- The request's headers follow from the delivery and these two
-- (hookline_core::model::request_headers), so only they are kept.
ALTER TABLE attempts ADD COLUMN signature TEXT;          -- webhook-signature as sent (HMACs, never a secret)
ALTER TABLE attempts ADD COLUMN custom_headers TEXT;     -- the endpoint's own headers as sent, JSON [[name, value], ...]; NULL: none
ALTER TABLE attempts ADD COLUMN response_headers TEXT;   -- JSON [[name, value], ...], capped
ALTER TABLE attempts ADD COLUMN response_truncated INTEGER NOT NULL DEFAULT 0; -- the body was cut at the limit
ALTER TABLE attempts ADD COLUMN cause TEXT;              -- first | retry | probe | replay
