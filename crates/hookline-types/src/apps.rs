//! `/v1/apps`: a SaaS's customers, each with its endpoints and events.

use hookline_core::portal::PortalSettings;
use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// `POST /v1/apps`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApp {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    /// Your own id for the app (not starting with `app_` or `.`).
    #[schema(pattern = r"^[B-Zb-z0-9-][A-Za-z0-9._-]{0,255}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The customer portal's branding and framing (docs/portal.md).
    #[serde(
        default,
        deserialize_with = "crate::de::optional_object",
        skip_serializing_if = "Option::is_none"
    )]
    pub portal: Option<PortalSettings>,
}

/// `PATCH /v1/apps/{app}`: absent fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateApp {
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `null` removes it.
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(pattern = r"^[B-Zb-z0-9-][A-Za-z0-9._-]{0,255}$")]
    pub uid: Option<Option<String>>,
    /// Replaces the portal settings as a whole.
    #[serde(
        default,
        deserialize_with = "crate::de::optional_object",
        skip_serializing_if = "Option::is_none"
    )]
    pub portal: Option<PortalSettings>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AppView {
    pub id: String,
    pub uid: Option<String>,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The customer portal's branding and framing (docs/portal.md).
    pub portal: PortalSettings,
}

/// `POST /v1/apps/{app}/portal-access`: a link that opens the app's customer portal once.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PortalAccess {
    /// What the portal may do besides reading (`read` is always granted):
    /// `endpoints`, `secrets`, `replay`, `publish` (a test send of an edited payload).
    #[serde(default)]
    pub capabilities: Vec<hookline_core::access::Capability>,
    /// How long the link may wait to be opened: 60 s to 7 days, default 1 h.
    #[schema(minimum = 60, maximum = 604_800)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// How long the session it opens lasts between renewals: 5 min to 12 h,
    /// default 1 h. The portal renews it while the customer uses it, never
    /// past 12 h after sign-in (docs/portal.md, "Sessions").
    #[schema(minimum = 300, maximum = 43_200)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_secs: Option<u64>,
    /// The screen the portal opens on once signed in: a portal route such as
    /// `/deliveries/dlv_…`, `/endpoints/ep_…` or `/deliveries?state=dead`
    /// (default: `/status`, what is wrong now).
    #[schema(pattern = r"^/[A-Za-z0-9_./?=&-]{0,199}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// When the link's code is spent: `click` (the default) only once the
    /// customer clicks "Continue", so a mail scanner that opens links spends
    /// nothing; `load` as soon as the page opens (for a link your own server
    /// sets as an iframe's `src`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redeem: Option<Redeem>,
}

/// When a portal link's code is spent ([`PortalAccess::redeem`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Redeem {
    /// On the customer's click.
    #[default]
    Click,
    /// On opening.
    Load,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PortalLink {
    /// The link to hand the customer: it opens the portal once.
    pub url: String,
    /// When the link stops working if it has not been opened.
    pub expires_at: Timestamp,
    pub capabilities: Vec<hookline_core::access::Capability>,
}
