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
use crate::error::{StageError, StageFault};
use crate::access::Reader;
use crate::graph::{Change, Dirty, GraphState, GraphStore, Step, TripleKey, Views};
use crate::runtime::{Consumed, Operator, Outcome, StartFrom};
use crate::stages::{BuildError, Shared, SnapshotConfig};
use crate::transport::{Output, Record};

/// The live graph: one copy, which queries take as an immutable version (an `Arc` clone; the
/// lock is held only for that clone) and the writer changes in place once no query holds it.
///
/// The writer takes the lock, so that new queries wait, and waits up to [`HOLD_WAIT`] for the
/// queries that hold the current version to let go of it; then it applies its batch in place
/// and lets them in again. A query that holds its version longer than that (a snapshot being
/// written, a long batch of evaluations) keeps it: the writer then copies the graph, outside the
/// lock, and installs the copy with the batch applied, so two graphs live only until that
/// query drops its version. Memory is one graph; each batch is applied once.
///
/// Readers restricted by access labels read a view of it: the graph their documents alone
/// build ([`Views`]), kept up to date from the same steps.
#[derive(Clone, Default)]
pub struct LiveGraph(Arc<Live>);

#[derive(Default)]
struct Live {
    current: RwLock<Arc<GraphState>>,
    views: Views,
}

impl LiveGraph {
    pub fn new(g: GraphState) -> Self {
        LiveGraph(Arc::new(Live { current: RwLock::new(Arc::new(g)), views: Views::default() }))
    }
    /// The current version; consistent for as long as the caller holds it.
    pub fn current(&self) -> Arc<GraphState> {
        self.0.current.read().unwrap().clone()
    }
    /// The current version as `reader` may see it: the whole graph for [`Reader::All`], else
    /// the graph of the documents it may read (at the same version).
    pub fn current_for(&self, reader: &Reader) -> Arc<GraphState> {
        if reader.is_all() {
            return self.current();
        }
        self.0.views.view(reader, || self.current())
    }
    /// Applies `f` to the current version (see [`LiveGraph`]): in place when no query holds
    /// it within [`HOLD_WAIT`], else to a copy that replaces it. `f` returns what it made and
    /// the steps it applied, for the access views.
    pub fn update<T>(&self, f: impl FnOnce(&mut GraphState) -> (T, Vec<Step>)) -> T {
        self.0.views.record(|| {
            let mut cur = self.0.current.write().unwrap();
            let deadline = std::time::Instant::now() + HOLD_WAIT;
            while Arc::strong_count(&cur) > 1 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            if let Some(g) = Arc::get_mut(&mut cur) {
                return f(g);
            }
            // Held: queries may go on reading the current version while it is copied; the
            // writer is the only one to change it, so nothing is lost in between.
            let held = cur.clone();
            drop(cur);
            let t = std::time::Instant::now();
            let mut g = (*held).clone();
            drop(held);
            tracing::info!(seconds = t.elapsed().as_secs_f64(), "a query held the live graph past the writer's wait; the writer copied it");
            let out = f(&mut g);
            *self.0.current.write().unwrap() = Arc::new(g);
            out
        })
    }
    /// How many access views are kept now.
    pub fn views(&self) -> usize {
        self.0.views.len()
    }
}

/// How long the writer waits for the queries that hold the live graph to let go of it (new
/// ones wait meanwhile) before it copies the graph instead of changing it in place.
pub const HOLD_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

pub struct KgWriter {
    pub topics: Topics,
    pub graph: LiveGraph,
    /// None for a query replica, which keeps its graph in memory only.
    pub store: Option<GraphStore>,
    /// Bumped after every applied batch (number of live documents), for waiters.
    pub applied: watch::Sender<usize>,
    next_seq: u64,
    in_flight: Vec<u64>,
}

impl KgWriter {
    pub fn new(topics: Topics, graph: LiveGraph, store: Option<GraphStore>, applied: watch::Sender<usize>) -> Self {
        KgWriter { topics, graph, store, applied, next_seq: 0, in_flight: Vec::new() }
    }

    /// The kg-writer: the graph store under the data directory, loaded into the live graph the
    /// process's queries read.
    pub async fn build(shared: &mut Shared) -> Result<Self, BuildError> {
        let store = shared.data.open_graph()?;
        let store2 = store.clone();
        let state = tokio::task::spawn_blocking(move || store2.load()).await??;
        tracing::info!(documents = state.document_count(), "graph loaded");
        let g = LiveGraph::new(state);
        shared.graph = Some(g.clone());
        Ok(KgWriter::new(shared.topics.clone(), g, Some(store), shared.applied.clone()))
    }

