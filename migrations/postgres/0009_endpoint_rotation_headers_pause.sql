-- Endpoint secret rotation, custom headers and pause (crates/hookline-store/src/endpoints.rs).
ALTER TABLE endpoints ADD COLUMN previous_secret TEXT;           -- the secret a rotation replaced, signing beside the new one
ALTER TABLE endpoints ADD COLUMN previous_secret_until BIGINT;   -- ...until then (unix ms)
ALTER TABLE endpoints ADD COLUMN headers TEXT;                   -- JSON [[name, value], ...] sent with every request; NULL: none
ALTER TABLE endpoints ADD COLUMN paused BOOLEAN NOT NULL DEFAULT false; -- new deliveries are made but held (parked) until resumed
