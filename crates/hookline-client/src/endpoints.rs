//! An app's endpoints: where its events go, their secrets, health, stats,
//! timelines, and the incidents they are in.

use futures_util::Stream;
use reqwest::Method;

use crate::request::app_path;
use crate::types::{
    AttemptView, AttemptsQuery, CheckSignature, CommitMessages, CommittedView, CreateEndpoint,
    EndpointHealthView, EndpointStatsView, EndpointView, FilterPreview, FilterPreviewView,
    IncidentsQuery, IncidentsView, ListView, MessagesQuery, MessagesView, PageQuery, RotateSecret,
    RotatedSecretView, SecretView, SignatureCheck, TestSend, TestSendView, TimelineQuery,
    TimelineView, TimelineWindow, Timestamp, TransformPreview, TransformPreviewView,
    UpdateEndpoint,
};
use crate::{segment, Client, Result};

fn endpoint_path(app: &str, endpoint: &str, rest: &str) -> Result<String> {
    app_path(app, &format!("/endpoints/{}{rest}", segment(endpoint)?))
}

impl Client {
    /// `POST /v1/apps/{app}/endpoints`: the answer holds its signing secret, this once.
    pub async fn create_endpoint(
        &self,
        app: &str,
        endpoint: &CreateEndpoint,
    ) -> Result<EndpointView> {
        self.write(Method::POST, app_path(app, "/endpoints")?, Some(endpoint))
            .await
    }

    pub async fn get_endpoint(&self, app: &str, endpoint: &str) -> Result<EndpointView> {
        self.read(endpoint_path(app, endpoint, "")?, None).await
    }

    /// One page of an app's endpoints.
    pub async fn list_endpoints(
        &self,
        app: &str,
        page: &PageQuery,
    ) -> Result<ListView<EndpointView>> {
        self.read(app_path(app, "/endpoints")?, Some(page)).await
    }

    /// Every endpoint of an app, following the cursor.
    pub fn endpoints_stream(
        &self,
        app: &str,
        page: PageQuery,
    ) -> impl Stream<Item = Result<EndpointView>> + Send {
        self.stream(app_path(app, "/endpoints"), page)
    }

    /// `PATCH …/endpoints/{endpoint}`: change, pause, resume, enable or disable it.
    pub async fn update_endpoint(
        &self,
        app: &str,
        endpoint: &str,
        patch: &UpdateEndpoint,
    ) -> Result<EndpointView> {
        self.write(
            Method::PATCH,
            endpoint_path(app, endpoint, "")?,
            Some(patch),
        )
        .await
    }

    /// `DELETE …/endpoints/{endpoint}` (its history stays).
    pub async fn delete_endpoint(&self, app: &str, endpoint: &str) -> Result<()> {
        self.delete(endpoint_path(app, endpoint, "")?).await
    }

    /// `GET …/secret` (a key with the `secrets` capability).
    pub async fn endpoint_secret(&self, app: &str, endpoint: &str) -> Result<SecretView> {
        self.read(endpoint_path(app, endpoint, "/secret")?, None)
            .await
    }

    /// `POST …/secret/rotate`: the old secret keeps signing beside the new one for the grace.
    pub async fn rotate_endpoint_secret(
        &self,
        app: &str,
        endpoint: &str,
        rotation: &RotateSecret,
    ) -> Result<RotatedSecretView> {
        self.write(
            Method::POST,
            endpoint_path(app, endpoint, "/secret/rotate")?,
            Some(rotation),
        )
        .await
    }

    /// `GET …/health`: the breaker and the recent success rate.
    pub async fn endpoint_health(&self, app: &str, endpoint: &str) -> Result<EndpointHealthView> {
        self.read(endpoint_path(app, endpoint, "/health")?, None)
            .await
    }

    /// `GET …/stats`: deliveries by state, the DLQ by reason, windows of attempts.
    pub async fn endpoint_stats(&self, app: &str, endpoint: &str) -> Result<EndpointStatsView> {
        self.read(endpoint_path(app, endpoint, "/stats")?, None)
            .await
    }

