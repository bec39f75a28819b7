//! Who is calling: bearer API keys, looked up by their SHA-256.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use hookline_core::signing::api_key;
use hookline_store::{App, KeyScope};

use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// An authenticated caller.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub KeyScope);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let key = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or(ApiError::Unauthorized)?;
        let hash = api_key::hash(key);
        if let Some(scope) = state.keys.get(&hash) {
            return Ok(Caller(scope));
        }
        let scope = state
            .store
            .find_api_key(&hash)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        state.keys.insert(hash, scope.clone());
        Ok(Caller(scope))
    }
}

/// Known keys by hash, so a busy producer's every request is not a database read.
/// Entries live [`KeyCache::TTL`]; unknown keys are never cached, so a new key works
/// at once.
#[derive(Default)]
pub(crate) struct KeyCache {
    entries: std::sync::Mutex<std::collections::HashMap<String, (KeyScope, std::time::Instant)>>,
}

impl KeyCache {
    const TTL: std::time::Duration = std::time::Duration::from_secs(60);
    /// Past this many keys the cache starts over (a bound, not an LRU: keys are few).
    const CAPACITY: usize = 10_000;

    fn get(&self, hash: &str) -> Option<KeyScope> {
        let entries = self.entries.lock().expect("key cache poisoned");
        entries
            .get(hash)
            .filter(|(_, at)| at.elapsed() < Self::TTL)
            .map(|(scope, _)| scope.clone())
    }

    /// Forgets a key (revoked here; other processes forget it within [`KeyCache::TTL`]).
    pub(crate) fn remove(&self, hash: &str) {
        self.entries
            .lock()
            .expect("key cache poisoned")
            .remove(hash);
    }

    fn insert(&self, hash: String, scope: KeyScope) {
        let mut entries = self.entries.lock().expect("key cache poisoned");
        if entries.len() >= Self::CAPACITY {
            entries.clear();
        }
        entries.insert(hash, (scope, std::time::Instant::now()));
    }
}

impl Caller {
    pub fn require_admin(&self) -> ApiResult<()> {
        match self.0 {
            KeyScope::Admin => Ok(()),
            // An app token learns nothing about what lies outside its app.
            KeyScope::App(_) => Err(ApiError::NotFound("resource")),
        }
    }

    /// Resolves `{app}` (an id or a uid) to an app this caller may reach.
    pub async fn app(&self, state: &AppState, key: &str) -> ApiResult<App> {
        let app = state
            .store
            .find_app(key)
            .await?
            .ok_or(ApiError::NotFound("app"))?;
        match &self.0 {
            KeyScope::Admin => Ok(app),
            KeyScope::App(own) if *own == app.id => Ok(app),
            KeyScope::App(_) => Err(ApiError::NotFound("app")),
        }
    }
}
