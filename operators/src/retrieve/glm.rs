//! The GLM retriever (docs/glm.md, "Retrieval"): link seeds, select the subgraph from the live
//! graph, encode it with the question on the GLM, score entities with the head, and hand the
//! top entities to the IDF document ranker. Questions of one batch share forward passes.
//! Training ([`super::train`]) prepares its examples with the same functions.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use candle_core::{Device, Tensor};
use streamrag_glm::graph::{Entity, TokenizedGraph, Triplet};
use streamrag_glm::sentence::dot;
use streamrag_glm::{GlmModel, Result};

use crate::graph::GraphState;

use super::rank::{display_name, rank_documents, supporting_triples};
use super::seeds::{exact_seeds, word_candidates};
use super::subgraph::{select, SubgraphParams};
use super::Retrieved;

/// Candidates (sharing a question word) whose names are compared with the question when no
/// entity name occurs in it.
const LINK_CANDIDATES: usize = 50;
const LINK_SEEDS: usize = 5;
/// Cached name embeddings before the cache is cleared.
const NAME_CACHE_MAX: usize = 200_000;

/// A question's linked seeds, and the GLM's best entities with their probabilities.
pub type EntityScores = (Vec<String>, Vec<(String, f64)>);

/// What one question needs for the GLM.
pub struct Prepared {
    pub seeds: Vec<String>,
    pub triplets: Vec<Triplet>,
    /// None when nothing links or the subgraph is empty.
    pub graph: Option<TokenizedGraph>,
}

pub struct GlmRetriever {
    pub model: GlmModel,
    pub max_ngram: usize,
    /// Graphs per forward pass.
    pub batch_size: usize,
    /// The subgraph budget at query time, when not the one the checkpoint was trained with.
    pub max_triplets: Option<usize>,
    names: Mutex<HashMap<String, Vec<f32>>>,
}

impl GlmRetriever {
    pub fn new(model: GlmModel) -> Self {
        GlmRetriever { model, max_ngram: 10, batch_size: 4, max_triplets: None, names: Mutex::new(HashMap::new()) }
    }

    /// Loads a checkpoint written by `streamrag train`.
    pub fn load(checkpoint: &Path, device: &Device) -> Result<Self> {
        Ok(Self::new(GlmModel::load(checkpoint, device)?))
    }

    pub fn params(&self) -> SubgraphParams {
        SubgraphParams { max_hops: self.model.config.max_hops, max_triplets: self.max_triplets.unwrap_or(self.model.config.max_triplets) }
    }

    /// Seeds: entity names found in the question; failing that, the candidates sharing its
    /// rarest words whose names are most similar to it (sentence embeddings, cosine).
    pub fn link(&self, g: &GraphState, question: &str, qvec: &[f32]) -> Result<Vec<String>> {
        let exact = exact_seeds(g, question, self.max_ngram);
        if !exact.is_empty() {
            return Ok(exact);
        }
        let cands = word_candidates(g, question, LINK_CANDIDATES);
        let missing: Vec<&String> = {
            let names = self.names.lock().expect("name cache");
            cands.iter().filter(|c| !names.contains_key(*c)).collect()
        };
        if !missing.is_empty() {
            let labels: Vec<String> = missing.iter().map(|id| display_name(g, id)).collect();
            let vecs = self.model.question.embed_vecs(&labels.iter().map(String::as_str).collect::<Vec<_>>())?;
            let mut names = self.names.lock().expect("name cache");
            if names.len() + vecs.len() > NAME_CACHE_MAX {
                names.clear();
            }
            for (id, v) in missing.into_iter().zip(vecs) {
                names.insert(id.clone(), v);
            }
        }
        let names = self.names.lock().expect("name cache");
        let mut scored: Vec<(f32, &String)> = cands.iter().filter_map(|c| names.get(c).map(|v| (dot(v, qvec), c))).collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        Ok(scored.into_iter().take(LINK_SEEDS).map(|(_, c)| c.clone()).collect())
    }

    /// Seeds, subgraph and the encoder's graph for one question.
    pub fn prepare(&self, g: &GraphState, question: &str, qvec: &[f32]) -> Result<Prepared> {
        let seeds = self.link(g, question, qvec)?;
        let name = |id: &str| display_name(g, id);
        let triplets: Vec<Triplet> = select(g, &seeds, question, &self.params())
            .into_iter()
            .map(|(s, r, o)| Triplet {
                head: Entity { id: s.to_string(), label: name(s) },
                relation: r.to_string(),
                tail: Entity { id: o.to_string(), label: name(o) },
            })
            .collect();
        let graph = if triplets.is_empty() { None } else { Some(self.model.graph(&triplets, question)?) };
        Ok(Prepared { seeds, triplets, graph })
    }

    /// Entity scores (logits) per graph, best first, in forward passes of `batch_size`.
    /// `qemb` holds one question embedding per graph.
    pub fn score(&self, graphs: &[&TokenizedGraph], qemb: &Tensor) -> Result<Vec<Vec<(String, f32)>>> {
        let mut out = Vec::with_capacity(graphs.len());
        for (i, chunk) in graphs.chunks(self.batch_size.max(1)).enumerate() {
            let start = i * self.batch_size.max(1);
            let q = qemb.narrow(0, start, chunk.len())?;
            out.extend(self.model.score_with(chunk, &q)?);
        }
        Ok(out)
    }

    /// The GLM's best entities for each question (ids with probabilities, best first, at most
    /// `top_entities`) and the seeds it linked; empty when nothing links.
    pub fn entity_scores(&self, g: &GraphState, questions: &[&str]) -> Result<Vec<EntityScores>> {
        if questions.is_empty() {
            return Ok(vec![]);
        }
        let qemb = self.model.question.embed(questions)?;
        let qv = qemb.to_vec2::<f32>()?;
        let prepared: Vec<Prepared> = questions.iter().zip(&qv).map(|(q, v)| self.prepare(g, q, v)).collect::<Result<_, _>>()?;
        let with_graph: Vec<usize> = (0..questions.len()).filter(|&i| prepared[i].graph.is_some()).collect();
        let graphs: Vec<&TokenizedGraph> = with_graph.iter().map(|&i| prepared[i].graph.as_ref().expect("filtered")).collect();
        let rows = Tensor::new(with_graph.iter().map(|&i| i as u32).collect::<Vec<_>>(), qemb.device())?;
        let scores = if graphs.is_empty() { vec![] } else { self.score(&graphs, &qemb.index_select(&rows, 0)?)? };
        let mut by_q: HashMap<usize, Vec<(String, f32)>> = with_graph.into_iter().zip(scores).collect();
        Ok(prepared
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let top = by_q.remove(&i).unwrap_or_default().into_iter().take(self.model.config.top_entities).map(|(e, l)| (e, 1.0 / (1.0 + (-l as f64).exp()))).collect();
                (p.seeds, top)
            })
            .collect())
    }

    /// Retrieves for each (question, top_k).
    pub fn retrieve_batch(&self, g: &GraphState, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>> {
        let texts: Vec<&str> = qs.iter().map(|q| q.0).collect();
        Ok(self
            .entity_scores(g, &texts)?
            .into_iter()
            .zip(qs)
            .map(|((seeds, top), (_, k))| {
                let documents = rank_documents(g, &top, *k);
                let triples = supporting_triples(g, &documents, &top, 10);
                let seeds = seeds.iter().map(|s| display_name(g, s)).collect();
                Retrieved { seeds, documents, triples, entities: vec![], checkpoint: None }
            })
            .collect())
    }
}
