//! The query stage: question -> seed entities -> personalized PageRank over the entity graph ->
//! the IDF-weighted top-20 entity -> document ranking (glm.md §1.6) -> an answer with the top
//! documents, the supporting triples and the graph version it was computed against.
//!
//! Seams: [`Retriever`] is where the GLM and dense retrievers join; [`Answer::answer`] stays
//! empty until an LLM writes answers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use streamrag_schemas::{decode, encode, Answer, Query, ScoredDocument, Triple, SCHEMA_VERSION};

use crate::config::{Limits, Topics};
use crate::error::{StageError, TransportError};
use crate::graph::GraphState;
use crate::kg_writer::LiveGraph;
use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;
use crate::normalize::{normalize, words};
use crate::runtime::{Operator, Outcome};
use crate::transport::{Output, Record};

/// Words that never seed a query on their own.
const QUESTION_STOP: &[&str] = &[
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "was", "are",
    "were", "be", "been", "who", "whom", "whose", "what", "which", "when", "where", "why", "how", "did", "does",
    "do", "has", "have", "had", "that", "this", "these", "those", "it", "its", "he", "she", "his", "her", "they",
    "their", "as", "than", "more", "most", "first", "later", "earlier", "both", "same", "born", "died", "film",
    "director", "name", "country", "year", "one", "many", "much", "not", "there", "s",
];

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

/// Which retriever answers: PPR over the entity graph (the default), the GLM (a trained
/// checkpoint), or dense passage similarity.
#[derive(Clone)]
pub enum Retriever {
    Ppr(PprParams),
    Glm(std::sync::Arc<crate::glm_retriever::GlmRetriever>),
    Dense(std::sync::Arc<crate::dense::DenseIndex>),
}

impl Default for Retriever {
    fn default() -> Self {
        Retriever::Ppr(PprParams::default())
    }
}

/// What retrieval found for one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    pub seeds: Vec<String>,
    pub documents: Vec<ScoredDocument>,
    pub triples: Vec<Triple>,
}

/// Links a question to entities: the longest word n-grams that are entity ids (ids are
/// normalised names); when none match, entities sharing the question's rarest content words.
pub fn seeds(g: &GraphState, question: &str, max_ngram: usize) -> Vec<String> {
    let found = exact_seeds(g, question, max_ngram);
    if !found.is_empty() {
        return found;
    }
    word_candidates(g, question, 5)
}

