//! `streamrag`: run the pipeline, ingest documents, ask questions. Thin: parses arguments and
//! calls the library.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use streamrag::client::{self, Line, Target};
use streamrag::config::{self, FileConfig};
use streamrag_operators::llm::openai::ApiKeySource;
use streamrag_operators::llm::{LlmSettings, LlmSpec};
use streamrag::http::{self, ApiState};
use streamrag::node::{Node, NodeConfig, RetrieverChoice};
use streamrag::retrieval_cmd::{self, default_minilm_dir};
use streamrag::dataset::parse_range;
use streamrag::progress::Bar;
use streamrag::synth;
use std::collections::BTreeMap;
use streamrag_operators::graph::GraphStore;
use streamrag_operators::replay::{catch_up, parse_until};
use streamrag_operators::snapshot;
use streamrag_operators::transport::embedded::EmbeddedLog;
use streamrag_operators::transport::Transport;
use streamrag_operators::Limits;
use streamrag_schemas::Document;

#[derive(Parser)]
#[command(name = "streamrag", version, about = "Streaming graph RAG: documents on a topic in, answers on a topic out")]
struct Cli {
    /// Log level or filter (e.g. info, debug, streamrag_operators=debug).
    #[arg(long, global = true, env = "STREAMRAG_LOG", default_value = "info")]
    log_level: String,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true, env = "STREAMRAG_LOG_JSON")]
    log_json: bool,
    /// A TOML config file ([topics], [limits], [kafka]); flags and STREAMRAG_* variables win.
    #[arg(long, global = true, env = "STREAMRAG_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the pipeline's stages in this process (embedded transport unless --brokers).
    Run(Box<RunArgs>),
    /// Publish JSON-lines documents (or a deletion) onto the docs topic.
    Ingest(IngestArgs),
    /// Ask a question and print its answer.
    Ask(AskArgs),
    /// Print the graph's counts and digest from a data directory or a running process.
    Stats(StatsArgs),
    /// Write a Parquet snapshot of a stopped node's graph.
    Snapshot(SnapshotArgs),
    /// Rebuild a graph from a snapshot, then continue from its offsets through the log.
    Replay(ReplayArgs),
    /// Index the sample corpus shipped in samples/ on the embedded transport and answer the
    /// sample questions.
    Demo(DemoArgs),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// The Graph Language Model encoder.
    #[command(subcommand)]
    Glm(GlmCmd),
    /// Document recall of a retriever on a dataset: its corpus through the pipeline, its
    /// questions through the query stage.
    Eval(EvalArgs),
    /// Train the GLM retriever on a dataset's questions; writes (and resumes) a checkpoint.
    Train(TrainArgs),
}

#[derive(Args)]
struct EvalArgs {
    /// A dataset directory (HippoRAG / GFM-RAG layout, e.g. ../shared/datasets/2wikimultihopqa).
    #[arg(long)]
    dataset: PathBuf,
    /// glm, ppr or dense.
    #[arg(long, default_value = "ppr")]
    retriever: String,
    /// A checkpoint `streamrag train` wrote (for --retriever glm).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Question indices A..B (B exclusive); default all.
    #[arg(long, default_value = "0..")]
    questions: String,
    /// Write the JSON report here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Data directory for the pipeline (default: a temporary one, removed after).
    #[arg(long)]
    data: Option<PathBuf>,
    /// The sentence encoder (all-MiniLM-L6-v2 directory) of the dense retriever.
    #[arg(long)]
    sentence_model: Option<PathBuf>,
    /// Questions in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// GLM graphs per forward pass.
    #[arg(long, default_value_t = 4)]
    glm_batch: usize,
}

#[derive(Args)]
struct TrainArgs {
    #[arg(long)]
    dataset: PathBuf,
    /// Training question indices A..B (B exclusive).
    #[arg(long)]
    questions: String,
    /// Checkpoint directory; when it holds a checkpoint of the same run, training resumes.
    #[arg(long)]
    out: PathBuf,
    /// The graph encoder to start from: a Hugging Face BERT or T5 directory (default the
    /// all-MiniLM-L6-v2 that scripts/fetch-models.sh fetches).
    #[arg(long)]
    backbone: Option<PathBuf>,
    /// The question encoder (all-MiniLM-L6-v2 directory).
    #[arg(long)]
    question_model: Option<PathBuf>,
    #[arg(long)]
    data: Option<PathBuf>,
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    #[arg(long, default_value_t = 2)]
    batch_size: usize,
    #[arg(long, default_value_t = 5e-4)]
    lr_head: f64,
    #[arg(long, default_value_t = 1e-4)]
    lr_encoder: f64,
    /// Subgraph budget in triplets (the paper: 600).
    #[arg(long, default_value_t = 600)]
    max_triplets: usize,
    #[arg(long, default_value_t = 2)]
    max_hops: usize,
    /// Save a checkpoint every N steps (and after each epoch).
    #[arg(long, default_value_t = 50)]
    save_every: usize,
    /// cpu or cuda.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Stop after N steps in this run (the checkpoint resumes).
    #[arg(long)]
    max_steps: Option<usize>,
}

