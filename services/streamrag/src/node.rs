//! One streamrag process: the chosen stages on the chosen transport, sharing one live graph.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use streamrag_glm::SentenceEncoder;
use streamrag_operators::dense::{DenseIndex, DenseIndexer};
use streamrag_operators::glm_retriever::{default_device, GlmRetriever};
use streamrag_operators::graph::{GraphState, GraphStore};
use streamrag_operators::kg_writer::{KgWriter, LiveGraph};
use streamrag_operators::openie::{Extractor, OpenIe};
use streamrag_operators::query::{QueryStage, Retriever};
use streamrag_operators::answer::{Answerer, PassageKeeper, Passages};
use streamrag_operators::llm::{Llm, LlmSettings};
use streamrag_operators::llm_extract::{open_cache, LlmExtractor};
use streamrag_operators::resolve::{open_store, EntityResolver, Resolve};
use streamrag_operators::snapshot::{self, NoProgress};
use streamrag_operators::runtime::{self, RunOptions};
use streamrag_operators::transport::embedded::EmbeddedLog;
use streamrag_operators::transport::kafka::{KafkaConfig, KafkaTransport};
use streamrag_operators::transport::{Output, Position, Subscription, Transport};
use streamrag_operators::{Limits, Topics};
use streamrag_schemas::{decode, encode, Answer, Document, Query};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// The stages, in pipeline order.
pub const STAGES: [&str; 4] = ["openie", "resolve", "kg-writer", "query"];

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Kafka bootstrap servers; None: the embedded transport under `data`.
    pub brokers: Option<String>,
    pub kafka_options: Vec<(String, String)>,
    pub partitions: i32,
    pub data: PathBuf,
    pub stages: Vec<String>,
    pub topics: Topics,
    pub limits: Limits,
    pub group_prefix: String,
    /// Where periodic snapshots go (kg-writer) or come from (query replica).
    pub snapshot_dir: Option<PathBuf>,
    /// How often the kg-writer writes a snapshot; None: never.
    pub snapshot_every: Option<Duration>,
    /// Periodic snapshots kept (older ones are removed).
    pub snapshot_keep: usize,
    /// What the query stage retrieves with.
    pub retriever: RetrieverChoice,
    /// The LLM that extracts triples (openie); None: the built-in extractor.
    pub extract_llm: Option<LlmSettings>,
    /// The LLM that writes answers (query); None: retrieval only.
    pub answer_llm: Option<LlmSettings>,
    /// Entity resolution by name embeddings with this sentence encoder (all-MiniLM-L6-v2
    /// directory); None: by normalised name only.
    pub resolve_model: Option<PathBuf>,
    /// Cosine at or above which a new name joins an existing entity.
    pub resolve_threshold: f32,
}

/// The query stage's retriever.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum RetrieverChoice {
    /// Personalized PageRank over the entity graph.
    #[default]
    Ppr,
    /// The GLM, from a checkpoint `streamrag train` wrote; `batch`: graphs per forward pass.
    Glm { checkpoint: PathBuf, batch: usize },
    /// Passage embeddings with the sentence encoder in this directory (all-MiniLM-L6-v2).
    Dense { model: PathBuf },
}

impl RetrieverChoice {
    /// From `--retriever NAME` and its companions: glm needs a checkpoint (and is the default
    /// when one is given), dense takes the sentence encoder (default the MiniLM directory).
    pub fn from_flags(name: Option<&str>, checkpoint: Option<PathBuf>, batch: usize, model: Option<PathBuf>) -> Result<Self> {
        Ok(match (name, checkpoint) {
            (None | Some("glm"), Some(checkpoint)) => RetrieverChoice::Glm { checkpoint, batch },
            (Some("glm"), None) => bail!("--retriever glm needs --checkpoint (a directory `streamrag train` wrote)"),
            (None | Some("ppr"), None) => RetrieverChoice::Ppr,
            (Some("dense"), None) => RetrieverChoice::Dense { model: model.unwrap_or_else(crate::retrieval_cmd::default_minilm_dir) },
            (Some(r), Some(_)) if r != "glm" => bail!("--checkpoint is for --retriever glm, not {r}"),
            (Some(r), _) => bail!("--retriever {r}: ppr, glm or dense"),
        })
    }
}

