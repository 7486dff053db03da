//! `streamrag run`: the pipeline's stages in this process, until a signal or a fatal error.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use streamrag_operators::llm::openai::ApiKeySource;
use streamrag_operators::llm::{LlmSettings, LlmSpec};
use streamrag_operators::retrieve::RetrieverChoice;
use streamrag_operators::stages::StageKind;

use super::{minilm_dir, node_config, Conn};
use crate::config::{self, FileConfig};
use crate::http::{self, ApiState};
use crate::node::Node;

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Data directory: the embedded log and the graph store.
    #[arg(long, value_parser = super::data_dir_arg, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    pub data: PathBuf,
    /// Serve the HTTP API on this address (e.g. 127.0.0.1:8080; a bare port binds to 127.0.0.1).
    #[arg(long, env = "STREAMRAG_HTTP")]
    pub http: Option<String>,
    /// Bearer tokens for the HTTP API: a TOML file of `[[token]]` entries, hashed (`streamrag
    /// token` makes them; STREAMRAG_TOKENS may hold the same text instead). None: the API is
    /// open, and only a loopback address may serve it.
    #[arg(long, env = "STREAMRAG_TOKENS_FILE")]
    pub tokens: Option<PathBuf>,
    /// Serve the HTTP API on a non-loopback address without tokens (anyone who reaches it may
    /// ingest, delete and read everything).
    #[arg(long, env = "STREAMRAG_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// Comma-separated stages to run (default: all of openie,resolve,kg-writer,query).
    #[arg(long, env = "STREAMRAG_STAGES", value_delimiter = ',')]
    pub stages: Vec<String>,
    /// Partitions for topics this process creates on Kafka.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..))]
    pub partitions: i32,
    /// Largest accepted document text in bytes.
    #[arg(long, env = "STREAMRAG_MAX_TEXT_BYTES", value_parser = super::at_least_one)]
    pub max_text_bytes: Option<usize>,
    /// Periodic snapshots: the kg-writer writes them here; a query replica starts from the
    /// newest one here.
    #[arg(long, env = "STREAMRAG_SNAPSHOT_DIR")]
    pub snapshot_dir: Option<PathBuf>,
    /// Seconds between periodic snapshots (with --snapshot-dir; 0: none).
    #[arg(long, env = "STREAMRAG_SNAPSHOT_EVERY_S", default_value_t = 300)]
    pub snapshot_every_s: u64,
    /// Periodic snapshots kept (locally and in the bucket).
    #[arg(long, default_value_t = 3, value_parser = super::at_least_one)]
    pub snapshot_keep: usize,
    /// Snapshots in S3-compatible object storage, `s3://bucket/prefix`: the kg-writer uploads
    /// each periodic snapshot there (staged under --snapshot-dir, else DATA/snapshots); a query
    /// replica starts from the newest there that reads whole. Credentials and endpoint from
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_ENDPOINT,
    /// AWS_ALLOW_HTTP.
    #[arg(long, env = "STREAMRAG_SNAPSHOT_URL")]
    pub snapshot_url: Option<String>,
    /// The query stage's retriever: hybrid, ppr, glm (needs --checkpoint), dense or bm25.
    /// Default: glm when a checkpoint is given, else hybrid.
    #[arg(long, env = "STREAMRAG_RETRIEVER")]
    pub retriever: Option<String>,
    /// A GLM checkpoint `streamrag train` wrote; with --retriever hybrid it joins the hybrid's
    /// fusion ([query.hybrid] glm_seed, fuse_glm). The node follows the directory: a newer
    /// checkpoint saved there is swapped in between batches.
    #[arg(long, env = "STREAMRAG_GLM_CHECKPOINT")]
    pub checkpoint: Option<PathBuf>,
    /// GLM graphs per forward pass (concurrent queries share passes).
    #[arg(long, env = "STREAMRAG_GLM_BATCH", value_parser = super::at_least_one)]
    pub glm_batch: Option<usize>,
    /// The GLM's subgraph budget at query time (default: the checkpoint's training budget).
    #[arg(long, env = "STREAMRAG_GLM_TRIPLETS", value_parser = super::at_least_one)]
    pub glm_triplets: Option<usize>,
    /// The sentence encoder of the hybrid and dense retrievers (all-MiniLM-L6-v2 directory).
    #[arg(long, env = "STREAMRAG_MINILM_DIR")]
    pub sentence_model: Option<PathBuf>,
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Consumer-group prefix (groups are PREFIX.STAGE). A new prefix re-reads every topic from
    /// the start: a replay.
    #[arg(long, env = "STREAMRAG_GROUP_PREFIX")]
    pub group_prefix: Option<String>,
    /// Entity resolution by name embeddings with this sentence encoder (all-MiniLM-L6-v2
    /// directory). Default: by normalised name only.
    #[arg(long, env = "STREAMRAG_RESOLVE_MODEL")]
    pub resolve_model: Option<PathBuf>,
    /// Cosine at or above which a new name joins an existing entity (default 0.8).
    #[arg(long)]
    pub resolve_threshold: Option<f32>,
}

