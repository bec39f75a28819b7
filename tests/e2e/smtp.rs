//! A real SMTP server on 127.0.0.1:0 for the tests: it speaks enough of
//! RFC 5321 for a client (EHLO or HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT),
//! keeps every message it accepts, and refuses some mailboxes as real servers
//! do: `refused@…` for good (550), `busy@…` for now (451), `policy@…` by a
//! policy of the server's (554, permanent but not about the mailbox).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::helpers::wait_until;

/// A message the server accepted.
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent (headers, a blank line, the body), dots unstuffed.
    pub data: String,
}

impl Mail {
    /// A header's value (unfolded).
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next()?;
        let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
        unfolded.split("\r\n").find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    /// A header's value with its RFC 2047 encoded words (`=?utf-8?b?…?=`,
    /// `=?utf-8?q?…?=`, how a mail client sends a subject that is not ASCII)
    /// decoded.
    pub fn decoded_header(&self, name: &str) -> Option<String> {
        let value = self.header(name)?;
        let mut decoded = String::new();
        for word in value.split(' ') {
            let inner = word.strip_prefix("=?").and_then(|w| w.strip_suffix("?="));
            match inner.and_then(|w| {
                let mut parts = w.splitn(3, '?');
                Some((parts.next()?, parts.next()?, parts.next()?))
            }) {
                Some((_charset, encoding, text)) => {
                    let bytes = if encoding.eq_ignore_ascii_case("b") {
                        use base64::Engine as _;
                        base64::engine::general_purpose::STANDARD
                            .decode(text)
                            .expect("base64 encoded word")
                    } else {
                        quoted_printable(&text.replace('_', " "))
                    };
                    // Adjacent encoded words join without the space between them.
                    decoded.push_str(&String::from_utf8(bytes).expect("UTF-8"));
                }
                None => {
                    if !decoded.is_empty() {
                        decoded.push(' ');
                    }
                    decoded.push_str(word);
                }
            }
        }
        Some(decoded)
    }

    /// The body as text: quoted-printable or base64 decoded, as its
    /// `Content-Transfer-Encoding` says, with CRLF as LF.
    pub fn body(&self) -> String {
        let body = self
            .data
            .split_once("\r\n\r\n")
            .map_or("", |(_, body)| body);
        let encoding = self
            .header("content-transfer-encoding")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let bytes = match encoding.as_str() {
            "quoted-printable" => quoted_printable(body),
            "base64" => {
                use base64::Engine as _;
                let joined: String = body.split_whitespace().collect();
                base64::engine::general_purpose::STANDARD
                    .decode(joined)
                    .expect("a base64 body")
            }
            _ => body.as_bytes().to_vec(),
        };
        String::from_utf8(bytes)
            .expect("a UTF-8 body")
            .replace("\r\n", "\n")
    }
}

/// Quoted-printable decoded: soft line breaks joined, `=XX` as its byte.
fn quoted_printable(text: &str) -> Vec<u8> {
    let text = text.replace("=\r\n", "");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'=', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

#[derive(Default)]
struct State {
    mails: Mutex<Vec<Mail>>,
    /// Every RCPT it answered, with its reply code.
    recipients: Mutex<Vec<(String, u16)>>,
}

pub struct SmtpServer {
    /// `smtp://127.0.0.1:port` (plain: the test's own loopback).
    pub url: String,
    state: Arc<State>,
}

impl SmtpServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("smtp://{}", listener.local_addr().unwrap());
        let state = Arc::new(State::default());
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let _ = session(socket, &state).await;
                });
            }
        });
        Self { url, state }
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.state.mails.lock().unwrap().clone()
    }

    /// The mailboxes clients named, with what the server answered.
    pub fn recipients(&self) -> Vec<(String, u16)> {
        self.state.recipients.lock().unwrap().clone()
    }

    /// Waits until `count` messages arrived; returns them all.
    pub async fn wait_for_mails(&self, count: usize) -> Vec<Mail> {
        wait_until(
            Duration::from_secs(30),
            &format!("{count} mails at the test's SMTP server"),
            || async {
                let mails = self.mails();
                (mails.len() >= count).then_some(mails)
            },
        )
        .await
    }
}

async fn session(socket: tokio::net::TcpStream, state: &State) -> std::io::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 test.invalid ESMTP\r\n").await?;
    let (mut from, mut to) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_owned();
        let verb = command
            .split([' ', ':'])
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-test.invalid\r\n250 8BITMIME\r\n",
            "HELO" | "NOOP" => b"250 OK\r\n",
            "RSET" => {
                (from, to) = (String::new(), Vec::new());
                b"250 OK\r\n"
            }
            "MAIL" => {
                from = address(&command);
                b"250 OK\r\n"
            }
            "RCPT" => {
                let mailbox = address(&command);
                let code = if mailbox.starts_with("refused@") {
                    550
                } else if mailbox.starts_with("busy@") {
                    451
                } else if mailbox.starts_with("policy@") {
                    554
                } else {
                    to.push(mailbox.clone());
                    250
                };
                state.recipients.lock().unwrap().push((mailbox, code));
                match code {
                    550 => b"550 5.1.1 No such user here\r\n",
                    554 => b"554 5.7.1 Relay access denied\r\n",
                    451 => b"451 4.3.0 Try again later\r\n",
                    _ => b"250 OK\r\n",
                }
            }
            "DATA" if to.is_empty() => b"554 5.5.1 No valid recipients\r\n",
            "DATA" => {
                write
                    .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                    .await?;
                let mut data = String::new();
                loop {
                    line.clear();
                    if lines.read_line(&mut line).await? == 0 {
                        return Ok(());
                    }
                    if line == ".\r\n" {
                        break;
                    }
                    data.push_str(line.strip_prefix('.').unwrap_or(&line));
                }
                state.mails.lock().unwrap().push(Mail {
                    from: from.clone(),
                    to: std::mem::take(&mut to),
                    data,
                });
                b"250 2.0.0 Ok: queued\r\n"
            }
            "QUIT" => {
                write.write_all(b"221 2.0.0 Bye\r\n").await?;
                return Ok(());
            }
            _ => b"502 5.5.2 Command not recognized\r\n",
        };
        write.write_all(reply).await?;
    }
}

/// `ops@example.com` from `RCPT TO:<ops@example.com> …`.
fn address(command: &str) -> String {
    let start = command.find('<').map_or(0, |i| i + 1);
    let end = command[start..]
        .find('>')
        .map_or(command.len(), |i| start + i);
    command[start..end].to_owned()
}
