//! One module per command, each with its own arguments; `main.rs` only parses and dispatches.
//! What several commands share lives here: how to reach a node ([`Conn`], [`TargetArgs`]) and
//! where the sentence encoder is.

pub mod ask;
pub mod bench;
pub mod demo;
pub mod eval;
pub mod glm;
pub mod ingest;
pub mod mcp;
pub mod replay;
pub mod run;
pub mod snapshot;
pub mod stats;
pub mod token;
pub mod train;
pub mod adapt;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use streamrag_operators::transport::TransportConfig;

use crate::client::Target;
use crate::config::FileConfig;
use crate::node::NodeConfig;

/// How to reach a Kafka cluster.
#[derive(Args, Clone, Debug)]
pub struct Conn {
    /// Kafka bootstrap servers (host:port,...). Without it: the embedded transport.
    #[arg(long, env = "STREAMRAG_BROKERS")]
    pub brokers: Option<String>,
    /// Raw librdkafka option KEY=VALUE (SASL, TLS...), repeatable.
    #[arg(long = "kafka-option", value_parser = parse_kv)]
    pub kafka_options: Vec<(String, String)>,
}

impl Conn {
    /// The transport these flags and the config file name.
    pub fn transport(&self, file: &FileConfig) -> TransportConfig {
        let mut kafka_options = file.kafka_options();
        kafka_options.extend(self.kafka_options.iter().cloned());
        TransportConfig { brokers: self.brokers.clone(), kafka_options, ..TransportConfig::default() }
    }
}

/// Where `ingest` and `ask` send: Kafka, a running process's HTTP API, or a stopped node's
/// data directory.
#[derive(Args, Debug)]
pub struct TargetArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// A running process's HTTP API instead.
    #[arg(long, conflicts_with = "brokers")]
    pub http: Option<String>,
    /// Data directory of a stopped embedded node (when neither --brokers nor --http).
    #[arg(long, value_parser = data_dir_arg, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    pub data: PathBuf,
}

impl TargetArgs {
    pub fn target(&self, file: &FileConfig) -> Target {
        if let Some(h) = &self.http {
            return Target::Http(h.clone());
        }
        if self.conn.brokers.is_some() {
            return Target::Kafka(self.conn.transport(file));
        }
        Target::Embedded(streamrag_operators::DataDir::new(&self.data))
    }
}

/// A `--data` directory: refused at parse time when the path is there but is not a directory.
pub fn data_dir_arg(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.exists() && !p.is_dir() {
        return Err(format!("{s} is a file, not a data directory"));
    }
    Ok(p)
}

/// A count that must be at least 1 (`--snapshot-keep`, `--top-k` ...).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

/// A node's config from the connection flags and the config file's topics, limits and Kafka
/// options (every stage, defaults elsewhere).
pub fn node_config(conn: &Conn, data: &Path, file: &FileConfig) -> NodeConfig {
    let mut cfg = NodeConfig::embedded(data);
    cfg.transport = conn.transport(file);
    cfg.topics = file.topics.clone();
    cfg.limits = file.limits.clone();
    cfg.query.standing_batch = file.query.standing_batch.filter(|n| *n > 0);
    cfg
}

/// Where the all-MiniLM-L6-v2 files are: the flag, else $STREAMRAG_MINILM_DIR, else .models/
/// (what scripts/fetch-models.sh fills).
pub fn minilm_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.unwrap_or_else(streamrag_operators::retrieve::default_sentence_model)
}

/// Fails in one line, naming the fix, when `dir` holds no sentence encoder.
pub fn check_model_dir(dir: &Path, flag: &str) -> Result<()> {
    if !dir.join("config.json").is_file() || !dir.join("model.safetensors").is_file() {
        bail!(
            "no sentence encoder at {} (config.json and model.safetensors): run scripts/fetch-models.sh, or point {flag} or STREAMRAG_MINILM_DIR at an all-MiniLM-L6-v2 directory",
            dir.display()
        );
    }
    Ok(())
}

/// The data directory of a stopped node, which must exist: reading commands do not create an
/// empty one.
pub fn existing_data(path: &Path) -> Result<streamrag_operators::DataDir> {
    if !path.is_dir() {
        bail!("no data directory at {}: pass --data DIR (a node's, as `streamrag run --data DIR` made it), or reach a running node with --http ADDR", path.display());
    }
    Ok(streamrag_operators::DataDir::new(path))
}

/// `cpu` or `cuda`, as a device.
pub fn parse_device(name: &str) -> Result<candle_core::Device> {
    streamrag_glm::device::parse_device(name).map_err(|e| anyhow::anyhow!("--device {name}: {e}"))
}
