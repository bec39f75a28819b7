//! The fault suite's history checker (issue #21): what every publisher was
//! told and what every receiver got, judged against Hookline's promises.
//!
//! A fault scenario records each publish (its tag, app, type, ordering key and
//! sequence, and the answer: accepted with an event id, refused with a clear
//! 4xx, or indeterminate) while real receivers log every request. At the end,
//! [`check`] turns the history into a [`Report`]: lost, misdirected, forged,
//! out of order, misnumbered and phantom receipts must all be zero; duplicates
//! are counted and held to the bound the scenario's faults allow.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{Receiver, ADMIN_TOKEN};

/// What a publisher was finally told about one publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: the event is committed; its id.
    Accepted(String),
    /// A clear 4xx: nothing was stored.
    Refused(u16),
    /// No answer, a reset, a timeout or a 5xx: it may or may not be stored.
    Indeterminate,
}

/// One publish as its publisher saw it.
#[derive(Debug, Clone)]
pub struct Publish {
    /// Unique in the run; carried in the payload (`data.tag`).
    pub tag: String,
    pub app: String,
    pub event_type: String,
    /// The ordering key and the publisher's sequence within it (1, 2, …;
    /// a key's events are published one after another, each after the last
    /// was accepted).
    pub ordered: Option<(String, u64)>,
    pub outcome: Outcome,
    /// Indeterminate answers before the final one (each retried).
    pub retried: u32,
}

/// One endpoint of the run and the receiver behind it.
pub struct Subscriber {
    pub name: &'static str,
    pub app: String,
    pub id: String,
    pub secret: String,
    /// `None`: every type.
    pub event_types: Option<Vec<String>>,
    pub inbox: Inbox,
}

/// Where a subscriber's deliveries arrive: an HTTP receiver, one that is
/// sent batches (its endpoint has `batch`), a RabbitMQ queue (an `amqp://`
/// endpoint) that a consumer reads, or a polling endpoint (`poll:`) whose
/// consumer fetches and commits.
pub enum Inbox {
    Http(Receiver),
    Batched(Receiver),
    RabbitMq(crate::brokers::Queue),
    Poll(Poller),
}

/// One delivery as a receiver took it in: a request (or message) of its
/// own, or an element of a batch request.
pub struct Receipt {
    /// The event's id: the `webhook-id`, or a batch element's `id`.
    pub id: String,
    /// The request it came in carried a signature the official crate makes.
    pub signed: bool,
    /// The envelope.
    pub body: Value,
    /// The `hookline-endpoint-sequence` header of a request of its own.
    pub header_seq: Option<u64>,
    /// What the receiver answered.
    pub status: u16,
}

impl Inbox {
    /// The endpoint URL that delivers here.
    pub fn url(&self) -> &str {
        match self {
            Self::Http(receiver) | Self::Batched(receiver) => &receiver.url,
            Self::RabbitMq(queue) => &queue.url,
            Self::Poll(_) => "poll:",
        }
    }

    /// Everything that arrived, in order.
    pub fn requests(&self) -> Vec<crate::helpers::Received> {
        match self {
            Self::Http(receiver) | Self::Batched(receiver) => receiver.requests(),
            Self::RabbitMq(queue) => queue.requests(),
            Self::Poll(poller) => poller.received.lock().unwrap().clone(),
        }
    }
}

/// A polling endpoint's consumer: fetches past its cursor (waiting up to a
/// second for news), takes in each message once, and commits; through
/// restarts and outages of the server it retries every tenth of a second.
/// Each message taken in is logged as a receipt with its signed headers and
/// body, as an HTTP receiver logs a request it answered 200.
#[derive(Default)]
pub struct Poller {
    received: Arc<std::sync::Mutex<Vec<crate::helpers::Received>>>,
}

