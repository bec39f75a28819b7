-- What an attempt sent and got, for the dashboard's attempt detail
-- (crates/hookline-store/src/complete.rs writes them; NULL on older rows).
ALTER TABLE attempts ADD COLUMN url TEXT;                -- where it went (the endpoint's URL may change later)
ALTER TABLE attempts ADD COLUMN request_headers TEXT;    -- JSON [[name, value], ...] as sent (signatures, never secrets)
ALTER TABLE attempts ADD COLUMN response_headers TEXT;   -- JSON [[name, value], ...], capped
ALTER TABLE attempts ADD COLUMN response_truncated INTEGER NOT NULL DEFAULT 0; -- the body was cut at the limit
ALTER TABLE attempts ADD COLUMN cause TEXT;              -- first | retry | probe | replay
