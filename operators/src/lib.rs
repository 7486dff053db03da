//! The streamrag stages and the runtime that carries them.
//!
//! # Layout
//! - [`runtime`]: the [`runtime::Operator`] trait and the consume -> process -> produce ->
//!   commit loop; each stage is written once against it and runs unchanged on either transport.
//! - [`transport`]: the two transports, embedded (sled-backed log, the default, no broker) and
//!   Kafka (rdkafka), behind one enum picked at start-up.
//! - [`openie`], [`extract`]: document -> entities + triples (pass-through or the built-in
//!   extractor; the seam for an LLM extractor is [`openie::Extractor`]).
//! - [`resolve`]: mentions -> canonical entity ids by normalisation.
//! - [`graph`]: the knowledge graph in memory ([`graph::GraphState`]) and in sled
//!   ([`graph::GraphStore`]); [`kg_writer`] applies graph deltas to both, idempotently.
//! - [`query`]: question -> seeds -> personalized PageRank -> IDF-weighted documents -> answer.
//! - [`replay`]: catching a graph up from its offsets through the graph-deltas topic.
//! - [`snapshot`]: Parquet snapshots of the graph and the reader that rebuilds it.
//! - [`config`]: topic names and limits shared by all stages.

pub mod ann;
pub mod answer;
pub mod config;
pub mod dense;
pub mod error;
pub mod extract;
pub mod glm_retriever;
pub mod graph;
pub mod kg_writer;
pub mod llm;
pub mod llm_extract;
pub mod metrics;
pub mod normalize;
pub mod openie;
pub mod query;
pub mod resolve;
pub mod replay;
pub mod runtime;
pub mod snapshot;
pub mod subgraph;
pub mod transport;

pub use config::{Limits, Topics};
pub use error::StageError;