impl Poller {
    /// Starts consuming endpoint `endpoint` of `app` at `base`; it runs until
    /// the test's runtime ends.
    pub fn start(&self, base: &str, app: &str, endpoint: &str) {
        let received = self.received.clone();
        let url = format!("{base}/v1/apps/{app}/endpoints/{endpoint}/messages");
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let (mut cursor, mut taken) = (0u64, 0u64);
            loop {
                if taken > cursor {
                    let committed = http
                        .post(format!("{url}/commit"))
                        .bearer_auth(ADMIN_TOKEN)
                        .json(&json!({"cursor": taken}))
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await;
                    match committed {
                        Ok(answer) if answer.status().is_success() => cursor = taken,
                        _ => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    }
                }
                let fetched = http
                    .get(format!("{url}?from_seq={}&wait_secs=1", taken + 1))
                    .bearer_auth(ADMIN_TOKEN)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                let page: Value = match fetched {
                    Ok(answer) if answer.status().is_success() => match answer.json().await {
                        Ok(page) => page,
                        Err(_) => continue,
                    },
                    _ => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                for message in page["messages"].as_array().into_iter().flatten() {
                    let seq = message["seq"].as_u64().unwrap_or(0);
                    let Some(body) = message["body"].as_str() else {
                        continue;
                    };
                    received.lock().unwrap().push(crate::helpers::Received {
                        headers: crate::helpers::header_map(&message["headers"]),
                        body: body.as_bytes().to_vec().into(),
                        at: std::time::Instant::now(),
                        wall: std::time::SystemTime::now(),
                        status: 200,
                    });
                    taken = taken.max(seq);
                }
            }
        });
    }
}

impl Subscriber {
    fn wants(&self, publish: &Publish) -> bool {
        publish.app == self.app
            && self
                .event_types
                .as_ref()
                .is_none_or(|types| types.contains(&publish.event_type))
    }
}

/// The checker's verdict on one history.
#[derive(Debug, Default)]
pub struct Report {
    pub accepted: usize,
    pub refused: usize,
    pub indeterminate: usize,
    pub receipts: usize,
    /// (endpoint, event id) pairs the DLQ holds at the end.
    pub dead: usize,
    /// An accepted event an endpoint subscribed to it never got with a 2xx
    /// answer, and that is not in the DLQ for that endpoint.
    pub lost: Vec<String>,
    /// A receipt at an endpoint not subscribed to the event, of another
    /// app, or of no publish at all.
    pub misdirected: Vec<String>,
    /// A receipt whose signature the official `standardwebhooks` crate
    /// rejects, or whose `webhook-id` is not the id its publish was given.
    pub forged: Vec<String>,
    /// For one endpoint and ordering key, a first receipt of sequence n+1
    /// before the first success of n.
    pub out_of_order: Vec<String>,
    /// A receipt of an event whose publish was refused.
    pub phantom: Vec<String>,
    /// Against the endpoint's sequence numbers (docs/api.md, "Sequence
    /// numbers"): a receipt without one, an event received under two numbers
    /// or two events under one, or more numbers missing from 1..=highest than
    /// the endpoint has dead events it never got (a gap no receiver could heal).
    pub misnumbered: Vec<String>,
    /// Successful receipts beyond the first, per (endpoint, event).
    pub duplicates: usize,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "accepted {}, refused {}, indeterminate {}, receipts {}, dead {}; \
             lost {}, misdirected {}, forged {}, out of order {}, misnumbered {}, phantom {}, duplicates {}",
            self.accepted,
            self.refused,
            self.indeterminate,
            self.receipts,
            self.dead,
            self.lost.len(),
            self.misdirected.len(),
            self.forged.len(),
            self.out_of_order.len(),
            self.misnumbered.len(),
            self.phantom.len(),
            self.duplicates,
        )
    }
}

impl Report {
    /// What broke, if anything: a promise, or more duplicates than
    /// `duplicate_bound`.
    pub fn violations(&self, duplicate_bound: usize) -> Option<String> {
        let first = |list: &[String]| list.iter().take(5).cloned().collect::<Vec<_>>();
        if !(self.lost.is_empty()
            && self.misdirected.is_empty()
            && self.forged.is_empty()
            && self.out_of_order.is_empty()
            && self.misnumbered.is_empty()
            && self.phantom.is_empty())
        {
            return Some(format!(
                "{self}\nlost: {:?}\nmisdirected: {:?}\nforged: {:?}\nout of order: {:?}\nmisnumbered: {:?}\nphantom: {:?}",
                first(&self.lost),
                first(&self.misdirected),
                first(&self.forged),
                first(&self.out_of_order),
                first(&self.misnumbered),
                first(&self.phantom),
            ));
        }
        (self.duplicates > duplicate_bound)
            .then(|| format!("{self}: more duplicates than the faults allow ({duplicate_bound})"))
    }

