//! One streamrag process: the chosen stages on the chosen transport, sharing one live graph.
//! Each stage is built by its own constructor from its own config section
//! ([`streamrag_operators::stages`]); the node runs what they return and remembers, for each,
//! which topic it reads and where its position can be read, so "drained" needs no table.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Result};
use streamrag_operators::kg_writer::{KgWriter, LiveGraph};
use streamrag_operators::openie::OpenIe;
use streamrag_operators::query::QueryStage;
use streamrag_operators::resolve::Resolve;
use streamrag_operators::runtime::{self, Consumed, Operator, RunOptions};
use streamrag_operators::standing::readers::{ChangesWatcher, SubscriptionsReader};
use streamrag_operators::standing::Standing;
use streamrag_operators::stages::{OpenIeConfig, QueryConfig, ResolveConfig, Shared, SnapshotConfig, StageKind};
use streamrag_operators::transport::{connect, Output, Position, Subscription, Transport, TransportConfig};
use streamrag_operators::{snapshot, DataDir, Limits, Topics};
use streamrag_schemas::{decode, encode, Answer, Document, Query};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub transport: TransportConfig,
    pub data: DataDir,
    /// The stages this process runs (any order; they start in pipeline order).
    pub stages: Vec<StageKind>,
    pub topics: Topics,
    pub limits: Limits,
    pub group_prefix: String,
    pub openie: OpenIeConfig,
    pub resolve: ResolveConfig,
    pub snapshots: SnapshotConfig,
    pub query: QueryConfig,
}

impl NodeConfig {
    /// Every stage on the embedded transport under `data`, with the defaults.
    pub fn embedded(data: &std::path::Path) -> Self {
        NodeConfig {
            transport: TransportConfig::default(),
            data: DataDir::new(data),
            stages: StageKind::ALL.to_vec(),
            topics: Topics::default(),
            limits: Limits::default(),
            group_prefix: "streamrag".into(),
            openie: OpenIeConfig::default(),
            resolve: ResolveConfig::default(),
            snapshots: SnapshotConfig::default(),
            query: QueryConfig::default(),
        }
    }
}

/// No answer came in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer for {0} within {1:?}")]
pub struct AskTimeout(pub String, pub Duration);

/// Routes answers from the answers topic to whoever waits for a query id.
#[derive(Clone, Default)]
pub struct AnswerRouter {
    waiters: Arc<Mutex<HashMap<String, oneshot::Sender<Answer>>>>,
}