#[derive(Subcommand)]
enum GlmCmd {
    /// Print, as JSON, how a graph becomes the encoder's input: tokens (with their node),
    /// relative positions, mask, bucket ids; with --checkpoint, each entity's pooled vector.
    Inspect(GlmInspectArgs),
}

#[derive(Args)]
struct GlmInspectArgs {
    /// A Hugging Face tokenizer.json.
    #[arg(long)]
    tokenizer: PathBuf,
    /// A JSON list of [subject, relation, object] triplets.
    #[arg(long)]
    graph: PathBuf,
    /// The question text, attached to the graph.
    #[arg(long)]
    question: Option<String>,
    /// local: pairs that share no triplet are masked; global: they attend through the G2G bucket.
    #[arg(long, default_value = "global")]
    mode: streamrag_glm::Mode,
    /// A checkpoint directory (config.json + model.safetensors; T5 or BERT).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
}

#[derive(Args, Clone)]
struct Conn {
    /// Kafka bootstrap servers (host:port,...). Without it: the embedded transport.
    #[arg(long, env = "STREAMRAG_BROKERS")]
    brokers: Option<String>,
    /// Raw librdkafka option KEY=VALUE (SASL, TLS...), repeatable.
    #[arg(long = "kafka-option", value_parser = parse_kv)]
    kafka_options: Vec<(String, String)>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    conn: Conn,
    /// Data directory: the embedded log and the graph store.
    #[arg(long, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    data: PathBuf,
    /// Serve the HTTP API on this address (e.g. 127.0.0.1:8080; a bare port binds to 127.0.0.1).
    #[arg(long, env = "STREAMRAG_HTTP")]
    http: Option<String>,
    /// Comma-separated stages to run (default: all of openie,resolve,kg-writer,query).
    #[arg(long, env = "STREAMRAG_STAGES", value_delimiter = ',')]
    stages: Vec<String>,
    /// Partitions for topics this process creates on Kafka.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Largest accepted document text in bytes.
    #[arg(long, env = "STREAMRAG_MAX_TEXT_BYTES")]
    max_text_bytes: Option<usize>,
    /// Periodic snapshots: the kg-writer writes them here; a query replica starts from the
    /// newest one here.
    #[arg(long, env = "STREAMRAG_SNAPSHOT_DIR")]
    snapshot_dir: Option<PathBuf>,
    /// Seconds between periodic snapshots (with --snapshot-dir; 0: none).
    #[arg(long, env = "STREAMRAG_SNAPSHOT_EVERY_S", default_value_t = 300)]
    snapshot_every_s: u64,
    /// Periodic snapshots kept.
    #[arg(long, default_value_t = 3)]
    snapshot_keep: usize,
    /// The query stage's retriever: ppr, glm (needs --checkpoint) or dense. Default: glm when
    /// a checkpoint is given, else ppr.
    #[arg(long, env = "STREAMRAG_RETRIEVER")]
    retriever: Option<String>,
    /// A GLM checkpoint `streamrag train` wrote.
    #[arg(long, env = "STREAMRAG_GLM_CHECKPOINT")]
    checkpoint: Option<PathBuf>,
    /// GLM graphs per forward pass (concurrent queries share passes).
    #[arg(long, env = "STREAMRAG_GLM_BATCH")]
    glm_batch: Option<usize>,
    /// The sentence encoder of the dense retriever (all-MiniLM-L6-v2 directory).
    #[arg(long, env = "STREAMRAG_MINILM_DIR")]
    sentence_model: Option<PathBuf>,
    #[command(flatten)]
    llm: LlmArgs,
    /// Consumer-group prefix (groups are PREFIX.STAGE). A new prefix re-reads every topic from
    /// the start: a replay.
    #[arg(long, env = "STREAMRAG_GROUP_PREFIX")]
    group_prefix: Option<String>,
    /// Entity resolution by name embeddings with this sentence encoder (all-MiniLM-L6-v2
    /// directory). Default: by normalised name only.
    #[arg(long, env = "STREAMRAG_RESOLVE_MODEL")]
    resolve_model: Option<PathBuf>,
    /// Cosine at or above which a new name joins an existing entity (default 0.8).
    #[arg(long)]
    resolve_threshold: Option<f32>,
}

#[derive(Args, Clone, Default)]
struct LlmArgs {
    /// The LLM for extraction and answers: openai:MODEL or local:PATH.gguf.
    #[arg(long, env = "STREAMRAG_LLM")]
    llm: Option<String>,
    /// The extraction LLM only (overrides --llm for openie).
    #[arg(long)]
    extract_llm: Option<String>,
    /// The answering LLM only (overrides --llm for answers).
    #[arg(long)]
    answer_llm: Option<String>,
    /// The OpenAI-compatible endpoint for openai: models.
    #[arg(long, env = "STREAMRAG_LLM_BASE_URL")]
    llm_base_url: Option<String>,
    /// Environment variable holding the API key (default OPENAI_API_KEY).
    #[arg(long)]
    llm_api_key_env: Option<String>,
    /// File holding the API key (its first line).
    #[arg(long, env = "STREAMRAG_LLM_API_KEY_FILE")]
    llm_api_key_file: Option<PathBuf>,
    /// LLM requests in flight at once.
    #[arg(long)]
    llm_concurrency: Option<usize>,
    /// Seconds before an LLM request is abandoned (and retried).
    #[arg(long)]
    llm_timeout_s: Option<u64>,
}

