//! Chat formats: a [`Message`] as the JSON a chat's incoming webhook takes.
//!
//! One home for each format: Slack, Microsoft Teams and Discord incoming
//! webhooks. Customer notifications ([`crate::notify`]) send through them, and
//! an endpoint's `transform` names one of them as its preset.
//!
//! Each format keeps within its chat's limits (text is cut with `…`) and makes
//! nothing the chat would read as markup or a mention from the message's
//! words: Slack's `<`, `>` and `&` are escaped, Discord parses no mentions.

use serde_json::{json, Value};

/// Something to say in a chat or an e-mail: a title, a text and a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// One line: what happened.
    pub title: String,
    /// The details, one paragraph or a few lines.
    pub text: String,
    /// Where to look, with what to call it ("Open the endpoint").
    pub link: Option<(String, String)>,
}

/// A chat's incoming-webhook format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Slack,
    Teams,
    Discord,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Slack, Format::Teams, Format::Discord];

    /// Its stable spelling (API, database).
    pub const fn as_str(self) -> &'static str {
        match self {
            Format::Slack => "slack",
            Format::Teams => "teams",
            Format::Discord => "discord",
        }
    }

    pub fn parse(text: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == text)
    }

    /// The chat's name, for people.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Slack => "Slack",
            Format::Teams => "Microsoft Teams",
            Format::Discord => "Discord",
        }
    }

    /// `message` as this chat's incoming webhook takes it.
    pub fn body(self, message: &Message) -> Value {
        match self {
            Format::Slack => slack(message),
            Format::Teams => teams(message),
            Format::Discord => discord(message),
        }
    }
}

/// Cuts `text` to at most `most` characters, ending in `…` when cut.
fn cut(text: &str, most: usize) -> String {
    if text.chars().count() <= most {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(most.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// Slack's mrkdwn escapes (<https://api.slack.com/reference/surfaces/formatting#escaping>).
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A Slack incoming webhook's message: a section with the title in bold and
/// the text, the link as `<url|label>`, and `text` as the notification's
/// fallback.
fn slack(message: &Message) -> Value {
    // Cut after escaping: `&` becomes `&amp;`, and Slack counts what it gets.
    let title = cut(&slack_escape(&message.title), 150);
    let mut section = format!("*{title}*\n{}", cut(&slack_escape(&message.text), 2500));
    if let Some((url, label)) = &message.link {
        section.push_str(&format!(
            "\n<{}|{}>",
            slack_escape(url),
            slack_escape(label)
        ));
    }
    json!({
        "text": title,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": section}}],
    })
}

/// A Teams message with an Adaptive Card (what Teams' Workflows webhooks and
/// its incoming webhooks both take).
fn teams(message: &Message) -> Value {
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": cut(&message.title, 200), "weight": "Bolder", "size": "Medium", "wrap": true},
            {"type": "TextBlock", "text": cut(&message.text, 4000), "wrap": true},
        ],
    });
    if let Some((url, label)) = &message.link {
        card["actions"] = json!([{"type": "Action.OpenUrl", "title": label, "url": url}]);
    }
    json!({
        "type": "message",
        "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
    })
}

/// A Discord webhook's message: one embed (title 256, description 4096
/// characters at most), mentions off.
fn discord(message: &Message) -> Value {
    let mut description = cut(&message.text, 3500);
    let mut embed = json!({"title": cut(&message.title, 256)});
    if let Some((url, label)) = &message.link {
        embed["url"] = json!(url);
        description.push_str(&format!("\n[{label}]({url})"));
    }
    embed["description"] = json!(description);
    json!({"embeds": [embed], "allowed_mentions": {"parse": []}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Message {
        Message {
            title: "orders <acme> is failing".into(),
            text: "It answers 503 & waits.".into(),
            link: Some((
                "https://portal.example/x".into(),
                "Open the endpoint".into(),
            )),
        }
    }

    #[test]
    fn slack_escapes_its_markup_and_links_with_a_label() {
        let body = Format::Slack.body(&message());
        assert_eq!(body["text"], "orders &lt;acme&gt; is failing");
        assert_eq!(
            body["blocks"][0]["text"]["text"],
            "*orders &lt;acme&gt; is failing*\nIt answers 503 &amp; waits.\n<https://portal.example/x|Open the endpoint>"
        );
    }

    #[test]
    fn teams_gets_an_adaptive_card_with_an_open_action() {
        let body = Format::Teams.body(&message());
        let card = &body["attachments"][0];
        assert_eq!(
            card["contentType"],
            "application/vnd.microsoft.card.adaptive"
        );
        assert_eq!(
            card["content"]["body"][0]["text"],
            "orders <acme> is failing"
        );
        assert_eq!(
            card["content"]["body"][1]["text"],
            "It answers 503 & waits."
        );
        assert_eq!(
            card["content"]["actions"][0]["url"],
            "https://portal.example/x"
        );
    }

    #[test]
    fn discord_gets_one_embed_and_no_mentions() {
        let body = Format::Discord.body(&Message {
            text: "@everyone look".into(),
            ..message()
        });
        assert_eq!(body["embeds"][0]["title"], "orders <acme> is failing");
        assert_eq!(body["embeds"][0]["url"], "https://portal.example/x");
        assert_eq!(
            body["embeds"][0]["description"],
            "@everyone look\n[Open the endpoint](https://portal.example/x)"
        );
        assert_eq!(body["allowed_mentions"]["parse"], json!([]));
    }

    #[test]
    fn long_text_is_cut_within_each_chats_limits() {
        let long = Message {
            title: "t".repeat(1000),
            text: "x".repeat(10_000),
            link: None,
        };
        let discord = Format::Discord.body(&long);
        assert_eq!(
            discord["embeds"][0]["title"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            256
        );
        assert!(discord["embeds"][0]["title"]
            .as_str()
            .unwrap()
            .ends_with('…'));
        assert!(
            discord["embeds"][0]["description"]
                .as_str()
                .unwrap()
                .chars()
                .count()
                <= 4096
        );
        let slack = Format::Slack.body(&long);
        assert!(
            slack["blocks"][0]["text"]["text"]
                .as_str()
                .unwrap()
                .chars()
                .count()
                <= 3000
        );
    }

    #[test]
    fn formats_read_back_from_their_names() {
        for format in Format::ALL {
            assert_eq!(Format::parse(format.as_str()), Some(format));
        }
        assert_eq!(Format::parse("email"), None);
    }
}
