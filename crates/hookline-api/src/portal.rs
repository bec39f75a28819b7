//! The customer portal (docs/portal.md): its files, compiled into the binary and
//! served under `/portal/`, the links that open it, and the exchange of a link's
//! one-time code for a session.
//!
//! The portal is a client of the public API: its page calls the same `/v1/…`
//! routes with its session, an app-scoped key, so the route table's access
//! layer guards it like any other caller. What is here only serves files, mints
//! links and turns a code into that key; the one app field it reads is the
//! app's portal settings, for the page's `frame-ancestors`.

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hookline_core::access::{Capabilities, Capability};
use hookline_core::ids::AppId;
use hookline_core::portal::{self, PortalSettings};
use hookline_core::signing::api_key;
use hookline_core::time::Timestamp;
use hookline_store::{KeyScope, PortalExchange};
use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, PortalCode};
use crate::extract::JsonBody;
use crate::AppState;
pub(crate) use hookline_types::{PortalAccess, PortalLink, Redeem};

/// The portal's files (`crates/hookline-api/portal/`), by their path there.
macro_rules! files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_bytes!(concat!("../portal/", $path)))),*]
    };
}
const FILES: &[(&str, &[u8])] = files![
    "index.html",
    "js/api.js",
    "js/branding.js",
    "js/chart.js",
    "js/dom.js",
    "js/format.js",
    "js/i18n.js",
    "js/locales/he.js",
    "js/main.js",
    "js/renewal.js",
    "js/router.js",
    "js/screens/catalog.js",
    "js/screens/deliveries.js",
    "js/screens/delivery.js",
    "js/screens/endpoint-actions.js",
    "js/screens/endpoint-advanced.js",
    "js/screens/endpoint-form.js",
    "js/screens/endpoint-secret.js",
    "js/screens/endpoint-signature.js",
    "js/screens/endpoint-stats.js",
    "js/screens/endpoint-timeline.js",
    "js/screens/endpoint-transform.js",
    "js/screens/endpoint-test.js",
    "js/screens/endpoint.js",
    "js/screens/endpoints.js",
    "js/screens/notifications.js",
    "js/screens/recover.js",
    "js/screens/status.js",
    "js/session.js",
    "js/ui.js",
    "js/words.js",
    "portal.css",
];

/// The page's template: every `{{STATIC}}` in it becomes the files' hashed path.
const INDEX: &str = "index.html";

/// The files' content hash and the page that names it, computed once.
struct Assets {
    /// `/portal/static/<hash>`: a path that changes whenever any file does, so
    /// the files under it can be cached for good.
    base: String,
    page: String,
}

static ASSETS: LazyLock<Assets> = LazyLock::new(|| {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for (path, bytes) in FILES {
        hash.update((path.len() as u64).to_le_bytes());
        hash.update(path.as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    let digest = hookline_core::fingerprint::hex(&hash.finalize());
    let base = format!("/portal/static/{}", &digest[..16]);
    let template = std::str::from_utf8(file(INDEX).expect("the portal has its page"))
        .expect("the portal's page is UTF-8");
    let page = template.replace("{{STATIC}}", &base);
    Assets { base, page }
});

fn file(path: &str) -> Option<&'static [u8]> {
    FILES.iter().find(|(p, _)| *p == path).map(|(_, b)| *b)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// The Content-Security-Policy of a portal response for an app with
/// `settings`: nothing inline, nothing evaluated, no string into a DOM sink
/// (Trusted Types: the portal builds its DOM from nodes), data only from this
/// origin, images from this origin and the app's logo's, framed only by the
/// app's origins.
fn content_security_policy(settings: &PortalSettings) -> String {
    let logo = settings
        .logo_origin()
        .map(|origin| format!(" {origin}"))
        .unwrap_or_default();
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:{logo}; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; \
         require-trusted-types-for 'script'; trusted-types 'none'; \
         frame-ancestors {}",
        settings.frame_ancestors()
    )
}

/// The headers of every portal response. A page sets its own CSP (its app's
/// `frame-ancestors`); everything else may not be framed at all.
pub(crate) async fn headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        let csp = content_security_policy(&PortalSettings::default());
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_str(&csp).expect("a constant policy"),
        );
    }
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // A window the portal opens, or that opens it, gets no handle on it.
    headers.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// `Strict-Transport-Security` on every answer of a deployment whose
/// `public_url` is https (a year; not its subdomains, which may be others').
pub(crate) async fn strict_transport(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::STRICT_TRANSPORT_SECURITY,
        HeaderValue::from_static("max-age=31536000"),
    );
    response
}

