//! The customer portal's per-app settings and the rules for them.
//!
//! An app's settings brand its portal (name, colour, logo, theme, language) and say which
//! origins may frame it. The origins end up in a `Content-Security-Policy`
//! header, so they are checked to be bare origins — nothing a header could be
//! broken out of.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::access::{Capabilities, Capability};
use crate::language::Language;

/// How long a portal link may be opened, and how long the session it opens
/// lasts between renewals, unless asked otherwise.
pub const DEFAULT_SESSION_SECS: u64 = 60 * 60;
/// The longest a portal link may wait to be opened.
pub const MAX_SESSION_SECS: u64 = 7 * 24 * 60 * 60;
/// The shortest and longest a session may last between renewals (it is never
/// renewed past 12 hours after sign-in, `hookline_store::SESSION_CAP`).
pub const MIN_SESSION_SPAN_SECS: u64 = 5 * 60;
pub const MAX_SESSION_SPAN_SECS: u64 = 12 * 60 * 60;

/// What a portal session may do unless the SaaS grants more.
pub fn default_capabilities() -> Capabilities {
    Capabilities::from_iter([Capability::Read])
}

/// Light, dark, or whatever the customer's system prefers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Theme {
    #[default]
    System,
    Light,
    Dark,
}

/// The portal's typeface: a stack of fonts the customer's system already has
/// (the page loads none: its CSP allows no font source).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Font {
    /// The system's interface font (San Francisco, Segoe UI, Roboto, …).
    #[default]
    System,
    /// A humanist sans (Seravek, Gill Sans Nova, Ubuntu, Calibri, …).
    Humanist,
    /// A book serif (Charter, Sitka, Cambria, …).
    Serif,
    /// A rounded sans (SF Rounded, Quicksand, Comfortaa, …).
    Rounded,
}

/// An app's portal settings (`portal` in the app's API view).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PortalSettings {
    /// The name the portal shows in its header (default: the app's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 100,
            pattern = r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$"
        )
    )]
    pub display_name: Option<String>,
    /// The accent colour, `#rrggbb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^#[0-9a-fA-F]{6}$"))]
    pub brand_color: Option<String>,
    /// The accent colour in dark mode, `#rrggbb`, with `brand_color` (default:
    /// `brand_color`); either is lightened on the dark page until buttons
    /// stand out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^#[0-9a-fA-F]{6}$"))]
    pub brand_color_dark: Option<String>,
    /// The typeface.
    #[serde(default, skip_serializing_if = "is_system")]
    pub font: Font,
    /// The portal's language, and its customers' notices' (default: the
    /// customer's browser's, when the portal speaks it, else English).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
    /// An `https://` URL of a logo image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^https://[a-z0-9]+(\.[a-z0-9]+){0,3}(/[A-Za-z0-9._-]{1,20}){0,4}$")
    )]
    pub logo_url: Option<String>,
    #[serde(default)]
    pub theme: Theme,
    /// Origins (`https://app.example.com`, `http://localhost:3000`) allowed to
    /// embed the portal in a frame; none: it cannot be framed.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_items = 20,
            pattern = r"^https?://[a-z0-9]+(\.[a-z0-9]+){0,3}(:[1-9][0-9]{0,3})?$"
        )
    )]
    pub frame_origins: Vec<String>,
    /// Your own page that signs a customer in and opens the portal at a
    /// screen. Links in the customer's notifications go to
    /// `{sign_in_url}?screen=/endpoints/ep_…`: the page makes a portal link
    /// with that `screen` (`POST /v1/apps/{app}/portal-access`) and redirects
    /// to it. Unset: they open the portal page itself, which works while the
    /// customer's session in that browser lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^https?://([a-z0-9]+\.){0,3}[a-z]{2,10}(/[A-Za-z0-9._-]{1,20}){0,4}$")
    )]
    pub sign_in_url: Option<String>,
}

fn is_system(font: &Font) -> bool {
    *font == Font::System
}

/// A setting that is not acceptable, with a message that says which and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSettings(pub String);

const MAX_DISPLAY_NAME: usize = 100;
const MAX_URL: usize = 2048;
const MAX_FRAME_ORIGINS: usize = 20;