    /// Every promise held, and duplicates stayed within `duplicate_bound`.
    pub fn assert_holds(&self, duplicate_bound: usize) {
        if let Some(broken) = self.violations(duplicate_bound) {
            panic!("{broken}");
        }
    }
}

/// Judges a history. `dead` holds the (endpoint id, event id) pairs in the
/// DLQ at the end of the run.
pub fn check(
    publishes: &[Publish],
    subscribers: &[Subscriber],
    dead: &HashSet<(String, String)>,
) -> Report {
    let mut report = Report {
        dead: dead.len(),
        ..Report::default()
    };
    let by_tag: HashMap<&str, &Publish> = publishes.iter().map(|p| (p.tag.as_str(), p)).collect();
    for publish in publishes {
        match publish.outcome {
            Outcome::Accepted(_) => report.accepted += 1,
            Outcome::Refused(_) => report.refused += 1,
            Outcome::Indeterminate => report.indeterminate += 1,
        }
    }

    for subscriber in subscribers {
        // (event id) → successful receipts at this endpoint.
        let mut successes: HashMap<String, usize> = HashMap::new();
        // ordering key → sequences that have succeeded here so far.
        let mut done: HashMap<&str, HashSet<u64>> = HashMap::new();
        // ordering key → sequences received here so far.
        let mut seen: HashMap<&str, HashSet<u64>> = HashMap::new();
        // The endpoint's numbers: event id → its number, and back.
        let mut number_of: HashMap<String, u64> = HashMap::new();
        let mut event_of: HashMap<u64, String> = HashMap::new();
        let verifier = standardwebhooks::Webhook::new(&subscriber.secret).expect("a whsec_ secret");
        let receipts = receipts(&subscriber.inbox, &verifier);
        report.receipts += receipts.len();
        for (n, receipt) in receipts.iter().enumerate() {
            let id = receipt.id.clone();
            let at = format!("{} receipt #{n} ({id})", subscriber.name);
            if !receipt.signed {
                report.forged.push(format!("{at}: signature rejected"));
            }
            match number(receipt) {
                None => report.misnumbered.push(format!("{at}: no sequence number")),
                Some(seq) => {
                    let earlier = number_of.entry(id.clone()).or_insert(seq);
                    if *earlier != seq {
                        report
                            .misnumbered
                            .push(format!("{at}: numbered {seq}, earlier {earlier}"));
                    }
                    let holder = event_of.entry(seq).or_insert_with(|| id.clone());
                    if *holder != id {
                        report
                            .misnumbered
                            .push(format!("{at}: number {seq} is also {holder}'s"));
                    }
                }
            }
            let tag = receipt.body["data"]["tag"].as_str().map(str::to_owned);
            let Some(publish) = tag.as_deref().and_then(|tag| by_tag.get(tag)) else {
                report
                    .misdirected
                    .push(format!("{at}: no publish has its tag"));
                continue;
            };
            if !subscriber.wants(publish) {
                report
                    .misdirected
                    .push(format!("{at}: {} of app {}", publish.tag, publish.app));
            }
            match &publish.outcome {
                Outcome::Refused(status) => {
                    report
                        .phantom
                        .push(format!("{at}: {} was refused ({status})", publish.tag));
                }
                Outcome::Accepted(event) if *event != id => {
                    report
                        .forged
                        .push(format!("{at}: {} was accepted as {event}", publish.tag));
                }
                _ => {}
            }
            let success = (200..300).contains(&receipt.status);
            if let Some((key, sequence)) = &publish.ordered {
                let first_time = seen.entry(key).or_default().insert(*sequence);
                let previous_done = *sequence == 1
                    || done
                        .get(key.as_str())
                        .is_some_and(|d| d.contains(&(sequence - 1)));
                if first_time && !previous_done {
                    report.out_of_order.push(format!(
                        "{at}: {key}#{sequence} before the first success of #{}",
                        sequence - 1
                    ));
                }
                if success {
                    done.entry(key).or_default().insert(*sequence);
                }
            }
            if success {
                *successes.entry(id).or_default() += 1;
            }
        }
        report.duplicates += successes.values().map(|n| n - 1).sum::<usize>();
        // Every number up to the highest received was made for an event; those
        // never received must be dead ones (which a receiver fetches by number).
        let unseen_dead = dead
            .iter()
            .filter(|(endpoint, event)| {
                *endpoint == subscriber.id && !number_of.contains_key(event)
            })
            .count();
        let highest = event_of.keys().max().copied().unwrap_or(0);
        let missing = (1..=highest).filter(|n| !event_of.contains_key(n)).count();
        if missing > unseen_dead {
            report.misnumbered.push(format!(
                "{}: {missing} of 1..={highest} never received, only {unseen_dead} dead",
                subscriber.name
            ));
        }
        for publish in publishes.iter().filter(|p| subscriber.wants(p)) {
            if let Outcome::Accepted(event) = &publish.outcome {
                if !successes.contains_key(event)
                    && !dead.contains(&(subscriber.id.clone(), event.clone()))
                {
                    report.lost.push(format!(
                        "{}: {} ({event}) never delivered, not dead",
                        subscriber.name, publish.tag
                    ));
                }
            }
        }
    }
    report
}

