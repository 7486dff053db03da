//! Retrieval: a question and the live graph in, ranked documents with their supporting
//! triples and seeds out. One folder, one file per step:
//!
//! - [`seeds`]: which entities the question names (seed linking).
//! - [`ppr`]: personalized PageRank from the seeds named in the question.
//! - [`subgraph`]: the seeds' neighbourhood the GLM reads, within a triplet budget.
//! - [`glm`]: the Graph Language Model retriever (seeds, subgraph, encoder, entity scores).
//! - [`checkpoint`]: the GLM checkpoint a running node follows, swapped in when it changes.
//! - [`dense`]: passage embeddings (a baseline alone), kept under the data directory.
//! - [`bm25`]: passage BM25 (tantivy; a baseline alone), kept under the data directory.
//! - [`hybrid`]: the default: BM25, dense, names and facts meeting in one walk over entities
//!   and passages.
//! - [`rank`]: scored entities -> IDF-weighted documents and supporting triples.
//! - [`train`]: fitting the GLM on labelled questions over a graph.
//!
//! The query stage ([`crate::query`]) holds a [`Retriever`] and calls
//! [`Retriever::retrieve_batch`]; nothing here knows about topics or transports. The design
//! notes are in `docs/retrieval.md` and `docs/glm.md`.

pub mod bm25;
pub mod checkpoint;
pub mod dense;
pub mod facts;
pub mod glm;
pub mod hybrid;
pub mod ppr;
pub mod rank;
pub mod seeds;
pub mod selfmade;
pub mod subgraph;
pub mod train;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use streamrag_glm::device::default_device;
use streamrag_glm::SentenceEncoder;
use streamrag_schemas::{ScoredDocument, ScoredEntity, Triple};

use crate::data_dir::DataDir;
use crate::graph::GraphState;
use crate::runtime::blocking;
use crate::stages::BuildError;

pub use bm25::Bm25Index;
pub use checkpoint::GlmSlot;
pub use dense::DenseIndex;
pub use facts::{FactVectors, FactsReader};
pub use glm::GlmRetriever;
pub use hybrid::{Hybrid, HybridParams, PriorScale};
pub use ppr::PprParams;

use crate::passages::DocSink;

/// Which retriever answers: the hybrid (the default), PPR over the entity graph, the GLM (a
/// trained checkpoint), dense passage similarity, or passage BM25.
#[derive(Clone)]
pub enum Retriever {
    Hybrid(Arc<Hybrid>),
    Ppr(PprParams),
    Glm(Arc<GlmSlot>),
    Dense(Arc<DenseIndex>),
    Bm25(Arc<Bm25Index>),
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
#[derive(Debug, Clone, PartialEq)]
pub enum RetrieverChoice {
    /// BM25, dense, names and facts in one walk; `model`: the sentence encoder of its dense
    /// part (None: BM25 alone proposes passages).
    /// `glm`: a GLM checkpoint (and its graphs per forward pass) whose ranking joins the
    /// hybrid's final fusion.
    Hybrid { model: Option<PathBuf>, params: Box<HybridParams>, glm: Option<(PathBuf, usize)> },
    /// Personalized PageRank over the entity graph.
    Ppr,
    /// The GLM, from a checkpoint `streamrag train` wrote; `batch`: graphs per forward pass;
    /// `triplets`: the subgraph budget at query time (None: the one it was trained with).
    Glm { checkpoint: PathBuf, batch: usize, triplets: Option<usize> },
    /// Passage embeddings with the sentence encoder in this directory (all-MiniLM-L6-v2).
    Dense { model: PathBuf },
    /// Passage BM25, its index under the data directory.
    Bm25,
}

impl Default for RetrieverChoice {
    /// The hybrid, dense from [`default_sentence_model`].
    fn default() -> Self {
        RetrieverChoice::hybrid(default_sentence_model())
    }
}

/// Where the all-MiniLM-L6-v2 files are when no flag says: $STREAMRAG_MINILM_DIR, else
/// `.models/all-MiniLM-L6-v2` (what scripts/fetch-models.sh fills) in the working directory,
/// else in the nearest folder above the executable that has one (a checkout's
/// `target/release/streamrag` finds the checkout's `.models/` from any directory). When none
/// has it, the working directory's path, so that the error names where it was looked for.
pub fn default_sentence_model() -> PathBuf {
    if let Some(d) = std::env::var_os("STREAMRAG_MINILM_DIR") {
        return PathBuf::from(d);
    }
    let rel = Path::new(".models/all-MiniLM-L6-v2");
    let exe = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok());
    model_dir_from(rel, exe.as_deref())
}