/// The longest word n-grams of the question that are entity ids, sorted.
pub fn exact_seeds(g: &GraphState, question: &str, max_ngram: usize) -> Vec<String> {
    let norm = normalize(question);
    let ws: Vec<&str> = words(&norm).collect();
    let mut covered = vec![false; ws.len()];
    let mut found = Vec::new();
    for n in (1..=max_ngram.min(ws.len())).rev() {
        for i in 0..=ws.len() - n {
            if covered[i..i + n].iter().any(|&c| c) {
                continue;
            }
            let window = &ws[i..i + n];
            if window.iter().all(|w| QUESTION_STOP.contains(w)) {
                continue;
            }
            let cand = window.join(" ");
            if g.entity(&cand).is_some() {
                covered[i..i + n].iter_mut().for_each(|c| *c = true);
                found.push(cand);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Up to `k` entities scored by the inverse frequency of the question's content words they
/// share (per word of the entity name), best first.
pub fn word_candidates(g: &GraphState, question: &str, k: usize) -> Vec<String> {
    let norm = normalize(question);
    let mut score: HashMap<&str, f64> = HashMap::new();
    for w in words(&norm).filter(|w| !QUESTION_STOP.contains(w)) {
        let ents = g.entities_with_word(w);
        if !ents.is_empty() {
            let idf = 1.0 / ents.len() as f64;
            for e in ents {
                *score.entry(e).or_default() += idf;
            }
        }
    }
    let mut ranked: Vec<(&str, f64)> = score
        .into_iter()
        .map(|(e, s)| (e, s / words(e).count().max(1) as f64))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.into_iter().take(k).map(|(e, _)| e.to_string()).collect()
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

/// The name an entity is shown by (its id when it is not live).
pub fn display_name(g: &GraphState, id: &str) -> String {
    g.entity(id).map(|e| e.name().to_string()).unwrap_or_else(|| id.to_string())
}

/// The top `k` entities by score, best first (ties by id, for determinism).
pub fn top_entities(scores: &HashMap<String, f64>, k: usize) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = scores.iter().map(|(e, s)| (e.clone(), *s)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

/// GFM-RAG's IDF-weighted ranker: score(d) = sum over the given entities e that occur in d of
/// 1 / df(e). Ties are broken by the summed entity scores, then by document id.
pub fn rank_documents(g: &GraphState, entities: &[(String, f64)], top_k: usize) -> Vec<ScoredDocument> {
    let mut score: HashMap<&str, (f64, f64)> = HashMap::new();
    for (e, s) in entities {
        let Some(entry) = g.entity(e) else { continue };
        let idf = 1.0 / entry.df().max(1) as f64;
        for d in entry.docs() {
            let x = score.entry(d).or_default();
            x.0 += idf;
            x.1 += s;
        }
    }
    let mut ranked: Vec<(&str, (f64, f64))> = score.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then(b.1 .1.total_cmp(&a.1 .1)).then(a.0.cmp(b.0)));
    ranked
        .into_iter()
        .take(top_k)
        .map(|(d, (s, _))| ScoredDocument {
            id: d.to_string(),
            title: g.doc(d).map(|x| x.title().to_string()).unwrap_or_default(),
            score: s,
        })
        .collect()
}

/// Triples of the returned documents whose two ends are among the top entities, best first.
pub fn supporting_triples(g: &GraphState, docs: &[ScoredDocument], top: &[(String, f64)], limit: usize) -> Vec<Triple> {
    let score: HashMap<&str, f64> = top.iter().map(|(e, s)| (e.as_str(), *s)).collect();
    let mut seen = HashSet::new();
    let mut out: Vec<(f64, Triple)> = Vec::new();
    for d in docs {
        let Some(entry) = g.doc(&d.id) else { continue };
        for t in entry.triples() {
            if let (Some(a), Some(b)) = (score.get(t.0), score.get(t.2)) {
                if seen.insert(t) {
                    out.push((a + b, Triple { subject: display_name(g, t.0), relation: t.1.to_string(), object: display_name(g, t.2) }));
                }
            }
        }
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| (&a.1.subject, &a.1.relation, &a.1.object).cmp(&(&b.1.subject, &b.1.relation, &b.1.object))));
    out.into_iter().take(limit).map(|(_, t)| t).collect()
}

impl Retriever {
    pub fn name(&self) -> &'static str {
        match self {
            Retriever::Ppr(_) => "ppr",
            Retriever::Glm(_) => "glm",
            Retriever::Dense(_) => "dense",
        }
    }

    /// Retrieves for one question.
    pub fn retrieve(&self, g: &GraphState, question: &str, top_k: usize) -> Result<Retrieved, String> {
        Ok(self.retrieve_batch(g, &[(question, top_k)])?.pop().expect("one result per question"))
    }

    /// Retrieves for each (question, top_k); the GLM and dense retrievers share forward passes.
    pub fn retrieve_batch(&self, g: &GraphState, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>, String> {
        match self {
            Retriever::Ppr(p) => Ok(qs.iter().map(|(q, k)| ppr_retrieve(g, p, q, *k)).collect()),
            Retriever::Glm(m) => crate::runtime::blocking(|| m.retrieve_batch(g, qs)),
            Retriever::Dense(d) => crate::runtime::blocking(|| d.retrieve_batch(qs)),
        }
    }
}

fn ppr_retrieve(g: &GraphState, p: &PprParams, question: &str, top_k: usize) -> Retrieved {
    let seed_ids = seeds(g, question, p.max_ngram);
    let scores = personalized_pagerank(g, &seed_ids, p);
    let top = top_entities(&scores, p.top_entities);
    let documents = rank_documents(g, &top, top_k);
    let triples = supporting_triples(g, &documents, &top, 10);
    let seeds = seed_ids.iter().map(|s| display_name(g, s)).collect();
    Retrieved { seeds, documents, triples }
}

fn top_k_of(q: &Query) -> usize {
    q.top_k.unwrap_or(5).clamp(1, 100) as usize
}

fn answer_of(g: &GraphState, retriever: &Retriever, q: &Query, r: Retrieved, latency_ms: f64) -> Answer {
    Answer {
        schema_version: SCHEMA_VERSION,
        query_id: q.query_id.clone(),
        question: q.question.clone(),
        documents: r.documents,
        triples: r.triples,
        seeds: r.seeds,
        retriever: retriever.name().into(),
        answer: None,
        graph_version: g.version(),
        latency_ms,
    }
}

/// Answers one query against the graph as it is now (one consistent version).
pub fn answer(g: &GraphState, retriever: &Retriever, q: &Query) -> Result<Answer, String> {
    Ok(answer_batch(g, retriever, std::slice::from_ref(q))?.pop().expect("one answer per query"))
}

/// Answers queries together (one forward pass per GLM batch); each answer's latency is the
/// batch's.
pub fn answer_batch(g: &GraphState, retriever: &Retriever, qs: &[Query]) -> Result<Vec<Answer>, String> {
    let t0 = Instant::now();
    let asks: Vec<(&str, usize)> = qs.iter().map(|q| (q.question.as_str(), top_k_of(q))).collect();
    let rs = retriever.retrieve_batch(g, &asks)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok(qs.iter().zip(rs).map(|(q, r)| answer_of(g, retriever, q, r, ms)).collect())
}

/// Checks a query against the rules the schema cannot express.
pub fn validate(q: &Query, limits: &Limits) -> Result<(), StageError> {
    if q.query_id.trim().is_empty() {
        return Err(StageError::user("query_id is empty"));
    }
    if q.question.trim().is_empty() {
        return Err(StageError::user(format!("query {} has an empty question", q.query_id)));
    }
    if q.question.len() > limits.max_text_bytes {
        return Err(StageError::user(format!("query {} question is over {} bytes", q.query_id, limits.max_text_bytes)));
    }
    Ok(())
}

pub struct QueryStage {
    pub topics: Topics,
    pub limits: Limits,
    pub graph: LiveGraph,
    pub retriever: Retriever,
    /// Writes the answer text with an LLM; `None`: retrieval only.
    pub answerer: Option<Arc<crate::answer::Answerer>>,
}

impl Operator for QueryStage {
    fn name(&self) -> &'static str {
        "query"
    }
    fn input(&self) -> String {
        self.topics.queries.clone()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, TransportError> {
        let g = self.graph.current();
        let parsed: Vec<Result<Query, StageError>> = batch
            .iter()
            .map(|r| {
                let q: Query = decode(&r.payload)?;
                validate(&q, &self.limits)?;
                Ok(q)
            })
            .collect();
        let valid: Vec<Query> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
        let mut answers = match answer_batch(&g, &self.retriever, &valid) {
            Ok(mut a) => {
                if let Some(w) = &self.answerer {
                    // An LLM failure leaves the answer retrieval-only rather than losing it.
                    let texts = futures::future::join_all(a.iter().map(|x| w.answer(&x.question, &x.documents))).await;
                    for (x, t) in a.iter_mut().zip(texts) {
                        match t {
                            Ok(t) => x.answer = Some(t),
                            Err(e) => tracing::warn!(query_id = %x.query_id, error = %e.message, "the LLM wrote no answer"),
                        }
                    }
                }
                a.into_iter().map(Ok).collect::<Vec<_>>().into_iter()
            }
            Err(e) => {
                tracing::error!(error = %e, retriever = self.retriever.name(), "retrieval failed");
                vec![Err(StageError::internal(format!("retrieval failed: {e}"))); valid.len()].into_iter()
            }
        };
        Ok(parsed
            .into_iter()
            .map(|p| {
                p?;
                let a = answers.next().expect("one answer per valid query")?;
                Ok(vec![Output { topic: self.topics.answers.clone(), key: a.query_id.clone(), payload: encode(&a) }])
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Dirty, GraphState};
    use crate::resolve::resolve;
    use streamrag_schemas::{Extraction, SourceRef};

    fn graph(docs: &[(&str, &str, &str)]) -> GraphState {
        let mut g = GraphState::new();
        for (i, (id, title, text)) in docs.iter().enumerate() {
            let got = crate::extract::extract(title, text);
            let ex = Extraction {
                schema_version: 1,
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