/// What `inbox` took in, delivery by delivery, in order: a batch request
/// (it has `hookline-batch-size`) is one receipt per element, each signed if
/// the request is, under the element's `id`.
pub fn receipts(inbox: &Inbox, verifier: &standardwebhooks::Webhook) -> Vec<Receipt> {
    let mut receipts = Vec::new();
    for request in inbox.requests() {
        let signed = signed(verifier, &request);
        let body = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
        if request.headers.contains_key("hookline-batch-size") {
            for element in body.as_array().into_iter().flatten() {
                receipts.push(Receipt {
                    id: element["id"].as_str().unwrap_or_default().to_owned(),
                    signed,
                    body: element.clone(),
                    header_seq: None,
                    status: request.status,
                });
            }
            continue;
        }
        receipts.push(Receipt {
            id: request.header("webhook-id").to_owned(),
            signed,
            header_seq: request
                .headers
                .get("hookline-endpoint-sequence")
                .and_then(|v| v.to_str().ok()?.parse().ok()),
            body,
            status: request.status,
        });
    }
    receipts
}

/// The receipt's sequence number: the signed envelope's `seq`, else the
/// `hookline-endpoint-sequence` header (an endpoint with `seq_in_body` off).
fn number(receipt: &Receipt) -> Option<u64> {
    receipt.body["seq"].as_u64().or(receipt.header_seq)
}

/// Whether one of the receipt's `v1` signatures is the official crate's
/// signature of its id, timestamp and body. (`Webhook::verify` would also
/// refuse timestamps older than five minutes, which a long run's early
/// receipts are by the time they are checked.)
fn signed(verifier: &standardwebhooks::Webhook, receipt: &crate::helpers::Received) -> bool {
    let Ok(timestamp) = receipt.header("webhook-timestamp").parse::<i64>() else {
        return false;
    };
    let Ok(expected) = verifier.sign(receipt.header("webhook-id"), timestamp, &receipt.body) else {
        return false;
    };
    receipt
        .header("webhook-signature")
        .split(' ')
        .any(|signature| signature == expected)
}

/// Publishes like a careful client: the same body and `Idempotency-Key`
/// again while the answer is indeterminate (the server down, a reset, a
/// timeout, a 5xx), until a clear answer or `give_up` after the first try.
pub async fn publish(
    http: &reqwest::Client,
    base: &str,
    publish: &mut Publish,
    idempotency_key: &str,
    give_up: Duration,
) {
    let mut body = json!({
        "event_type": publish.event_type,
        "payload": {"tag": publish.tag},
    });
    if let Some((key, sequence)) = &publish.ordered {
        body["ordering_key"] = json!(key);
        body["payload"]["sequence"] = json!(sequence);
    }
    let deadline = std::time::Instant::now() + give_up;
    publish.outcome = loop {
        let answer = http
            .post(format!("{base}/v1/apps/{}/events", publish.app))
            .bearer_auth(ADMIN_TOKEN)
            .header("idempotency-key", idempotency_key)
            .json(&body)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let outcome = match answer {
            Ok(response) if response.status().is_success() => {
                match response.json::<Value>().await {
                    Ok(body) => Outcome::Accepted(body["id"].as_str().unwrap().to_owned()),
                    // Cut while reading the answer.
                    Err(_) => Outcome::Indeterminate,
                }
            }
            Ok(response) if response.status().is_client_error() => {
                Outcome::Refused(response.status().as_u16())
            }
            _ => Outcome::Indeterminate,
        };
        if outcome != Outcome::Indeterminate || std::time::Instant::now() > deadline {
            break outcome;
        }
        publish.retried += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
}

/// The (endpoint id, event id) pairs in an app's DLQ, read through the API.
pub async fn dead_letters(base: &str, app: &str) -> HashSet<(String, String)> {
    let http = reqwest::Client::new();
    let mut dead = HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/v1/apps/{app}/dlq?limit=250");
        if let Some(cursor) = &cursor {
            url.push_str(&format!("&before={cursor}"));
        }
        let page: Value = http
            .get(&url)
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for row in page["data"].as_array().unwrap() {
            dead.insert((
                row["endpoint_id"].as_str().unwrap().to_owned(),
                row["event_id"].as_str().unwrap().to_owned(),
            ));
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return dead,
        }
    }
}