impl LlmArgs {
    /// (extract, answer) settings from the flags over the config file's [llm].
    fn settings(&self, f: &config::LlmConfig) -> Result<(Option<LlmSettings>, Option<LlmSettings>)> {
        let make = |spec: Option<&String>| -> Result<Option<LlmSettings>> {
            let Some(spec) = spec else { return Ok(None) };
            let mut s = LlmSettings::new(LlmSpec::parse(spec).map_err(|e| anyhow::anyhow!(e))?);
            s.base_url = self.llm_base_url.clone().or_else(|| f.base_url.clone());
            s.api_key = match (self.llm_api_key_file.as_ref().or(f.api_key_file.as_ref()), self.llm_api_key_env.as_ref().or(f.api_key_env.as_ref())) {
                (Some(file), _) => ApiKeySource::File(file.clone()),
                (None, Some(var)) => ApiKeySource::Env(var.clone()),
                (None, None) => ApiKeySource::default(),
            };
            if let Some(c) = self.llm_concurrency.or(f.concurrency) {
                s.concurrency = c.max(1);
            }
            if let Some(t) = self.llm_timeout_s.or(f.timeout_s) {
                s.timeout = Duration::from_secs(t.max(1));
            }
            s.tokenizer = f.tokenizer.clone();
            Ok(Some(s))
        };
        let extract = self.extract_llm.as_ref().or(self.llm.as_ref()).or(f.extract.as_ref());
        let answer = self.answer_llm.as_ref().or(self.llm.as_ref()).or(f.answer.as_ref());
        Ok((make(extract)?, make(answer)?))
    }
}

#[derive(Args)]
struct SnapshotArgs {
    /// Data directory of a stopped node.
    #[arg(long, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    data: PathBuf,
    /// Snapshot directory to create.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct ReplayArgs {
    #[command(flatten)]
    conn: Conn,
    /// A snapshot directory, or a root of periodic snapshots (the newest is used).
    #[arg(long)]
    snapshot: PathBuf,
    /// Data directory whose graph store to (re)build; its embedded log (if any) is the log to
    /// continue from when there is no --brokers.
    #[arg(long, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    data: PathBuf,
    /// Stop at these graph-deltas positions (PARTITION=LAST_OFFSET,...): the graph as of a past
    /// point in the log. Default: the end of the log when the replay starts.
    #[arg(long)]
    until: Option<String>,
    /// Only rebuild from the snapshot; do not read the log.
    #[arg(long)]
    no_log: bool,
    /// Replace a graph store that is not empty.
    #[arg(long)]
    force: bool,
}

/// Where `ingest` and `ask` send: Kafka, a running process's HTTP API, or a stopped node's
/// data directory.
#[derive(Args)]
struct TargetArgs {
    #[command(flatten)]
    conn: Conn,
    /// A running process's HTTP API instead.
    #[arg(long, conflicts_with = "brokers")]
    http: Option<String>,
    /// Data directory of a stopped embedded node (when neither --brokers nor --http).
    #[arg(long, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    data: PathBuf,
}

#[derive(Args)]
struct IngestArgs {
    #[command(flatten)]
    to: TargetArgs,
    /// Publish a deletion of this document id instead of reading a file.
    #[arg(long)]
    delete: Option<String>,
    /// Publish each line as-is, unchecked (to replay captured records or test dead-lettering).
    #[arg(long)]
    raw: bool,
    /// JSON lines {"id","title","text"[,"triples"]}, or - for stdin.
    file: Option<String>,
}

#[derive(Args)]
struct AskArgs {
    #[command(flatten)]
    to: TargetArgs,
    /// Print the answer message as JSON.
    #[arg(long)]
    json: bool,
    /// Documents to return.
    #[arg(long)]
    top_k: Option<u32>,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
    question: String,
}

#[derive(Args)]
struct StatsArgs {
    #[arg(long)]
    http: Option<String>,
    #[arg(long, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    data: PathBuf,
}

#[derive(Args)]
struct DemoArgs {
    /// Data directory (default: a fresh temporary one).
    #[arg(long)]
    data: Option<PathBuf>,
    /// The corpus to index.
    #[arg(long, default_value = "samples/corpus.jsonl")]
    corpus: PathBuf,
    /// One question per line.
    #[arg(long, default_value = "samples/questions.txt")]
    questions: PathBuf,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Documents/s through the whole pipeline with the built-in extractor.
    Pipeline(BenchPipelineArgs),
    /// kg-writer apply rate and update latency at growing graph sizes, then snapshot and
    /// replay time and peak memory at the largest.
    Graph(BenchGraphArgs),
    /// GLM encoder latency and throughput on a synthetic subgraph with T5 dimensions.
    Glm(BenchGlmArgs),
    /// Freshness (document topic timestamp -> queryable) and consumer lag while documents with
    /// pre-extracted triples stream in at a fixed rate.
    Freshness(BenchFreshnessArgs),
    /// Entity resolution: names/s at growing entity counts (HNSW against exact search), and
    /// merge precision / recall on aliases built from 2WikiMultihopQA titles.
    Resolve(BenchResolveArgs),
}

