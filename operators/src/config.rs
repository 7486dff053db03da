//! Topic names and limits shared by every stage.

use serde::{Deserialize, Serialize};

fn default_docs() -> String { "streamrag.docs".into() }
fn default_triples() -> String { "streamrag.triples".into() }
fn default_graph_deltas() -> String { "streamrag.graph-deltas".into() }
fn default_graph_changes() -> String { "streamrag.graph-changes".into() }
fn default_queries() -> String { "streamrag.queries".into() }
fn default_answers() -> String { "streamrag.answers".into() }
fn default_dead_letters() -> String { "streamrag.dead-letters".into() }

/// The topics the pipeline reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topics {
    /// Documents to index (and deletions), keyed by document id.
    #[serde(default = "default_docs")]
    pub docs: String,
    /// Extracted entities and triples, keyed by document id.
    #[serde(default = "default_triples")]
    pub triples: String,
    /// Resolved per-document graph deltas, keyed by document id.
    #[serde(default = "default_graph_deltas")]
    pub graph_deltas: String,
    /// What the kg-writer changed in the graph, keyed by document id.
    #[serde(default = "default_graph_changes")]
    pub graph_changes: String,
    /// Questions, keyed by query id.
    #[serde(default = "default_queries")]
    pub queries: String,
    /// Answers, keyed by query id.
    #[serde(default = "default_answers")]
    pub answers: String,
    /// Records any stage could not process.
    #[serde(default = "default_dead_letters")]
    pub dead_letters: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            docs: default_docs(),
            triples: default_triples(),
            graph_deltas: default_graph_deltas(),
            graph_changes: default_graph_changes(),
            queries: default_queries(),
            answers: default_answers(),
            dead_letters: default_dead_letters(),
        }
    }
}

impl Topics {
    pub fn all(&self) -> [&str; 7] {
        [&self.docs, &self.triples, &self.graph_deltas, &self.graph_changes, &self.queries, &self.answers, &self.dead_letters]
    }

    pub fn all_mut(&mut self) -> [&mut String; 7] {
        [
            &mut self.docs,
            &mut self.triples,
            &mut self.graph_deltas,
            &mut self.graph_changes,
            &mut self.queries,
            &mut self.answers,
            &mut self.dead_letters,
        ]
    }
}

fn default_max_text_bytes() -> usize { 1 << 20 }
fn default_max_batch() -> usize { 256 }

/// Bounds on input and on work per step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest document text accepted, in bytes; larger ones are dead-lettered (default 1 MiB).
    #[serde(default = "default_max_text_bytes")]
    pub max_text_bytes: usize,
    /// Most records a stage takes in one step.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_text_bytes: default_max_text_bytes(), max_batch: default_max_batch() }
    }
}