impl NodeConfig {
    pub fn embedded(data: &Path) -> Self {
        NodeConfig {
            brokers: None,
            kafka_options: vec![],
            partitions: 1,
            data: data.to_path_buf(),
            stages: STAGES.iter().map(|s| s.to_string()).collect(),
            topics: Topics::default(),
            limits: Limits::default(),
            group_prefix: "streamrag".into(),
            snapshot_dir: None,
            snapshot_every: None,
            snapshot_keep: 3,
            retriever: RetrieverChoice::Ppr,
            extract_llm: None,
            answer_llm: None,
            resolve_model: None,
            resolve_threshold: 0.8,
        }
    }
}

/// Connects the transport a config names (and creates missing Kafka topics).
pub async fn connect(cfg: &NodeConfig) -> Result<Transport> {
    Ok(match &cfg.brokers {
        Some(b) => {
            let mut kc = KafkaConfig::new(b.clone());
            kc.partitions = cfg.partitions;
            kc.options = cfg.kafka_options.iter().cloned().collect();
            let t = KafkaTransport::connect(kc)?;
            t.ensure_topics(&cfg.topics.all()).await.context("creating topics")?;
            Transport::Kafka(t)
        }
        None => {
            std::fs::create_dir_all(&cfg.data).with_context(|| format!("creating {}", cfg.data.display()))?;
            Transport::Embedded(EmbeddedLog::open(&cfg.data.join("log"))?)
        }
    })
}

type Task = (String, JoinHandle<Result<()>>);

fn stage(name: &str, fut: impl std::future::Future<Output = Result<(), streamrag_operators::error::TransportError>> + Send + 'static) -> Task {
    (name.to_string(), tokio::spawn(async move { fut.await.map_err(anyhow::Error::from) }))
}

/// Writes a snapshot of the live graph every `every` (when it changed), keeping the newest
/// `keep`. The graph version is immutable, so the writer is never blocked.
async fn periodic_snapshots(g: LiveGraph, root: PathBuf, every: Duration, keep: usize, mut shutdown: watch::Receiver<bool>) -> Result<()> {
    let mut last_digest = String::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return Ok(());
        }
        let version = g.current();
        let root2 = root.clone();
        let prev = std::mem::take(&mut last_digest);
        let (digest, res) = tokio::task::spawn_blocking(move || {
            let digest = version.stats().digest;
            if digest == prev {
                return (digest, Ok(None));
            }
            let res = snapshot::write_periodic(&version, &root2, &mut NoProgress)
                .map_err(anyhow::Error::from)
                .and_then(|out| prune_snapshots(&root2, keep).map(|_| Some(out)));
            (digest, res)
        })
        .await?;
        if res.is_ok() {
            last_digest = digest;
        }
        match res {
            Ok(Some((dir, m))) => tracing::info!(dir = %dir.display(), rows = ?m.rows, "snapshot written"),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "snapshot failed; will retry"),
        }
    }
}

/// Removes all but the newest `keep` periodic snapshots under `root`.
fn prune_snapshots(root: &Path, keep: usize) -> Result<()> {
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(root)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("snap-") && !n.contains(".tmp")))
        .collect();
    snaps.sort();
    let n = snaps.len().saturating_sub(keep.max(1));
    for old in &snaps[..n] {
        std::fs::remove_dir_all(old)?;
    }
    Ok(())
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
    pub started_from: Option<std::collections::BTreeMap<String, i64>>,
    /// The dense index, when the query stage retrieves with it.
    pub dense: Option<Arc<DenseIndex>>,
    /// The LLMs this process uses, by role (`extract`, `answer`): their calls and tokens.
    pub llms: Vec<(&'static str, Llm)>,
    /// The LLM extractor (its cache counters), when openie runs with one.
    pub extractor: Option<Arc<LlmExtractor>>,
    shutdown: watch::Sender<bool>,
}

/// The tasks of a running node.
pub struct Tasks(Vec<Task>);