impl AnswerRouter {
    /// Registers interest in a query id; call before producing the query.
    pub fn wait_for(&self, query_id: &str) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().unwrap().insert(query_id.to_string(), tx);
        rx
    }

    /// Takes the waiter of a query id, if any.
    pub fn waiters_take(&self, query_id: &str) -> Option<oneshot::Sender<Answer>> {
        self.waiters.lock().unwrap().remove(query_id)
    }

    pub fn forget(&self, query_id: &str) {
        self.waiters.lock().unwrap().remove(query_id);
    }

    /// Consumes an answers subscription (made with `from_end`) until shutdown, handing each
    /// answer to its waiter.
    pub async fn run(self, mut sub: Subscription, mut shutdown: watch::Receiver<bool>) -> Result<()> {
        while !*shutdown.borrow() {
            let batch = tokio::select! {
                b = sub.next_batch(256, Duration::from_millis(200)) => b?,
                _ = shutdown.changed() => continue,
            };
            for r in batch {
                if let Ok(a) = decode::<Answer>(&r.payload) {
                    if let Some(tx) = self.waiters_take(&a.query_id) {
                        let _ = tx.send(a);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A stage this process runs: the topic it reads and where its position can be read.
struct Running {
    name: &'static str,
    input: String,
    consumed: Consumed,
}

/// A running node.
pub struct Node {
    pub config: NodeConfig,
    pub transport: Transport,
    /// The live graph, when this process runs the kg-writer or a query replica.
    pub graph: Option<LiveGraph>,
    /// Number of live documents after each persisted kg-writer batch.
    pub applied: watch::Receiver<usize>,
    pub answers: AnswerRouter,
    /// For a query replica that started from a snapshot: the offsets that snapshot reflected.
    pub started_from: Option<BTreeMap<String, i64>>,
    /// The query stage's retriever, when this node runs one (for in-process evaluation).
    pub retriever: Option<streamrag_operators::retrieve::Retriever>,
    /// The standing queries, when this node runs the query stage.
    pub standing: Option<Arc<Standing>>,
    /// The documents' text as the query stage's answerer reads it, when this node runs it.
    pub passages: Option<Arc<streamrag_operators::passages::Passages>>,
    running: Vec<Running>,
    shutdown: watch::Sender<bool>,
}

type Task = (String, JoinHandle<Result<()>>);

/// The tasks of a running node.
pub struct Tasks(Vec<Task>);

/// Starts operators and remembers what each one reads.
struct Starter {
    transport: Transport,
    opts: RunOptions,
    shutdown: watch::Receiver<bool>,
    tasks: Vec<Task>,
    running: Vec<Running>,
}

impl Starter {
    fn start<O: Operator + 'static>(&mut self, op: O) {
        self.running.push(Running { name: op.name(), input: op.input(), consumed: op.consumed() });
        let name = op.name().to_string();
        let fut = runtime::run(op, self.transport.clone(), self.opts.clone(), self.shutdown.clone());
        self.tasks.push((name, tokio::spawn(async move { fut.await.map_err(anyhow::Error::from) })));
    }
}

impl Node {
    pub async fn start(config: NodeConfig) -> Result<(Arc<Node>, Tasks)> {
        let mut kinds = config.stages.clone();
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            bail!("no stages to run");
        }
        let transport = connect(&config.transport, &config.topics, &config.data).await?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (mut shared, applied) = Shared::new(config.topics.clone(), config.limits.clone(), config.data.clone());
        let opts = RunOptions {
            group_prefix: config.group_prefix.clone(),
            dead_letter_topic: config.topics.dead_letters.clone(),
            max_batch: config.limits.max_batch,
            ..RunOptions::default()
        };
        let mut s = Starter { transport: transport.clone(), opts, shutdown: shutdown_rx.clone(), tasks: Vec::new(), running: Vec::new() };
        let mut retriever = None;
        let mut standing = None;
        let mut passages = None;
        for kind in &kinds {
            match kind {
                StageKind::OpenIe => s.start(OpenIe::build(&config.openie, &mut shared).await?),
                StageKind::Resolve => s.start(Resolve::build(&config.resolve, &shared).await?),
                StageKind::KgWriter => {
                    let writer = KgWriter::build(&mut shared).await?;
                    // with only a bucket, the snapshots are staged under the data directory
                    let dir = config.snapshots.dir.clone().or_else(|| config.snapshots.url.as_ref().map(|_| config.data.root().join("snapshots")));
                    if let (Some(dir), Some(every)) = (dir, config.snapshots.every) {
                        let g = writer.graph.clone();
                        let bucket = config.snapshots.url.as_deref().map(streamrag_operators::bucket::SnapshotBucket::open).transpose()?.map(Arc::new);
                        let fut = snapshot::periodic(g, dir, every, config.snapshots.keep, bucket, shutdown_rx.clone());
                        s.tasks.push((
                            "snapshots".into(),
                            tokio::spawn(async move {
                                fut.await;
                                Ok(())
                            }),
                        ));
                    }
                    s.start(writer);
                }
                StageKind::Query => {
                    if shared.graph.is_none() {
                        // A query replica: its own in-memory graph from a snapshot and the
                        // graph-deltas topic, under a group of its own.
                        s.start(KgWriter::replica(&config.snapshots, &mut shared).await?);
                    }
                    let (stage, readers, facts) = QueryStage::build(&config.query, &mut shared).await?;
                    retriever = Some(stage.retriever.clone());
                    passages = Some(stage.answerer.passages.clone());
                    // standing queries answer with the same retriever and answerer, after the
                    // passage indexes read what the graph holds
                    let mut indexes: Vec<(String, Consumed)> = readers.iter().map(|r| (r.input(), r.consumed())).collect();
                    indexes.extend(facts.iter().map(|f| (f.input(), f.consumed())));
                    let st = Arc::new(Standing::open(
                        &config.data.standing_path(),
                        stage.graph.clone(),
                        stage.retriever.clone(),
                        stage.answerer.clone(),
                        config.topics.clone(),
                        transport.clone(),
                        indexes,
                    )?);
                    let from = transport.end_offsets(&config.topics.graph_changes).await?;
                    s.start(SubscriptionsReader::new(st.clone(), config.limits.clone()));
                    s.start(ChangesWatcher::new(st.clone(), from).with_batch(config.query.standing_batch));
                    standing = Some(st);
                    for r in readers {
                        s.start(r);
                    }
                    if let Some(f) = facts {
                        s.start(f);
                    }
                    s.start(stage);
                }
            }
        }
        let answers = AnswerRouter::default();
        let group = format!("{}.answers-{}-{}", config.group_prefix, std::process::id(), streamrag_operators::transport::now_ms());
        let sub = transport.subscribe(&group, &config.topics.answers, true).await?;
        s.tasks.push(("answer-router".into(), tokio::spawn(answers.clone().run(sub, shutdown_rx.clone()))));
        let node = Node {
            config,
            transport,
            graph: shared.graph,
            applied,
            answers,
            started_from: shared.started_from,
            retriever,
            standing,
            passages,
            running: s.running,
            shutdown,
        };
        Ok((Arc::new(node), Tasks(s.tasks)))
    }

    /// The stages this process runs, by name.
    pub fn stage_names(&self) -> Vec<&'static str> {
        self.running.iter().map(|r| r.name).collect()
    }

    /// Publishes documents onto the docs topic (keyed by id); returns when acknowledged.
    pub async fn publish_documents(&self, docs: &[Document]) -> Result<Vec<Position>> {
        let outs: Vec<Output> = docs
            .iter()
            .map(|d| Output { topic: self.config.topics.docs.clone(), key: d.id.clone(), payload: encode(d) })
            .collect();
        Ok(self.transport.produce(&outs).await?)
    }

    /// Publishes a query and waits up to `timeout` for its answer on the answers topic.
    pub async fn ask(&self, query: &Query, timeout: Duration) -> Result<Answer> {
        let rx = self.answers.wait_for(&query.query_id);
        let out = Output { topic: self.config.topics.queries.clone(), key: query.query_id.clone(), payload: encode(query) };
        if let Err(e) = self.transport.produce(&[out]).await {
            self.answers.forget(&query.query_id);
            return Err(anyhow::anyhow!("could not publish the query: {e}"));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(a)) => Ok(a),
            _ => {
                self.answers.forget(&query.query_id);
                Err(AskTimeout(query.query_id.clone(), timeout).into())
            }
        }
    }

    /// Asks every task to stop; [`Tasks::join`] waits for them.
    pub fn request_stop(&self) {
        let _ = self.shutdown.send(true);
    }

    /// A receiver that turns true when the node shuts down.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Whether every stage of this process has consumed everything on its input topic
    /// (embedded transport only; Kafka reports `false`).
    pub fn drained(&self) -> Result<bool> {
        let Transport::Embedded(log) = &self.transport else { return Ok(false) };
        for r in &self.running {
            let done = match &r.consumed {
                Consumed::Group => log.committed(&format!("{}.{}", self.config.group_prefix, r.name), &r.input)?.unwrap_or(0),
                Consumed::Own(position) => position().get(&0).copied().unwrap_or(0),
            };
            if done < log.end_offset(&r.input)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Waits until [`Node::drained`] holds (embedded) or `timeout` passes.
    pub async fn wait_drained(&self, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.drained()? {
            if tokio::time::Instant::now() > deadline {
                bail!("the pipeline did not drain within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

impl Tasks {
    /// Resolves when any task ends (normally only on shutdown or a fatal error).
    pub async fn wait_any(&mut self) -> Result<()> {
        if self.0.is_empty() {
            return std::future::pending().await;
        }
        let handles: Vec<_> = self.0.iter_mut().map(|(_, h)| h).collect();
        let (res, i, _) = futures::future::select_all(handles).await;
        let name = self.0.remove(i).0;
        match res {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.context(format!("stage {name} failed"))),
            Err(e) => Err(anyhow::anyhow!("stage {name} panicked: {e}")),
        }
    }

    /// Stops the node's tasks, waits for them and flushes the embedded log.
    pub async fn join(self, node: &Node) -> Result<()> {
        node.request_stop();
        for (name, h) in self.0 {
            match h.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(stage = %name, error = %e, "stage ended with an error"),
                Err(e) => tracing::error!(stage = %name, error = %e, "stage panicked"),
            }
        }
        if let Transport::Embedded(log) = &node.transport {
            log.flush()?;
        }
        Ok(())
    }
}