#[derive(Args)]
struct BenchFreshnessArgs {
    #[command(flatten)]
    conn: Conn,
    /// Documents per second offered.
    #[arg(long, default_value_t = 1000)]
    rate: usize,
    /// Seconds of streaming measured.
    #[arg(long, default_value_t = 30)]
    seconds: usize,
    /// Seconds of streaming first, not measured (consumer groups join, caches warm).
    #[arg(long, default_value_t = 5)]
    warmup_s: usize,
    /// Kafka partitions of the fresh topics (with --brokers).
    #[arg(long, default_value_t = 1)]
    partitions: i32,
}

#[derive(Args)]
struct BenchResolveArgs {
    /// A dataset in the 2Wiki layout (the titles and passages supply the names).
    #[arg(long, default_value = "../shared/datasets/2wikimultihopqa")]
    dataset: PathBuf,
    /// Sentence encoder directory (all-MiniLM-L6-v2).
    #[arg(long, env = "STREAMRAG_MINILM_DIR")]
    model: Option<PathBuf>,
    /// Entity counts at which to measure.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    sizes: Vec<usize>,
    /// New names resolved at each size.
    #[arg(long, default_value_t = 2000)]
    probe: usize,
    /// Merge threshold (cosine).
    #[arg(long, default_value_t = 0.8)]
    threshold: f32,
    /// Other thresholds at which to report alias precision / recall too.
    #[arg(long, value_delimiter = ',')]
    also_thresholds: Vec<f32>,
}

#[derive(Args)]
struct BenchGlmArgs {
    /// T5 sizes: small, base, large.
    #[arg(long, value_delimiter = ',', default_value = "small,base")]
    models: Vec<String>,
    /// Triplets in the subgraph.
    #[arg(long, default_value_t = 600)]
    triplets: usize,
    /// Batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    batch: Vec<usize>,
    /// cpu, or cuda (needs a build with --features cuda).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Timed runs per configuration.
    #[arg(long, default_value_t = 5)]
    iters: usize,
    /// Untimed runs first (the first CUDA call compiles kernels).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Write each model's batch-1 inputs here (for the PyTorch comparison).
    #[arg(long)]
    dump_inputs: Option<PathBuf>,
}

#[derive(Args)]
struct BenchGraphArgs {
    /// Graph sizes in triples at which to measure.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    sizes: Vec<usize>,
    /// Triples per synthetic document.
    #[arg(long, default_value_t = 10)]
    triples_per_doc: usize,
}

#[derive(Args)]
struct BenchPipelineArgs {
    #[command(flatten)]
    conn: Conn,
    /// Number of synthetic documents.
    #[arg(long, default_value_t = 5000)]
    docs: usize,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

fn target(to: &TargetArgs, file: &FileConfig) -> Target {
    if let Some(h) = &to.http {
        return Target::Http(h.clone());
    }
    if let Some(b) = &to.conn.brokers {
        let mut options = file.kafka_options();
        options.extend(to.conn.kafka_options.iter().cloned());
        return Target::Kafka { brokers: b.clone(), options };
    }
    Target::Embedded(to.data.clone())
}

fn init_logs(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_new(level).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn serve_http(addr: &str, node: Arc<Node>) -> Result<tokio::task::JoinHandle<()>> {
    let addr = http::bind_addr(addr);
    let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("binding {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "HTTP API listening");
    let mut stop = node.shutdown_signal();
    let app = http::router(Arc::new(ApiState { node, answer_timeout: Duration::from_secs(30) }));
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    }))
}

fn node_config(conn: &Conn, data: &std::path::Path, file: &FileConfig) -> NodeConfig {
    let mut cfg = NodeConfig::embedded(data);
    cfg.brokers = conn.brokers.clone();
    cfg.kafka_options = file.kafka_options();
    cfg.kafka_options.extend(conn.kafka_options.iter().cloned());
    cfg.topics = file.topics.clone();
    cfg.limits = file.limits.clone();
    cfg
}

fn parse_device(name: &str) -> Result<candle_core::Device> {
    Ok(match name {
        "cpu" => candle_core::Device::Cpu,
        "cuda" => streamrag_operators::glm_retriever::cuda_device().map_err(|e| anyhow::anyhow!("--device cuda: {e}"))?,
        d => bail!("--device {d}: cpu or cuda"),
    })
}

