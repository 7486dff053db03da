//! The PPR retriever: personalized PageRank from the question's seeds over the entity graph
//! (HippoRAG's walk), then the IDF-weighted document ranking of the top entities.

use std::collections::{HashMap, HashSet};

use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;

use crate::graph::GraphState;

use super::rank::{display_name, rank_documents, supporting_triples, top_entities};
use super::seeds::seeds;
use super::Retrieved;

/// Tunables of the PPR retriever.
#[derive(Debug, Clone)]
pub struct PprParams {
    /// Probability of following an edge (1 - restart probability).
    pub damping: f64,
    pub iterations: usize,
    /// Entities handed to the document ranker (GFM-RAG: 20).
    pub top_entities: usize,
    /// Longest entity name, in words, tried when matching the question.
    pub max_ngram: usize,
    /// The walk runs on the entities within this many hops of the seeds...
    pub hops: usize,
    /// ...and at most this many of them.
    pub max_nodes: usize,
}

impl Default for PprParams {
    fn default() -> Self {
        PprParams { damping: 0.5, iterations: 30, top_entities: 20, max_ngram: 10, hops: 3, max_nodes: 20_000 }
    }
}

/// The entities within `hops` of the seeds, breadth first, at most `max_nodes`.
fn neighbourhood<'g>(g: &'g GraphState, seeds: &[&'g str], hops: usize, max_nodes: usize) -> Vec<&'g str> {
    let mut seen: HashSet<&str> = seeds.iter().copied().collect();
    let mut order: Vec<&str> = seeds.to_vec();
    let mut frontier = order.clone();
    for _ in 0..hops {
        let mut next = Vec::new();
        for u in frontier {
            let mut nb: Vec<&str> = g.neighbours(u).map(|(v, _)| v).collect();
            nb.sort_unstable(); // deterministic whichever way the map iterates
            for v in nb {
                if order.len() >= max_nodes {
                    return order;
                }
                if seen.insert(v) {
                    order.push(v);
                    next.push(v);
                }
            }
        }
        frontier = next;
    }
    order
}

/// Personalized PageRank from the seeds over the entity graph within `p.hops` of them (with
/// damping 0.5 the mass beyond a few hops is negligible), by power iteration on a petgraph;
/// dangling mass returns to the seeds. Returns a score per entity id with a non-zero score.
pub fn personalized_pagerank(g: &GraphState, seeds: &[String], p: &PprParams) -> HashMap<String, f64> {
    let seed_refs: Vec<&str> = seeds.iter().filter_map(|s| g.entity(s).map(|e| e.id())).collect();
    if seed_refs.is_empty() {
        return HashMap::new();
    }
    let nodes = neighbourhood(g, &seed_refs, p.hops, p.max_nodes);
    let mut index: HashMap<&str, NodeIndex> = HashMap::with_capacity(nodes.len());
    let mut graph: UnGraph<&str, f64> = UnGraph::with_capacity(nodes.len(), nodes.len() * 4);
    for n in &nodes {
        index.insert(n, graph.add_node(n));
    }
    for n in &nodes {
        for (v, w) in g.neighbours(n) {
            if let Some(&j) = index.get(v) {
                let i = index[n];
                if i <= j {
                    graph.add_edge(i, j, w as f64);
                }
            }
        }
    }
    let n = graph.node_count();
    let mut restart = vec![0.0; n];
    for s in &seed_refs {
        restart[index[s].index()] += 1.0 / seed_refs.len() as f64;
    }
    let out_weight: Vec<f64> = graph.node_indices().map(|i| graph.edges(i).map(|e| *e.weight()).sum()).collect();
    let mut rank = restart.clone();
    let mut next = vec![0.0; n];
    for _ in 0..p.iterations {
        next.iter_mut().for_each(|x| *x = 0.0);
        let mut dangling = 0.0;
        for u in graph.node_indices() {
            let ru = rank[u.index()];
            if ru == 0.0 {
                continue;
            }
            if out_weight[u.index()] == 0.0 {
                dangling += ru;
                continue;
            }
            for e in graph.edges(u) {
                let v = if e.source() == u { e.target() } else { e.source() };
                next[v.index()] += p.damping * ru * e.weight() / out_weight[u.index()];
            }
        }
        let back = (1.0 - p.damping) + p.damping * dangling;
        let mut delta = 0.0;
        for i in 0..n {
            next[i] += back * restart[i];
            delta += (next[i] - rank[i]).abs();
        }
        std::mem::swap(&mut rank, &mut next);
        if delta < 1e-9 {
            break;
        }
    }
    graph.node_indices().filter(|i| rank[i.index()] > 0.0).map(|i| (graph[i].to_string(), rank[i.index()])).collect()
}

/// Retrieves for one question: seeds, walk, ranking.
pub fn retrieve(g: &GraphState, p: &PprParams, question: &str, top_k: usize) -> Retrieved {
    let seed_ids = seeds(g, question, p.max_ngram);
    let scores = personalized_pagerank(g, &seed_ids, p);
    let top = top_entities(&scores, p.top_entities);
    let documents = rank_documents(g, &top, top_k);
    let triples = supporting_triples(g, &documents, &top, 10);
    let seeds: Vec<String> = seed_ids.iter().map(|s| display_name(g, s)).collect();
    let entities = super::rank::subgraph_entities(&seeds, &triples, |id| scores.get(id).copied().unwrap_or(0.0));
    Retrieved { seeds, documents, triples, entities, checkpoint: None }
}
