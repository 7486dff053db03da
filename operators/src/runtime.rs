//! The operator runtime: consume a batch -> process -> produce outputs and dead letters ->
//! wait for the acknowledgements -> commit the batch. A stage is an [`Operator`]; the loop is
//! the same on both transports.

use std::future::Future;
use std::time::Duration;

use streamrag_schemas::{encode, DeadLetter, SourceRef, SCHEMA_VERSION};
use tokio::sync::watch;

use crate::error::{StageError, TransportError};
use crate::transport::{now_ms, Output, Record, Transport};

/// What processing one record gave: outputs to produce, or an error for the dead-letter topic.
pub type Outcome = Result<Vec<Output>, StageError>;

/// One stage of the pipeline.
pub trait Operator: Send {
    /// The stage's name: its consumer group suffix, its log and dead-letter label.
    fn name(&self) -> &'static str;

    /// The topic the stage consumes.
    fn input(&self) -> String;

    /// Processes a batch of records, in order, giving one outcome per record. A failing record
    /// must not affect the others. An `Err` is a failure of the stage itself (its store): the
    /// batch is not committed and the stage stops, to resume from its last commit.
    fn process_batch(&mut self, batch: &[Record]) -> impl Future<Output = Result<Vec<Outcome>, TransportError>> + Send;

    /// Called after a batch's outputs were acknowledged and its offsets committed (with an
    /// empty batch after the recovered outputs were acknowledged).
    fn after_commit(&mut self, _batch: &[Record]) {}

    /// Where to start reading: the consumer group's committed position (default), or the
    /// positions the operator keeps in its own state.
    fn start_from(&self) -> StartFrom {
        StartFrom::Group
    }

    /// Outputs a previous run stored but may not have published (an outbox); produced once
    /// at start, before any input.
    fn recover_outputs(&mut self) -> Vec<Output> {
        Vec::new()
    }
}

/// Where a stage starts reading its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartFrom {
    /// The consumer group `<prefix>.<stage>`: positions committed by the transport.
    Group,
    /// Explicit positions (partition -> next offset; others from the beginning), no group.
    Offsets(std::collections::BTreeMap<i32, i64>),
}

/// How a stage is run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Consumer group prefix; the group is `<prefix>.<stage>`.
    pub group_prefix: String,
    pub dead_letter_topic: String,
    pub max_batch: usize,
    /// How long to wait for input before looking at the shutdown signal again.
    pub poll: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            group_prefix: "streamrag".into(),
            dead_letter_topic: "streamrag.dead-letters".into(),
            max_batch: 256,
            poll: Duration::from_millis(200),
        }
    }
}

/// Runs CPU-heavy work (model passes) without stalling the other tasks of a multi-threaded
/// runtime; inline elsewhere.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Builds the dead-letter record of a failed input record.
pub fn dead_letter(stage: &str, record: &Record, error: &StageError, topic: &str) -> Output {
    let dl = DeadLetter {
        schema_version: SCHEMA_VERSION,
        stage: stage.to_string(),
        source: SourceRef { topic: record.topic.clone(), partition: record.partition, offset: record.offset, timestamp_ms: None },
        reason: error.message.clone(),
        error_kind: error.kind,
        key: record.key_str(),
        payload_base64: DeadLetter::encode_payload(&record.payload),
        timestamp_ms: now_ms(),
    };
    Output { topic: topic.to_string(), key: record.key_str().unwrap_or_default(), payload: encode(&dl) }
}

/// Runs `op` until `shutdown` turns true. Returns an error only when the transport fails; a
/// bad record never stops the loop.
pub async fn run<O: Operator>(
    mut op: O,
    transport: Transport,
    opts: RunOptions,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), TransportError> {
    let group = format!("{}.{}", opts.group_prefix, op.name());
    let mut sub = match op.start_from() {
        StartFrom::Group => transport.subscribe(&group, &op.input(), false).await?,
        StartFrom::Offsets(from) => transport.assign(&op.input(), &from).await?,
    };
    let recovered = op.recover_outputs();
    if !recovered.is_empty() {
        tracing::info!(stage = op.name(), records = recovered.len(), "publishing recovered outputs");
        transport.produce(&recovered).await?;
        op.after_commit(&[]);
    }
    tracing::info!(stage = op.name(), group = %group, input = %op.input(), transport = transport.name(), "stage started");
    let metrics = crate::metrics::global().stage(op.name());
    // Partition -> next offset to read, for the consumer-lag gauge (measured at most once a second).
    let mut next: std::collections::BTreeMap<i32, i64> = std::collections::BTreeMap::new();
    let mut lag_at = std::time::Instant::now() - Duration::from_secs(2);
    loop {
        if *shutdown.borrow() {
            break;
        }
        let batch = tokio::select! {
            b = sub.next_batch(opts.max_batch, opts.poll) => b?,
            _ = shutdown.changed() => continue,
        };
        if batch.is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        let span = tracing::debug_span!("batch", stage = op.name(), records = batch.len(), partition = batch[0].partition, first_offset = batch[0].offset);
        metrics.records_in.fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let outcomes = tracing::Instrument::instrument(op.process_batch(&batch), span).await?;
        debug_assert_eq!(outcomes.len(), batch.len());
        let mut outputs = Vec::new();
        for (record, outcome) in batch.iter().zip(outcomes) {
            match outcome {
                Ok(outs) => {
                    metrics.records_out.fetch_add(outs.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    outputs.extend(outs)
                }
                Err(e) => {
                    metrics.dead_lettered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!(stage = op.name(), topic = %record.topic, partition = record.partition,
                        offset = record.offset, kind = ?e.kind, reason = %e.message, "record dead-lettered");
                    outputs.push(dead_letter(op.name(), record, &e, &opts.dead_letter_topic));
                }
            }
        }
        transport.produce(&outputs).await?;
        sub.commit(&batch).await?;
        op.after_commit(&batch);
        metrics.batch_seconds.observe(started.elapsed().as_secs_f64());
        for r in &batch {
            next.insert(r.partition, r.offset + 1);
        }
        if lag_at.elapsed() >= Duration::from_secs(1) {
            lag_at = std::time::Instant::now();
            if let Some(lag) = sub.lag(&next) {
                metrics.lag.store(lag, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    tracing::info!(stage = op.name(), "stage stopped");
    Ok(())
}
