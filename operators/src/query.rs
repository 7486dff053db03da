//! The query stage: questions from the queries topic -> the retriever ([`crate::retrieve`]) on
//! one consistent version of the live graph -> answers on the answers topic, with the top
//! documents, the supporting triples, the seeds and the graph version; the answer text, cited,
//! is written by the answering LLM when one is configured and is extractive otherwise, or the
//! answer abstains ([`crate::answer`]).

use std::sync::Arc;
use std::time::Instant;

use streamrag_schemas::{decode, encode, Answer, Query, SCHEMA_VERSION};

use crate::answer::Answerer;
use crate::config::{Limits, Topics};
use crate::error::{StageError, StageFault};
use crate::graph::GraphState;
use crate::kg_writer::LiveGraph;
use crate::passages::{DocSink, DocsReader, Passages};
use crate::access::Reader;
use crate::retrieve::{FactsReader, RetrieveError, Retrieved, Retriever};
use crate::stages::{BuildError, QueryConfig, Shared};
use crate::runtime::{Operator, Outcome};
use crate::transport::{Output, Record};

/// The documents a query asks for: 5 unless it says. A validated query says 1 to
/// [`Limits::max_top_k`]; the clamp only guards callers of [`answer_batch`] that skip
/// [`validate`].
fn top_k_of(q: &Query) -> usize {
    q.top_k.unwrap_or(5).clamp(1, 10_000) as usize
}

fn answer_of(g: &GraphState, retriever: &Retriever, q: &Query, r: Retrieved, latency_ms: f64) -> Answer {
    Answer {
        schema_version: SCHEMA_VERSION,
        query_id: q.query_id.clone(),
        question: q.question.clone(),
        documents: r.documents,
        triples: r.triples,
        seeds: r.seeds,
        entities: r.entities,
        retriever: retriever.name().into(),
        checkpoint: r.checkpoint,
        answer: None,
        abstained: false,
        answered_by: None,
        citations: vec![],
        reason: None,
        graph_version: g.version(),
        latency_ms,
    }
}

/// Answers one query against the graph as it is now (one consistent version).
pub fn answer(g: &GraphState, retriever: &Retriever, q: &Query) -> Result<Answer, RetrieveError> {
    Ok(answer_batch(g, retriever, std::slice::from_ref(q))?.pop().expect("one answer per query"))
}

/// Answers queries together (one forward pass per GLM batch); each answer's latency is the
/// batch's.
pub fn answer_batch(g: &GraphState, retriever: &Retriever, qs: &[Query]) -> Result<Vec<Answer>, RetrieveError> {
    let t0 = Instant::now();
    let asks: Vec<(&str, usize)> = qs.iter().map(|q| (q.question.as_str(), top_k_of(q))).collect();
    let rs = retriever.retrieve_batch(g, &asks)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok(qs.iter().zip(rs).map(|(q, r)| answer_of(g, retriever, q, r, ms)).collect())
}

/// At most this many questions are retrieved from one version of the live graph.
const HOLD_BATCH: usize = 32;

/// Answers queries each on the graph its asker may read ([`Query::access`]): one batch per
/// set of labels, on that labels' view of `live` ([`HOLD_BATCH`] questions per version); then
/// drops any document whose passage the docs topic has since given labels the asker may not
/// read (a relabelled document, before the graph has it), so that new text is never read under
/// old labels.
pub fn answer_batch_as(live: &LiveGraph, retriever: &Retriever, passages: &Passages, qs: &[Query]) -> Result<Vec<Answer>, RetrieveError> {
    let readers: Vec<Reader> = qs.iter().map(|q| Reader::of(q.access.as_deref())).collect();
    let mut groups: Vec<(&Reader, Vec<usize>)> = Vec::new();
    for (i, r) in readers.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == r) {
            Some((_, v)) => v.push(i),
            None => groups.push((r, vec![i])),
        }
    }
    let mut out: Vec<Option<Answer>> = vec![None; qs.len()];
    for (reader, ix) in groups {
        // the graph taken afresh for each few questions: a version held for a long batch would
        // make the writer copy the graph (see LiveGraph)
        for ix in ix.chunks(HOLD_BATCH) {
            let g = live.current_for(reader);
            let batch: Vec<Query> = ix.iter().map(|&i| qs[i].clone()).collect();
            for (&i, mut a) in ix.iter().zip(answer_batch(&g, retriever, &batch)?) {
                if !reader.is_all() {
                    a.documents.retain(|d| passages.may_read(&d.id, reader));
                }
                out[i] = Some(a);
            }
        }
    }
    Ok(out.into_iter().map(|a| a.expect("one answer per query")).collect())
}