impl PortalSettings {
    /// The settings with each frame origin in its canonical spelling, or why
    /// they are refused.
    pub fn validated(mut self) -> Result<Self, InvalidSettings> {
        if let Some(name) = &self.display_name {
            if name.trim().is_empty()
                || name.chars().count() > MAX_DISPLAY_NAME
                || name.chars().any(char::is_control)
            {
                return Err(InvalidSettings(format!(
                    "portal.display_name must be 1 to {MAX_DISPLAY_NAME} characters, without control characters"
                )));
            }
        }
        for (field, color) in [
            ("brand_color", &self.brand_color),
            ("brand_color_dark", &self.brand_color_dark),
        ] {
            let Some(color) = color else { continue };
            let hex = color.strip_prefix('#').unwrap_or("");
            if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(InvalidSettings(format!(
                    "portal.{field} {color:?} must be a colour as #rrggbb"
                )));
            }
        }
        if let Some(logo) = &self.logo_url {
            let ok = logo.len() <= MAX_URL
                && logo.strip_prefix("https://").is_some_and(|rest| {
                    !rest.is_empty() && !rest.chars().any(|c| c.is_whitespace() || c.is_control())
                });
            if !ok || logo_origin(logo).is_none() {
                return Err(InvalidSettings(
                    "portal.logo_url must be an https:// URL of at most 2048 characters, with a host name or address".into(),
                ));
            }
        }
        if let Some(url) = &self.sign_in_url {
            let rest = url
                .strip_prefix("https://")
                .or_else(|| url.strip_prefix("http://"));
            let ok = url.len() <= MAX_URL
                && rest.is_some_and(|rest| {
                    !rest.is_empty()
                        && !rest.starts_with(['/', '?'])
                        && !rest
                            .chars()
                            .any(|c| c.is_whitespace() || c.is_control() || c == '#')
                });
            if !ok {
                return Err(InvalidSettings(
                    "portal.sign_in_url must be an http:// or https:// URL of at most 2048 characters, without a fragment".into(),
                ));
            }
        }
        if self.frame_origins.len() > MAX_FRAME_ORIGINS {
            return Err(InvalidSettings(format!(
                "portal.frame_origins holds at most {MAX_FRAME_ORIGINS} origins"
            )));
        }
        self.frame_origins = self
            .frame_origins
            .iter()
            .map(|o| Origin::parse(o).map(|o| o.to_string()))
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// The `frame-ancestors` source list of a portal page: the allowed
    /// origins, or `'none'`.
    /// The origin the logo loads from (the page's `img-src` allows it and no
    /// other): `https://host[:port]`.
    pub fn logo_origin(&self) -> Option<String> {
        self.logo_url.as_deref().and_then(logo_origin)
    }

    /// Where a link to one of the portal's screens (`/endpoints/ep_…`) should
    /// go for the app `app` of a deployment at `public_url`: the app's
    /// `sign_in_url` with the screen, or the portal page opened at it.
    pub fn link(&self, public_url: &str, app: &str, screen: &str) -> String {
        match &self.sign_in_url {
            Some(url) => {
                let join = if url.contains('?') { '&' } else { '?' };
                format!(
                    "{url}{join}screen={}",
                    screen.replace('&', "%26").replace('#', "%23")
                )
            }
            None => format!(
                "{}/portal/apps/{app}/#{screen}",
                public_url.trim_end_matches('/')
            ),
        }
    }

    pub fn frame_ancestors(&self) -> String {
        if self.frame_origins.is_empty() {
            "'none'".into()
        } else {
            self.frame_origins.join(" ")
        }
    }
}

/// The origin of an `https://` URL, canonical; `None` if it has none.
fn logo_origin(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Origin::parse(&format!("https://{}", &rest[..end]))
        .ok()
        .map(|origin| origin.to_string())
}