/// How many of each outcome, and how many publishes were retried after an
/// indeterminate answer, for a scenario's log line.
pub fn tally(publishes: &[Publish]) -> BTreeMap<String, usize> {
    let mut tally = BTreeMap::new();
    for publish in publishes {
        if publish.retried > 0 {
            *tally.entry("retried".to_owned()).or_default() += 1;
        }
        let name = match publish.outcome {
            Outcome::Accepted(_) => "accepted".to_owned(),
            Outcome::Refused(status) => format!("refused {status}"),
            Outcome::Indeterminate => "indeterminate".to_owned(),
        };
        *tally.entry(name).or_default() += 1;
    }
    tally
}

/// The checker must catch what it claims to: each kind of broken history,
/// built by hand against real receivers, is reported.
mod self_test {
    use super::*;
    use crate::helpers::Reply;

    fn accepted(tag: &str, app: &str, ordered: Option<(&str, u64)>) -> Publish {
        Publish {
            tag: tag.into(),
            app: app.into(),
            event_type: "order.paid".into(),
            ordered: ordered.map(|(k, s)| (k.into(), s)),
            outcome: Outcome::Accepted(format!("evt_{tag}")),
            retried: 0,
        }
    }

    /// Sends `tag` as event `id`, numbered `seq` among the endpoint's.
    async fn send(receiver: &Receiver, secret: &str, id: &str, tag: &str, seq: Option<u64>) {
        let mut body = json!({"type": "order.paid", "timestamp": "x", "data": {"tag": tag}});
        if let Some(seq) = seq {
            body["seq"] = json!(seq);
        }
        let body = serde_json::to_vec(&body).unwrap();
        let webhook = standardwebhooks::Webhook::new(secret).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let signature = webhook.sign(id, now, &body).unwrap();
        reqwest::Client::new()
            .post(&receiver.url)
            .header("webhook-id", id)
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .unwrap();
    }

