//! The streamrag binary's library: the node that runs the stages, the commands, the HTTP API,
//! the clients behind `ingest` and `ask`, and the datasets and synthetic corpus the
//! benchmarks and tests use.
//!
//! # Layout
//! - [`node`]: one process: the stages it runs (each built by its own constructor), the live
//!   graph, answers routed back to askers, "drained", clean shutdown.
//! - [`cmd`]: one module per command (`run`, `ingest`, `ask`, `stats`, `snapshot`, `replay`,
//!   `demo`, `eval`, `train`, `glm`, `bench ...`), each with its own arguments.
//! - [`http`]: `POST /documents`, `POST /query`, `GET /health`, `GET /stats`, `GET /metrics`;
//!   [`subscriptions`]: standing queries over HTTP (`/subscriptions`, server-sent events);
//!   [`auth`]: bearer tokens with scopes and access labels.
//! - [`client`]: ingest and ask over Kafka, HTTP, or the data directory of a stopped node.
//! - [`config`]: the TOML config file and `STREAMRAG_KAFKA_OPT_*` variables.
//! - [`dataset`]: retrieval datasets in the HippoRAG / GFM-RAG layouts.
//! - [`synth`]: a deterministic multi-hop corpus with questions and gold documents.
//! - [`progress`]: progress bars on stderr.

pub mod answer_eval;
pub mod auth;
pub mod client;
pub mod cmd;
pub mod config;
pub mod dataset;
pub mod http;
pub mod node;
pub mod openai;
pub mod progress;
pub mod subscriptions;
pub mod synth;

/// A new empty directory under the system's temporary folder, named `<prefix>-<pid>-<millis>`.
pub fn scratch_dir(prefix: &str) -> std::io::Result<std::path::PathBuf> {
    let p = std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), streamrag_operators::transport::now_ms()));
    std::fs::create_dir_all(&p)?;
    Ok(p)
}