/// `GET /portal/apps/{app}/`: the portal's page, framed only by the app's
/// origins. `{app}` is an app's id, which links carry and no one can guess:
/// a uid, or an id of no app, gets the same page as an app without portal
/// settings (it then finds no session), so the address tells no one which
/// apps exist.
pub(crate) async fn page(State(state): State<AppState>, Path(app): Path<String>) -> Response {
    let settings = match AppId::parse(&app) {
        Ok(id) => match state.store.apps().find_app(id.as_str()).await {
            Ok(found) => found.map(|app| app.portal).unwrap_or_default(),
            Err(error) => return ApiError::from(error).into_response(),
        },
        Err(_) => PortalSettings::default(),
    };
    let csp = content_security_policy(&settings);
    let Ok(csp) = HeaderValue::from_str(&csp) else {
        // Settings are validated when written; one that is not a header is corrupt.
        return ApiError::Internal("an app's frame origins are not a header".into())
            .into_response();
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CONTENT_SECURITY_POLICY, csp),
        ],
        ASSETS.page.clone(),
    )
        .into_response()
}

/// `GET /portal/static/{hash}/{*file}`: one of the portal's files, cached for a
/// year (its path changes with its content).
pub(crate) async fn asset(Path((hash, path)): Path<(String, String)>) -> ApiResult<Response> {
    let current = ASSETS.base.rsplit('/').next().unwrap_or_default();
    let bytes = (hash == current && path != INDEX)
        .then(|| file(&path))
        .flatten()
        .ok_or(ApiError::NotFound("portal file"))?;
    Ok((
        [
            (header::CONTENT_TYPE, content_type(&path)),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        bytes,
    )
        .into_response())
}

const MIN_SESSION_SECS: u64 = 60;

/// `POST /v1/apps/{app}/portal-access` (admin): a link that opens the app's portal once.
pub(crate) async fn access(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<PortalAccess>,
) -> ApiResult<(StatusCode, Json<PortalLink>)> {
    let app = caller.app(&state, &app).await?;
    let PortalAccess {
        capabilities,
        ttl_secs,
        session_secs,
        screen,
        redeem,
    } = body.value;
    let session = session_secs.unwrap_or(portal::DEFAULT_SESSION_SECS);
    if !(portal::MIN_SESSION_SPAN_SECS..=portal::MAX_SESSION_SPAN_SECS).contains(&session) {
        return Err(ApiError::Validation(format!(
            "session_secs must be between {} (5 minutes) and {} (12 hours)",
            portal::MIN_SESSION_SPAN_SECS,
            portal::MAX_SESSION_SPAN_SECS
        )));
    }
    if let Some(screen) = &screen {
        let path = screen.split('?').next().unwrap_or_default();
        let ok = screen.starts_with('/')
            && screen.len() <= 200
            && screen
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./?=&-".contains(c))
            && !path
                .split('/')
                .any(|segment| segment == "." || segment == "..");
        if !ok {
            return Err(ApiError::Validation(format!(
                "screen must be a portal route such as /deliveries/dlv_… (a slash, then at most 199 of A-Z a-z 0-9 _ . / ? = & -, no . or .. segment), not {screen:?}"
            )));
        }
    }
    let ttl = ttl_secs.unwrap_or(portal::DEFAULT_SESSION_SECS);
    if !(MIN_SESSION_SECS..=portal::MAX_SESSION_SECS).contains(&ttl) {
        return Err(ApiError::Validation(format!(
            "ttl_secs must be between {MIN_SESSION_SECS} and {} (7 days)",
            portal::MAX_SESSION_SECS
        )));
    }
    let capabilities: Capabilities = portal::default_capabilities()
        .iter()
        .chain(capabilities)
        .collect();
    let now = state.clock.now();
    let expires_at = now + std::time::Duration::from_secs(ttl);
    let code = api_key::generate_portal_code();
    state
        .store
        .apps()
        .create_portal_code(
            &api_key::hash(&code),
            &app.id,
            capabilities,
            expires_at,
            std::time::Duration::from_secs(session),
            now,
        )
        .await?;
    // The fragment never reaches a server; the portal reads it and removes it.
    let mut url = format!(
        "{}/portal/apps/{}/#code={code}",
        state.config.public_url.trim_end_matches('/'),
        app.id
    );
    if let Some(screen) = &screen {
        url.push_str("&to=");
        url.push_str(
            &screen
                .replace('&', "%26")
                .replace('=', "%3D")
                .replace('?', "%3F"),
        );
    }
    if redeem.unwrap_or_default() == Redeem::Load {
        url.push_str("&redeem=load");
    }
    Ok((
        StatusCode::CREATED,
        Json(PortalLink {
            url,
            expires_at,
            capabilities: capabilities.iter().collect(),
        }),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionRequest {
    /// The code from the portal link's fragment (`#code=…`).
    code: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct PortalSession {
    /// An app-scoped key: `Authorization: Bearer <token>` on `/v1/…`.
    token: String,
    /// The session's key id (`DELETE /v1/keys/{id}` ends it).
    session_id: String,
    app_id: String,
    capabilities: Vec<Capability>,
    /// When the session ends unless it is renewed (`POST /portal/session/renew`).
    expires_at: Timestamp,
    /// The latest a renewal can take it to (12 h after sign-in); absent: it
    /// cannot be renewed (a session of a link made before sessions were).
    #[serde(skip_serializing_if = "Option::is_none")]
    renewable_until: Option<Timestamp>,
}

/// `POST /portal/session`: a portal link's code, exchanged once for a session.
pub(crate) async fn session(
    State(state): State<AppState>,
    body: JsonBody<SessionRequest>,
) -> ApiResult<Response> {
    let code = body.value.code;
    let token = api_key::generate();
    let exchange = state
        .store
        .apps()
        .exchange_portal_code(
            &api_key::hash(code.trim()),
            &api_key::hash(&token),
            state.clock.now(),
        )
        .await?;
    let (key, renewable_until) = match exchange {
        PortalExchange::Session(key, renewable_until) => (key, renewable_until),
        PortalExchange::Unknown => return Err(ApiError::PortalCode(PortalCode::Invalid)),
        PortalExchange::Used => return Err(ApiError::PortalCode(PortalCode::Used)),
        PortalExchange::Expired => return Err(ApiError::PortalCode(PortalCode::Expired)),
    };
    let KeyScope::App { app, capabilities } = &key.scope else {
        return Err(ApiError::Internal(
            "a portal session is not app-scoped".into(),
        ));
    };
    // The portal page keeps its session in this cookie, which its scripts
    // cannot read; it lasts as long as the session can (the key's own end
    // still decides).
    let expires_at = key.expires_at.unwrap_or(Timestamp::from_millis(i64::MAX));
    let last = renewable_until.unwrap_or(expires_at).max(expires_at);
    let cookie = session_cookie(
        &state,
        app.as_str(),
        &token,
        last.since(state.clock.now()).as_secs(),
    );
    let answer = PortalSession {
        token,
        session_id: key.id.to_string(),
        app_id: app.to_string(),
        capabilities: capabilities.iter().collect(),
        expires_at,
        renewable_until,
    };
    Ok(([(header::SET_COOKIE, cookie)], Json(answer)).into_response())
}

/// An app's portal session cookie: only for `/portal/` (the page, its API
/// under `/portal/api/`, and its session routes), never readable by scripts,
/// never sent by another site's request, and only over https where the
/// deployment is reached by https. `max_age` 0 removes it.
fn session_cookie(state: &AppState, app: &str, token: &str, max_age: u64) -> HeaderValue {
    let secure = if state.config.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{}={token}; Path=/portal/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        crate::auth::portal_cookie_name(app)
    );
    HeaderValue::from_str(&cookie).expect("an app id and a key are header-safe")
}

/// `POST /portal/session/renew`: the portal session whose key is the bearer
/// lasts its span again from now, never past 12 h after sign-in (the portal
/// calls it while the customer uses it). 404 when there is no live session
/// under the bearer that can be renewed (none given, over, signed out, a key
/// that is not a session's, or a session that ends with its old link).
pub(crate) async fn renew(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Json<RenewedSession>> {
    let (scope, hash) = match crate::auth::authenticate(&state, &headers).await {
        Ok(Caller(scope, hash)) => (scope, hash),
        Err(ApiError::Unauthorized(_)) => return Err(ApiError::NotFound("portal session")),
        Err(error) => return Err(error),
    };
    let KeyScope::App { app, capabilities } = scope else {
        return Err(ApiError::NotFound("portal session"));
    };
    let renewed = state
        .store
        .apps()
        .renew_portal_session(&hash, state.clock.now())
        .await?
        .ok_or(ApiError::NotFound("portal session"))?;
    // This process's cached copy holds the old end.
    state.keys.remove(&hash);
    Ok(Json(RenewedSession {
        app_id: app.to_string(),
        capabilities: capabilities.iter().collect(),
        expires_at: renewed.expires_at,
        renewable_until: renewed.renewable_until,
    }))
}

/// A renewed session: what it may do, and its new end (what a page opened
/// from a bookmark, in a tab that has not seen the sign-in, needs to go on).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RenewedSession {
    app_id: String,
    capabilities: Vec<Capability>,
    expires_at: Timestamp,
    /// The latest a renewal can take it to (12 h after sign-in).
    renewable_until: Timestamp,
}

/// `DELETE /portal/session`: signs out the portal session whose key is the
/// bearer: its key stops working at once on this process, and on others
/// within their key cache's lifetime (60 s). Idempotent: 204 whenever no
/// session is left under the bearer (none given, or one already spent or
/// expired). A live key that is not a portal session's is not ended by this
/// (404): a backend's app key is revoked by an admin.
pub(crate) async fn sign_out(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    // The page's cookie goes whatever else happens (its app named by the page).
    let forget = headers
        .get(crate::auth::PORTAL_APP_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|app| AppId::parse(app).ok())
        .map(|app| session_cookie(&state, app.as_str(), "", 0));
    let done = |forget: Option<HeaderValue>| {
        let mut response = StatusCode::NO_CONTENT.into_response();
        if let Some(cookie) = forget {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        response
    };
    let hash = match crate::auth::authenticate(&state, &headers).await {
        Ok(Caller(_, hash)) => hash,
        Err(ApiError::Unauthorized(_)) => return Ok(done(forget)),
        Err(error) => return Err(error),
    };
    // Whatever follows, this process stops trusting its cached copy.
    state.keys.remove(&hash);
    let Some(key) = state.store.apps().find_api_key(&hash).await? else {
        return Ok(done(forget));
    };
    let is_session =
        key.name == hookline_store::SESSION_KEY_NAME && matches!(key.scope, KeyScope::App { .. });
    if !is_session {
        return Err(ApiError::NotFound("portal session"));
    }
    state.store.apps().revoke_api_key(&key.id).await?;
    // A request that read the key before the revoke may have cached it again.
    state.keys.remove(&hash);
    Ok(done(forget))
}

/// Checks an app's portal settings as the API receives them.
pub(crate) fn validated(settings: PortalSettings) -> ApiResult<PortalSettings> {
    settings.validated().map_err(|e| ApiError::Validation(e.0))
}

#[cfg(test)]
mod languages;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in `portal/` is compiled in (a new file that is not listed
    /// would be missing from the binary), and none is listed twice.
    #[test]
    fn every_portal_file_is_served() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("portal");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let relative = path.strip_prefix(&root).unwrap();
                    let relative = relative.to_str().unwrap().replace('\\', "/");
                    if relative != "README.md" {
                        on_disk.push(relative);
                    }
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = FILES.iter().map(|(p, _)| p.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    #[test]
    fn the_page_names_the_hashed_files_and_nothing_inline() {
        let page = &ASSETS.page;
        assert!(!page.contains("{{STATIC}}"));
        assert!(page.contains(&format!("{}/", ASSETS.base)));
        assert!(
            !page.contains("<style"),
            "inline styles are refused by the CSP"
        );
        assert!(
            !page.contains(" style="),
            "inline styles are refused by the CSP"
        );
        assert!(
            !page.contains("<script>") && !page.contains(" onclick="),
            "inline scripts are refused by the CSP"
        );
    }

    #[test]
    fn the_policy_allows_nothing_inline() {
        let csp = content_security_policy(&PortalSettings::default());
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
        assert!(csp.contains("require-trusted-types-for 'script'; trusted-types 'none'"));
        assert!(
            csp.contains("img-src 'self' data:;"),
            "no image from elsewhere: {csp}"
        );
        assert!(csp.ends_with("frame-ancestors 'none'"));
    }

    #[test]
    fn images_load_from_the_logos_origin_and_no_other() {
        let settings = PortalSettings {
            logo_url: Some("https://cdn.acme.example/brand/logo.svg".into()),
            ..Default::default()
        };
        let csp = content_security_policy(&settings);
        assert!(
            csp.contains("img-src 'self' data: https://cdn.acme.example;"),
            "{csp}"
        );
        assert!(
            !csp.contains("https:;") && !csp.contains("https: "),
            "{csp}"
        );
    }
}