async fn cmd_run(a: RunArgs, file: FileConfig) -> Result<()> {
    let mut cfg = node_config(&a.conn, &a.data, &file);
    cfg.partitions = a.partitions;
    if let Some(m) = a.max_text_bytes {
        cfg.limits.max_text_bytes = m;
    }
    cfg.snapshot_dir = a.snapshot_dir;
    cfg.snapshot_every = (a.snapshot_every_s > 0).then(|| Duration::from_secs(a.snapshot_every_s));
    cfg.snapshot_keep = a.snapshot_keep;
    if !a.stages.is_empty() {
        cfg.stages = a.stages;
    }
    let q = &file.query;
    cfg.retriever = RetrieverChoice::from_flags(
        a.retriever.as_deref().or(q.retriever.as_deref()),
        a.checkpoint.or_else(|| q.checkpoint.clone()),
        a.glm_batch.or(q.glm_batch).unwrap_or(4),
        a.sentence_model.or_else(|| q.sentence_model.clone()),
    )?;
    (cfg.extract_llm, cfg.answer_llm) = a.llm.settings(&file.llm)?;
    if let Some(p) = a.group_prefix {
        cfg.group_prefix = p;
    }
    cfg.resolve_model = a.resolve_model.or_else(|| file.resolve.model.clone());
    cfg.resolve_threshold = a.resolve_threshold.or(file.resolve.threshold).unwrap_or(0.8);
    let (node, mut tasks) = Node::start(cfg).await?;
    tracing::info!(transport = node.transport.name(), stages = %node.config.stages.join(","), "streamrag running");
    if let Some(addr) = &a.http {
        serve_http(addr, node.clone()).await?;
    }
    let result = tokio::select! {
        r = tasks.wait_any() => r,
        _ = shutdown_signal() => Ok(()),
    };
    tracing::info!("shutting down");
    tasks.join(&node).await?;
    result
}

fn print_answer(a: &streamrag_schemas::Answer, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(a).expect("serializable"));
    } else {
        print!("{}", client::render(a));
    }
}

async fn cmd_ingest(a: IngestArgs, file: FileConfig) -> Result<()> {
    let t = target(&a.to, &file);
    let items = match (&a.delete, &a.file) {
        (Some(id), None) => vec![Line::Doc(Document::delete(id.clone()))],
        (None, Some(path)) => client::read_lines(path, a.raw, &file.limits)?,
        (Some(_), Some(_)) => bail!("give either --delete ID or a FILE, not both"),
        (None, None) => bail!("give a FILE of JSON lines (or - for stdin), or --delete ID"),
    };
    let mut rejected = 0;
    for item in &items {
        if let Line::Rejected { line, reason } = item {
            eprintln!("line {line}: rejected: {reason}");
            rejected += 1;
        }
    }
    let t0 = Instant::now();
    let sent = client::ingest(&t, &file.topics, items).await?;
    eprintln!("ingested {sent} record(s) in {:.2}s; {rejected} rejected", t0.elapsed().as_secs_f64());
    if rejected > 0 {
        bail!("{rejected} line(s) rejected");
    }
    Ok(())
}

async fn cmd_ask(a: AskArgs, file: FileConfig) -> Result<()> {
    let t = target(&a.to, &file);
    let answer = client::ask(&t, &file.topics, &a.question, a.top_k, Duration::from_secs(a.timeout_s)).await?;
    print_answer(&answer, a.json);
    Ok(())
}

async fn cmd_stats(a: StatsArgs) -> Result<()> {
    let stats = match &a.http {
        Some(h) => reqwest::get(format!("http://{h}/stats")).await?.error_for_status()?.json::<serde_json::Value>().await?,
        None => {
            let store = streamrag_operators::graph::GraphStore::open(&a.data.join("graph"))
                .map_err(|e| anyhow::anyhow!("{e}\nhint: while `streamrag run` holds the directory, use --http ADDR"))?;
            serde_json::to_value(store.load()?.stats())?
        }
    };
    println!("{}", serde_json::to_string_pretty(&stats)?);
    Ok(())
}

async fn cmd_demo(a: DemoArgs) -> Result<()> {
    let data = match &a.data {
        Some(d) => d.clone(),
        None => streamrag::scratch_dir("streamrag-demo")?,
    };
    let docs = client::read_lines(a.corpus.to_str().unwrap_or("-"), false, &Limits::default())?;
    for d in &docs {
        if let Line::Rejected { line, reason } = d {
            bail!("{}:{line}: {reason}", a.corpus.display());
        }
    }
    let questions: Vec<String> = std::fs::read_to_string(&a.questions)
        .with_context(|| format!("reading {}", a.questions.display()))?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let (node, tasks) = Node::start(NodeConfig::embedded(&data)).await?;
    let t0 = Instant::now();
    let n = docs.len();
    let docs: Vec<Document> = docs
        .into_iter()
        .filter_map(|l| match l {
            Line::Doc(d) => Some(d),
            _ => None,
        })
        .collect();
    node.publish_documents(&docs).await?;
    node.wait_drained(Duration::from_secs(120)).await?;
    let stats = node.graph.as_ref().expect("kg-writer runs").current().stats();
    println!(
        "indexed {n} documents in {:.2}s: {} entities, {} triples\n",
        t0.elapsed().as_secs_f64(),
        stats.entities,
        stats.triples
    );
    for q in &questions {
        let query = streamrag_schemas::Query { schema_version: 1, query_id: http::new_query_id(), question: q.clone(), top_k: Some(3) };
        let answer = node.ask(&query, Duration::from_secs(30)).await?;
        print_answer(&answer, false);
        println!();
    }
    tasks.join(&node).await?;
    if a.data.is_none() {
        drop(node);
        let _ = std::fs::remove_dir_all(&data);
    }
    Ok(())
}