/// Puts a written answer into its message.
pub fn written_into(a: &mut Answer, w: crate::answer::Written) {
    a.answer = Some(w.text);
    a.abstained = w.abstained;
    a.answered_by = Some(w.answered_by);
    a.citations = w.citations;
}

/// Checks a query against the rules the schema cannot express (the bounds of [`Limits`]).
pub fn validate(q: &Query, limits: &Limits) -> Result<(), StageError> {
    limits.check_id("query_id", &q.query_id).map_err(StageError::user)?;
    let what = format!("query {}", q.query_id);
    limits.check_question(&what, &q.question).map_err(StageError::user)?;
    if let Some(k) = q.top_k {
        limits.check_top_k(&what, k).map_err(StageError::user)?;
    }
    if let Some(a) = &q.access {
        limits.check_access(&what, a).map_err(StageError::user)?;
    }
    Ok(())
}

pub struct QueryStage {
    pub topics: Topics,
    pub limits: Limits,
    pub graph: LiveGraph,
    pub retriever: Retriever,
    /// Writes the answer text (with the LLM when one is configured, else extractive), or
    /// abstains.
    pub answerer: Arc<Answerer>,
}

impl QueryStage {
    /// Builds the stage from its section over the process's live graph: the retriever's models
    /// loaded, the answering LLM opened. When the retriever or the answerer needs passages' text
    /// (the dense or BM25 index, the answer prompt), the docs readers that keep it come along
    /// (one for the persistent indexes, one for what lives in memory); run them beside the
    /// stage, and the facts reader that keeps the fact vectors from the graph changes when the
    /// retriever has them.
    pub async fn build(cfg: &QueryConfig, shared: &mut Shared) -> Result<(Self, Vec<DocsReader>, Option<FactsReader>), BuildError> {
        let graph = shared.graph.clone().ok_or_else(|| BuildError::Config("the query stage needs the kg-writer's graph or a replica's".into()))?;
        let (choice, data) = (cfg.retriever.clone(), shared.data.clone());
        let retriever = tokio::task::spawn_blocking(move || choice.load(&data)).await??;
        // the retriever's indexes are persistent and read on from their commits; what lives in
        // memory (the answer passages) is read from the start, by a reader of its own
        let mut readers = Vec::new();
        let indexes = retriever.sinks();
        if !indexes.is_empty() {
            readers.push(DocsReader::new(shared.topics.clone(), indexes).with_limits(shared.limits.clone()));
        }
        // the answer passages live in memory and are read from the start, by a reader of their own
        let passages = Arc::new(Passages::default());
        readers.push(DocsReader::new(shared.topics.clone(), vec![passages.clone() as Arc<dyn DocSink>]).with_limits(shared.limits.clone()));
        let mut answerer = Answerer::new(passages);
        if let Some(settings) = &cfg.answer_llm {
            answerer = answerer.with_llm(shared.llms.open("answer", settings).await?);
        }
        let answerer = Arc::new(answerer);
        let facts = retriever.facts().map(|f| FactsReader::new(shared.topics.clone(), f));
        let stage = QueryStage { topics: shared.topics.clone(), limits: shared.limits.clone(), graph, retriever, answerer };
        Ok((stage, readers, facts))
    }
}

impl Operator for QueryStage {
    fn name(&self) -> &'static str {
        "query"
    }
    fn input(&self) -> String {
        self.topics.queries.clone()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        let parsed: Vec<Result<Query, StageError>> = batch
            .iter()
            .map(|r| {
                let q: Query = decode(&r.payload)?;
                validate(&q, &self.limits)?;
                Ok(q)
            })
            .collect();
        let valid: Vec<Query> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
        let mut answers = match answer_batch_as(&self.graph, &self.retriever, &self.answerer.passages, &valid) {
            Ok(mut a) => {
                let written = futures::future::join_all(a.iter().map(|x| self.answerer.write(&x.question, &x.documents))).await;
                for (x, w) in a.iter_mut().zip(written) {
                    written_into(x, w);
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
