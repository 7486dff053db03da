//! The kg-writer stage: applies graph deltas to the live graph that queries read and to sled,
//! with the consumed offsets in the same atomic batch, and publishes what changed on the
//! graph-changes topic through an outbox kept in that same batch (so a crash between the sled
//! write and the publish loses no change). It reads from the offsets stored with the graph,
//! not from a consumer group, so the graph and its position never disagree; a record at or
//! below them is skipped, and re-applying a document version changes nothing.
//!
//! Without a store it is a query replica: the same application, in memory only, publishing
//! nothing.

use std::sync::{Arc, RwLock};

use streamrag_schemas::{decode, encode, EntityRef, GraphChange, GraphDelta, ResolvedTriple, SourceRef, SCHEMA_VERSION};
use tokio::sync::watch;

use crate::config::Topics;
use crate::error::{StageError, TransportError};
use crate::graph::{Change, Dirty, GraphState, GraphStore, TripleKey};
use crate::runtime::{Operator, Outcome, StartFrom};
use crate::transport::{Output, Record};

/// The live graph: an immutable version that queries take (an `Arc` clone; the lock is held
/// only for that clone or a pointer swap, never while a query or a write runs) and the writer
/// replaces after each batch.
///
/// The writer keeps two copies (left-right): it applies a batch to the spare copy, swaps it in,
/// and keeps the version it replaced as the next spare, replaying that batch onto it once no
/// query holds it any more. Memory is two compact graphs; no full copy is made per batch.
#[derive(Clone, Default)]
pub struct LiveGraph(Arc<RwLock<Arc<GraphState>>>);

impl LiveGraph {
    pub fn new(g: GraphState) -> Self {
        LiveGraph(Arc::new(RwLock::new(Arc::new(g))))
    }
    /// The current version; consistent for as long as the caller holds it.
    pub fn current(&self) -> Arc<GraphState> {
        self.0.read().unwrap().clone()
    }
    /// Installs `g` and returns the version it replaced.
    pub fn swap(&self, g: Arc<GraphState>) -> Arc<GraphState> {
        std::mem::replace(&mut *self.0.write().unwrap(), g)
    }
}

/// One step of a batch, kept to replay onto the spare copy.
enum Step {
    Apply(String, Option<crate::graph::DocEntry>),
    Offset(String, i32, i64),
}

/// How long the writer waits for queries to let go of the spare copy before it copies the
/// current version instead.
const SPARE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

pub struct KgWriter {
    pub topics: Topics,
    pub graph: LiveGraph,
    /// None for a query replica, which keeps its graph in memory only.
    pub store: Option<GraphStore>,
    /// Bumped after every applied batch (number of live documents), for waiters.
    pub applied: watch::Sender<usize>,
    next_seq: u64,
    in_flight: Vec<u64>,
    /// The version before the current one, and the steps that turn it into the current one.
    spare: Option<(Arc<GraphState>, Vec<Step>)>,
}

impl KgWriter {
    pub fn new(topics: Topics, graph: LiveGraph, store: Option<GraphStore>, applied: watch::Sender<usize>) -> Self {
        KgWriter { topics, graph, store, applied, next_seq: 0, in_flight: Vec::new(), spare: None }
    }
}

impl KgWriter {
    /// A private copy equal to the current version: the spare caught up, or a full copy when
    /// there is no spare yet or a query still holds it.
    async fn writable(&mut self) -> GraphState {
        if let Some((mut old, steps)) = self.spare.take() {
            let deadline = tokio::time::Instant::now() + SPARE_WAIT;
            loop {
                match Arc::try_unwrap(old) {
                    Ok(mut g) => {
                        let mut scratch = Dirty::default();
                        for step in steps {
                            match step {
                                Step::Apply(doc, entry) => {
                                    g.apply(&doc, entry, &mut scratch);
                                }
                                Step::Offset(t, p, o) => g.set_offset(&t, p, o, &mut scratch),
                            }
                        }
                        return g;
                    }
                    Err(still_shared) if tokio::time::Instant::now() < deadline => {
                        old = still_shared;
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    Err(_) => {
                        tracing::debug!("a reader holds the spare graph copy; copying the current version");
                        break;
                    }
                }
            }
        }
        (*self.graph.current()).clone()
    }
}

fn resolved(g: &GraphState, t: &TripleKey, names: &std::collections::HashMap<&str, &str>) -> ResolvedTriple {
    let name = |id: &str| {
        names.get(id).map(|s| s.to_string()).or_else(|| g.entity(id).map(|e| e.name().to_string())).unwrap_or_else(|| id.to_string())
    };
    ResolvedTriple { subject_id: t.0.clone(), subject: name(&t.0), relation: t.1.clone(), object_id: t.2.clone(), object: name(&t.2) }
}

/// The graph-changes message of one applied delta.
pub fn change_message(g: &GraphState, delta: &GraphDelta, source: SourceRef, c: &Change) -> GraphChange {
    // removed entities are gone from `g`: keep their last names for the retracted triples
    let names: std::collections::HashMap<&str, &str> = c.entities_removed.iter().map(|(i, n)| (i.as_str(), n.as_str())).collect();
    GraphChange {
        schema_version: SCHEMA_VERSION,
        op: delta.op,
        doc_id: delta.doc_id.clone(),
        asserted: c.asserted.iter().map(|t| resolved(g, t, &names)).collect(),
        retracted: c.retracted.iter().map(|t| resolved(g, t, &names)).collect(),
        entities_added: c.entities_added.iter().map(|(id, name)| EntityRef { id: id.clone(), name: name.clone() }).collect(),
        entities_removed: c.entities_removed.iter().map(|(id, name)| EntityRef { id: id.clone(), name: name.clone() }).collect(),
        source,
    }
}

impl Operator for KgWriter {
    fn name(&self) -> &'static str {
        if self.store.is_some() {
            "kg-writer"
        } else {
            "query-replica"
        }
    }

