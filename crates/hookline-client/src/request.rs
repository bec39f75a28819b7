//! One request: its URL and key, the answer read as the server's JSON or its
//! problem, and the retries of what is safe to send again; and the calls every
//! resource makes (reads, writes, deletes, listings that follow their cursor).

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use futures_util::Stream;
use hookline_core::retry::{RetryPolicy, ThreadJitter};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::types::{
    AttemptsQuery, DeliveriesQuery, DlqQuery, EventsQuery, KeyQuery, ListView, PageQuery,
};
use crate::{segment, Client, Error, Problem, Result};

pub(crate) struct Inner {
    pub http: reqwest::Client,
    /// Without a trailing slash.
    pub base: String,
    pub authorization: String,
    pub retries: Retries,
    /// Sent as `Accept-Language`, when set.
    pub language: Option<hookline_core::language::Language>,
}

/// How publishes and reads are retried: up to `attempts` tries in all, with a
/// full-jitter delay between them (`uniform(0, min(cap, base · 2ⁿ))`, the
/// server's own backoff rule) or the server's `Retry-After` (at most `cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Retries {
    /// 4 tries, 250 ms base, 5 s cap.
    fn default() -> Self {
        Self {
            attempts: 4,
            base: Duration::from_millis(250),
            cap: Duration::from_secs(5),
        }
    }
}

impl Retries {
    /// One try only.
    pub fn none() -> Self {
        Self {
            attempts: 1,
            ..Self::default()
        }
    }

    fn policy(self) -> RetryPolicy {
        RetryPolicy {
            base: self.base,
            cap: self.cap,
            max_attempts: self.attempts,
            max_age: Duration::MAX,
            retry_after_cap: self.cap,
        }
    }
}

/// Whether a request may be sent again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Safe {
    /// A read, or a publish with its idempotency key: yes.
    Retry,
    /// Anything else: one try.
    Once,
}

/// A request before it is sent (rebuilt for each try).
pub(crate) struct Call<'a> {
    pub method: Method,
    pub path: String,
    pub query: Option<&'a (dyn ErasedQuery + Sync)>,
    pub body: Option<serde_json::Value>,
    pub idempotency_key: Option<&'a str>,
    pub safe: Safe,
}

/// A query's `Serialize`, as an object (reqwest's `query` is generic).
pub(crate) trait ErasedQuery {
    fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder;
}

impl<T: Serialize> ErasedQuery for T {
    fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.query(self)
    }
}

/// An answer: its status, whether it repeats an earlier one (`Idempotent-Replayed`), its body.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub replayed: bool,
    pub body: bytes::Bytes,
}

impl Answer {
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|error| Error::Unexpected {
            status: self.status.as_u16(),
            reason: error.to_string(),
        })
    }
}

