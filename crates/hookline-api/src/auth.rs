//! Who is calling and what they may do: bearer API keys, looked up by their
//! SHA-256, checked against the [`Access`] each route declares in the route table.
//!
//! The check runs before the handler (a route layer), so no handler can forget it:
//! a handler reads the [`Caller`] the layer let through.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hookline_core::access::Capability;
use hookline_core::signing::api_key;
use hookline_store::{ApiKey, App, KeyScope};

use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// What a route requires of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a key (health, metrics, the problem pages), on every role.
    Public,
    /// Anyone, without a key, where the API is served: the customer portal's
    /// page and files, and the exchange of a portal link's one-time code (which
    /// its handler checks).
    Portal,
    /// An admin key. App-scoped keys get 403 `admin_only`.
    Admin,
    /// An admin key, or a key scoped to the route's `{app}` that holds this
    /// capability (403 `missing_capability_…` otherwise).
    App(Capability),
}

impl Access {
    /// Whether a caller must present a key.
    pub fn needs_key(self) -> bool {
        !matches!(self, Self::Public | Self::Portal)
    }
}

/// An authenticated caller that the route's [`Access`] let through: its
/// scope, and its key's hash (what rate limits count by).
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub KeyScope, pub(crate) String);

/// The route layer: authenticates the bearer key and checks it against `access`.
pub(crate) async fn authorize(
    State((state, access)): State<(AppState, Access)>,
    mut request: Request,
    next: Next,
) -> Response {
    if !access.needs_key() {
        return next.run(request).await;
    }
    let caller = match authenticate(&state, request.headers()).await {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = caller.permits(access) {
        return error.into_response();
    }
    if let Some(limits) = &state.limits {
        if let Err(error) = limits.check(&caller.1, &caller.0) {
            return error.into_response();
        }
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

pub(crate) async fn authenticate(
    state: &AppState,
    headers: &axum::http::HeaderMap,
) -> ApiResult<Caller> {
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let key = bearer
        .or_else(|| portal_cookie(headers))
        .ok_or(ApiError::Unauthorized(
            "a valid API key is required (Authorization: Bearer <key>)",
        ))?;
    let hash = api_key::hash(key);
    let now = state.clock.now();
    let found = match state.keys.get(&hash) {
        // A cached copy that looks expired is read again: a portal session
        // renewed (on any process) since it was cached ends later now.
        Some(found) if !found.expired(now) => found,
        _ => {
            state.keys.remove(&hash);
            let found =
                state
                    .store
                    .apps()
                    .find_api_key(&hash)
                    .await?
                    .ok_or(ApiError::Unauthorized(
                        "this API key is not valid (unknown or revoked)",
                    ))?;
            state.keys.insert(hash.clone(), found.clone());
            found
        }
    };
    if found.expired(now) {
        return Err(ApiError::Unauthorized("this API key has expired"));
    }
    Ok(Caller(found.scope, hash))
}

/// The header a portal page sends with every request, naming its app: it
/// picks the app's session cookie, and a cross-site request cannot set it
/// (no CORS is allowed), which keeps the cookie from being used by another
/// site's form or script (CSRF).
pub(crate) const PORTAL_APP_HEADER: &str = "x-portal-app";

/// The name of an app's portal session cookie.
pub(crate) fn portal_cookie_name(app: &str) -> String {
    format!("hl_portal_{app}")
}

/// A portal session's key from its cookie, when the request names its app
/// in [`PORTAL_APP_HEADER`] (and only then).
fn portal_cookie(headers: &axum::http::HeaderMap) -> Option<&str> {
    let app = headers.get(PORTAL_APP_HEADER)?.to_str().ok()?;
    let name = portal_cookie_name(app);
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name && !value.is_empty()).then_some(value)
        })
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> ApiResult<Self> {
        // Present on every route whose access is not public (see `authorize`).
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or(ApiError::Unauthorized(
                "a valid API key is required (Authorization: Bearer <key>)",
            ))
    }
}

/// Known keys by hash, so a busy producer's every request is not a database read.
/// Entries live [`KeyCache::TTL`]; unknown keys are never cached, so a new key works
/// at once. Expiry is checked on every use, cached or not.
#[derive(Default)]
pub(crate) struct KeyCache {
    entries: std::sync::Mutex<std::collections::HashMap<String, (ApiKey, std::time::Instant)>>,
}

impl KeyCache {
    const TTL: std::time::Duration = std::time::Duration::from_secs(60);
    /// Past this many keys the cache starts over (a bound, not an LRU: keys are few).
    const CAPACITY: usize = 10_000;

    fn get(&self, hash: &str) -> Option<ApiKey> {
        let entries = self.entries.lock().expect("key cache poisoned");
        entries
            .get(hash)
            .filter(|(_, at)| at.elapsed() < Self::TTL)
            .map(|(key, _)| key.clone())
    }

    /// Forgets a key (revoked here; other processes forget it within [`KeyCache::TTL`]).
    pub(crate) fn remove(&self, hash: &str) {
        self.entries
            .lock()
            .expect("key cache poisoned")
            .remove(hash);
    }

    fn insert(&self, hash: String, key: ApiKey) {
        let mut entries = self.entries.lock().expect("key cache poisoned");
        if entries.len() >= Self::CAPACITY {
            entries.clear();
        }
        entries.insert(hash, (key, std::time::Instant::now()));
    }
}

impl Caller {
    /// Whether this caller may use a route that requires `access` (its `{app}`
    /// is checked by [`Caller::app`]).
    fn permits(&self, access: Access) -> ApiResult<()> {
        match (&self.0, access) {
            (_, Access::Public | Access::Portal) | (KeyScope::Admin, _) => Ok(()),
            (KeyScope::App { .. }, Access::Admin) => Err(ApiError::AdminOnly),
            (KeyScope::App { capabilities, .. }, Access::App(needed)) => {
                if capabilities.contains(needed) {
                    Ok(())
                } else {
                    Err(ApiError::MissingCapability(needed))
                }
            }
        }
    }

    /// Whether this caller holds `capability` (admin keys hold every one).
    pub fn can(&self, capability: Capability) -> bool {
        match &self.0 {
            KeyScope::Admin => true,
            KeyScope::App { capabilities, .. } => capabilities.contains(capability),
        }
    }

    /// Resolves `{app}` (an id or a uid) to an app this caller may reach; another
    /// app's answers 404, as if it did not exist.
    pub async fn app(&self, state: &AppState, key: &str) -> ApiResult<App> {
        let app = state
            .store
            .apps()
            .find_app(key)
            .await?
            .ok_or(ApiError::NotFound("app"))?;
        self.reaches(app)
    }

    /// [`Caller::app`] for a publish: the app as the publish's snapshot holds
    /// it (`hookline_store::AppSnapshot`), kept in memory between publishes and
    /// checked by the publish's write, so a publish reads no app of its own.
    pub async fn publishing_app(&self, state: &AppState, key: &str) -> ApiResult<App> {
        let snapshot = state
            .store
            .events()
            .app_snapshot(key)
            .await?
            .ok_or(ApiError::NotFound("app"))?;
        self.reaches(snapshot.app.clone())
    }

    fn reaches(&self, app: App) -> ApiResult<App> {
        match &self.0 {
            KeyScope::Admin => Ok(app),
            KeyScope::App { app: own, .. } if *own == app.id => Ok(app),
            KeyScope::App { .. } => Err(ApiError::NotFound("app")),
        }
    }
}
