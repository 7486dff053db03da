//! The data directory of one node, and the only place its layout is spelled:
//!
//! ```text
//! DATA/log/        the embedded transport's topics and consumer-group commits (sled)
//! DATA/graph/      the kg-writer's graph store with its applied offsets and outbox (sled)
//! DATA/llm-cache/  LLM extraction responses, so a replay makes no call (sled)
//! DATA/resolver/   entity-resolution decisions and name vectors (sled)
//! DATA/bm25/       the passages' BM25 index (tantivy) with the docs position it reflects
//! DATA/vectors/    the passages' embeddings (sled) with the docs position they reflect
//! DATA/fact-vectors/ the facts' embeddings (sled) with the graph-changes position they reflect
//! ```
//!
//! sled allows one process per database: each opener says, when another process holds it,
//! how to reach that process instead.

use std::path::{Path, PathBuf};

use crate::error::TransportError;
use crate::graph::{GraphStore, StoreError};
use crate::transport::embedded::EmbeddedLog;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir(PathBuf);

/// A database of the data directory could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{what} under {dir}: {source}{hint}", dir = dir.display(), hint = hint(source.to_string()))]
pub struct OpenError {
    pub what: &'static str,
    pub dir: PathBuf,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// What to do when sled says another process holds the directory.
fn hint(message: String) -> &'static str {
    if message.contains("lock") || message.contains("WouldBlock") || message.contains("Resource temporarily unavailable") {
        "\nhint: a `streamrag run` holds this data directory: stop it, or reach it with --http ADDR"
    } else {
        ""
    }
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DataDir(root.into())
    }

    pub fn root(&self) -> &Path {
        &self.0
    }

    pub fn log_path(&self) -> PathBuf {
        self.0.join("log")
    }

    pub fn graph_path(&self) -> PathBuf {
        self.0.join("graph")
    }

    pub fn llm_cache_path(&self) -> PathBuf {
        self.0.join("llm-cache")
    }

    pub fn resolver_path(&self) -> PathBuf {
        self.0.join("resolver")
    }

    pub fn bm25_path(&self) -> PathBuf {
        self.0.join("bm25")
    }

    pub fn vectors_path(&self) -> PathBuf {
        self.0.join("vectors")
    }

    /// The standing queries' last published answers.
    pub fn standing_path(&self) -> PathBuf {
        self.0.join("standing")
    }

    pub fn fact_vectors_path(&self) -> PathBuf {
        self.0.join("fact-vectors")
    }

    /// Whether the directory holds an embedded log.
    pub fn has_log(&self) -> bool {
        self.log_path().exists()
    }

    fn fail(&self, what: &'static str) -> impl Fn(Box<dyn std::error::Error + Send + Sync>) -> OpenError + '_ {
        move |source| OpenError { what, dir: self.0.clone(), source }
    }

    /// The embedded log (created, with the directory, if missing).
    pub fn open_log(&self) -> Result<EmbeddedLog, OpenError> {
        std::fs::create_dir_all(&self.0).map_err(|e| self.fail("the data directory")(Box::new(e)))?;
        EmbeddedLog::open(&self.log_path()).map_err(|e: TransportError| self.fail("the embedded log")(Box::new(e)))
    }

    /// The graph store (created if missing).
    pub fn open_graph(&self) -> Result<GraphStore, OpenError> {
        GraphStore::open(&self.graph_path()).map_err(|e: StoreError| self.fail("the graph store")(Box::new(e)))
    }

    /// Removes the graph store (a stopped node's, before a replay replaces it).
    pub fn remove_graph(&self) -> std::io::Result<()> {
        std::fs::remove_dir_all(self.graph_path())
    }

    /// The passages' BM25 index (created if missing).
    pub fn open_bm25(&self) -> Result<crate::retrieve::bm25::Bm25Index, OpenError> {
        crate::retrieve::bm25::Bm25Index::open(&self.bm25_path()).map_err(|e| self.fail("the BM25 index")(Box::new(e)))
    }

    /// The LLM response cache.
    pub fn open_llm_cache(&self) -> Result<sled::Tree, OpenError> {
        crate::llm_extract::open_cache(&self.llm_cache_path()).map_err(|e| self.fail("the LLM cache")(Box::new(e)))
    }

    /// The entity resolver's decisions.
    pub fn open_resolver(&self) -> Result<sled::Tree, OpenError> {
        crate::resolve::open_store(&self.resolver_path()).map_err(|e| self.fail("the entity resolver store")(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_opener_is_told_how_to_reach_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = DataDir::new(dir.path());
        let _held = d.open_graph().unwrap();
        let e = d.open_graph().err().expect("sled is one process per directory... and one handle per process here");
        let msg = e.to_string();
        assert!(msg.starts_with("the graph store under "), "{msg}");
        assert!(msg.contains("--http ADDR"), "{msg}");
    }
}
