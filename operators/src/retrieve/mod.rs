//! Retrieval: a question and the live graph in, ranked documents with their supporting
//! triples and seeds out. One folder, one file per step:
//!
//! - [`seeds`]: which entities the question names (seed linking).
//! - [`ppr`]: personalized PageRank from the seeds (the default retriever).
//! - [`subgraph`]: the seeds' neighbourhood the GLM reads, within a triplet budget.
//! - [`glm`]: the Graph Language Model retriever (seeds, subgraph, encoder, entity scores).
//! - [`dense`]: passage embeddings, a baseline.
//! - [`bm25`]: passage BM25 (tantivy), a baseline, kept under the data directory.
//! - [`rank`]: scored entities -> IDF-weighted documents and supporting triples.
//! - [`train`]: fitting the GLM on labelled questions over a graph.
//!
//! The query stage ([`crate::query`]) holds a [`Retriever`] and calls
//! [`Retriever::retrieve_batch`]; nothing here knows about topics or transports. The design
//! notes are in `docs/retrieval.md` and `docs/glm.md`.

pub mod bm25;
pub mod dense;
pub mod glm;
pub mod ppr;
pub mod rank;
pub mod seeds;
pub mod subgraph;
pub mod train;

use std::path::PathBuf;
use std::sync::Arc;

use streamrag_glm::device::default_device;
use streamrag_glm::SentenceEncoder;
use streamrag_schemas::{ScoredDocument, Triple};

use crate::data_dir::DataDir;
use crate::graph::GraphState;
use crate::runtime::blocking;
use crate::stages::BuildError;

pub use bm25::Bm25Index;
pub use dense::DenseIndex;
pub use glm::GlmRetriever;
pub use ppr::PprParams;

/// Which retriever answers: PPR over the entity graph (the default), the GLM (a trained
/// checkpoint), dense passage similarity, or passage BM25.
#[derive(Clone)]
pub enum Retriever {
    Ppr(PprParams),
    Glm(Arc<GlmRetriever>),
    Dense(Arc<DenseIndex>),
    Bm25(Arc<Bm25Index>),
}

impl Default for Retriever {
    fn default() -> Self {
        Retriever::Ppr(PprParams::default())
    }
}

/// Why retrieval failed.
#[derive(Debug, thiserror::Error)]
pub enum RetrieveError {
    #[error("model: {0}")]
    Model(#[from] streamrag_glm::Error),
    #[error("BM25 index: {0}")]
    Search(#[from] tantivy::TantivyError),
}

/// Which retriever a query stage is configured with, before its models are loaded.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum RetrieverChoice {
    /// Personalized PageRank over the entity graph.
    #[default]
    Ppr,
    /// The GLM, from a checkpoint `streamrag train` wrote; `batch`: graphs per forward pass.
    Glm { checkpoint: PathBuf, batch: usize },
    /// Passage embeddings with the sentence encoder in this directory (all-MiniLM-L6-v2).
    Dense { model: PathBuf },
    /// Passage BM25, its index under the data directory.
    Bm25,
}

impl RetrieverChoice {
    /// From `--retriever NAME` and its companions: glm needs a checkpoint (and is the default
    /// when one is given), dense takes the sentence encoder `dense_model`.
    pub fn from_flags(name: Option<&str>, checkpoint: Option<PathBuf>, batch: usize, dense_model: PathBuf) -> Result<Self, BuildError> {
        let bad = |m: String| Err(BuildError::Config(m));
        match (name, checkpoint) {
            (None | Some("glm"), Some(checkpoint)) => Ok(RetrieverChoice::Glm { checkpoint, batch }),
            (Some("glm"), None) => bad("--retriever glm needs --checkpoint (a directory `streamrag train` wrote)".into()),
            (None | Some("ppr"), None) => Ok(RetrieverChoice::Ppr),
            (Some("dense"), None) => Ok(RetrieverChoice::Dense { model: dense_model }),
            (Some("bm25"), None) => Ok(RetrieverChoice::Bm25),
            (Some(r), Some(_)) if r != "glm" => bad(format!("--checkpoint is for --retriever glm, not {r}")),
            (Some(r), _) => bad(format!("--retriever {r}: ppr, glm, dense or bm25")),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            RetrieverChoice::Ppr => "ppr",
            RetrieverChoice::Glm { .. } => "glm",
            RetrieverChoice::Dense { .. } => "dense",
            RetrieverChoice::Bm25 => "bm25",
        }
    }

    /// Loads the models and indexes the choice names (call from a blocking thread). A dense
    /// index starts empty, the BM25 index where its last commit left it: both are kept from the
    /// docs topic as [`crate::passages::DocSink`]s.
    pub fn load(&self, data: &DataDir) -> Result<Retriever, BuildError> {
        let what = |w: String| move |source| BuildError::Model { what: w, source };
        Ok(match self {
            RetrieverChoice::Ppr => Retriever::default(),
            RetrieverChoice::Glm { checkpoint, batch } => {
                let device = default_device();
                let mut r = GlmRetriever::load(checkpoint, &device).map_err(what(format!("the GLM checkpoint {}", checkpoint.display())))?;
                r.batch_size = (*batch).max(1);
                tracing::info!(checkpoint = %checkpoint.display(), device = ?device, budget = r.model.config.max_triplets, "the query stage uses the GLM");
                Retriever::Glm(Arc::new(r))
            }
            RetrieverChoice::Dense { model } => {
                let enc = SentenceEncoder::load(model, &default_device()).map_err(what(format!("the sentence encoder {}", model.display())))?;
                Retriever::Dense(Arc::new(DenseIndex::new(enc)))
            }
            RetrieverChoice::Bm25 => Retriever::Bm25(Arc::new(data.open_bm25()?)),
        })
    }
}

/// What retrieval found for one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    pub seeds: Vec<String>,
    pub documents: Vec<ScoredDocument>,
    pub triples: Vec<Triple>,
}

