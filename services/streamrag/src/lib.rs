//! The streamrag binary's library: pipeline assembly, the HTTP API, the clients behind
//! `ingest` and `ask`, and the synthetic corpus used by tests and benchmarks.
//!
//! # Layout
//! - [`config`]: the TOML config file and `STREAMRAG_KAFKA_OPT_*` variables.
//! - [`glm_cmd`]: `streamrag glm inspect` and `streamrag bench glm`.
//! - [`node`]: starts the stages of one process on the chosen transport, with clean shutdown.
//! - [`http`]: `POST /documents`, `POST /query`, `GET /health`, `GET /stats`.
//! - [`client`]: ingest and ask over Kafka, HTTP, or the embedded log of a data directory.
//! - [`bench`]: `streamrag bench graph`.
//! - [`dataset`]: retrieval datasets in the HippoRAG / GFM-RAG layouts.
//! - [`retrieval_cmd`]: `streamrag eval` and `streamrag train`.
//! - [`synth`]: a deterministic multi-hop corpus with questions and gold documents.

pub mod bench;
pub mod client;
pub mod config;
pub mod dataset;
pub mod glm_cmd;
pub mod http;
pub mod node;
pub mod progress;
pub mod resolve_bench;
pub mod retrieval_cmd;
pub mod synth;

/// A new empty directory under the system's temporary folder, named `<prefix>-<pid>-<millis>`.
pub fn scratch_dir(prefix: &str) -> std::io::Result<std::path::PathBuf> {
    let p = std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), streamrag_operators::transport::now_ms()));
    std::fs::create_dir_all(&p)?;
    Ok(p)
}