impl Node {
    pub async fn start(config: NodeConfig) -> Result<(Arc<Node>, Tasks)> {
        for s in &config.stages {
            if !STAGES.contains(&s.as_str()) {
                bail!("unknown stage {s:?}; the stages are {}", STAGES.join(", "));
            }
        }
        let has = |s: &str| config.stages.iter().any(|x| x == s);
        let transport = connect(&config).await?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (applied_tx, applied) = watch::channel(0usize);
        let opts = RunOptions {
            group_prefix: config.group_prefix.clone(),
            dead_letter_topic: config.topics.dead_letters.clone(),
            max_batch: config.limits.max_batch,
            ..RunOptions::default()
        };
        let mut tasks: Vec<Task> = Vec::new();
        let mut graph = None;
        let mut started_from = None;
        if has("kg-writer") {
            let store = GraphStore::open(&config.data.join("graph"))
                .with_context(|| format!("opening the graph store under {}", config.data.display()))?;
            let state = store.load()?;
            tracing::info!(documents = state.document_count(), "graph loaded");
            let g = LiveGraph::new(state);
            graph = Some(g.clone());
            if let (Some(dir), Some(every)) = (&config.snapshot_dir, config.snapshot_every) {
                let fut = periodic_snapshots(g.clone(), dir.clone(), every, config.snapshot_keep, shutdown_rx.clone());
                tasks.push(("snapshots".into(), tokio::spawn(fut)));
            }
            let op = KgWriter::new(config.topics.clone(), g, Some(store), applied_tx);
            tasks.push(stage("kg-writer", runtime::run(op, transport.clone(), opts.clone(), shutdown_rx.clone())));
        } else if has("query") {
            // A query replica: its own in-memory graph from the graph-deltas topic, read from
            // the start under a group of its own. sled is single-process, so it never opens
            // the writer's database.
            let mut state = GraphState::new();
            if let Some(root) = &config.snapshot_dir {
                if let Some(dir) = snapshot::resolve(root)? {
                    let (s, m) = tokio::task::spawn_blocking(move || snapshot::read(&dir, &mut NoProgress)).await??;
                    tracing::info!(documents = s.document_count(), offsets = ?m.offsets, "query replica starts from a snapshot");
                    started_from = Some(m.offsets);
                    state = s;
                }
            }
            let g = LiveGraph::new(state);
            graph = Some(g.clone());
            let op = KgWriter::new(config.topics.clone(), g, None, applied_tx);
            tasks.push(stage("query-replica", runtime::run(op, transport.clone(), opts.clone(), shutdown_rx.clone())));
        }
        // LLMs: opened once per distinct setting (a local model loads once for both roles).
        let mut llms: Vec<(&'static str, Llm)> = Vec::new();
        let mut opened: Vec<(LlmSettings, Llm)> = Vec::new();
        for (role, s) in [("extract", config.extract_llm.as_ref().filter(|_| has("openie"))), ("answer", config.answer_llm.as_ref().filter(|_| has("query")))] {
            let Some(s) = s else { continue };
            let llm = match opened.iter().find(|(o, _)| o == s) {
                Some((_, l)) => l.for_role(),
                None => {
                    let s2 = s.clone();
                    let l = tokio::task::spawn_blocking(move || s2.open(&default_device()))
                        .await?
                        .map_err(|e| anyhow::anyhow!("opening the {role} LLM: {e}"))?;
                    opened.push((s.clone(), l.clone()));
                    l
                }
            };
            tracing::info!(role, model = %llm.model_id(), "LLM ready");
            llms.push((role, llm));
        }
        let role_llm = |role: &str| llms.iter().find(|(r, _)| *r == role).map(|(_, l)| l.clone());
        let mut extractor_stats = None;
        if has("openie") {
            let extractor = match role_llm("extract") {
                None => Extractor::Builtin,
                Some(llm) => {
                    let cache = open_cache(&config.data.join("llm-cache"))
                        .with_context(|| format!("opening the LLM cache under {}", config.data.display()))?;
                    let x = Arc::new(LlmExtractor::new(llm, Some(cache)));
                    extractor_stats = Some(x.clone());
                    Extractor::Llm(x)
                }
            };
            let op = OpenIe { topics: config.topics.clone(), limits: config.limits.clone(), extractor };
            tasks.push(stage("openie", runtime::run(op, transport.clone(), opts.clone(), shutdown_rx.clone())));
        }
        if has("resolve") {
            let resolver = match &config.resolve_model {
                None => None,
                Some(model) => {
                    let (model, threshold, dir) = (model.clone(), config.resolve_threshold, config.data.join("resolver"));
                    let r = tokio::task::spawn_blocking(move || -> Result<EntityResolver> {
                        let enc = SentenceEncoder::load(&model, &default_device()).map_err(|e| anyhow::anyhow!("loading the sentence encoder: {e}"))?;
                        let tree = open_store(&dir).with_context(|| format!("opening {}", dir.display()))?;
                        EntityResolver::open(enc, threshold, Some(tree)).map_err(|e| anyhow::anyhow!("loading the entity resolver: {e}"))
                    })
                    .await??;
                    tracing::info!(entities = r.entities(), threshold, "entity resolution by name embeddings");
                    Some(r)
                }
            };
            let op = Resolve { topics: config.topics.clone(), resolver };
            tasks.push(stage("resolve", runtime::run(op, transport.clone(), opts.clone(), shutdown_rx.clone())));
        }
        let mut dense = None;
        if has("query") {
            let retriever = match &config.retriever {
                RetrieverChoice::Ppr => Retriever::default(),
                RetrieverChoice::Glm { checkpoint, batch } => {
                    let (ckpt, batch) = (checkpoint.clone(), *batch);
                    let r = tokio::task::spawn_blocking(move || {
                        let device = default_device();
                        GlmRetriever::load(&ckpt, &device).map(|mut r| {
                            r.batch_size = batch.max(1);
                            (r, device)
                        })
                    })
                    .await?
                    .map_err(|e| anyhow::anyhow!("loading the GLM checkpoint: {e}"))?;
                    tracing::info!(checkpoint = %checkpoint.display(), device = ?r.1, budget = r.0.model.config.max_triplets, "query stage uses the GLM");
                    Retriever::Glm(Arc::new(r.0))
                }
                RetrieverChoice::Dense { model } => {
                    let m = model.clone();
                    let enc = tokio::task::spawn_blocking(move || SentenceEncoder::load(&m, &default_device()))
                        .await?
                        .map_err(|e| anyhow::anyhow!("loading the sentence encoder: {e}"))?;
                    let index = Arc::new(DenseIndex::new(enc));
                    dense = Some(index.clone());
                    let op = DenseIndexer { topics: config.topics.clone(), index: index.clone() };
                    tasks.push(stage("dense-index", runtime::run(op, transport.clone(), opts.clone(), shutdown_rx.clone())));
                    Retriever::Dense(index)
                }
            };
            // Answers need the passages' text, kept from the docs topic by a stage of its own.
            let answerer = role_llm("answer").map(|llm| {
                let passages = Arc::new(Passages::default());
                let keeper = PassageKeeper { topics: config.topics.clone(), passages: passages.clone() };
                tasks.push(stage("passages", runtime::run(keeper, transport.clone(), opts.clone(), shutdown_rx.clone())));
                Arc::new(Answerer::new(llm, passages))
            });
            let op = QueryStage {
                topics: config.topics.clone(),
                limits: config.limits.clone(),
                graph: graph.clone().expect("set above"),
                retriever,
                answerer,
            };
            tasks.push(stage("query", runtime::run(op, transport.clone(), opts.clone(), shutdown_rx.clone())));
        }
        let answers = AnswerRouter::default();
        let group = format!("{}.answers-{}-{}", config.group_prefix, std::process::id(), streamrag_operators::transport::now_ms());
        let sub = transport.subscribe(&group, &config.topics.answers, true).await?;
        let router = answers.clone().run(sub, shutdown_rx.clone());
        tasks.push(("answer-router".into(), tokio::spawn(router)));
        Ok((Arc::new(Node { config, transport, graph, applied, answers, started_from, dense, llms, extractor: extractor_stats, shutdown }), Tasks(tasks)))
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

    /// Whether every stage of this process has committed everything on its input topic
    /// (embedded transport only; Kafka reports `false`).
    pub fn drained(&self) -> Result<bool> {
        let Transport::Embedded(log) = &self.transport else { return Ok(false) };
        let t = &self.config.topics;
        for (stage, input) in [("openie", &t.docs), ("resolve", &t.triples), ("kg-writer", &t.graph_deltas), ("query", &t.queries)] {
            if !self.config.stages.iter().any(|s| s == stage) {
                continue;
            }
            // the kg-writer keeps its position with the graph, not in a consumer group
            let done = match (stage, &self.graph) {
                ("kg-writer", Some(g)) => g.current().resume_offsets(input).get(&0).copied().unwrap_or(0),
                _ => log.committed(&format!("{}.{}", self.config.group_prefix, stage), input)?.unwrap_or(0),
            };
            if done < log.end_offset(input)? {
                return Ok(false);
            }
        }
        if let Some(d) = &self.dense {
            if d.progress().get(&0).copied().unwrap_or(0) < log.end_offset(&t.docs)? {
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