    fn input(&self) -> String {
        self.topics.graph_deltas.clone()
    }

    fn start_from(&self) -> StartFrom {
        // the graph's own offsets (a replica's come from its snapshot); other partitions from the start
        StartFrom::Offsets(self.graph.current().resume_offsets(&self.topics.graph_deltas))
    }

    fn recover_outputs(&mut self) -> Vec<Output> {
        let Some(store) = &self.store else { return Vec::new() };
        match store.outbox() {
            Ok(entries) => {
                self.next_seq = entries.last().map(|e| e.0 + 1).unwrap_or(0);
                self.in_flight = entries.iter().map(|e| e.0).collect();
                entries.into_iter().map(|e| e.1).collect()
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot read the outbox; its changes stay unpublished until the next start");
                Vec::new()
            }
        }
    }

    fn after_commit(&mut self, _batch: &[Record]) {
        if let Some(store) = &self.store {
            if let Err(e) = store.clear_outbox(&self.in_flight) {
                tracing::warn!(error = %e, "cannot clear the outbox; its changes will be published again");
            }
        }
        self.in_flight.clear();
    }

    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, TransportError> {
        let mut next = self.writable().await;
        let mut steps = Vec::with_capacity(batch.len() * 2);
        let mut dirty = Dirty::default();
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut outbox = Vec::new();
        let mut doc_times = Vec::new();
        for r in batch {
            if next.already_applied(&r.topic, r.partition, r.offset) {
                outcomes.push(Ok(vec![]));
                continue;
            }
            let outcome = decode::<GraphDelta>(&r.payload).map_err(StageError::from).and_then(|d| {
                if d.doc_id.trim().is_empty() {
                    return Err(StageError::user("graph delta has an empty doc_id"));
                }
                doc_times.extend(d.source.timestamp_ms);
                let entry = GraphState::entry_of(&d);
                let change = next.apply(&d.doc_id, entry.clone(), &mut dirty);
                steps.push(Step::Apply(d.doc_id.clone(), entry));
                match (change, &self.store) {
                    (Some(c), Some(_)) if !c.is_empty() => {
                        let source = SourceRef { topic: r.topic.clone(), partition: r.partition, offset: r.offset, timestamp_ms: d.source.timestamp_ms };
                        let msg = change_message(&next, &d, source, &c);
                        let out = Output { topic: self.topics.graph_changes.clone(), key: d.doc_id.clone(), payload: encode(&msg) };
                        outbox.push((self.next_seq, out.clone()));
                        self.next_seq += 1;
                        Ok(vec![out])
                    }
                    _ => Ok(vec![]),
                }
            });
            steps.push(Step::Offset(r.topic.clone(), r.partition, r.offset));
            // A bad record is consumed too: its offset moves with the batch.
            next.set_offset(&r.topic, r.partition, r.offset, &mut dirty);
            outcomes.push(outcome);
        }
        if let Some(store) = &self.store {
            store.persist(&next, &dirty, &outbox).map_err(|e| TransportError::Other(e.to_string()))?;
        }
        // The runtime publishes the changes with the batch's outputs; after_commit then clears
        // them from the outbox.
        self.in_flight.extend(outbox.iter().map(|(s, _)| *s));
        let docs = next.document_count();
        let old = self.graph.swap(Arc::new(next));
        // Queryable from here: the freshness clock of each document in the batch stops.
        let now = crate::transport::now_ms();
        let h = crate::metrics::global().freshness(if self.store.is_some() { "writer" } else { "replica" });
        for t in doc_times.into_iter().filter(|&t| t > 0) {
            h.observe((now - t) as f64 / 1e3);
        }
        self.spare = Some((old, steps));
        self.applied.send_replace(docs);
        Ok(outcomes)
    }
}
