//! The streamrag stages and the runtime that carries them.
//!
//! # Layout
//! - [`runtime`]: the [`runtime::Operator`] trait and the consume -> process -> produce ->
//!   commit loop; each stage is written once against it and runs unchanged on either transport.
//! - [`transport`]: the two transports, embedded (sled-backed log, the default, no broker) and
//!   Kafka (rdkafka), behind one enum picked at start-up; [`transport::connect`].
//! - [`stages`]: what the stages of one process share while they are built ([`stages::Shared`]),
//!   their config sections, and [`stages::StageKind`]; each operator's `build` is its constructor.
//! - [`data_dir`]: the data directory's layout, and the only place it is spelled.
//! - [`openie`], [`extract`], [`llm_extract`]: document -> entities + triples (pass-through,
//!   the built-in extractor, or an LLM with its response cache).
//! - [`resolve`], [`ann`]: mentions -> canonical entity ids by normalisation ([`normalize`]), or
//!   by name embeddings searched in an HNSW index.
//! - [`graph`]: the knowledge graph in memory ([`graph::GraphState`]) and in sled
//!   ([`graph::GraphStore`]); [`kg_writer`] applies graph deltas to both, idempotently, and
//!   holds the [`kg_writer::LiveGraph`] queries read.
//! - [`query`]: the query stage: questions -> [`retrieve`] -> answers; [`standing`]: standing
//!   queries, answered again when a graph change reaches what their answer depended on.
//! - [`retrieve`]: the hybrid (the default), BM25, dense, seeds, PPR, subgraph, the GLM,
//!   document ranking, and GLM training; one folder (docs/retrieval.md).
//! - [`answer`], [`llm`]: answers written by an LLM (an OpenAI-compatible endpoint or a local
//!   GGUF model) over the retrieved passages.
//! - [`passages`]: the docs reader, keeping what needs passage text from the docs topic (the
//!   answer passages in memory, the BM25 and vector indexes on disk).
//! - [`snapshot`]: Parquet snapshots of the graph, periodic snapshots, and the reader that
//!   rebuilds a graph; [`replay`]: a snapshot, then the log after it.
//! - [`metrics`]: the process's counters and histograms and their one Prometheus renderer.
//! - [`progress`]: progress of long work, reported to whoever runs it; [`hash`]: the one
//!   stable hash (FNV-1a) of what is stored.
//! - [`config`]: topic names and limits shared by all stages; [`error`]: record errors (dead
//!   letters) and stage faults (what stops a stage).

pub mod access;
pub mod ann;
pub mod bucket;
pub mod answer;
pub mod config;
pub mod data_dir;
pub mod error;
pub mod extract;
pub mod graph;
pub mod hash;
pub mod kg_writer;
pub mod llm;
pub mod llm_extract;
pub mod metrics;
pub mod normalize;
pub mod openie;
pub mod passages;
pub mod progress;
pub mod query;
pub mod resolve;
pub mod replay;
pub mod retrieve;
pub mod runtime;
pub mod snapshot;
pub mod standing;
pub mod stages;
pub mod transport;

pub use config::{Limits, Topics};
pub use data_dir::DataDir;
pub use error::{StageError, StageFault};