    /// A query replica's graph: in memory, from the newest snapshot under the snapshot
    /// directory (if any), then the graph-deltas after its offsets. sled is single-process, so a
    /// replica never opens the writer's database.
    /// With a bucket (`snapshots.url`), the newest snapshot there that reads whole, downloaded
    /// under the data directory; the snapshot directory only when the bucket has none.
    pub async fn replica(snapshots: &SnapshotConfig, shared: &mut Shared) -> Result<Self, BuildError> {
        let mut state = GraphState::new();
        let mut from_bucket = false;
        if let Some(url) = &snapshots.url {
            let bucket = crate::bucket::SnapshotBucket::open(url)?;
            if let Some((s, m, name)) = bucket.load_newest(&shared.data.root().join("snapshot-cache")).await? {
                tracing::info!(bucket = %url, snapshot = %name, documents = s.document_count(), offsets = ?m.offsets, "query replica starts from a snapshot in object storage");
                shared.started_from = Some(m.offsets);
                state = s;
                from_bucket = true;
            }
        }
        if let Some(root) = snapshots.dir.as_ref().filter(|_| !from_bucket) {
            if let Some(dir) = crate::snapshot::resolve(root)? {
                let (s, m) = tokio::task::spawn_blocking(move || crate::snapshot::read(&dir, &mut crate::progress::NoProgress)).await??;
                tracing::info!(documents = s.document_count(), offsets = ?m.offsets, "query replica starts from a snapshot");
                shared.started_from = Some(m.offsets);
                state = s;
            }
        }
        let g = LiveGraph::new(state);
        shared.graph = Some(g.clone());
        Ok(KgWriter::new(shared.topics.clone(), g, None, shared.applied.clone()))
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

    fn consumed(&self) -> Consumed {
        let (g, topic) = (self.graph.clone(), self.topics.graph_deltas.clone());
        Consumed::Own(Arc::new(move || g.current().resume_offsets(&topic)))
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

    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        let mut dirty = Dirty::default();
        let mut outbox = Vec::new();
        let mut doc_times = Vec::new();
        let (topics, publishes, next_seq) = (&self.topics, self.store.is_some(), &mut self.next_seq);
        let outcomes = self.graph.update(|next| {
            let mut steps = Vec::with_capacity(batch.len() * 2);
            let mut outcomes = Vec::with_capacity(batch.len());
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
                    let change = next.apply(&d.doc_id, entry.as_ref(), &mut dirty);
                    steps.push(Step::Apply(d.doc_id.clone(), entry));
                    match change {
                        Some(c) if publishes && !c.is_empty() => {
                            let source = SourceRef { topic: r.topic.clone(), partition: r.partition, offset: r.offset, timestamp_ms: d.source.timestamp_ms };
                            let msg = change_message(next, &d, source, &c);
                            let out = Output { topic: topics.graph_changes.clone(), key: d.doc_id.clone(), payload: encode(&msg) };
                            outbox.push((*next_seq, out.clone()));
                            *next_seq += 1;
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
            (outcomes, steps)
        });
        // Queryable from here: the freshness clock of each document in the batch stops.
        let now = crate::transport::now_ms();
        let h = crate::metrics::global().freshness(if self.store.is_some() { "writer" } else { "replica" });
        for t in doc_times.into_iter().filter(|&t| t > 0) {
            h.observe((now - t) as f64 / 1e3);
        }
        let g = self.graph.current();
        // Durable from here, and only then published (the runtime publishes the changes with
        // the batch's outputs; after_commit then clears them from the outbox). A failed write
        // stops the stage, and the node with it: the graph is loaded again from the store and
        // the batch read again from its offsets there.
        if let Some(store) = &self.store {
            store.persist(&g, &dirty, &outbox)?;
        }
        self.in_flight.extend(outbox.iter().map(|(s, _)| *s));
        let docs = g.document_count();
        drop(g);
        crate::metrics::global().graph_documents.store(docs as i64, std::sync::atomic::Ordering::Relaxed);
        self.applied.send_replace(docs);
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamrag_schemas::DocOp;

    fn delta(doc: &str, triples: &[(&str, &str, &str)]) -> GraphDelta {
        GraphDelta {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: if triples.is_empty() { DocOp::Delete } else { DocOp::Upsert },
            doc_id: doc.into(),
            title: doc.to_uppercase(),
            entities: vec![],
            triples: triples
                .iter()
                .map(|(s, r, o)| ResolvedTriple { subject_id: s.to_string(), subject: s.to_string(), relation: r.to_string(), object_id: o.to_string(), object: o.to_string() })
                .collect(),
            links: vec![],
            source: SourceRef { topic: "streamrag.docs".into(), partition: 0, offset: 0, timestamp_ms: None },
        }
    }

    fn records(first: i64, ds: &[GraphDelta]) -> Vec<Record> {
        ds.iter()
            .enumerate()
            .map(|(i, d)| Record {
                topic: Topics::default().graph_deltas,
                partition: 0,
                offset: first + i as i64,
                key: None,
                payload: encode(d),
                timestamp_ms: 0,
            })
            .collect()
    }

    fn oracle(ds: &[GraphDelta], topic: &str) -> GraphState {
        let mut g = GraphState::new();
        let mut d = Dirty::default();
        for (i, x) in ds.iter().enumerate() {
            g.apply(&x.doc_id, GraphState::entry_of(x).as_ref(), &mut d);
            g.set_offset(topic, 0, i as i64, &mut d);
        }
        g
    }

    #[tokio::test]
    async fn a_version_a_reader_holds_is_never_written_and_every_path_gives_the_oracle() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::open(dir.path()).unwrap();
        let live = LiveGraph::new(GraphState::new());
        let (tx, _rx) = watch::channel(0);
        let mut w = KgWriter::new(Topics::default(), live.clone(), Some(store), tx);
        let batches = [
            vec![delta("d1", &[("a", "r", "b")]), delta("d2", &[("b", "r", "c")])],
            vec![delta("d3", &[("c", "r", "d")]), delta("d1", &[("a", "s", "e")])],
            vec![delta("d2", &[])],
            vec![delta("d4", &[("e", "r", "a")])],
        ];
        let topic = Topics::default().graph_deltas;
        let mut all = Vec::new();
        let mut held = None;
        for (i, b) in batches.iter().enumerate() {
            let recs = records(all.len() as i64, b);
            all.extend(b.iter().cloned());
            let before = Arc::as_ptr(&live.current());
            let held_now = held.as_ref().is_some_and(|(g, _)| Arc::as_ptr(g) == before);
            let outcomes = w.process_batch(&recs).await.unwrap();
            // one copy: a version no query holds is changed in place, a held one is not
            assert_eq!(Arc::as_ptr(&live.current()) == before, !held_now, "batch {i} in place");
            assert!(outcomes.iter().all(|o| o.is_ok()));
            w.after_commit(&recs);
            assert_eq!(live.current().stats().digest, oracle(&all, &topic).stats().digest, "after batch {i}");
            match i {
                // a query takes version 0 and keeps it through the next two batches: the
                // writer may not change it in place
                0 => held = Some((live.current(), live.current().stats())),
                2 => {
                    let (g, before) = held.take().unwrap();
                    assert_eq!(g.stats(), before, "the held version is unchanged");
                    assert_eq!(g.stats().digest, oracle(&all[..2], &topic).stats().digest);
                }
                _ => {}
            }
        }
    }

    #[tokio::test]
    async fn changes_persisted_but_not_published_are_recovered_from_the_outbox_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::open(dir.path()).unwrap();
        let (tx, _rx) = watch::channel(0);
        let topics = Topics::default();
        let mut w = KgWriter::new(topics.clone(), LiveGraph::new(GraphState::new()), Some(store.clone()), tx.clone());
        let recs = records(0, &[delta("d1", &[("a", "r", "b")]), delta("d2", &[("b", "r", "c")])]);
        let outcomes = w.process_batch(&recs).await.unwrap();
        let published: Vec<Output> = outcomes.into_iter().flat_map(|o| o.unwrap()).collect();
        assert_eq!(published.len(), 2);
        assert!(published.iter().all(|o| o.topic == topics.graph_changes));
        // the process dies here: persisted, not yet published or committed
        drop(w);
        let g = store.load().unwrap();
        assert_eq!(g.resume_offsets(&topics.graph_deltas), [(0, 2)].into(), "the offsets went with the graph");
        let mut again = KgWriter::new(topics.clone(), LiveGraph::new(g), Some(store.clone()), tx);
        let recovered = again.recover_outputs();
        assert_eq!(recovered.iter().map(|o| (&o.key, &o.payload)).collect::<Vec<_>>(), published.iter().map(|o| (&o.key, &o.payload)).collect::<Vec<_>>());
        // once published (the runtime then calls after_commit), they leave the outbox
        again.after_commit(&[]);
        assert!(store.outbox().unwrap().is_empty());
        // a redelivered batch changes nothing and publishes nothing
        let outcomes = again.process_batch(&recs).await.unwrap();
        assert!(outcomes.into_iter().all(|o| o.unwrap().is_empty()));
        assert!(store.outbox().unwrap().is_empty());
    }
}