impl Retriever {
    pub fn name(&self) -> &'static str {
        match self {
            Retriever::Ppr(_) => "ppr",
            Retriever::Glm(_) => "glm",
            Retriever::Dense(_) => "dense",
            Retriever::Bm25(_) => "bm25",
        }
    }

    /// Retrieves for one question.
    pub fn retrieve(&self, g: &GraphState, question: &str, top_k: usize) -> Result<Retrieved, RetrieveError> {
        Ok(self.retrieve_batch(g, &[(question, top_k)])?.pop().expect("one result per question"))
    }

    /// Retrieves for each (question, top_k); the GLM and dense retrievers share forward passes.
    pub fn retrieve_batch(&self, g: &GraphState, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>, RetrieveError> {
        match self {
            Retriever::Ppr(p) => Ok(qs.iter().map(|(q, k)| ppr::retrieve(g, p, q, *k)).collect()),
            Retriever::Glm(m) => Ok(blocking(|| m.retrieve_batch(g, qs))?),
            Retriever::Dense(d) => Ok(blocking(|| d.retrieve_batch(qs))?),
            Retriever::Bm25(b) => Ok(blocking(|| b.retrieve_batch(qs))?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::ppr::{personalized_pagerank, PprParams};
    use super::rank::rank_documents;
    use super::seeds::seeds;
    use crate::graph::{Dirty, GraphState};
    use crate::resolve::resolve;
    use streamrag_schemas::{Extraction, SourceRef};

    fn graph(docs: &[(&str, &str, &str)]) -> GraphState {
        let mut g = GraphState::new();
        for (i, (id, title, text)) in docs.iter().enumerate() {
            let got = crate::extract::extract(title, text);
            let ex = Extraction {
                schema_version: streamrag_schemas::SCHEMA_VERSION,
                op: Default::default(),
                doc_id: id.to_string(),
                title: title.to_string(),
                entities: got.entities,
                triples: got.triples,
                extractor: "builtin".into(),
                source: SourceRef { topic: "docs".into(), partition: 0, offset: i as i64, timestamp_ms: None },
            };
            let d = resolve(&ex);
            g.apply(&d.doc_id, GraphState::entry_of(&d), &mut Dirty::default());
        }
        g
    }

    fn corpus() -> GraphState {
        graph(&[
            ("1", "Night Train", "Night Train is a 1959 film directed by Jerzy Kawalerowicz."),
            ("2", "Jerzy Kawalerowicz", "Jerzy Kawalerowicz was born in Gwoździec. He studied in Kraków."),
            ("3", "Gwoździec", "Gwoździec is a village in Ukraine."),
            ("4", "Kraków", "Kraków is a city in Poland. It lies on the Vistula."),
            ("5", "Vistula", "The Vistula is the longest river in Poland."),
        ])
    }

    #[test]
    fn seeds_prefer_the_longest_match() {
        let g = corpus();
        assert_eq!(seeds(&g, "Where was the director of Night Train born?", 10), vec!["night train"]);
        assert_eq!(seeds(&g, "Is the Vistula longer than rivers in Ukraine?", 10), vec!["ukraine", "vistula"]);
        // no exact match: falls back to shared rare words
        assert_eq!(seeds(&g, "kawalerowicz birthplace?", 10)[0], "jerzy kawalerowicz");
    }

    #[test]
    fn multi_hop_question_reaches_the_second_document() {
        let g = corpus();
        let r = Retriever::default().retrieve(&g, "Where was the director of Night Train born?", 3).unwrap();
        let ids: Vec<&str> = r.documents.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids[0], "1", "{r:?}");
        assert!(ids.contains(&"2"), "the director's page is in the top 3: {r:?}");
        assert!(r.triples.iter().any(|t| t.subject == "Night Train" && t.object == "Jerzy Kawalerowicz"), "{r:?}");
        assert_eq!(r.seeds, vec!["Night Train"]);
    }

    #[test]
    fn pagerank_mass_is_a_distribution_and_prefers_near_nodes() {
        let g = corpus();
        let s = personalized_pagerank(&g, &["night train".to_string()], &PprParams::default());
        let total: f64 = s.values().sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        assert!(s["jerzy kawalerowicz"] > s["vistula"]);
        assert!(s.get("ukraine").copied().unwrap_or(0.0) < s["gwoździec"]);
    }

    #[test]
    fn idf_ranking_matches_the_formula() {
        let g = corpus();
        let ents = vec![("poland".to_string(), 1.0), ("vistula".to_string(), 0.5)];
        let docs = rank_documents(&g, &ents, 5);
        // poland: docs 4, 5 (df 2); vistula: docs 4, 5 (df 2) -> both 1.0, tie broken by entity score sum
        assert_eq!(docs.len(), 2);
        assert!((docs[0].score - 1.0).abs() < 1e-9);
        let unknown = rank_documents(&g, &[("nope".into(), 1.0)], 5);
        assert!(unknown.is_empty());
    }
}
