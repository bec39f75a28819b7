//! `--destination rabbitmq`: the endpoints are a RabbitMQ exchange, and this
//! process consumes what Hookline publishes to it.
//!
//! Before the endpoints are created, a fresh topic exchange
//! `hookline-bench-<run>` is declared with one queue of the same name bound to
//! it by `#`, so every routing key lands in it (Hookline publishes mandatory: a
//! message no queue takes would be returned and dead-lettered). Endpoint `i` is
//! `amqp://HOST:PORT/?exchange=<exchange>&routing_key=ep.<i>`: the routing key
//! names the endpoint, as the path `/e<i>` does at the HTTP sink.
//!
//! [`CONSUMERS`] consumers, each on its own channel, take the queue with
//! automatic acknowledgement, and each message is recorded into the run's
//! [`Arrivals`] as an HTTP request answered 200 would be: the pair (its
//! `webhook-id` header, the endpoint of its routing key) at the moment a
//! consumer got it. So the ledger, the delivery rate and the latencies are
//! computed exactly as for HTTP; a message counts as delivered once consumed,
//! and its latency includes RabbitMQ's routing and queueing.
//!
//! The queue is transient (not durable): RabbitMQ confirms a message without
//! writing it to disk, as the HTTP sink answers without storing anything. Both
//! exchange and queue are auto-delete, so a run that dies leaves nothing
//! behind once its connection closes, and [`Consumer::remove`] deletes them at
//! the end of a run anyway.

use amqprs::channel::{
    BasicConsumeArguments, Channel, ConsumerMessage, ExchangeDeclareArguments,
    ExchangeDeleteArguments, QueueBindArguments, QueueDeclareArguments, QueueDeleteArguments,
};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::{FieldName, FieldValue};
use anyhow::Context;
use tokio::task::JoinHandle;

use crate::api::event_key;
use crate::arrivals::{Arrivals, PairKey, Recorder, Timebase};
use crate::cli::amqp_host_port;

/// Consumers of the queue, each on its own channel (so its own dispatcher task in
/// `amqprs`): enough that consuming is not what limits Hookline's rate.
const CONSUMERS: usize = 2;

/// The exchange and queue of one run, and the consumers recording what arrives.
pub struct Consumer {
    connection: Connection,
    /// The channel the declarations were made on; deletes them at the end.
    channel: Channel,
    /// The exchange's and the queue's name.
    name: String,
    /// `HOST:PORT` as the endpoints' URLs give it.
    authority: String,
    consumers: Vec<JoinHandle<()>>,
}

impl Consumer {
    /// Connects as guest/guest, declares the exchange and its queue and starts consuming.
    pub async fn start(
        address: &str,
        run_id: &str,
        arrivals: &Arrivals,
        timebase: Timebase,
    ) -> anyhow::Result<Self> {
        let (host, port) = amqp_host_port(address)?;
        let authority = match host.contains(':') {
            true => format!("[{host}]:{port}"),
            false => format!("{host}:{port}"),
        };
        let mut open = OpenConnectionArguments::new(&host, port, "guest", "guest");
        open.connection_name("hookline-bench");
        let connection = Connection::open(&open).await.with_context(|| {
            format!("connecting to RabbitMQ at {authority} as guest/guest (--amqp-url)")
        })?;
        let channel = connection
            .open_channel(None)
            .await
            .context("opening a RabbitMQ channel")?;
        let name = format!("hookline-bench-{run_id}");
        channel
            .exchange_declare(
                ExchangeDeclareArguments::new(&name, "topic")
                    .auto_delete(true)
                    .finish(),
            )
            .await
            .with_context(|| format!("declaring the exchange {name}"))?;
        channel
            .queue_declare(QueueDeclareArguments::transient_autodelete(&name))
            .await
            .with_context(|| format!("declaring the queue {name}"))?;
        channel
            .queue_bind(QueueBindArguments::new(&name, &name, "#"))
            .await
            .with_context(|| format!("binding the queue {name} to its exchange"))?;
        let mut consumer = Self {
            connection,
            channel,
            name,
            authority,
            consumers: Vec::new(),
        };
        for n in 0..CONSUMERS {
            if let Err(error) = consumer.consume(n, arrivals.recorder(), timebase).await {
                consumer.remove().await;
                return Err(error);
            }
        }
        Ok(consumer)
    }

    /// Starts consumer `n` on a channel of its own.
    async fn consume(
        &mut self,
        n: usize,
        recorder: Recorder,
        timebase: Timebase,
    ) -> anyhow::Result<()> {
        let channel = self
            .connection
            .open_channel(None)
            .await
            .context("opening a RabbitMQ channel")?;
        // Automatic acknowledgement: the broker forgets a message once it sent it, so
        // consuming costs no round trip (and a prefetch limit would not apply).
        let arguments = BasicConsumeArguments::new(&self.name, &format!("hookline-bench-{n}"))
            .manual_ack(false)
            .finish();
        let (_tag, mut messages) = channel
            .basic_consume_rx(arguments)
            .await
            .with_context(|| format!("consuming the queue {}", self.name))?;
        let webhook_id: FieldName = "webhook-id"
            .try_into()
            .expect("a name shorter than 256 bytes");
        self.consumers.push(tokio::spawn(async move {
            // The channel lives as long as its consumer.
            let _channel = channel;
            while let Some(message) = messages.recv().await {
                let at_ns = timebase.now_ns();
                recorder.record(pair_of(&message, &webhook_id), at_ns, true);
            }
        }));
        Ok(())
    }

    /// The URL of endpoint `i`: this run's exchange, routing key `ep.<i>`.
    pub fn endpoint_url(&self, i: u16) -> String {
        format!(
            "amqp://{}/?exchange={}&routing_key=ep.{i}",
            self.authority, self.name
        )
    }

    /// `HOST:PORT, exchange <name>`, for the report.
    pub fn describe(&self) -> String {
        format!("{}, exchange {}", self.authority, self.name)
    }

    /// Deletes the exchange and the queue, then stops consuming (best effort: a
    /// failure is only reported; auto-delete removes them with the connection anyway).
    /// The exchange goes first and the queue while its consumers are still on it, so
    /// neither is auto-deleted before it is deleted here.
    pub async fn remove(self) {
        if let Err(error) = self
            .channel
            .exchange_delete(ExchangeDeleteArguments::new(&self.name))
            .await
        {
            eprintln!(
                "warning: could not delete the RabbitMQ exchange {}: {error}",
                self.name
            );
        }
        if let Err(error) = self
            .channel
            .queue_delete(QueueDeleteArguments::new(&self.name))
            .await
        {
            eprintln!(
                "warning: could not delete the RabbitMQ queue {}: {error}",
                self.name
            );
        }
        for consumer in &self.consumers {
            consumer.abort();
        }
        let _ = self.channel.close().await;
        let _ = self.connection.close().await;
    }
}

/// The (event, endpoint) of a message: its `webhook-id` header (a long string, as
/// Hookline writes its headers) and the endpoint index in its routing key `ep.<i>`.
fn pair_of(message: &ConsumerMessage, webhook_id: &FieldName) -> Option<PairKey> {
    let endpoint = message
        .deliver
        .as_ref()?
        .routing_key()
        .strip_prefix("ep.")?
        .parse::<u16>()
        .ok()?;
    let event = match message
        .basic_properties
        .as_ref()?
        .headers()?
        .get(webhook_id)?
    {
        FieldValue::S(id) => {
            let id: &String = id.as_ref();
            event_key(id)?
        }
        _ => return None,
    };
    Some((event, endpoint))
}
