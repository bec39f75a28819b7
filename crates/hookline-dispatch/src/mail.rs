//! Sending one delivery by e-mail: the `mailto:` endpoints of customer
//! notifications (`hookline_core::notify`).
//!
//! The message is the notice in words ([`notify::message`]), plain text, sent
//! through the operator's SMTP server ([`SmtpConfig`]). The server's address
//! is the operator's own, so the destination guard does not apply to it; the
//! customer names only the mailbox.
//!
//! What the server answers decides the attempt as an HTTP status would:
//! accepted (2xx) is delivered; refused for good (5xx: no such mailbox, a
//! policy refusal) is dead at once; refused for now (4xx), a timeout or a lost
//! connection is retried with backoff. The `Message-ID` is the event's, so a
//! mail sent again after a lost answer is the same message to the reader's
//! client.

use std::time::{Duration, Instant};

use hookline_core::chat::Message;
use hookline_core::classify::Outcome;
use hookline_core::model::TransportError;
use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use crate::sender::SendResult;

/// The SMTP server notices are sent through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    /// `smtp://user:password@host:587?tls=required` (STARTTLS),
    /// `smtps://user:password@host:465` (TLS from the start), or
    /// `smtp://host:25` (plain; for a relay on the operator's own network).
    pub url: String,
    /// The sender: `Webhooks <notify@example.com>`.
    pub from: String,
}

/// Sends mail through one SMTP server.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The transport holds the credentials: never printed.
        f.debug_struct("Mailer").field("from", &self.from).finish()
    }
}

impl Mailer {
    pub fn new(config: &SmtpConfig, timeout: Duration) -> Result<Self, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&config.url)
            .map_err(|e| format!("smtp_url is not an SMTP URL: {e}"))?
            .timeout(Some(timeout))
            .build();
        let from = config
            .from
            .parse::<Mailbox>()
            .map_err(|e| format!("smtp_from is not a mail address: {e}"))?;
        Ok(Self { transport, from })
    }

    /// Sends `message` to `to`; `id` (the event's) names the mail.
    pub async fn send(&self, to: &str, message: &Message, id: &str) -> SendResult {
        let started = Instant::now();
        let to = match to.parse::<Mailbox>() {
            Ok(to) => to,
            Err(e) => return rejected(format!("not a mail address: {e}"), started),
        };
        let mut text = message.text.clone();
        if let Some((url, label)) = &message.link {
            text.push_str(&format!("\n\n{label}: {url}\n"));
        }
        let domain = self.from.email.domain();
        let mail = lettre::Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(&message.title)
            .message_id(Some(format!("<{id}@{domain}>")))
            .header(ContentType::TEXT_PLAIN)
            .body(text);
        let mail = match mail {
            Ok(mail) => mail,
            Err(e) => return rejected(e.to_string(), started),
        };
        match self.transport.send(mail).await {
            Ok(response) => SendResult {
                response_body: Some(reply(
                    response.code().to_string(),
                    response.message().collect(),
                )),
                ..SendResult::answered(Outcome::Accepted, started)
            },
            Err(error) if error.is_permanent() => rejected(error.to_string(), started),
            Err(error) => {
                let kind = if error.is_timeout() {
                    TransportError::Timeout
                } else if error.is_transient() {
                    // The server answered 4xx: try again later.
                    TransportError::Io
                } else {
                    TransportError::Connect
                };
                SendResult::failed(kind, error.to_string(), started, None)
            }
        }
    }
}

/// "250 2.0.0 Ok: queued".
fn reply(code: String, lines: Vec<&str>) -> String {
    std::iter::once(code.as_str())
        .chain(lines)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Refused for good: what the server said is the attempt's response.
fn rejected(said: String, started: Instant) -> SendResult {
    SendResult {
        response_body: Some(said),
        ..SendResult::answered(Outcome::Rejected, started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_or_sender_is_refused_at_start() {
        let config = |url: &str, from: &str| SmtpConfig {
            url: url.into(),
            from: from.into(),
        };
        let timeout = Duration::from_secs(1);
        assert!(Mailer::new(
            &config("smtp://127.0.0.1:2525", "Hooks <n@example.com>"),
            timeout
        )
        .is_ok());
        assert!(Mailer::new(&config("http://127.0.0.1", "n@example.com"), timeout).is_err());
        assert!(Mailer::new(&config("smtp://127.0.0.1:2525", "not an address"), timeout).is_err());
    }

    #[test]
    fn credentials_are_never_printed() {
        let config = SmtpConfig {
            url: "smtp://user:hunter2@127.0.0.1:2525".into(),
            from: "n@example.com".into(),
        };
        let mailer = Mailer::new(&config, Duration::from_secs(1)).unwrap();
        assert!(!format!("{mailer:?}").contains("hunter2"));
    }
}
