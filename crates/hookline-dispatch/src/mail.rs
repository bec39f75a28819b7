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
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    /// `smtp://user:password@host:587?tls=required` (STARTTLS),
    /// `smtps://user:password@host:465` (TLS from the start), or
    /// `smtp://host:25` (plain; for a relay on the operator's own network).
    pub url: String,
    /// A file holding the password of the URL's user, read when the mailer is
    /// made (a process that cannot read it does not start).
    pub password_file: Option<String>,
    /// The sender: `Webhooks <notify@example.com>`.
    pub from: String,
}

impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold the password: only its host is printed.
        let host = url::Url::parse(&self.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned));
        f.debug_struct("SmtpConfig")
            .field("host", &host)
            .field("password_file", &self.password_file)
            .field("from", &self.from)
            .finish()
    }
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
        let mut url =
            url::Url::parse(&config.url).map_err(|e| format!("smtp_url is not a URL: {e}"))?;
        if let Some(file) = &config.password_file {
            if url.username().is_empty() {
                return Err("smtp_url names no user for smtp_password_file's password".to_owned());
            }
            let password = std::fs::read_to_string(file)
                .map_err(|e| format!("smtp_password_file {file} cannot be read: {e}"))?;
            url.set_password(Some(password.trim_end_matches(['\r', '\n'])))
                .map_err(|()| {
                    "smtp_url has no user for smtp_password_file's password".to_owned()
                })?;
        }
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url.as_str())
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
            Err(e) => return SendResult::rejected(format!("not a mail address: {e}"), started),
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
            Err(e) => return SendResult::rejected(e.to_string(), started),
        };
        match self.transport.send(mail).await {
            Ok(response) => SendResult {
                response_body: Some(reply(
                    response.code().to_string(),
                    response.message().collect(),
                )),
                ..SendResult::answered(Outcome::Accepted, started)
            },
            // Refused for good, by the mailbox: no such user, not accepted here,
            // over its quota, a name not allowed. Any other permanent answer
            // (authentication, TLS required, a policy at connect) is the
            // operator's set-up: retried, so fixing it loses no notice.
            Err(error) if error.is_permanent() && refuses_the_mailbox(&error) => {
                SendResult::rejected(error.to_string(), started)
            }
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

/// A permanent answer about the recipient (RFC 5321: 550, 551, 552, 553).
fn refuses_the_mailbox(error: &lettre::transport::smtp::Error) -> bool {
    error
        .status()
        .is_some_and(|code| matches!(code.to_string().as_str(), "550" | "551" | "552" | "553"))
}

/// "250 2.0.0 Ok: queued".
fn reply(code: String, lines: Vec<&str>) -> String {
    std::iter::once(code.as_str())
        .chain(lines)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_or_sender_is_refused_at_start() {
        let config = |url: &str, from: &str| SmtpConfig {
            url: url.into(),
            password_file: None,
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
            password_file: None,
            from: "n@example.com".into(),
        };
        assert!(!format!("{config:?}").contains("hunter2"));
        let mailer = Mailer::new(&config, Duration::from_secs(1)).unwrap();
        assert!(!format!("{mailer:?}").contains("hunter2"));
        // A password file that cannot be read stops the start.
        let missing = SmtpConfig {
            password_file: Some("/nonexistent/smtp-password".into()),
            ..config
        };
        let error = Mailer::new(&missing, Duration::from_secs(1)).unwrap_err();
        assert!(error.contains("/nonexistent/smtp-password"), "{error}");
    }
}