    /// `GET …/timeline`: attempts per time bucket over the last hour, day
    /// (`None`) or week, with the breaker's and the switches' changes.
    pub async fn endpoint_timeline(
        &self,
        app: &str,
        endpoint: &str,
        window: Option<TimelineWindow>,
    ) -> Result<TimelineView> {
        let query = TimelineQuery { window };
        self.read(endpoint_path(app, endpoint, "/timeline")?, Some(&query))
            .await
    }

    /// `GET /v1/apps/{app}/incidents`: what is wrong now with the app's
    /// endpoints, grouped by cause; deaths count from `since` (default a day ago).
    pub async fn incidents(&self, app: &str, since: Option<Timestamp>) -> Result<IncidentsView> {
        let query = IncidentsQuery {
            since: since.map(Timestamp::to_rfc3339),
        };
        self.read(app_path(app, "/incidents")?, Some(&query)).await
    }

    /// `POST /v1/apps/{app}/filter-preview`: which of the app's latest events of
    /// the types a payload filter lets through (changes nothing).
    pub async fn filter_preview(
        &self,
        app: &str,
        preview: &FilterPreview,
    ) -> Result<FilterPreviewView> {
        self.write(
            Method::POST,
            app_path(app, "/filter-preview")?,
            Some(preview),
        )
        .await
    }

    /// `POST /v1/apps/{app}/transform-preview`: what a transform makes of one
    /// event — the body it would send, a skip, or how it fails (changes nothing).
    pub async fn transform_preview(
        &self,
        app: &str,
        preview: &TransformPreview,
    ) -> Result<TransformPreviewView> {
        self.write(
            Method::POST,
            app_path(app, "/transform-preview")?,
            Some(preview),
        )
        .await
    }

    /// `GET …/messages?from_seq=&to_seq=`: the endpoint's deliveries by
    /// sequence number, each signed as a push is (at most 100; `next_seq` says
    /// where the range goes on), for a receiver that saw a gap.
    pub async fn endpoint_messages(
        &self,
        app: &str,
        endpoint: &str,
        query: &MessagesQuery,
    ) -> Result<MessagesView> {
        self.read(endpoint_path(app, endpoint, "/messages")?, Some(query))
            .await
    }

    /// `POST …/messages/commit {cursor}`: a polling endpoint's receiver
    /// handled every number up to `cursor` (409 past the last number, or for
    /// an endpoint that does not poll).
    pub async fn commit_messages(
        &self,
        app: &str,
        endpoint: &str,
        cursor: u64,
    ) -> Result<CommittedView> {
        self.write(
            Method::POST,
            endpoint_path(app, endpoint, "/messages/commit")?,
            Some(&CommitMessages { cursor }),
        )
        .await
    }

    /// `POST …/test`: a test event to this endpoint only.
    pub async fn test_endpoint(
        &self,
        app: &str,
        endpoint: &str,
        test: &TestSend,
    ) -> Result<TestSendView> {
        self.write(
            Method::POST,
            endpoint_path(app, endpoint, "/test")?,
            Some(test),
        )
        .await
    }

    /// `POST …/signature-check`: what a receiver got, checked against the
    /// endpoint's secrets, and why it does not verify when it does not.
    pub async fn check_signature(
        &self,
        app: &str,
        endpoint: &str,
        got: &CheckSignature,
    ) -> Result<SignatureCheck> {
        self.write(
            Method::POST,
            endpoint_path(app, endpoint, "/signature-check")?,
            Some(got),
        )
        .await
    }

    /// One page of every attempt sent to an endpoint.
    pub async fn endpoint_attempts(
        &self,
        app: &str,
        endpoint: &str,
        query: &AttemptsQuery,
    ) -> Result<ListView<AttemptView>> {
        self.read(endpoint_path(app, endpoint, "/attempts")?, Some(query))
            .await
    }

    /// Every attempt sent to an endpoint that `query` matches, following the cursor.
    pub fn endpoint_attempts_stream(
        &self,
        app: &str,
        endpoint: &str,
        query: AttemptsQuery,
    ) -> impl Stream<Item = Result<AttemptView>> + Send {
        self.stream(endpoint_path(app, endpoint, "/attempts"), query)
    }
}