    /// Sends `elements` (event id, tag, number) as one batch request signed
    /// with `secret`.
    async fn send_batch(receiver: &Receiver, secret: &str, elements: &[(&str, &str, u64)]) {
        let body: Vec<Value> = elements
            .iter()
            .map(|(id, tag, seq)| {
                json!({"id": id, "type": "order.paid", "timestamp": "x", "seq": seq,
                    "data": {"tag": tag}})
            })
            .collect();
        let body = serde_json::to_vec(&body).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let signature = standardwebhooks::Webhook::new(secret)
            .unwrap()
            .sign("bat_1", now, &body)
            .unwrap();
        reqwest::Client::new()
            .post(&receiver.url)
            .header("webhook-id", "bat_1")
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", signature)
            .header("hookline-batch-size", elements.len().to_string())
            .body(body)
            .send()
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_is_judged_element_by_element() {
        const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let receiver = Receiver::start().await;
        let publishes = vec![
            accepted("a", "app_1", Some(("k", 1))),
            accepted("b", "app_1", Some(("k", 2))),
            accepted("c", "app_1", None),
            accepted("d", "app_1", None),
        ];
        // a and b in order in one signed batch; c in a batch signed with
        // another key; d never sent.
        send_batch(&receiver, SECRET, &[("evt_a", "a", 1), ("evt_b", "b", 2)]).await;
        send_batch(
            &receiver,
            "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            &[("evt_c", "c", 3)],
        )
        .await;
        let subscribers = [Subscriber {
            name: "batched",
            app: "app_1".into(),
            id: "ep_1".into(),
            secret: SECRET.into(),
            event_types: None,
            inbox: Inbox::Batched(receiver),
        }];
        let report = check(&publishes, &subscribers, &HashSet::new());
        assert_eq!(report.receipts, 3, "one receipt per element");
        assert_eq!(report.forged.len(), 1, "{:?}", report.forged);
        assert!(report.forged[0].contains("evt_c"));
        assert_eq!(report.lost.len(), 1, "{:?}", report.lost);
        assert!(report.lost[0].contains("evt_d"));
        assert!(report.out_of_order.is_empty(), "{:?}", report.out_of_order);
        assert!(report.misnumbered.is_empty(), "{:?}", report.misnumbered);
        assert_eq!(report.duplicates, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_checker_reports_every_kind_of_broken_history() {
        const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let receiver = Receiver::start().await;
        let mut publishes = vec![
            accepted("a", "app_1", Some(("k", 1))),
            accepted("b", "app_1", Some(("k", 2))),
            accepted("lost", "app_1", None),
            accepted("dead", "app_1", None),
            accepted("other", "app_2", None),
            accepted("dup", "app_1", None),
        ];
        publishes.push(Publish {
            outcome: Outcome::Refused(409),
            ..accepted("refused", "app_1", None)
        });
        // b (sequence 2) before a (sequence 1); a refused publish; another
        // app's event, under the refused one's number; a bad signature; a
        // duplicate, under another number; an unknown tag, without one;
        // numbers 4, 6 and 7 never received, and one dead event to explain them.
        send(&receiver, SECRET, "evt_b", "b", Some(2)).await;
        send(&receiver, SECRET, "evt_a", "a", Some(1)).await;
        send(&receiver, SECRET, "evt_refused", "refused", Some(3)).await;
        send(&receiver, SECRET, "evt_other", "other", Some(3)).await;
        send(
            &receiver,
            "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "evt_dup",
            "dup",
            Some(5),
        )
        .await;
        send(&receiver, SECRET, "evt_dup", "dup", Some(8)).await;
        receiver.answer_always(Reply::status(500));
        send(&receiver, SECRET, "evt_x", "nobody", None).await;
        let subscribers = [Subscriber {
            name: "one",
            app: "app_1".into(),
            id: "ep_1".into(),
            secret: SECRET.into(),
            event_types: None,
            inbox: Inbox::Http(receiver),
        }];
        let dead = HashSet::from([("ep_1".to_owned(), "evt_dead".to_owned())]);
        let report = check(&publishes, &subscribers, &dead);
        assert_eq!(report.lost.len(), 1, "{:?}", report.lost);
        assert!(report.lost[0].contains("lost"));
        assert_eq!(report.out_of_order.len(), 1, "{:?}", report.out_of_order);
        assert_eq!(report.phantom.len(), 1, "{:?}", report.phantom);
        // Another app's event, and a tag no publish has.
        assert_eq!(report.misdirected.len(), 2, "{:?}", report.misdirected);
        assert_eq!(report.forged.len(), 1, "{:?}", report.forged);
        // Two events under 3, evt_dup under 5 and 8, evt_x under none, and
        // three numbers missing with one dead event.
        assert_eq!(report.misnumbered.len(), 4, "{:?}", report.misnumbered);
        for said in [
            "also evt_refused's",
            "numbered 8, earlier 5",
            "no sequence number",
            "3 of 1..=8 never received, only 1 dead",
        ] {
            assert!(
                report.misnumbered.iter().any(|m| m.contains(said)),
                "{said}: {:?}",
                report.misnumbered
            );
        }
        // The forged one answered 200 too: two successes of evt_dup.
        assert_eq!(report.duplicates, 1);
        assert_eq!(
            (report.accepted, report.refused, report.receipts),
            (6, 1, 7)
        );
        assert!(
            report.violations(10).is_some(),
            "a broken history must fail the check"
        );
        // Duplicates alone break the check only beyond their bound.
        let duplicates_only = Report {
            duplicates: 3,
            ..Report::default()
        };
        assert!(duplicates_only.violations(3).is_none());
        assert!(duplicates_only.violations(2).is_some());
    }
}
