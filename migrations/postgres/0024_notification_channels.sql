-- Customer notifications (crates/hookline-core/src/notify.rs): a channel is an
-- endpoint of the internal app that belongs to a customer's app. It is made
-- and removed only through /v1/apps/{app}/notifications.
ALTER TABLE endpoints ADD COLUMN owner_app TEXT;  -- the app whose channel this is; NULL: not a channel
ALTER TABLE endpoints ADD COLUMN transform TEXT;  -- what is sent instead of the envelope: a chat format (slack | teams | discord); NULL: the envelope
-- An app's channels, for its portal and its deletion.
CREATE INDEX endpoints_by_owner ON endpoints (owner_app, id) WHERE owner_app IS NOT NULL;
