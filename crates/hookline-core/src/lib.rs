//! Hookline's domain: the types every other crate speaks and the pure policy
//! that decides what happens to a delivery.
//!
//! Nothing here performs I/O or awaits. The clock and the random source are
//! passed in ([`time::Clock`], [`retry::Jitter`]) so that every decision is a
//! deterministic function of its inputs and is unit-tested exhaustively.
//!
//! # Layout
//!
//! - [`access`]: what an app-scoped API key may do ([`access::Capability`]).
//! - [`ids`]: prefixed, time-sortable identifiers (`app_…`, `ep_…`, `msg_…`).
//! - [`time`]: [`time::Timestamp`] (unix milliseconds) and the injected clock.
//! - [`model`]: delivery states, dead-letter reasons, the webhook envelope.
//! - [`event_types`]: event type names and the patterns endpoints subscribe with.
//! - [`filter`]: payload filters: which events an endpoint receives, by what their payload says.
//! - [`incidents`]: what is wrong now with an app's endpoints, grouped by cause, in words.
//! - [`language`]: the languages sentences are worded in (English, Hebrew), and `Accept-Language`.
//! - [`explain`]: why a delivery is where it is, and what an attempt meant, as a code, an action and a sentence.
//! - [`classify`]: one attempt's outcome → [`classify::Verdict`] and a breaker [`breaker::Signal`].
//! - [`admission`]: may a due delivery be sent now — one rule for claims and hand-offs.
//! - [`claim`]: a claim as pure decisions: lane shares, rooms, and the plan for its rows.
//! - [`completion`]: what finished attempts do to their endpoints and partitions (the completion plan).
//! - [`breaker`]: the per-endpoint circuit breaker state machine.
//! - [`concurrency`]: per-endpoint concurrency that adapts to the receiver (AIMD).
//! - [`operational`]: operational webhooks: notices about endpoints, deaths and replays, for the operator.
//! - [`notify`]: customer notifications: an app's own e-mail and chat channels for its endpoints' notices.
//! - [`chat`]: Slack, Microsoft Teams and Discord incoming webhooks' formats.
//! - [`ordering`]: the rules of per-entity ordered partitions.
//! - [`outbound_auth`]: how Hookline authenticates to a receiver (OAuth2, Basic, bearer, client TLS).
//! - [`rate`]: per-endpoint rate limits (GCRA over one stored number).
//! - [`retry`]: full-jitter exponential backoff and the retry budget.
//! - [`sealing`]: endpoint secrets encrypted at rest under a master key (XChaCha20-Poly1305).
//! - [`signature_check`]: what a receiver got, checked against an endpoint's secrets, and why it does not verify.
//! - [`signing`]: Standard Webhooks secrets, signatures and verification.
//! - [`sigv4`]: AWS Signature Version 4, for the SQS, SNS and EventBridge destinations.
//! - [`switches`]: an endpoint's `enabled` and `paused`: whether it sends, and what turning them does.
//! - [`timeline`]: an endpoint's attempts in time buckets, and the marks of its breaker and switches.
//! - [`stats`]: an endpoint's attempts summarised (success rate, latency percentiles).
//! - [`fingerprint`]: the request fingerprint behind `Idempotency-Key`.
//! - [`custom_headers`]: the headers an endpoint adds to its requests, and which it may not.
//! - [`destination`]: which IP addresses outbound requests may reach, and what an endpoint URL may be.
//! - [`broker`]: endpoints that are message brokers (Redis Streams, NATS JetStream, RabbitMQ, Amazon SQS, SNS and EventBridge), read from their URLs.
//! - [`portal`]: the customer portal's per-app settings (branding, framing) and session limits.

pub mod access;
pub mod admission;
pub mod batch;
pub mod breaker;
pub mod broker;
pub mod chat;
pub mod claim;
pub mod classify;
pub mod completion;
pub mod concurrency;
pub mod cursor;
pub mod custom_headers;
pub mod destination;
pub mod event_types;
pub mod explain;
pub mod filter;
pub mod fingerprint;
pub mod ids;
pub mod incidents;
pub mod language;
pub mod model;
pub mod notify;
pub mod operational;
pub mod ordering;
pub mod outbound_auth;
pub mod portal;
pub mod publish;
pub mod rate;
pub mod retry;
pub mod sealing;
pub mod signature_check;
pub mod signing;
pub mod sigv4;
pub mod stats;
pub mod switches;
pub mod time;
pub mod timeline;
pub mod transform;