/// `rel` in the working directory if it is there, else under the nearest ancestor of `exe`
/// that holds it, else `rel` itself.
fn model_dir_from(rel: &Path, exe: Option<&Path>) -> PathBuf {
    let present = |d: &Path| d.join("config.json").is_file();
    if present(rel) {
        return rel.to_path_buf();
    }
    exe.into_iter().flat_map(Path::ancestors).skip(1).map(|a| a.join(rel)).find(|d| present(d)).unwrap_or_else(|| rel.to_path_buf())
}

impl RetrieverChoice {
    /// From `--retriever NAME` and its companions: glm needs a checkpoint (and is the default
    /// when one is given); the hybrid with a checkpoint fuses the GLM's ranking into its own;
    /// dense and the hybrid (the default otherwise) take the sentence encoder `dense_model`.
    /// The hybrid goes without its dense part, with a warning, when no encoder is there; dense
    /// refuses.
    pub fn from_flags(name: Option<&str>, checkpoint: Option<PathBuf>, batch: usize, dense_model: PathBuf) -> Result<Self, BuildError> {
        let bad = |m: String| Err(BuildError::Config(m));
        match (name, checkpoint) {
            (None | Some("glm"), Some(checkpoint)) => Ok(RetrieverChoice::Glm { checkpoint, batch, triplets: None }),
            (Some("hybrid"), Some(checkpoint)) => Ok(RetrieverChoice::Hybrid { model: Some(dense_model), params: Box::default(), glm: Some((checkpoint, batch)) }),
            (Some("glm"), None) => bad("--retriever glm needs --checkpoint (a directory `streamrag train` wrote)".into()),
            (None | Some("hybrid"), None) => Ok(RetrieverChoice::hybrid(dense_model)),
            (Some("ppr"), None) => Ok(RetrieverChoice::Ppr),
            (Some("dense"), None) => Ok(RetrieverChoice::Dense { model: dense_model }),
            (Some("bm25"), None) => Ok(RetrieverChoice::Bm25),
            (Some(r), Some(_)) if r != "glm" => bad(format!("--checkpoint is for --retriever glm or hybrid, not {r}")),
            (Some(r), _) => bad(format!("--retriever {r}: hybrid, ppr, glm, dense or bm25")),
        }
    }

    /// The hybrid with its default weights, dense from `model` (checked when it loads).
    pub fn hybrid(model: PathBuf) -> Self {
        RetrieverChoice::Hybrid { model: Some(model), params: Box::default(), glm: None }
    }

    /// The GLM's subgraph budget at query time, for the GLM alone (the hybrid's is its
    /// `glm_triplets` weight); 0 or None: the checkpoint's.
    pub fn set_glm_triplets(&mut self, n: Option<usize>) {
        if let RetrieverChoice::Glm { triplets, .. } = self {
            *triplets = n;
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            RetrieverChoice::Hybrid { .. } => "hybrid",
            RetrieverChoice::Ppr => "ppr",
            RetrieverChoice::Glm { .. } => "glm",
            RetrieverChoice::Dense { .. } => "dense",
            RetrieverChoice::Bm25 => "bm25",
        }
    }