#[derive(Args, Clone, Default)]
pub struct LlmArgs {
    /// The LLM for extraction and answers: openai:MODEL or local:PATH.gguf.
    #[arg(long, env = "STREAMRAG_LLM")]
    pub llm: Option<String>,
    /// The extraction LLM only (overrides --llm for openie).
    #[arg(long)]
    pub extract_llm: Option<String>,
    /// The answering LLM only (overrides --llm for answers).
    #[arg(long)]
    pub answer_llm: Option<String>,
    /// The OpenAI-compatible endpoint for openai: models.
    #[arg(long, env = "STREAMRAG_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    /// Environment variable holding the API key (default OPENAI_API_KEY).
    #[arg(long)]
    pub llm_api_key_env: Option<String>,
    /// File holding the API key (its first line).
    #[arg(long, env = "STREAMRAG_LLM_API_KEY_FILE")]
    pub llm_api_key_file: Option<PathBuf>,
    /// LLM requests in flight at once.
    #[arg(long, value_parser = super::at_least_one)]
    pub llm_concurrency: Option<usize>,
    /// Seconds before an LLM request is abandoned (and retried).
    #[arg(long)]
    pub llm_timeout_s: Option<u64>,
}

impl LlmArgs {
    /// (extract, answer) settings from the flags over the config file's [llm].
    pub fn settings(&self, f: &config::LlmSection) -> Result<(Option<LlmSettings>, Option<LlmSettings>)> {
        let make = |spec: Option<&String>| -> Result<Option<LlmSettings>> {
            let Some(spec) = spec else { return Ok(None) };
            let mut s = LlmSettings::new(LlmSpec::parse(spec).map_err(anyhow::Error::msg)?);
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

pub async fn run(a: RunArgs, file: FileConfig) -> Result<()> {
    let mut cfg = node_config(&a.conn, &a.data, &file);
    cfg.transport.partitions = a.partitions;
    if let Some(m) = a.max_text_bytes {
        cfg.limits.max_text_bytes = m;
    }
    cfg.snapshots.dir = a.snapshot_dir;
    cfg.snapshots.every = (a.snapshot_every_s > 0).then(|| Duration::from_secs(a.snapshot_every_s));
    cfg.snapshots.keep = a.snapshot_keep;
    cfg.snapshots.url = a.snapshot_url;
    if !a.stages.is_empty() {
        cfg.stages = a.stages.iter().map(|s| s.parse::<StageKind>()).collect::<Result<_, _>>()?;
    }
    let q = &file.query;
    cfg.query.retriever = RetrieverChoice::from_flags(
        a.retriever.as_deref().or(q.retriever.as_deref()),
        a.checkpoint.or_else(|| q.checkpoint.clone()),
        a.glm_batch.or(q.glm_batch).unwrap_or(4),
        minilm_dir(a.sentence_model.or_else(|| q.sentence_model.clone())),
    )?;
    q.apply_hybrid(&mut cfg.query.retriever)?;
    if a.glm_triplets.is_some() {
        cfg.query.retriever.set_glm_triplets(a.glm_triplets);
    }
    if let RetrieverChoice::Dense { model } = &cfg.query.retriever {
        super::check_model_dir(model, "--sentence-model")?;
    }
    (cfg.openie.extract_llm, cfg.query.answer_llm) = a.llm.settings(&file.llm)?;
    if let Some(p) = a.group_prefix {
        cfg.group_prefix = p;
    }
    cfg.resolve.model = a.resolve_model.or_else(|| file.resolve.model.clone());
    if let Some(model) = &cfg.resolve.model {
        super::check_model_dir(model, "--resolve-model")?;
    }
    cfg.resolve.threshold = a.resolve_threshold.or(file.resolve.threshold).unwrap_or(0.8);
    let tokens = Arc::new(crate::auth::Tokens::load(a.tokens.as_deref(), std::env::var("STREAMRAG_TOKENS").ok().as_deref())?);
    // refuse an open API on a non-loopback address before anything starts
    let listener = match &a.http {
        Some(addr) => Some(bind_http(addr, &tokens, a.allow_unauthenticated).await?),
        None => None,
    };
    let (node, mut tasks) = Node::start(cfg).await?;
    tracing::info!(transport = node.transport.name(), stages = %node.stage_names().join(","), "streamrag running");
    if let Some(listener) = listener {
        serve_http(listener, node.clone(), tokens)?;
    }
    let result = tokio::select! {
        r = tasks.wait_any() => r,
        _ = shutdown_signal() => Ok(()),
    };
    tracing::info!("shutting down");
    tasks.join(&node).await?;
    result
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

/// Binds the HTTP API's address, if it may be served with the tokens there are.
async fn bind_http(addr: &str, tokens: &crate::auth::Tokens, allow_unauthenticated: bool) -> Result<tokio::net::TcpListener> {
    let addr = http::bind_addr(addr);
    let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("binding {addr}"))?;
    crate::auth::check_open_bind(&listener.local_addr()?, tokens, allow_unauthenticated)?;
    Ok(listener)
}

fn serve_http(listener: tokio::net::TcpListener, node: Arc<Node>, tokens: Arc<crate::auth::Tokens>) -> Result<tokio::task::JoinHandle<()>> {
    tracing::info!(addr = %listener.local_addr()?, tokens = tokens.len(), "HTTP API listening");
    let mut stop = node.shutdown_signal();
    let app = http::router(Arc::new(ApiState { node, answer_timeout: Duration::from_secs(30) }), tokens);
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    }))
}
