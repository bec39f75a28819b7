-- Each app's due fan-out in due order (docs/engine-v4.md, "Fairness: the app
-- pass"). Under a backlog, a claim in eight visits the apps with due fresh
-- work round-robin and leases each one's oldest due rows through this index,
-- so one tenant's backlog cannot hold another tenant's events back: the lane's
-- oldest-first reads reach them only once the backlog ahead has drained.
-- Partial like `fanout_due`: a lease takes a row out of it.
CREATE INDEX fanout_due_by_app ON fanout (app_id, due_at) WHERE lease_token IS NULL;