    /// Loads the models and indexes the choice names (call from a blocking thread). The dense
    /// and BM25 indexes open where their last commits left them under the data directory; both
    /// are kept from the docs topic as [`DocSink`]s ([`Retriever::sinks`]).
    pub fn load(&self, data: &DataDir) -> Result<Retriever, BuildError> {
        let what = |w: String| move |source| BuildError::Model { what: w, source };
        let dense = |model: &PathBuf| -> Result<DenseIndex, BuildError> {
            let enc = SentenceEncoder::load(model, &default_device()).map_err(what(format!("the sentence encoder {}", model.display())))?;
            let dir = data.vectors_path();
            // an OpenError, so that a directory another process holds gets its hint
            DenseIndex::open(enc, &dir, &encoder_id(model)).map_err(|e| crate::data_dir::OpenError { what: "the passage vectors", dir, source: Box::new(e.source) }.into())
        };
        Ok(match self {
            RetrieverChoice::Hybrid { model, params, glm } => {
                let dense = model.as_ref().filter(|m| has_encoder(m)).map(|m| dense(m).map(|d| (m, d))).transpose()?;
                // the facts' vectors share the passages' encoder
                let facts = match &dense {
                    Some((m, d)) => {
                        let dir = data.fact_vectors_path();
                        let f = FactVectors::open(d.encoder.clone(), &dir, &encoder_id(m))
                            .map_err(|e| crate::data_dir::OpenError { what: "the fact vectors", dir, source: Box::new(e.source) })?;
                        Some(Arc::new(f))
                    }
                    None => None,
                };
                let glm = match glm {
                    Some((dir, _)) if !params.asks_glm() => {
                        tracing::warn!(checkpoint = %dir.display(), "the hybrid asks its GLM checkpoint only with glm_seed or fuse_glm above 0 ([query.hybrid], eval --set); both are 0, so it is not loaded");
                        None
                    }
                    Some((dir, batch)) => Some(glm_slot(dir, *batch, Some(params.glm_triplets))?),
                    None => None,
                };
                Retriever::Hybrid(Arc::new(Hybrid { bm25: Arc::new(data.open_bm25()?), dense: dense.map(|(_, d)| Arc::new(d)), facts, glm, params: (**params).clone() }))
            }
            RetrieverChoice::Ppr => Retriever::Ppr(PprParams::default()),
            RetrieverChoice::Glm { checkpoint, batch, triplets } => Retriever::Glm(glm_slot(checkpoint, *batch, *triplets)?),
            RetrieverChoice::Dense { model } => Retriever::Dense(Arc::new(dense(model)?)),
            RetrieverChoice::Bm25 => Retriever::Bm25(Arc::new(data.open_bm25()?)),
        })
    }
}

/// The GLM checkpoint in `dir`, loaded and followed ([`GlmSlot::watch`]); `triplets`: the
/// subgraph budget (None or 0: the checkpoint's).
fn glm_slot(dir: &Path, batch: usize, triplets: Option<usize>) -> Result<Arc<GlmSlot>, BuildError> {
    let device = default_device();
    let loaded = GlmSlot::load(dir, &device, batch, triplets.filter(|t| *t > 0));
    let slot = Arc::new(loaded.map_err(|source| BuildError::Model { what: format!("the GLM checkpoint {}", dir.display()), source })?);
    let now = slot.current();
    tracing::info!(checkpoint = %now.id, device = ?device, budget = now.glm.params().max_triplets, "the query stage uses the GLM");
    slot.watch(checkpoint::CHECKPOINT_POLL);
    Ok(slot)
}

/// Whether `model` holds a sentence encoder; says so once, when the hybrid is loaded without one.
fn has_encoder(model: &std::path::Path) -> bool {
    let there = model.join("config.json").is_file() && model.join("model.safetensors").is_file();
    if !there {
        tracing::warn!(dir = %model.display(), "no sentence encoder there (scripts/fetch-models.sh fetches one): the hybrid retriever runs without its dense part");
    }
    there
}

/// What identifies an encoder's vectors: its directory's name and the size of its weights.
pub fn encoder_id(model: &std::path::Path) -> String {
    let name = model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let size = std::fs::metadata(model.join("model.safetensors")).map(|m| m.len()).unwrap_or(0);
    format!("{name} {size}")
}

/// What retrieval found for one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    pub seeds: Vec<String>,
    pub documents: Vec<ScoredDocument>,
    pub triples: Vec<Triple>,
    /// The seeds' and the triples' entities with the walk's score for each (best 1), best
    /// first; empty from retrievers that do not walk the graph.
    pub entities: Vec<ScoredEntity>,
    /// The GLM checkpoint that scored the question ([`checkpoint::Loaded::id`]), when one did.
    pub checkpoint: Option<String>,
}

impl Retriever {
    pub fn name(&self) -> &'static str {
        match self {
            Retriever::Hybrid(_) => "hybrid",
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
            Retriever::Hybrid(h) => blocking(|| h.retrieve_batch(g, qs)),
            Retriever::Ppr(p) => Ok(qs.iter().map(|(q, k)| ppr::retrieve(g, p, q, *k)).collect()),
            Retriever::Glm(slot) => {
                // one model for the whole batch, whatever the slot swaps to meanwhile
                let m = slot.current();
                let mut rs = blocking(|| m.glm.retrieve_batch(g, qs))?;
                for r in &mut rs {
                    r.checkpoint = Some(m.id.clone());
                }
                Ok(rs)
            }
            Retriever::Dense(d) => Ok(readable(g, qs, |qs| blocking(|| d.retrieve_batch(qs)))?),
            Retriever::Bm25(b) => Ok(readable(g, qs, |qs| blocking(|| b.retrieve_batch(qs)))?),
        }
    }
}

