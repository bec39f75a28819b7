//! Deliveries, their attempts, the dead-letter queue and replays.

use futures_util::Stream;
use reqwest::Method;

use crate::request::{app_path, to_json};
use crate::request::{Call, Safe};
use crate::types::{
    AttemptView, BulkReplayRequest, DeliveriesQuery, DeliveryView, DlqQuery, DryRunView, ListView,
    PageQuery, ReplayJobView, ReplayView, ResendView,
};
use crate::{segment, Client, Result};

fn delivery_path(app: &str, delivery: &str, rest: &str) -> Result<String> {
    app_path(app, &format!("/deliveries/{}{rest}", segment(delivery)?))
}

fn replay_path(app: &str, replay: &str, rest: &str) -> Result<String> {
    app_path(app, &format!("/replays/{}{rest}", segment(replay)?))
}

/// The answer to a bulk replay request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkReplay {
    /// A new job started (202).
    Started(ReplayJobView),
    /// The same replay was already running: this is it (nothing replays twice).
    Running(ReplayJobView),
    /// A dry run: how many dead deliveries the filter matches now.
    DryRun(DryRunView),
}

impl Client {
    /// One page of an app's deliveries, newest first.
    pub async fn list_deliveries(
        &self,
        app: &str,
        query: &DeliveriesQuery,
    ) -> Result<ListView<DeliveryView>> {
        self.read(app_path(app, "/deliveries")?, Some(query)).await
    }

    /// Every delivery `query` matches, following the cursor.
    pub fn deliveries_stream(
        &self,
        app: &str,
        query: DeliveriesQuery,
    ) -> impl Stream<Item = Result<DeliveryView>> + Send {
        self.stream(app_path(app, "/deliveries"), query)
    }

    pub async fn get_delivery(&self, app: &str, delivery: &str) -> Result<DeliveryView> {
        self.read(delivery_path(app, delivery, "")?, None).await
    }

    /// One page of a delivery's attempts, across replays.
    pub async fn delivery_attempts(
        &self,
        app: &str,
        delivery: &str,
        page: &PageQuery,
    ) -> Result<ListView<AttemptView>> {
        self.read(delivery_path(app, delivery, "/attempts")?, Some(page))
            .await
    }

    /// Every attempt of a delivery, following the cursor.
    pub fn delivery_attempts_stream(
        &self,
        app: &str,
        delivery: &str,
        page: PageQuery,
    ) -> impl Stream<Item = Result<AttemptView>> + Send {
        self.stream(delivery_path(app, delivery, "/attempts"), page)
    }

    /// `GET …/attempts/{attempt}`: one attempt in full.
    pub async fn get_attempt(&self, app: &str, attempt: &str) -> Result<AttemptView> {
        self.read(
            app_path(app, &format!("/attempts/{}", segment(attempt)?))?,
            None,
        )
        .await
    }

    /// `POST …/deliveries/{delivery}/replay`: a dead delivery is pending again
    /// (`replayed`); any other changes nothing and says so. Sent once: a retry
    /// after a lost answer would report `replayed: false` for a replay that happened.
    pub async fn replay_delivery(&self, app: &str, delivery: &str) -> Result<ReplayView> {
        self.write(
            Method::POST,
            delivery_path(app, delivery, "/replay")?,
            None::<&()>,
        )
        .await
    }

    /// `POST …/deliveries/{delivery}/resend`: a succeeded delivery is sent again
    /// (a new round). Not retried: a second request would send it twice.
    pub async fn resend_delivery(&self, app: &str, delivery: &str) -> Result<ResendView> {
        self.write(
            Method::POST,
            delivery_path(app, delivery, "/resend")?,
            None::<&()>,
        )
        .await
    }

    /// One page of the dead-letter queue, most recently dead first.
    pub async fn list_dlq(&self, app: &str, query: &DlqQuery) -> Result<ListView<DeliveryView>> {
        self.read(app_path(app, "/dlq")?, Some(query)).await
    }

    /// Every dead delivery `query` matches, following the cursor.
    pub fn dlq_stream(
        &self,
        app: &str,
        query: DlqQuery,
    ) -> impl Stream<Item = Result<DeliveryView>> + Send {
        self.stream(app_path(app, "/dlq"), query)
    }

    /// `POST /v1/apps/{app}/replays`: replay the dead deliveries a filter
    /// matches, or (`dry_run`) count them. A repeat while the job runs answers
    /// that job (`Running`); sent once all the same, since a job that finished
    /// in between would start again.
    pub async fn replay_dlq(&self, app: &str, request: &BulkReplayRequest) -> Result<BulkReplay> {
        let answer = self
            .inner
            .call(Call {
                method: Method::POST,
                path: app_path(app, "/replays")?,
                query: None,
                body: Some(to_json(request)?),
                idempotency_key: None,
                safe: Safe::Once,
            })
            .await?;
        Ok(if request.dry_run {
            BulkReplay::DryRun(answer.json()?)
        } else if answer.status == reqwest::StatusCode::ACCEPTED {
            BulkReplay::Started(answer.json()?)
        } else {
            BulkReplay::Running(answer.json()?)
        })
    }

    /// A bulk replay's progress and report.
    pub async fn get_replay(&self, app: &str, replay: &str) -> Result<ReplayJobView> {
        self.read(replay_path(app, replay, "")?, None).await
    }

    pub async fn cancel_replay(&self, app: &str, replay: &str) -> Result<ReplayJobView> {
        self.write(
            Method::POST,
            replay_path(app, replay, "/cancel")?,
            None::<&()>,
        )
        .await
    }
}