/// On Kafka, fresh topics and groups so a benchmark's figures are its run's alone.
fn isolate_bench_run(cfg: &mut NodeConfig) {
    if cfg.brokers.is_some() {
        let run_id = streamrag_operators::transport::now_ms();
        for name in cfg.topics.all_mut() {
            *name = format!("{name}.bench-{run_id}");
        }
        cfg.group_prefix = format!("streamrag.bench-{run_id}");
    }
}

async fn cmd_bench_pipeline(a: BenchPipelineArgs, file: FileConfig) -> Result<()> {
    let (docs, _) = synth::corpus(a.docs, 1);
    // Baseline in the same process: the built-in extractor alone, no transport, no store.
    let t0 = Instant::now();
    let mut triples = 0;
    for d in &docs {
        triples += streamrag_operators::extract::extract(&d.title, d.text.as_deref().unwrap_or("")).triples.len();
    }
    let extract_rate = docs.len() as f64 / t0.elapsed().as_secs_f64();
    let dir = streamrag::scratch_dir("streamrag-demo")?;
    let mut cfg = node_config(&a.conn, &dir, &file);
    isolate_bench_run(&mut cfg);
    let (node, tasks) = Node::start(cfg).await?;
    let t1 = Instant::now();
    for chunk in docs.chunks(1000) {
        node.publish_documents(chunk).await?;
    }
    let ingest_s = t1.elapsed().as_secs_f64();
    let mut applied = node.applied.clone();
    tokio::time::timeout(Duration::from_secs(600), applied.wait_for(|&n| n >= docs.len())).await.context("pipeline did not finish")??;
    let total_s = t1.elapsed().as_secs_f64();
    tasks.join(&node).await?;
    let _ = std::fs::remove_dir_all(&dir);
    let rate = docs.len() as f64 / total_s;
    println!("bench pipeline: transport {}, {} documents, {} triples extracted", node.transport.name(), docs.len(), triples);
    println!("  built-in extractor alone (baseline, same process): {extract_rate:.0} docs/s");
    println!("  ingest acknowledged:                               {:.0} docs/s ({ingest_s:.2}s)", docs.len() as f64 / ingest_s);
    println!("  end to end (ingest -> queryable graph):            {rate:.0} docs/s ({total_s:.2}s)");
    println!("  pipeline / extractor-alone ratio:                  {:.3}", rate / extract_rate);
    Ok(())
}