/// How many more hits a passage index is asked for when `g` is an access view, to find `k`
/// its reader may read.
pub const VIEW_OVERFETCH: usize = 4;

/// How many hits to ask a passage index for, to keep `k` that `g`'s reader may read: `k`
/// from the whole graph, [`VIEW_OVERFETCH`] times `k` from an access view.
pub(crate) fn view_fetch(g: &GraphState, k: usize) -> usize {
    if g.is_view() {
        k.saturating_mul(VIEW_OVERFETCH)
    } else {
        k
    }
}

/// A passage index's hits (best first) as `g`'s reader may read them: from an access view,
/// those the view holds, the best `k`; from the whole graph, all of them.
pub(crate) fn view_hits(g: &GraphState, hits: &mut Vec<ScoredDocument>, k: usize) {
    if g.is_view() {
        hits.retain(|h| g.readable(&h.id));
        hits.truncate(k);
    }
}

/// A passage index's results for `qs`, only the documents `g` lets its reader read.
fn readable<E>(g: &GraphState, qs: &[(&str, usize)], search: impl FnOnce(&[(&str, usize)]) -> Result<Vec<Retrieved>, E>) -> Result<Vec<Retrieved>, E> {
    let more: Vec<(&str, usize)> = qs.iter().map(|(q, k)| (*q, view_fetch(g, *k))).collect();
    let mut rs = search(&more)?;
    for (r, (_, k)) in rs.iter_mut().zip(qs) {
        view_hits(g, &mut r.documents, *k);
    }
    Ok(rs)
}

impl Retriever {
    /// The passage indexes this retriever reads, for a docs reader to keep from the docs topic.
    pub fn sinks(&self) -> Vec<Arc<dyn DocSink>> {
        match self {
            Retriever::Hybrid(h) => {
                let mut v: Vec<Arc<dyn DocSink>> = vec![h.bm25.clone()];
                if let Some(d) = &h.dense {
                    v.push(d.clone());
                }
                v
            }
            Retriever::Dense(d) => vec![d.clone()],
            Retriever::Bm25(b) => vec![b.clone()],
            Retriever::Ppr(_) | Retriever::Glm(_) => vec![],
        }
    }

    /// The fact vectors this retriever reads, for a facts reader to keep from the graph-changes
    /// topic.
    pub fn facts(&self) -> Option<Arc<FactVectors>> {
        match self {
            Retriever::Hybrid(h) => h.facts.clone(),
            _ => None,
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
                access: Default::default(),
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
            g.apply(&d.doc_id, GraphState::entry_of(&d).as_ref(), &mut Dirty::default());
        }
        g
    }

