//! Building the stages of one process. Each operator has a constructor that builds it from its
//! own config section and what the process shares ([`Shared`]: topics, limits, the data
//! directory, the LLMs, the live graph); the node picks them by an explicit match over
//! [`StageKind`] and runs what they return. Nothing here is registered by name at run time.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::{Limits, Topics};
use crate::data_dir::{DataDir, OpenError};
use crate::kg_writer::LiveGraph;
use crate::llm::{Llm, LlmSettings};
use crate::retrieve::RetrieverChoice;

/// A stage a process can run, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StageKind {
    OpenIe,
    Resolve,
    KgWriter,
    Query,
}

impl StageKind {
    pub const ALL: [StageKind; 4] = [StageKind::OpenIe, StageKind::Resolve, StageKind::KgWriter, StageKind::Query];

    pub fn name(self) -> &'static str {
        match self {
            StageKind::OpenIe => "openie",
            StageKind::Resolve => "resolve",
            StageKind::KgWriter => "kg-writer",
            StageKind::Query => "query",
        }
    }
}

impl std::fmt::Display for StageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for StageKind {
    type Err = BuildError;
    fn from_str(s: &str) -> Result<Self, BuildError> {
        StageKind::ALL.into_iter().find(|k| k.name() == s.trim()).ok_or_else(|| BuildError::UnknownStage(s.to_string()))
    }
}

/// The openie stage's section: where triples come from when a document carries none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenIeConfig {
    /// The extraction LLM; None: the built-in extractor.
    pub extract_llm: Option<LlmSettings>,
}

/// The resolve stage's section.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveConfig {
    /// Entity resolution by name embeddings with this sentence encoder (all-MiniLM-L6-v2
    /// directory); None: by normalised name only.
    pub model: Option<PathBuf>,
    /// Cosine at or above which a new name is linked to an existing entity (a merge needs the
    /// same name).
    pub threshold: f32,
}

impl Default for ResolveConfig {
    fn default() -> Self {
        ResolveConfig { model: None, threshold: 0.8 }
    }
}

/// Periodic snapshots: the kg-writer writes them; a query replica starts from the newest.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotConfig {
    pub dir: Option<PathBuf>,
    /// How often the kg-writer writes one; None: never.
    pub every: Option<Duration>,
    /// Periodic snapshots kept (older ones are removed).
    pub keep: usize,
    /// Also in object storage (`s3://bucket/prefix`, see [`crate::bucket`]): the kg-writer
    /// uploads each one, a query replica starts from the newest there that reads whole.
    pub url: Option<String>,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig { dir: None, every: None, keep: 3, url: None }
    }
}

/// The query stage's section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryConfig {
    pub retriever: RetrieverChoice,
    /// The LLM that writes answers; None: retrieval only.
    pub answer_llm: Option<LlmSettings>,
    /// Most graph changes the standing queries read at once (None: the watcher's default).
    pub standing_batch: Option<usize>,
}

/// Why a stage could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("unknown stage {0:?}; the stages are openie, resolve, kg-writer, query")]
    UnknownStage(String),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Store(#[from] crate::graph::StoreError),
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    #[error(transparent)]
    Resolver(#[from] crate::resolve::ResolverError),
    #[error(transparent)]
    Bucket(#[from] crate::bucket::BucketError),
    /// A model (GLM checkpoint, sentence encoder) could not be loaded.
    #[error("loading {what}: {source}")]
    Model { what: String, source: streamrag_glm::Error },
    #[error("opening the {role} LLM: {message}")]
    Llm { role: &'static str, message: String },
    /// Settings that do not fit together.
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

/// LLMs opened once per distinct setting (a local model loads once for both roles), each role
/// with its own counters.
#[derive(Default)]
pub struct LlmPool {
    opened: Vec<(LlmSettings, Llm)>,
    /// The LLM of each role (`extract`, `answer`) this process uses.
    pub roles: Vec<(&'static str, Llm)>,
}

impl LlmPool {
    pub async fn open(&mut self, role: &'static str, s: &LlmSettings) -> Result<Llm, BuildError> {
        let llm = match self.opened.iter().find(|(o, _)| o == s) {
            Some((_, l)) => l.for_role(),
            None => {
                let s2 = s.clone();
                let l = tokio::task::spawn_blocking(move || s2.open(&streamrag_glm::device::default_device()))
                    .await?
                    .map_err(|e| BuildError::Llm { role, message: e.to_string() })?;
                self.opened.push((s.clone(), l.clone()));
                l
            }
        };
        tracing::info!(role, model = %llm.model_id(), "LLM ready");
        crate::metrics::global().register_llm(role, &llm);
        self.roles.push((role, llm.clone()));
        Ok(llm)
    }
}

/// What the stages of one process share while they are built.
pub struct Shared {
    pub topics: Topics,
    pub limits: Limits,
    pub data: DataDir,
    pub llms: LlmPool,
    /// The live graph, once the kg-writer or a query replica made it.
    pub graph: Option<LiveGraph>,
    /// Bumped by the graph's writer after every applied batch (live documents).
    pub applied: watch::Sender<usize>,
    /// For a query replica that started from a snapshot: the offsets that snapshot reflected.
    pub started_from: Option<BTreeMap<String, i64>>,
}

impl Shared {
    pub fn new(topics: Topics, limits: Limits, data: DataDir) -> (Self, watch::Receiver<usize>) {
        let (applied, rx) = watch::channel(0usize);
        (Shared { topics, limits, data, llms: LlmPool::default(), graph: None, applied, started_from: None }, rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_round_trip_and_sort_in_pipeline_order() {
        for k in StageKind::ALL {
            assert_eq!(k.name().parse::<StageKind>().unwrap(), k);
        }
        let mut v: Vec<StageKind> = ["query", "kg-writer", "openie"].iter().map(|s| s.parse().unwrap()).collect();
        v.sort();
        assert_eq!(v, vec![StageKind::OpenIe, StageKind::KgWriter, StageKind::Query]);
        let e = "index".parse::<StageKind>().unwrap_err().to_string();
        assert!(e.contains("\"index\"") && e.contains("kg-writer"), "{e}");
    }
}
