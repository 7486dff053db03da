//! The operator runtime: consume a batch -> process -> produce outputs and dead letters ->
//! wait for the acknowledgements -> commit the batch. A stage is an [`Operator`]; the loop is
//! the same on both transports.

use std::future::Future;
use std::time::Duration;

use streamrag_schemas::{encode, DeadLetter, SourceRef, SCHEMA_VERSION};
use tokio::sync::watch;

use crate::error::{StageError, StageFault};
use crate::transport::{now_ms, Output, Record, Subscription, Transport};

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
    fn process_batch(&mut self, batch: &[Record]) -> impl Future<Output = Result<Vec<Outcome>, StageFault>> + Send;

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

    /// How far the stage has consumed its input, readable while it runs (whoever waits for
    /// the pipeline to drain asks it). Stages that start from their own positions
    /// ([`StartFrom::Offsets`]) keep them and say so here.
    fn consumed(&self) -> Consumed {
        Consumed::Group
    }

    /// Most records per batch, where the stage wants fewer than the node's `max_batch` (a
    /// batch is never cut short, so a stage whose records are slow keeps its batches short
    /// enough to stop promptly on shutdown).
    fn max_batch(&self) -> Option<usize> {
        None
    }
}

/// Where a running stage's consumed position can be read.
#[derive(Clone)]
pub enum Consumed {
    /// The consumer group `<prefix>.<stage>` commits it.
    Group,
    /// The stage keeps it: partition -> next offset to read.
    Own(std::sync::Arc<dyn Fn() -> std::collections::BTreeMap<i32, i64> + Send + Sync>),
}

/// The next offset per partition a stage that keeps its own position has consumed, readable
/// while it runs ([`Consumed::Own`]).
#[derive(Clone, Default)]
pub struct Progress(std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<i32, i64>>>);