    #[test]
    fn a_concept_has_no_page_by_a_qualified_title() {
        let g = graph(&[
            ("dab", "Movie (disambiguation)", "Movie may refer to a film. A movie theater shows a movie."),
            ("blue", "Blue Harbor", "Blue Harbor is a crime story. The movie was shot in a small harbor town."),
            ("red", "Red Door", "Red Door is a movie about a door."),
        ]);
        let movie = g.entity("movie").expect("the concept is an entity");
        assert!(hybrid::concept(movie), "written in lower case by two pages of three");
        assert!(!hybrid::concept(g.entity("blue harbor").unwrap()));
        let own = |concept_pages: bool| {
            let p = HybridParams { concept_pages, ..HybridParams::default() };
            hybrid::own_pages(&g, movie, &p, false).iter().map(|d| d.id().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(own(false), vec!["dab"], "as a name, the page titled by it and a qualifier");
        assert!(own(true).is_empty(), "as a concept, none");
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
    fn a_hub_asked_about_each_walk_entity_gives_the_edges_its_neighbours_give() {
        let g = corpus();
        // the walk: every entity but one, so a neighbour outside it must be left out both ways
        let mut ents: Vec<_> = g.entities().collect();
        ents.sort_by_key(|e| e.id());
        let left_out = ents.iter().position(|e| e.id() == "ukraine").expect("ukraine");
        ents.remove(left_out);
        let mut node = vec![u32::MAX; g.entity_slot_count()];
        for (i, e) in ents.iter().enumerate() {
            node[e.slot() as usize] = i as u32;
        }
        let sorted = |mut v: Vec<(u32, u32, f64)>| {
            v.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            v
        };
        let walked = sorted(super::hybrid::entity_edges(&ents, &node, usize::MAX));
        let asked = sorted(super::hybrid::entity_edges(&ents, &node, 0));
        assert!(walked.len() >= 4, "{walked:?}");
        assert_eq!(walked, asked);
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
        // (the ranker sums 1 / df over the walk's best entities: at the default 20 a five-page
        // corpus hands it nearly every entity, and the concept nodes of the pages far from the
        // question, "village" and "city", then outweigh the walk)
        let r = Retriever::Ppr(PprParams { top_entities: 5, ..PprParams::default() }).retrieve(&g, "Where was the director of Night Train born?", 3).unwrap();
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

    /// The sample corpus of the README demo, through the built-in extractor, with BM25 beside it.
    fn samples() -> (GraphState, Hybrid) {
        let lines: Vec<serde_json::Value> =
            include_str!("../../../samples/corpus.jsonl").lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
        let docs: Vec<(String, String, String)> =
            lines.iter().map(|v| (v["id"].as_str().unwrap().to_string(), v["title"].as_str().unwrap().to_string(), v["text"].as_str().unwrap().to_string())).collect();
        let refs: Vec<(&str, &str, &str)> = docs.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
        let bm25 = Arc::new(Bm25Index::in_memory().unwrap());
        DocSink::upsert(&*bm25, &docs).unwrap();
        DocSink::commit(&*bm25, &[(0, docs.len() as i64)].into()).unwrap();
        (graph(&refs), Hybrid { bm25, dense: None, facts: None, glm: None, params: HybridParams::default() })
    }

    fn top(g: &GraphState, r: &Retriever, q: &str, k: usize) -> Vec<String> {
        r.retrieve(g, q, k).unwrap().documents.into_iter().map(|d| d.id).collect()
    }

    #[test]
    fn the_hybrid_reads_what_is_asked_not_only_the_names() {
        let (g, h) = samples();
        let r = Retriever::Hybrid(Arc::new(h.clone()));
        let river = top(&g, &r, "Which river flows through the city where Marie Curie was born?", 3);
        let husband = top(&g, &r, "In which city was the husband of Marie Curie born?", 4);
        // without dense too, the river question's hop leads to Warsaw's page
        assert!(river.contains(&"marie-curie".to_string()) && river.contains(&"warsaw".to_string()), "{river:?}");
        // without dense (or the facts' vectors), nothing says "husband" is "married": Pierre
        // Curie's page is 4th here, after his daughter's, whose facts name both parents (with
        // the default encoder the demo puts it first)
        assert!(husband.contains(&"pierre-curie".to_string()), "{husband:?}");
        assert!(!river.contains(&"pierre-curie".to_string()), "{river:?}");
        assert_ne!(river, husband, "same names, different questions, different evidence");
        // no capitalised name at all: still linked (lexically, through the passages and their facts)
        let dynamite = top(&g, &r, "In which city are the prizes founded by the inventor of dynamite presented?", 3);
        assert!(dynamite.contains(&"nobel-prize".to_string()), "{dynamite:?}");
        // the matched facts come back as evidence, and name their ends as seeds
        let got = r.retrieve(&g, "In which city was the husband of Marie Curie born?", 3).unwrap();
        assert!(got.seeds.contains(&"Marie Curie".to_string()), "{got:?}");
        assert!(!got.triples.is_empty(), "{got:?}");
        // each part can be switched off, and the walk alone differs from the prior alone
        let abl = h.params.ablations();
        assert_eq!(abl.len(), 21, "the rank fusion is off by default: no row for it");
        assert!(abl.iter().all(|(_, p)| *p != h.params));
        let mut fused = h.params.clone();
        fused.set("fuse_bm25", "1").unwrap();
        assert_eq!(fused.ablations().len(), 22);
        let prior_only = abl.iter().find(|(n, _)| n.contains("prior only")).unwrap().1.clone();
        let prior_only = Retriever::Hybrid(Arc::new(Hybrid { params: prior_only, ..h.clone() }));
        assert!(!prior_only.retrieve(&g, "Which river flows through the city where Marie Curie was born?", 3).unwrap().documents.is_empty());
        // unknown words, empty index hits: an empty answer, not an error
        assert!(r.retrieve(&g, "xyzzy plugh", 3).unwrap().documents.is_empty());
    }

    #[test]
    fn a_question_naming_two_things_gets_both_their_pages_first() {
        let (g, h) = samples();
        let q = "Who was born first, Isaac Newton or Charles Darwin?";
        let on = top(&g, &Retriever::Hybrid(Arc::new(h.clone())), q, 2);
        let mut want = vec!["charles-darwin".to_string(), "isaac-newton".to_string()];
        let mut got = on.clone();
        got.sort();
        want.sort();
        // (without name_pages the walk puts Westminster Abbey, where both are buried, second)
        assert_eq!(got, want, "{on:?}");
    }

    #[test]
    fn the_bridge_a_matched_fact_crosses_leads_to_its_page() {
        let (g, h) = samples();
        let q = "Which river flows through the city where Marie Curie was born?";
        let score = |p: HybridParams| {
            let r = Retriever::Hybrid(Arc::new(Hybrid { params: p, ..h.clone() }));
            let got = r.retrieve(&g, q, 5).unwrap();
            assert!(got.triples.iter().any(|t| t.object == "Warsaw"), "the fact that crosses to Warsaw is matched: {got:?}");
            let top = got.documents[0].score;
            got.documents.iter().find(|d| d.id == "warsaw").map(|d| d.score / top)
        };
        // (Marie Curie; born in; Warsaw) is the best fact: Warsaw's page is where the river is
        // (hop pages off in both: they lift Warsaw's page too, as the page Marie Curie's names)
        let (on, off) = (score(HybridParams { hop_pages: 0.0, ..h.params.clone() }), score(HybridParams { fact_pages: 0.0, hop_pages: 0.0, ..h.params.clone() }));
        assert!(on.unwrap_or(0.0) > off.unwrap_or(0.0) + 0.1, "fact pages lift Warsaw's page: {on:?} against {off:?}");
    }

    #[test]
    fn a_question_its_names_do_not_explain_leans_on_the_passages() {
        let (g, h) = samples();
        let with = |unnamed_mix: f64, walk: bool| Retriever::Hybrid(Arc::new(Hybrid { params: HybridParams { unnamed_mix, walk, ..h.params.clone() }, ..h.clone() }));
        let (off, strong, prior_only) = (with(0.0, true), with(1e6, true), with(0.0, false));
        let ids = |r: &Retriever, q: &str| top(&g, r, q, 5);
        // names that carry the question: the guard, however strong, changes nothing
        let named = "In which city was the husband of Marie Curie born?";
        assert_eq!(ids(&strong, named), ids(&off, named));
        assert_eq!(ids(&Retriever::Hybrid(Arc::new(h.clone())), named), ids(&off, named));
        // words that name no entity: the walk still runs from the passages and their facts, and
        // as the guard grows the passages' own ranking takes over
        let q = "which radioactive elements were discovered by a chemist";
        assert!(r_links(&g, &h, q).is_empty(), "the question must link no name");
        assert_eq!(ids(&strong, q), ids(&prior_only, q));
        assert_ne!(ids(&off, q), ids(&prior_only, q), "the walk reorders what the passages rank");
    }

    fn r_links(g: &GraphState, h: &Hybrid, q: &str) -> Vec<String> {
        hybrid::link_names(g, q, h.params.max_ngram)
    }

    #[test]
    fn hybrid_parameters_are_set_by_name_and_checked() {
        let mut p = HybridParams::default();
        p.set("damping", "0.3").unwrap();
        p.set("walk", "false").unwrap();
        assert_eq!((p.damping, p.walk), (0.3, false));
        assert!(p.set("dampng", "1").unwrap_err().contains("no hybrid parameter"));
        assert!(p.set("facts", "many").unwrap_err().contains("not a number"));
    }

    #[test]
    fn the_sentence_model_is_found_beside_the_executable_from_any_directory() {
        let root = tempfile::tempdir().unwrap();
        let exe = root.path().join("target/release/streamrag");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        let rel = Path::new(".models/test-model-that-is-not-in-the-working-directory");
        // nowhere: the relative path, so that the error names it
        assert_eq!(model_dir_from(rel, Some(&exe)), rel);
        assert_eq!(model_dir_from(rel, None), rel);
        // in the checkout that holds the executable
        let model = root.path().join(rel);
        std::fs::create_dir_all(&model).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        assert_eq!(model_dir_from(rel, Some(&exe)), model);
    }
}
