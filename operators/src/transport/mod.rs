//! The two transports. Both give the same delivery contract: records of one partition arrive in
//! order; a consumer group's position moves only when the stage commits, which it does after
//! its outputs were acknowledged (at-least-once); produced records are durable when acknowledged.

pub mod embedded;
pub mod kafka;

use std::time::Duration;

use crate::error::TransportError;

/// A consumed record, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    /// Milliseconds since the epoch, as the log stamped it.
    pub timestamp_ms: i64,
}

impl Record {
    pub fn key_str(&self) -> Option<String> {
        self.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned())
    }
}

/// A record to produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub topic: String,
    pub key: String,
    pub payload: Vec<u8>,
}

/// Where a produced record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub partition: i32,
    pub offset: i64,
}

/// Which transport a process uses: Kafka when brokers are given, else the embedded log of its
/// data directory.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportConfig {
    /// Kafka bootstrap servers; None: the embedded transport.
    pub brokers: Option<String>,
    /// Raw librdkafka options (SASL, TLS...).
    pub kafka_options: Vec<(String, String)>,
    /// Partitions of the Kafka topics this process creates.
    pub partitions: i32,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig { brokers: None, kafka_options: Vec::new(), partitions: 1 }
    }
}

/// Why no transport could be had.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("creating the topics: {0}")]
    Topics(TransportError),
    #[error(transparent)]
    Open(#[from] crate::data_dir::OpenError),
}

/// Connects the transport `cfg` names: Kafka (creating missing topics), or the embedded log
/// under `data`.
pub async fn connect(cfg: &TransportConfig, topics: &crate::Topics, data: &crate::DataDir) -> Result<Transport, ConnectError> {
    Ok(match &cfg.brokers {
        Some(b) => connect_kafka(b, cfg, topics).await?,
        None => Transport::Embedded(data.open_log()?),
    })
}

/// Connects to the Kafka cluster at `brokers` with `cfg`'s options, creating missing topics.
pub async fn connect_kafka(brokers: &str, cfg: &TransportConfig, topics: &crate::Topics) -> Result<Transport, ConnectError> {
    let mut kc = kafka::KafkaConfig::new(brokers.to_string());
    kc.partitions = cfg.partitions;
    kc.options = cfg.kafka_options.iter().cloned().collect();
    let t = kafka::KafkaTransport::connect(kc)?;
    t.ensure_topics(&topics.all(), &topics.compacted()).await.map_err(ConnectError::Topics)?;
    Ok(Transport::Kafka(t))
}

/// The transport a process runs on, chosen once at start-up.
#[derive(Clone)]
pub enum Transport {
    Embedded(embedded::EmbeddedLog),
    Kafka(kafka::KafkaTransport),
}

impl Transport {
    /// Produces records in order and returns when every one is acknowledged (durable).
    pub async fn produce(&self, outputs: &[Output]) -> Result<Vec<Position>, TransportError> {
        match self {
            Transport::Embedded(t) => t.produce(outputs).await,
            Transport::Kafka(t) => t.produce(outputs).await,
        }
    }

    /// Joins `group` on `topic`. `from_end`: a fresh group starts at the end of the log
    /// rather than the beginning (for request/response clients).
    pub async fn subscribe(&self, group: &str, topic: &str, from_end: bool) -> Result<Subscription, TransportError> {
        Ok(match self {
            Transport::Embedded(t) => Subscription::Embedded(t.subscribe(group, topic, from_end)?),
            Transport::Kafka(t) => Subscription::Kafka(t.subscribe(group, topic, from_end).await?),
        })
    }

    /// Reads `topic` with no consumer group, from explicit positions: `from` maps a partition
    /// to the next offset to read; partitions not in it start at the beginning. Commits are
    /// no-ops: the reader keeps its position in its own state.
    pub async fn assign(&self, topic: &str, from: &std::collections::BTreeMap<i32, i64>) -> Result<Subscription, TransportError> {
        Ok(match self {
            Transport::Embedded(t) => Subscription::Embedded(t.assign(topic, from)),
            Transport::Kafka(t) => Subscription::Kafka(t.assign(topic, from).await?),
        })
    }

    /// The next offset each partition of `topic` will get (the high watermarks).
    pub async fn end_offsets(&self, topic: &str) -> Result<std::collections::BTreeMap<i32, i64>, TransportError> {
        match self {
            Transport::Embedded(t) => Ok([(0, t.end_offset(topic)?)].into()),
            Transport::Kafka(t) => t.end_offsets(topic).await,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Transport::Embedded(_) => "embedded",
            Transport::Kafka(_) => "kafka",
        }
    }
}

/// A consumer group member on one topic.
pub enum Subscription {
    Embedded(embedded::EmbeddedSubscription),
    Kafka(kafka::KafkaSubscription),
}

impl Subscription {
    /// Waits up to `wait` for the first record, then takes what is ready, up to `max`.
    pub async fn next_batch(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, TransportError> {
        match self {
            Subscription::Embedded(s) => s.next_batch(max, wait).await,
            Subscription::Kafka(s) => s.next_batch(max, wait).await,
        }
    }

    /// Records between `next` (partition -> next offset to read) and the end of each of those
    /// partitions, from what the client already knows (no broker round trip on Kafka: the
    /// watermarks its fetches cached). None when the client knows nothing yet.
    pub fn lag(&self, next: &std::collections::BTreeMap<i32, i64>) -> Option<i64> {
        match self {
            Subscription::Embedded(s) => {
                let end = s.log.end_offset(&s.topic).ok()?;
                Some(next.values().map(|n| (end - n).max(0)).sum())
            }
            Subscription::Kafka(s) => {
                let mut lag = 0;
                for (p, n) in next {
                    let (_, high) = s.cached_watermarks(*p)?;
                    lag += (high - n).max(0);
                }
                Some(lag)
            }
        }
    }

    /// Marks every record of `batch` done: the group resumes after them.
    pub async fn commit(&mut self, batch: &[Record]) -> Result<(), TransportError> {
        match self {
            Subscription::Embedded(s) => s.commit(batch),
            Subscription::Kafka(s) => s.commit(batch),
        }
    }
}

/// The highest offset per partition in a batch (batches are in order per partition).
pub fn last_offsets(batch: &[Record]) -> std::collections::BTreeMap<(String, i32), i64> {
    let mut out = std::collections::BTreeMap::new();
    for r in batch {
        let e = out.entry((r.topic.clone(), r.partition)).or_insert(r.offset);
        *e = (*e).max(r.offset);
    }
    out
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