impl Inner {
    pub(crate) async fn call(&self, call: Call<'_>) -> Result<Answer> {
        let policy = self.retries.policy();
        let tries = match call.safe {
            Safe::Retry => policy.max_attempts.max(1),
            Safe::Once => 1,
        };
        let mut failures = 0;
        loop {
            let outcome = self.send_once(&call).await;
            failures += 1;
            let wait = match &outcome {
                Ok((answer, retry_after)) if retryable(answer.status) => {
                    let asked = retry_after.as_deref().and_then(|value| {
                        hookline_core::classify::parse_retry_after(value, SystemTime::now())
                    });
                    asked.map(|delay| delay.min(policy.retry_after_cap))
                }
                Ok(_) => return outcome.map(|(answer, _)| answer).and_then(problem),
                // A connection error, a timeout, a reset: the request may or may
                // not have arrived; only a request that is safe to repeat goes again.
                Err(Error::Http(error)) if !error.is_builder() => None,
                Err(_) => return outcome.map(|(answer, _)| answer),
            };
            if failures >= tries {
                return outcome.map(|(answer, _)| answer).and_then(problem);
            }
            let delay = wait.unwrap_or_else(|| policy.backoff(failures, &mut ThreadJitter));
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_once(&self, call: &Call<'_>) -> Result<(Answer, Option<String>)> {
        let mut request = self
            .http
            .request(call.method.clone(), format!("{}{}", self.base, call.path))
            .header(reqwest::header::AUTHORIZATION, &self.authorization);
        if let Some(language) = self.language {
            request = request.header(reqwest::header::ACCEPT_LANGUAGE, language.tag());
        }
        if let Some(query) = call.query {
            request = query.apply(request);
        }
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        if let Some(key) = call.idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let replayed = header("idempotent-replayed").as_deref() == Some("true");
        let retry_after = header("retry-after");
        let body = response.bytes().await?;
        Ok((
            Answer {
                status,
                replayed,
                body,
            },
            retry_after,
        ))
    }
}

/// What is worth another try: the server failed or asked to wait.
fn retryable(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
}

/// A success as it is; anything else as the server's problem.
fn problem(answer: Answer) -> Result<Answer> {
    if answer.status.is_success() {
        return Ok(answer);
    }
    match serde_json::from_slice::<Problem>(&answer.body) {
        Ok(problem) => Err(Error::Api(problem)),
        Err(_) => Err(Error::Unexpected {
            status: answer.status.as_u16(),
            reason: String::from_utf8_lossy(&answer.body)
                .chars()
                .take(200)
                .collect(),
        }),
    }
}

/// The calls every resource makes: reads, writes, deletes and listings that
/// follow their cursor.
impl Client {
    /// A `GET`, retried when it fails in passing.
    pub(crate) async fn read<T: DeserializeOwned>(
        &self,
        path: String,
        query: Option<&(dyn ErasedQuery + Sync)>,
    ) -> Result<T> {
        self.inner
            .call(Call {
                method: Method::GET,
                path,
                query,
                body: None,
                idempotency_key: None,
                safe: Safe::Retry,
            })
            .await?
            .json()
    }

    /// A change, sent once.
    pub(crate) async fn write<T: DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T> {
        self.inner
            .call(Call {
                method,
                path,
                query: None,
                body: body.map(to_json).transpose()?,
                idempotency_key: None,
                safe: Safe::Once,
            })
            .await?
            .json()
    }

    /// A `DELETE` answered with no content.
    pub(crate) async fn delete(&self, path: String) -> Result<()> {
        self.inner
            .call(Call {
                method: Method::DELETE,
                path,
                query: None,
                body: None,
                idempotency_key: None,
                safe: Safe::Once,
            })
            .await
            .map(drop)
    }

    /// Every row of a listing from `query`'s page on, page after page.
    /// (A path that is not one makes a stream of that one error.)
    pub(crate) fn stream<T, Q>(
        &self,
        path: Result<String>,
        query: Q,
    ) -> impl Stream<Item = Result<T>> + Send
    where
        T: DeserializeOwned + Send + 'static,
        Q: Cursor + Serialize + Send + Sync + 'static,
    {
        struct State<T, Q> {
            client: Client,
            path: String,
            /// A path that is not one: the stream's one item.
            refused: Option<crate::Error>,
            query: Q,
            rows: VecDeque<T>,
            last_page: bool,
        }
        let (path, refused) = match path {
            Ok(path) => (path, None),
            Err(error) => (String::new(), Some(error)),
        };
        let state = State {
            client: self.clone(),
            path,
            refused,
            query,
            rows: VecDeque::new(),
            last_page: false,
        };
        futures_util::stream::try_unfold(state, |mut state| async move {
            loop {
                if let Some(row) = state.rows.pop_front() {
                    return Ok(Some((row, state)));
                }
                if state.last_page {
                    return Ok(None);
                }
                if let Some(error) = state.refused.take() {
                    return Err(error);
                }
                let page: ListView<T> = state
                    .client
                    .read(state.path.clone(), Some(&state.query))
                    .await?;
                state.rows = page.data.into();
                match page.next_cursor {
                    Some(cursor) => state.query.continue_after(cursor),
                    None => state.last_page = true,
                }
            }
        })
    }
}

pub(crate) fn to_json(body: &(impl Serialize + ?Sized)) -> Result<serde_json::Value> {
    serde_json::to_value(body).map_err(crate::Error::Encode)
}

/// `/v1/apps/{app}{rest}`.
pub(crate) fn app_path(app: &str, rest: &str) -> Result<String> {
    Ok(format!("/v1/apps/{}{rest}", segment(app)?))
}

/// A listing's query, continued on its next page.
pub(crate) trait Cursor {
    fn continue_after(&mut self, cursor: String);
}

macro_rules! cursor {
    ($($query:ty),*) => {$(
        impl Cursor for $query {
            fn continue_after(&mut self, cursor: String) {
                self.before = Some(cursor);
            }
        }
    )*};
}
cursor!(
    PageQuery,
    DeliveriesQuery,
    DlqQuery,
    EventsQuery,
    AttemptsQuery,
    KeyQuery
);
