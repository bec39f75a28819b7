//! The languages the API words its sentences in (explanations, incidents,
//! the signature checker) and the portal shows: English, and Hebrew, which is
//! written right to left.
//!
//! A request picks one with `Accept-Language` ([`Language::negotiate`]); an
//! app's portal may pin one (`portal.language`). Each module with sentences
//! keeps one table per language (`en`, `he`), pure functions of the same
//! facts.

use serde::{Deserialize, Serialize};

/// A language the API and the portal speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// English (the default).
    #[default]
    En,
    /// Hebrew, written right to left.
    He,
}

impl Language {
    pub const ALL: [Language; 2] = [Language::En, Language::He];

    /// Its BCP 47 tag: `en`, `he`.
    pub fn tag(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::He => "he",
        }
    }

    /// The language an `Accept-Language` header asks for: of those it names
    /// that are spoken here, the one with the highest weight (the first of
    /// equals); English when it names none, or asks for none of them.
    /// `he-IL` is Hebrew, and so is `iw`, Hebrew's older code.
    pub fn negotiate(accept_language: &str) -> Language {
        let mut best: Option<(Language, u16)> = None;
        for item in accept_language.split(',') {
            let mut parts = item.split(';');
            let tag = parts.next().unwrap_or("").trim();
            let weight = parts
                .find_map(|p| {
                    let p = p.trim();
                    p.get(..2)
                        .is_some_and(|q| q.eq_ignore_ascii_case("q="))
                        .then(|| &p[2..])
                })
                .map_or(Some(1000), quality);
            let (Some(language), Some(weight)) = (Self::from_tag(tag), weight) else {
                continue;
            };
            if weight > 0 && best.is_none_or(|(_, w)| weight > w) {
                best = Some((language, weight));
            }
        }
        best.map_or(Language::En, |(language, _)| language)
    }

    /// `en`, `en-GB`, `he`, `he-IL`, `iw` → the language; anything else, none.
    fn from_tag(tag: &str) -> Option<Language> {
        let primary = tag.split('-').next().unwrap_or("");
        if primary.eq_ignore_ascii_case("en") {
            Some(Language::En)
        } else if primary.eq_ignore_ascii_case("he") || primary.eq_ignore_ascii_case("iw") {
            Some(Language::He)
        } else {
            None
        }
    }

    /// `value` set into a sentence of this language: in a right-to-left one,
    /// a Unicode bidi isolate (FSI … PDI), so a URL, an id or a number keeps
    /// its own direction inside the sentence.
    pub fn isolate(self, value: impl std::fmt::Display) -> String {
        match self {
            Language::En => value.to_string(),
            Language::He => format!("\u{2068}{value}\u{2069}"),
        }
    }
}

/// `q=0.8` → 800 (thousandths); `None` for a malformed weight.
fn quality(q: &str) -> Option<u16> {
    let q = q.trim();
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    if fraction.len() > 3 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{fraction:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_by_weight_then_order() {
        for (header, expected) in [
            ("", Language::En),
            ("he", Language::He),
            ("he-IL,he;q=0.9,en-US;q=0.8,en;q=0.7", Language::He),
            ("en-US,en;q=0.9,he;q=0.8", Language::En),
            ("fr-FR, he;q=0.5", Language::He),
            ("fr, de", Language::En),
            ("en;q=0.2, he;q=0.9", Language::He),
            ("he;q=0, en;q=0.1", Language::En),
            ("iw", Language::He),
            ("HE-il", Language::He),
            ("*", Language::En),
            ("he;q=2, en;q=0.5", Language::En),
            ("he;q=abc", Language::En),
            ("en, he", Language::En),
            ("en;Q=0.1, he;q=0.2", Language::He),
            ("€€;q=1, he", Language::He),
            ("he, en", Language::He),
        ] {
            assert_eq!(Language::negotiate(header), expected, "{header:?}");
        }
    }

    #[test]
    fn isolates_only_in_a_right_to_left_language() {
        assert_eq!(Language::En.isolate("ep_1"), "ep_1");
        assert_eq!(Language::He.isolate(503), "\u{2068}503\u{2069}");
    }

    #[test]
    fn tags_round_trip_through_serde() {
        for language in Language::ALL {
            let json = serde_json::to_string(&language).unwrap();
            assert_eq!(json, format!("\"{}\"", language.tag()));
            assert_eq!(serde_json::from_str::<Language>(&json).unwrap(), language);
        }
    }
}
