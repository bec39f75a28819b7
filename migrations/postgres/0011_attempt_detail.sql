-- What an attempt sent and got, for the dashboard's attempt detail
-- (crates/hookline-store/src/complete.rs writes it; NULL on older rows), as one
-- JSON text: {"url", "signature", "custom_headers", "response_headers",
-- "response_truncated", "trigger"}. One column, not six: the attempts INSERT is
-- the hottest statement, and on SQLite every column of a batch row costs a
-- parse of the row (db.rs). The rest of the request headers follow from the
-- delivery (hookline_core::model::request_headers), so only these are kept.
ALTER TABLE attempts ADD COLUMN detail TEXT;