impl Progress {
    /// Starting at `from` (partition -> next offset).
    pub fn at(from: std::collections::BTreeMap<i32, i64>) -> Self {
        Progress(std::sync::Arc::new(std::sync::Mutex::new(from)))
    }
    pub fn get(&self) -> std::collections::BTreeMap<i32, i64> {
        self.0.lock().expect("progress lock").clone()
    }
    /// Where it stands once `batch` is consumed (not yet recorded: a stage that commits its
    /// position with its data records it with [`Self::set`] after the commit).
    pub fn after(&self, batch: &[Record]) -> std::collections::BTreeMap<i32, i64> {
        let mut next = self.get();
        for r in batch {
            next.insert(r.partition, r.offset + 1);
        }
        next
    }
    pub fn set(&self, next: std::collections::BTreeMap<i32, i64>) {
        *self.0.lock().expect("progress lock") = next;
    }
    /// Records `batch` as consumed.
    pub fn advance(&self, batch: &[Record]) {
        self.set(self.after(batch));
    }
    pub fn consumed(&self) -> Consumed {
        let p = self.clone();
        Consumed::Own(std::sync::Arc::new(move || p.get()))
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
) -> Result<(), StageFault> {
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
    let max_batch = op.max_batch().map_or(opts.max_batch, |m| m.clamp(1, opts.max_batch));
    loop {
        if *shutdown.borrow() {
            break;
        }
        let batch = tokio::select! {
            b = sub.next_batch(max_batch, opts.poll) => b?,
            _ = shutdown.changed() => continue,
        };
        if batch.is_empty() {
            // idle: the gauge still follows the topic (it kept the lag measured after an earlier
            // batch when the last ones came within the second)
            refresh_lag(&sub, &next, &mut lag_at, &metrics.lag);
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
        let producing = std::time::Instant::now();
        transport.produce(&outputs).await?;
        metrics.produce_seconds.observe(producing.elapsed().as_secs_f64());
        sub.commit(&batch).await?;
        op.after_commit(&batch);
        metrics.batch_seconds.observe(started.elapsed().as_secs_f64());
        for r in &batch {
            next.insert(r.partition, r.offset + 1);
        }
        refresh_lag(&sub, &next, &mut lag_at, &metrics.lag);
    }
    tracing::info!(stage = op.name(), "stage stopped");
    Ok(())
}

/// Sets the consumer-lag gauge from `next` (partition -> next offset to read), at most once a
/// second, and not before the stage has read anything.
fn refresh_lag(sub: &Subscription, next: &std::collections::BTreeMap<i32, i64>, at: &mut std::time::Instant, gauge: &std::sync::atomic::AtomicI64) {
    if next.is_empty() || at.elapsed() < Duration::from_secs(1) {
        return;
    }
    *at = std::time::Instant::now();
    if let Some(lag) = sub.lag(next) {
        gauge.store(lag, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::transport::embedded::EmbeddedLog;

    /// Copies each record to `out`; a record "bad" is refused.
    struct Copy {
        commits: Arc<AtomicUsize>,
    }

    impl Operator for Copy {
        fn name(&self) -> &'static str {
            "copy"
        }
        fn input(&self) -> String {
            "in".into()
        }
        async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
            Ok(batch
                .iter()
                .map(|r| match r.payload.as_slice() {
                    b"bad" => Err(StageError::user("bad record")),
                    p => Ok(vec![Output { topic: "out".into(), key: String::new(), payload: p.to_vec() }]),
                })
                .collect())
        }
        fn after_commit(&mut self, _batch: &[Record]) {
            self.commits.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn opts() -> RunOptions {
        RunOptions { poll: Duration::from_millis(20), dead_letter_topic: "dl".into(), ..RunOptions::default() }
    }

    /// Runs `op` until `until` holds or it fails; returns how it ended.
    async fn run_until(log: &EmbeddedLog, op: Copy, until: impl Fn(&EmbeddedLog) -> bool) -> Result<(), StageFault> {
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(run(op, Transport::Embedded(log.clone()), opts(), rx));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !task.is_finished() && !until(log) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = stop.send(true);
        task.await.expect("the stage does not panic")
    }

    #[tokio::test]
    async fn a_failed_produce_commits_nothing_and_the_batch_comes_again() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(dir.path()).unwrap();
        let input = |p: &str| Output { topic: "in".into(), key: String::new(), payload: p.as_bytes().to_vec() };
        log.produce(&[input("a"), input("bad"), input("b")]).await.unwrap();

        log.fail_produce_to(Some("out"));
        let commits = Arc::new(AtomicUsize::new(0));
        let ended = run_until(&log, Copy { commits: commits.clone() }, |_| false).await;
        assert!(matches!(ended, Err(StageFault::Transport(_))), "the stage stops on a failed produce: {ended:?}");
        assert_eq!(log.committed("streamrag.copy", "in").unwrap(), None, "nothing committed");
        assert_eq!(commits.load(Ordering::SeqCst), 0, "after_commit never ran");
        assert_eq!((log.end_offset("out").unwrap(), log.end_offset("dl").unwrap()), (0, 0), "nothing of the batch went out");

        // The broker is back: the same records are processed again, produced, then committed.
        log.fail_produce_to(None);
        let done = |l: &EmbeddedLog| l.committed("streamrag.copy", "in").unwrap() == Some(3);
        run_until(&log, Copy { commits: commits.clone() }, done).await.unwrap();
        assert_eq!(log.committed("streamrag.copy", "in").unwrap(), Some(3));
        let out: Vec<Vec<u8>> = log.read("out", 0, 10).unwrap().into_iter().map(|r| r.payload).collect();
        assert_eq!(out, vec![b"a".to_vec(), b"b".to_vec()], "each good record once, in order");
        assert_eq!(log.end_offset("dl").unwrap(), 1, "the bad one dead-lettered, not stopping the stage");
        assert!(commits.load(Ordering::SeqCst) >= 1);
    }
}
