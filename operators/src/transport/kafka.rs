//! The Kafka transport (rdkafka): consumer groups with offsets stored only after a batch's
//! outputs were acknowledged, and an idempotent producer (acks=all, in order per partition).
//! Works with any Kafka-protocol broker; raw librdkafka options pass through unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use super::{last_offsets, Output, Position, Record};
use crate::error::TransportError;

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub struct KafkaConfig {
    /// `host:port[,host:port...]`.
    pub brokers: String,
    /// Partitions for topics this process creates.
    pub partitions: i32,
    /// Replication factor for topics this process creates.
    pub replication: i32,
    /// Raw librdkafka options (SASL, TLS, timeouts...), applied to every client.
    pub options: BTreeMap<String, String>,
}

impl KafkaConfig {
    pub fn new(brokers: impl Into<String>) -> Self {
        KafkaConfig { brokers: brokers.into(), partitions: 1, replication: 1, options: BTreeMap::new() }
    }

    /// A client config with streamrag's `defaults` for this kind of client, then the user's
    /// raw options on top (the user can override any default).
    fn client(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in defaults {
            c.set(*k, *v);
        }
        for (k, v) in &self.options {
            c.set(k, v);
        }
        c
    }
}

/// How long a client waits for an unreachable cluster: when it connects, and for each record it
/// produces (the producer's `message.timeout.ms`).
const CONNECT_WAIT: Duration = Duration::from_secs(120);

/// Errors that say the cluster could not be reached, or not yet answer: waited out.
fn unreachable(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::BrokerNotAvailable
            | RDKafkaErrorCode::NotController
            | RDKafkaErrorCode::LeaderNotAvailable
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::CoordinatorNotAvailable
    )
}

/// A producer shared by all stages of a process, plus what it takes to make consumers.
#[derive(Clone)]
pub struct KafkaTransport {
    config: Arc<KafkaConfig>,
    producer: FutureProducer,
}

impl KafkaTransport {
    pub fn connect(config: KafkaConfig) -> Result<Self, TransportError> {
        let wait_ms = CONNECT_WAIT.as_millis().to_string();
        let producer: FutureProducer = config
            .client(&[("enable.idempotence", "true"), ("acks", "all"), ("linger.ms", "5"), ("message.timeout.ms", &wait_ms)])
            .create()?;
        Ok(KafkaTransport { config: Arc::new(config), producer })
    }