async fn cmd_bench_freshness(a: BenchFreshnessArgs, file: FileConfig) -> Result<()> {
    use streamrag_operators::metrics::{global, quantile};
    let n = a.rate * (a.seconds + a.warmup_s);
    let warm_docs = a.rate * a.warmup_s;
    let (mut docs, _) = synth::corpus(n, 3);
    for d in &mut docs {
        let got = streamrag_operators::extract::extract(&d.title, d.text.as_deref().unwrap_or(""));
        d.triples = Some(got.triples.into_iter().map(|t| [t.subject, t.relation, t.object]).collect());
    }
    let dir = streamrag::scratch_dir("streamrag-bench")?;
    let mut cfg = node_config(&a.conn, &dir, &file);
    cfg.partitions = a.partitions;
    isolate_bench_run(&mut cfg);
    let (node, tasks) = Node::start(cfg).await?;
    let fresh = global().freshness("writer");
    fresh.keep_samples();
    // Offer the documents in ticks of 10 ms; watch the lag gauges every 100 ms.
    let per_tick = (a.rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let stages = ["openie", "resolve", "kg-writer"];
    let mut max_lag = [0i64; 3];
    let mut lag_sum = [0i64; 3];
    let mut lag_n = 0;
    let mut t0 = Instant::now();
    let mut last_watch = Instant::now();
    let mut sent = 0;
    for chunk in docs.chunks(per_tick) {
        tick.tick().await;
        if sent < warm_docs && sent + chunk.len() >= warm_docs {
            // Warm-up over: measure from here.
            fresh.keep_samples();
            (max_lag, lag_sum, lag_n, t0) = ([0; 3], [0; 3], 0, Instant::now());
        }
        node.publish_documents(chunk).await?;
        sent += chunk.len();
        if last_watch.elapsed() >= Duration::from_millis(100) {
            last_watch = Instant::now();
            lag_n += 1;
            for (i, s) in stages.iter().enumerate() {
                let l = global().stage(s).lag.load(std::sync::atomic::Ordering::Relaxed);
                max_lag[i] = max_lag[i].max(l);
                lag_sum[i] += l;
            }
        }
    }
    let offered_s = t0.elapsed().as_secs_f64();
    let mut applied = node.applied.clone();
    tokio::time::timeout(Duration::from_secs(600), applied.wait_for(|&c| c >= n)).await.context("pipeline did not finish")??;
    let total_s = t0.elapsed().as_secs_f64();
    tasks.join(&node).await?;
    let _ = std::fs::remove_dir_all(&dir);
    let s = fresh.samples();
    println!(
        "bench freshness: transport {}, {} documents with pre-extracted triples offered at {} docs/s for {offered_s:.1} s after {} s of warm-up ({:.0} docs/s achieved); all queryable {total_s:.1} s after the warm-up",
        node.transport.name(),
        n - warm_docs,
        a.rate,
        a.warmup_s,
        (n - warm_docs) as f64 / offered_s
    );
    println!(
        "  freshness (topic timestamp -> queryable), {} documents: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        s.len(),
        quantile(&s, 0.5) * 1e3,
        quantile(&s, 0.9) * 1e3,
        quantile(&s, 0.99) * 1e3,
        quantile(&s, 1.0) * 1e3
    );
    for (i, st) in stages.iter().enumerate() {
        println!("  consumer lag {st}: mean {:.0}, max {} records (sampled every 100 ms)", lag_sum[i] as f64 / lag_n.max(1) as f64, max_lag[i]);
    }
    Ok(())
}

fn open_store(data: &std::path::Path) -> Result<GraphStore> {
    GraphStore::open(&data.join("graph")).map_err(|e| {
        anyhow::anyhow!("{e}\nhint: is a `streamrag run` using {}? stop it first", data.display())
    })
}

async fn cmd_snapshot(a: SnapshotArgs) -> Result<()> {
    let store = open_store(&a.data)?;
    let t0 = Instant::now();
    let g = tokio::task::spawn_blocking(move || store.load()).await??;
    let load_s = t0.elapsed().as_secs_f64();
    let out = a.out.clone();
    let (m, rows, rate) = tokio::task::spawn_blocking(move || -> Result<_> {
        let mut bar = Bar::new();
        let m = snapshot::write(&g, &out, &mut bar)?;
        let (rows, rate) = bar.finish();
        Ok((m, rows, rate))
    })
    .await??;
    println!("snapshot {}: {} (graph version {:?})", a.out.display(), serde_json::to_string(&m.rows)?, m.offsets);
    println!("  loaded the graph store in {load_s:.2}s; wrote {rows} rows at {rate:.0} rows/s");
    Ok(())
}

async fn cmd_replay(a: ReplayArgs, file: FileConfig) -> Result<()> {
    let snap = snapshot::resolve(&a.snapshot)?.with_context(|| format!("no snapshot under {}", a.snapshot.display()))?;
    let t0 = Instant::now();
    let (mut g, m) = tokio::task::spawn_blocking(move || -> Result<_> {
        let mut bar = Bar::new();
        let r = snapshot::read(&snap, &mut bar)?;
        bar.finish();
        Ok(r)
    })
    .await??;
    let read_s = t0.elapsed().as_secs_f64();
    let rows: u64 = m.rows.values().sum();
    println!("read snapshot: {rows} rows in {read_s:.2}s ({:.0} rows/s), {} triples; offsets {:?}", rows as f64 / read_s, g.triple_count(), m.offsets);

    let topic = file.topics.graph_deltas.clone();
    let mut store = open_store(&a.data)?;
    if !store.is_empty() {
        if !a.force {
            bail!("the graph store under {} is not empty; pass --force to replace it", a.data.display());
        }
        drop(store);
        std::fs::remove_dir_all(a.data.join("graph"))?;
        store = open_store(&a.data)?;
    }
    // The log to continue from: Kafka, or the embedded log of the data directory.
    let source = if a.no_log {
        None
    } else if a.conn.brokers.is_some() {
        Some(streamrag::node::connect(&node_config(&a.conn, &a.data, &file)).await?)
    } else if a.data.join("log").exists() {
        Some(Transport::Embedded(EmbeddedLog::open(&a.data.join("log"))?))
    } else {
        None
    };
    let t1 = Instant::now();
    if let Some(t) = &source {
        let last: BTreeMap<i32, i64> = match &a.until {
            Some(u) => parse_until(u).map_err(|e| anyhow::anyhow!("--until: {e}"))?,
            None => t.end_offsets(&topic).await?.into_iter().map(|(p, end)| (p, end - 1)).collect(),
        };
        for (p, last) in &last {
            if g.already_applied(&topic, *p, *last + 1) {
                bail!("the snapshot is past --until on partition {p} (it reflects offsets {:?})", m.offsets);
            }
        }
        let from = g.resume_offsets(&topic);
        let total: i64 = last.iter().map(|(p, l)| (l + 1 - from.get(p).copied().unwrap_or(0)).max(0)).sum();
        let mut bar = Bar::new();
        snapshot::Progress::start(&mut bar, "log", total as u64);
        let mut seen = 0;
        let c = catch_up(&mut g, t, &topic, &last, |n| {
            snapshot::Progress::inc(&mut bar, n - seen);
            seen = n;
        })
        .await?;
        bar.finish();
        println!(
            "continued through the log: {} records ({} applied, {} not deltas) in {:.2}s; now at {:?}",
            c.records,
            c.applied,
            c.skipped_bad,
            t1.elapsed().as_secs_f64(),
            g.offsets()
        );
    } else {
        println!("no log to continue from (--no-log, or no --brokers and no embedded log under {})", a.data.display());
    }
    let t2 = Instant::now();
    let keys = (g.document_count() + g.entity_count() + g.triple_count()) as u64;
    let g2 = std::sync::Arc::new(g);
    let g3 = g2.clone();
    tokio::task::spawn_blocking(move || -> Result<()> {
        let mut bar = Bar::new();
        snapshot::Progress::start(&mut bar, "persist", keys);
        store.persist_all(&g3, 200_000, |n| snapshot::Progress::inc(&mut bar, n as u64))?;
        bar.finish();
        Ok(())
    })
    .await??;
    let st = g2.stats();
    println!(
        "persisted to {} in {:.2}s: {} documents, {} entities, {} triples, digest {}",
        a.data.display(),
        t2.elapsed().as_secs_f64(),
        st.documents,
        st.entities,
        st.triples,
        st.digest
    );
    println!("replay total {:.2}s", t0.elapsed().as_secs_f64());
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_logs(&cli.log_level, cli.log_json);
    let file = FileConfig::load(cli.config.as_deref(), std::env::vars())?;
    // model work on CPU: before any thread has its own allocator arena
    let models_in_run = file.query.retriever.is_some() || file.query.checkpoint.is_some();
    if matches!(&cli.cmd, Cmd::Train(_) | Cmd::Eval(_)) || matches!(&cli.cmd, Cmd::Run(a) if models_in_run || a.checkpoint.is_some() || a.retriever.is_some()) {
        streamrag_glm::retain_large_allocations();
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Run(a) => cmd_run(*a, file).await,
            Cmd::Ingest(a) => cmd_ingest(a, file).await,
            Cmd::Ask(a) => cmd_ask(a, file).await,
            Cmd::Stats(a) => cmd_stats(a).await,
            Cmd::Demo(a) => cmd_demo(a).await,
            Cmd::Snapshot(a) => cmd_snapshot(a).await,
            Cmd::Replay(a) => cmd_replay(a, file).await,
            Cmd::Glm(GlmCmd::Inspect(a)) => {
                let v = streamrag::glm_cmd::inspect(&a.tokenizer, &a.graph, a.question.as_deref(), a.mode, a.checkpoint.as_deref())?;
                println!("{}", serde_json::to_string(&v)?);
                Ok(())
            }
            Cmd::Bench(BenchCmd::Glm(a)) => {
                let device = parse_device(&a.device)?;
                let dtype = match a.dtype.as_str() {
                    "f32" => candle_core::DType::F32,
                    "bf16" => candle_core::DType::BF16,
                    "f16" => candle_core::DType::F16,
                    d => bail!("--dtype {d}: f32, bf16 or f16"),
                };
                streamrag::glm_cmd::bench(streamrag::glm_cmd::BenchGlm {
                    models: &a.models,
                    triplets: a.triplets,
                    batches: &a.batch,
                    device,
                    dtype,
                    iters: a.iters.max(1),
                    warmup: a.warmup,
                    dump: a.dump_inputs.as_deref(),
                })
            }
            Cmd::Eval(a) => retrieval_cmd::eval(retrieval_cmd::EvalOptions {
                dataset: a.dataset,
                retriever: a.retriever,
                checkpoint: a.checkpoint,
                questions: parse_range(&a.questions)?,
                report: a.report,
                data: a.data,
                sentence_model: a.sentence_model.unwrap_or_else(default_minilm_dir),
                concurrency: a.concurrency,
                glm_batch: a.glm_batch,
            })
            .await
            .map(|_| ()),
            Cmd::Train(a) => {
                let minilm = default_minilm_dir();
                retrieval_cmd::train(retrieval_cmd::TrainOptions {
                    dataset: a.dataset,
                    questions: parse_range(&a.questions)?,
                    out: a.out,
                    backbone: a.backbone.unwrap_or_else(|| minilm.clone()),
                    question_model: a.question_model.unwrap_or(minilm),
                    data: a.data,
                    epochs: a.epochs,
                    batch_size: a.batch_size,
                    lr_head: a.lr_head,
                    lr_encoder: a.lr_encoder,
                    max_triplets: a.max_triplets,
                    max_hops: a.max_hops,
                    save_every: a.save_every,
                    device: parse_device(&a.device)?,
                    max_steps: a.max_steps,
                })
                .await
            }
            Cmd::Bench(BenchCmd::Freshness(a)) => cmd_bench_freshness(a, file).await,
            Cmd::Bench(BenchCmd::Resolve(a)) => {
                let model = a.model.unwrap_or_else(default_minilm_dir);
                tokio::task::spawn_blocking(move || {
                    streamrag::resolve_bench::run(streamrag::resolve_bench::BenchResolve {
                        dataset: &a.dataset,
                        model: &model,
                        sizes: a.sizes,
                        probe: a.probe,
                        threshold: a.threshold,
                        also: a.also_thresholds,
                    })
                })
                .await?
            }
            Cmd::Bench(BenchCmd::Graph(a)) => streamrag::bench::graph(&a.sizes, a.triples_per_doc).await,
            Cmd::Bench(BenchCmd::Pipeline(a)) => cmd_bench_pipeline(a, file).await,
        }
    })
}