/// A web origin: `http` or `https`, a host, and a port unless it is the default.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: &'static str,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(text: &str) -> Result<Self, InvalidSettings> {
        let refuse = || {
            InvalidSettings(format!(
                "portal.frame_origins: {text:?} is not an origin (scheme://host[:port], http or https, nothing after)"
            ))
        };
        let (scheme, rest) = if let Some(rest) = text.strip_prefix("https://") {
            ("https", rest)
        } else if let Some(rest) = text.strip_prefix("http://") {
            ("http", rest)
        } else {
            return Err(refuse());
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (inside, after) = v6.split_once(']').ok_or_else(refuse)?;
            if inside.is_empty() || !inside.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
                return Err(refuse());
            }
            (format!("[{}]", inside.to_ascii_lowercase()), after)
        } else {
            let end = rest.find(':').unwrap_or(rest.len());
            let host = &rest[..end];
            let label_ok = |l: &str| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            };
            if host.len() > 253 || !host.split('.').all(label_ok) {
                return Err(refuse());
            }
            (host.to_ascii_lowercase(), &rest[end..])
        };
        let port = match port {
            "" => None,
            p => {
                let digits = p.strip_prefix(':').ok_or_else(refuse)?;
                if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                    return Err(refuse());
                }
                let port: u16 = digits.parse().map_err(|_| refuse())?;
                let default = if scheme == "https" { 443 } else { 80 };
                (port != default).then_some(port)
            }
        };
        Ok(Self { scheme, host, port })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_origins(origins: &[&str]) -> Result<PortalSettings, InvalidSettings> {
        PortalSettings {
            frame_origins: origins.iter().map(|o| o.to_string()).collect(),
            ..Default::default()
        }
        .validated()
    }

    #[test]
    fn links_go_through_the_sign_in_page_when_there_is_one() {
        let plain = PortalSettings::default();
        assert_eq!(
            plain.link("https://hooks.example/", "app_1", "/endpoints/ep_1"),
            "https://hooks.example/portal/apps/app_1/#/endpoints/ep_1"
        );
        let with = |url: &str| PortalSettings {
            sign_in_url: Some(url.into()),
            ..Default::default()
        };
        assert_eq!(
            with("https://acme.example/webhooks/sign-in").link("https://h", "app_1", "/status"),
            "https://acme.example/webhooks/sign-in?screen=/status"
        );
        assert_eq!(
            with("https://acme.example/in?org=7").link("https://h", "app_1", "/endpoints/ep_1"),
            "https://acme.example/in?org=7&screen=/endpoints/ep_1"
        );
        for bad in [
            "ftp://acme.example",
            "https://",
            "https:///x",
            "https://a.example/#x",
            "https://a b",
        ] {
            assert!(with(bad).validated().is_err(), "{bad}");
        }
        assert!(with("http://localhost:3000/in").validated().is_ok());
    }

    #[test]
    fn a_logo_loads_from_its_own_origin_only() {
        let logo = |url: &str| PortalSettings {
            logo_url: Some(url.into()),
            ..Default::default()
        };
        assert_eq!(
            logo("https://CDN.example.com/a/logo.svg?v=2")
                .logo_origin()
                .as_deref(),
            Some("https://cdn.example.com")
        );
        assert_eq!(
            logo("https://cdn.example.com:8443#x")
                .logo_origin()
                .as_deref(),
            Some("https://cdn.example.com:8443")
        );
        assert_eq!(
            logo("https://cdn.example.com:443/l.png")
                .logo_origin()
                .as_deref(),
            Some("https://cdn.example.com")
        );
        // A URL whose host is no host name is refused when written.
        for bad in [
            "https://a b/",
            "https://user@cdn.example.com/l.png",
            "https:///l.png",
            "https://x;y/l.png",
        ] {
            assert!(logo(bad).validated().is_err(), "{bad}");
        }
        assert_eq!(PortalSettings::default().logo_origin(), None);
    }

    #[test]
    fn origins_are_canonical() {
        let settings = with_origins(&[
            "https://App.Example.com/",
            "http://127.0.0.1:3000",
            "https://example.com:443",
            "http://[::1]:8080",
        ])
        .unwrap();
        assert_eq!(
            settings.frame_origins,
            [
                "https://app.example.com",
                "http://127.0.0.1:3000",
                "https://example.com",
                "http://[::1]:8080"
            ]
        );
        assert_eq!(
            settings.frame_ancestors(),
            "https://app.example.com http://127.0.0.1:3000 https://example.com http://[::1]:8080"
        );
        assert_eq!(PortalSettings::default().frame_ancestors(), "'none'");
    }

    #[test]
    fn nothing_that_could_break_out_of_a_header_is_an_origin() {
        for bad in [
            "example.com",
            "https://",
            "https://example.com/path",
            "https://example.com; script-src *",
            "https://exa mple.com",
            "https://*.example.com",
            "https://user@example.com",
            "https://example.com:99999",
            "https://example.com:",
            "https://example.com?x=1",
            "ftp://example.com",
            "'self'",
            "https://-bad.example.com",
            "https://example.com\r\nX-Evil: 1",
        ] {
            let error = with_origins(&[bad]).unwrap_err();
            assert!(error.0.contains("frame_origins"), "{bad}: {error}");
        }
    }

    #[test]
    fn branding_is_checked() {
        let ok = PortalSettings {
            display_name: Some("Acme".into()),
            brand_color: Some("#1A2b3C".into()),
            brand_color_dark: Some("#8ab4f8".into()),
            font: Font::Serif,
            language: Some(Language::He),
            logo_url: Some("https://cdn.example.com/logo.svg".into()),
            theme: Theme::Dark,
            frame_origins: vec![],
            sign_in_url: Some("https://acme.example/sign-in".into()),
        };
        assert_eq!(ok.clone().validated(), Ok(ok));
        for bad in [
            PortalSettings {
                brand_color_dark: Some("#12345".into()),
                ..Default::default()
            },
            PortalSettings {
                brand_color: Some("red".into()),
                ..Default::default()
            },
            PortalSettings {
                brand_color: Some("#12345".into()),
                ..Default::default()
            },
            PortalSettings {
                logo_url: Some("http://example.com/logo.png".into()),
                ..Default::default()
            },
            PortalSettings {
                logo_url: Some("javascript:alert(1)".into()),
                ..Default::default()
            },
            PortalSettings {
                display_name: Some("  ".into()),
                ..Default::default()
            },
            PortalSettings {
                display_name: Some("a\u{7}b".into()),
                ..Default::default()
            },
        ] {
            assert!(bad.clone().validated().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn settings_read_back_as_written() {
        let json =
            r#"{"display_name":"Acme","theme":"light","frame_origins":["https://a.example"]}"#;
        let settings: PortalSettings = serde_json::from_str(json).unwrap();
        assert_eq!(settings.theme, Theme::Light);
        assert_eq!(serde_json::to_string(&settings).unwrap(), json);
        assert!(serde_json::from_str::<PortalSettings>(r##"{"colour":"#fff"}"##).is_err());
    }
}