    /// Creates the topics that do not exist yet. A cluster that cannot be reached (not started
    /// yet, restarting) is waited for, as the producer waits for it, up to `CONNECT_WAIT`;
    /// a refusal (authorisation, a bad setting) is an error at once. Those also in `compacted`
    /// keep the last record of each key (`cleanup.policy=compact`) instead of expiring by time.
    pub async fn ensure_topics(&self, topics: &[&str], compacted: &[&str]) -> Result<(), TransportError> {
        let admin: AdminClient<DefaultClientContext> = self.config.client(&[]).create()?;
        let new: Vec<NewTopic> = topics
            .iter()
            .map(|t| {
                let topic = NewTopic::new(t, self.config.partitions, TopicReplication::Fixed(self.config.replication));
                if compacted.contains(t) {
                    topic.set("cleanup.policy", "compact")
                } else {
                    topic
                }
            })
            .collect();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let deadline = tokio::time::Instant::now() + CONNECT_WAIT;
        let mut warned = false;
        loop {
            let code = match admin.create_topics(new.iter(), &opts).await {
                Ok(results) => {
                    let failed = results.into_iter().find_map(|r| match r {
                        Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => None,
                        Err(e) => Some(e),
                    });
                    match failed {
                        None => return Ok(()),
                        Some((topic, code)) if !unreachable(code) => {
                            return Err(TransportError::Other(format!("cannot create topic {topic}: {code}")))
                        }
                        Some((_, code)) => code,
                    }
                }
                Err(KafkaError::AdminOp(code)) if unreachable(code) => code,
                Err(e) => return Err(e.into()),
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(TransportError::Other(format!("the Kafka cluster at {} was not reachable for {} s: {code}", self.config.brokers, CONNECT_WAIT.as_secs())));
            }
            if !warned {
                warned = true;
                tracing::warn!(brokers = %self.config.brokers, error = %code, "Kafka unreachable; waiting for it before creating the topics");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Enqueues every record first (so librdkafka can batch them), in order, then waits for
    /// every acknowledgement.
    pub async fn produce(&self, outputs: &[Output]) -> Result<Vec<Position>, TransportError> {
        let mut pending = Vec::with_capacity(outputs.len());
        for o in outputs {
            let mut record = FutureRecord::to(&o.topic).key(&o.key).payload(&o.payload);
            loop {
                match self.producer.send_result(record) {
                    Ok(delivery) => {
                        pending.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        // the local queue is full: let deliveries drain, then retry
                        record = r;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err((e, _)) => return Err(e.into()),
                }
            }
        }
        let mut positions = Vec::with_capacity(outputs.len());
        for delivery in pending {
            let d = delivery
                .await
                .map_err(|_| TransportError::Other("the producer dropped a delivery".into()))?
                .map_err(|(e, _)| TransportError::Kafka(e))?;
            positions.push(Position { partition: d.partition, offset: d.offset });
        }
        Ok(positions)
    }

    pub async fn subscribe(&self, group: &str, topic: &str, from_end: bool) -> Result<KafkaSubscription, TransportError> {
        let consumer: StreamConsumer = self
            .config
            .client(&[
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("auto.offset.reset", if from_end { "latest" } else { "earliest" }),
                ("session.timeout.ms", "10000"),
                ("heartbeat.interval.ms", "1000"),
                ("enable.partition.eof", "false"),
                // A document crosses three topics before it is queryable: a broker that holds
                // a fetch for the default 500 ms (Tansu does) costs that at every hop. 20 ms: p99
                // freshness 68 ms at 1k docs/s (`bench freshness`); idle consumers ask 50 times/s.
                ("fetch.wait.max.ms", "20"),
            ])
            .set("group.id", group)
            .create()?;
        if from_end {
            // Request/response clients: read from the current end of every partition, and be
            // assigned before the caller produces its request.
            let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
            let mut tpl = TopicPartitionList::new();
            for t in md.topics() {
                for p in t.partitions() {
                    let (_, high) = consumer.fetch_watermarks(topic, p.id(), Duration::from_secs(10))?;
                    tpl.add_partition_offset(topic, p.id(), Offset::Offset(high))?;
                }
            }
            consumer.assign(&tpl)?;
        } else {
            consumer.subscribe(&[topic])?;
        }
        Ok(KafkaSubscription { consumer, topic: topic.to_string(), last_warn: None, assigned: from_end })
    }

    fn reader(&self) -> Result<StreamConsumer, TransportError> {
        let group = format!("streamrag.reader-{}-{}", std::process::id(), super::now_ms());
        Ok(self
            .config
            .client(&[
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("enable.partition.eof", "false"),
                ("fetch.wait.max.ms", "20"), // as for group members (the kg-writer reads this way)
            ])
            .set("group.id", group)
            .create()?)
    }

    fn partitions(consumer: &StreamConsumer, topic: &str) -> Result<Vec<i32>, TransportError> {
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        Ok(md.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect())
    }

    /// A reader of every partition of `topic` from explicit positions, outside any group.
    pub async fn assign(&self, topic: &str, from: &BTreeMap<i32, i64>) -> Result<KafkaSubscription, TransportError> {
        let consumer = self.reader()?;
        let mut tpl = TopicPartitionList::new();
        for p in Self::partitions(&consumer, topic)? {
            let offset = from.get(&p).map(|&o| Offset::Offset(o)).unwrap_or(Offset::Beginning);
            tpl.add_partition_offset(topic, p, offset)?;
        }
        consumer.assign(&tpl)?;
        Ok(KafkaSubscription { consumer, topic: topic.to_string(), last_warn: None, assigned: true })
    }

    /// High watermarks of every partition of `topic`.
    pub async fn end_offsets(&self, topic: &str) -> Result<BTreeMap<i32, i64>, TransportError> {
        let consumer = self.reader()?;
        let mut out = BTreeMap::new();
        for p in Self::partitions(&consumer, topic)? {
            let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?;
            out.insert(p, high);
        }
        Ok(out)
    }
}

/// A consumer group member on one topic.
pub struct KafkaSubscription {
    consumer: StreamConsumer,
    topic: String,
    /// When the last "Kafka unavailable" warning was logged.
    last_warn: Option<std::time::Instant>,
    /// Partitions assigned explicitly: commits are no-ops.
    assigned: bool,
}

fn owned(m: &rdkafka::message::BorrowedMessage<'_>) -> Record {
    Record {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(|k| k.to_vec()),
        payload: m.payload().map(|p| p.to_vec()).unwrap_or_default(),
        timestamp_ms: m.timestamp().to_millis().unwrap_or(0),
    }
}

impl KafkaSubscription {
    /// The (low, high) watermarks of a partition as the client last saw them in a fetch.
    pub fn cached_watermarks(&self, partition: i32) -> Option<(i64, i64)> {
        let topic = std::ffi::CString::new(self.topic.as_str()).ok()?;
        let (mut low, mut high) = (-1i64, -1i64);
        // SAFETY: the client pointer lives as long as `self.consumer`; the call only reads
        // librdkafka's cached watermarks into the two integers.
        let err = unsafe {
            rdkafka::bindings::rd_kafka_get_watermark_offsets(self.consumer.client().native_ptr(), topic.as_ptr(), partition, &mut low, &mut high)
        };
        (err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some((low, high))
    }

    pub async fn next_batch(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, TransportError> {
        let mut batch = Vec::new();
        match tokio::time::timeout(wait, self.consumer.recv()).await {
            Err(_) => return Ok(batch),
            Ok(Ok(m)) => batch.push(owned(&m)),
            Ok(Err(e)) => {
                self.transient(e)?;
                // The client reconnects on its own; do not spin while it does.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Ok(batch);
            }
        }
        while batch.len() < max {
            match tokio::time::timeout(Duration::from_millis(2), self.consumer.recv()).await {
                Err(_) => break,
                Ok(Ok(m)) => batch.push(owned(&m)),
                Ok(Err(KafkaError::PartitionEOF(_))) => break,
                Ok(Err(e)) => {
                    // The records already taken are processed; the error comes back next time if it lasts.
                    self.transient(e)?;
                    break;
                }
            }
        }
        Ok(batch)
    }

    /// A consumer error the client recovers from by itself (brokers unreachable, a leader or
    /// coordinator moving, timeouts) is logged (at most every 10 s) and waited out; others
    /// (authorisation, authentication, fatal) stop the stage.
    fn transient(&mut self, e: KafkaError) -> Result<(), TransportError> {
        let code = match &e {
            KafkaError::MessageConsumption(c) => Some(*c),
            KafkaError::PartitionEOF(_) => return Ok(()),
            _ => None,
        };
        let fatal = match code {
            None => true,
            Some(c) => matches!(
                c,
                RDKafkaErrorCode::TopicAuthorizationFailed
                    | RDKafkaErrorCode::GroupAuthorizationFailed
                    | RDKafkaErrorCode::ClusterAuthorizationFailed
                    | RDKafkaErrorCode::SaslAuthenticationFailed
                    | RDKafkaErrorCode::Authentication
                    | RDKafkaErrorCode::Fatal
            ),
        };
        if fatal {
            return Err(e.into());
        }
        if self.last_warn.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            self.last_warn = Some(std::time::Instant::now());
            tracing::warn!(topic = %self.topic, error = %e, "Kafka unavailable; waiting for the client to reconnect");
        }
        Ok(())
    }

    /// Stores and commits the offsets after each partition's last record of the batch.
    pub fn commit(&mut self, batch: &[Record]) -> Result<(), TransportError> {
        if batch.is_empty() || self.assigned {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), off) in last_offsets(batch) {
            tpl.add_partition_offset(&topic, partition, Offset::Offset(off + 1))?;
        }
        self.consumer.commit(&tpl, CommitMode::Async)?;
        Ok(())
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    fn with(options: &[(&str, &str)]) -> KafkaConfig {
        let mut c = KafkaConfig::new("127.0.0.1:1");
        c.options = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        c
    }

    /// SASL over TLS as a managed Kafka asks for it: librdkafka takes the options as given
    /// (this build has TLS and SCRAM); a wrong option is refused by name.
    #[test]
    fn sasl_and_tls_options_pass_through_to_librdkafka() {
        let secure = with(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "s3cret"),
            ("ssl.ca.location", "probe"),
            ("ssl.endpoint.identification.algorithm", "https"),
        ]);
        let c = secure.client(&[]);
        assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(c.get("sasl.mechanisms"), Some("SCRAM-SHA-512"));
        KafkaTransport::connect(secure).map(|_| ()).unwrap();
        let plain = with(&[("security.protocol", "SASL_PLAINTEXT"), ("sasl.mechanisms", "PLAIN"), ("sasl.username", "a"), ("sasl.password", "b")]);
        KafkaTransport::connect(plain).map(|_| ()).unwrap();
        let wrong = KafkaTransport::connect(with(&[("security.protocol", "SASL_SSL"), ("sasl.mechanismz", "PLAIN")]));
        let e = wrong.err().expect("a misspelt option is refused").to_string();
        assert!(e.contains("sasl.mechanismz"), "{e}");
    }
}
