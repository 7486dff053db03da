//! Fact embeddings (all-MiniLM-L6-v2): each live fact of the graph, written as "subject
//! relation object" with its entities' names, embedded once, so the hybrid can score a fact by
//! its cosine to the question beside its words. The index is kept from the graph-changes topic
//! by a [`FactsReader`]: a fact is embedded when it is asserted (its first supporting document)
//! and dropped when it is retracted (its last one gone), off the path that makes a triple
//! queryable (the kg-writer never waits for it); until its vector is there a fact is scored by
//! its words alone.
//!
//! A node keeps the vectors under its data directory (`DATA/fact-vectors`, sled) with the
//! graph-changes position they reflect; a restart loads them and reads the topic on from there.
//! A fact re-asserted with the same text keeps its vector. Vectors of another encoder are
//! dropped at open.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use streamrag_glm::sentence::dot;
use streamrag_glm::SentenceEncoder;
use streamrag_schemas::{decode, GraphChange};

use crate::config::Topics;
use crate::error::StageFault;
use crate::hash::fnv1a;
use crate::runtime::{blocking, Consumed, Operator, Outcome, StartFrom};
use crate::transport::Record;

use super::dense::{VectorStore, VectorStoreError};

/// The text a fact is embedded from (and matched on by its words).
pub fn fact_text(subject: &str, relation: &str, object: &str) -> String {
    format!("{subject} {relation} {object}")
}

/// A fact by its graph key: (subject id, relation, object id).
type Key = (String, String, String);

fn key_hash(s: &str, r: &str, o: &str) -> u64 {
    fnv1a(&[s, r, o])
}

/// The vectors, one slot each in one arena (a scan over all of them reads memory in order).
#[derive(Default)]
struct Table {
    dim: usize,
    /// key hash -> slots with that hash (nearly always one)
    slot_of: HashMap<u64, Vec<u32>>,
    keys: Vec<Option<Key>>,
    text_hash: Vec<u64>,
    arena: Vec<f32>,
    free: Vec<u32>,
    live: usize,
}

impl Table {
    fn new(dim: usize) -> Self {
        Table { dim, ..Table::default() }
    }

    fn find(&self, s: &str, r: &str, o: &str) -> Option<u32> {
        let slots = self.slot_of.get(&key_hash(s, r, o))?;
        slots.iter().copied().find(|&i| self.keys[i as usize].as_ref().is_some_and(|k| k.0 == s && k.1 == r && k.2 == o))
    }

    fn vector(&self, slot: u32) -> &[f32] {
        &self.arena[slot as usize * self.dim..(slot as usize + 1) * self.dim]
    }

    fn put(&mut self, key: Key, text_hash: u64, v: &[f32]) {
        let i = match self.find(&key.0, &key.1, &key.2) {
            Some(i) => i,
            None => {
                let i = self.free.pop().unwrap_or_else(|| {
                    self.arena.resize(self.arena.len() + self.dim, 0.0);
                    self.keys.push(None);
                    self.text_hash.push(0);
                    (self.keys.len() - 1) as u32
                });
                self.slot_of.entry(key_hash(&key.0, &key.1, &key.2)).or_default().push(i);
                self.keys[i as usize] = Some(key);
                self.live += 1;
                i
            }
        };
        self.text_hash[i as usize] = text_hash;
        let d = self.dim;
        self.arena[i as usize * d..(i as usize + 1) * d].copy_from_slice(v);
    }

    fn remove(&mut self, s: &str, r: &str, o: &str) -> bool {
        let Some(i) = self.find(s, r, o) else { return false };
        let h = key_hash(s, r, o);
        if let Some(v) = self.slot_of.get_mut(&h) {
            v.retain(|&j| j != i);
            if v.is_empty() {
                self.slot_of.remove(&h);
            }
        }
        self.keys[i as usize] = None;
        self.free.push(i);
        self.live -= 1;
        true
    }
}

fn store_key(k: &Key) -> Vec<u8> {
    serde_json::to_vec(&[&k.0, &k.1, &k.2]).expect("strings serialise")
}

fn encode_value(text_hash: u64, v: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 4 * v.len());
    b.extend_from_slice(&text_hash.to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn decode_entry(k: &[u8], v: &[u8], dim: usize) -> Option<(Key, u64, Vec<f32>)> {
    let [s, r, o]: [String; 3] = serde_json::from_slice(k).ok()?;
    let h = u64::from_le_bytes(v.get(..8)?.try_into().ok()?);
    let rest = v.get(8..)?;
    if rest.len() != 4 * dim {
        return None;
    }
    Some(((s, r, o), h, rest.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()))
}

/// What one batch of graph changes does to a fact: the text to embed, or its removal.
enum Op {
    Put(String),
    Remove,
}

pub struct FactVectors {
    encoder: Arc<SentenceEncoder>,
    table: RwLock<Table>,
    store: VectorStore,
}

impl FactVectors {
    /// The index kept under `dir` (see the module notes): loads what it holds; vectors another
    /// encoder (`encoder_id`) wrote are dropped.
    pub fn open(encoder: Arc<SentenceEncoder>, dir: &std::path::Path, encoder_id: &str) -> Result<Self, VectorStoreError> {
        let dim = encoder.dim();
        let store = VectorStore::open(dir, "facts", encoder_id, dim)?;
        let mut table = Table::new(dim);
        store.load(|k, v| match decode_entry(k, v, dim) {
            Some((key, h, vector)) => {
                table.put(key, h, &vector);
                true
            }
            None => false,
        })?;
        Ok(FactVectors { encoder, table: RwLock::new(table), store })
    }

    /// Facts with a vector.
    pub fn len(&self) -> usize {
        self.table.read().expect("fact vectors lock").live
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The facts with a vector, as (subject id, relation, object id), sorted.
    pub fn facts(&self) -> Vec<(String, String, String)> {
        let t = self.table.read().expect("fact vectors lock");
        let mut v: Vec<Key> = t.keys.iter().flatten().cloned().collect();
        v.sort();
        v
    }

    /// Applies graph changes in order: asserted facts embedded (unless their text is the one
    /// already embedded), retracted ones removed. Returns how many were embedded.
    pub fn apply(&self, changes: &[GraphChange]) -> Result<usize, StageFault> {
        // the last word on each fact in the batch wins
        let mut ops: BTreeMap<Key, Op> = BTreeMap::new();
        for c in changes {
            for t in &c.retracted {
                ops.insert((t.subject_id.clone(), t.relation.clone(), t.object_id.clone()), Op::Remove);
            }
            for t in &c.asserted {
                ops.insert((t.subject_id.clone(), t.relation.clone(), t.object_id.clone()), Op::Put(fact_text(&t.subject, &t.relation, &t.object)));
            }
        }
        let (todo, gone): (Vec<(Key, String, u64)>, Vec<Key>) = {
            let t = self.table.read().expect("fact vectors lock");
            let mut todo = Vec::new();
            let mut gone = Vec::new();
            for (k, op) in ops {
                let slot = t.find(&k.0, &k.1, &k.2);
                match op {
                    Op::Put(text) => {
                        let h = fnv1a(&[&text]);
                        if slot.map(|i| t.text_hash[i as usize]) != Some(h) {
                            todo.push((k, text, h));
                        }
                    }
                    Op::Remove if slot.is_some() => gone.push(k),
                    Op::Remove => {}
                }
            }
            (todo, gone)
        };
        let refs: Vec<&str> = todo.iter().map(|(_, t, _)| t.as_str()).collect();
        let vecs = if refs.is_empty() { Vec::new() } else { self.encoder.embed_vecs(&refs)? };
        let mut batch = sled::Batch::default();
        let mut t = self.table.write().expect("fact vectors lock");
        for k in &gone {
            t.remove(&k.0, &k.1, &k.2);
            batch.remove(store_key(k));
        }
        for ((k, _, h), v) in todo.iter().zip(&vecs) {
            batch.insert(store_key(k), encode_value(*h, v));
            t.put(k.clone(), *h, v);
        }
        drop(t);
        self.store.apply(batch)?;
        Ok(todo.len())
    }

    /// The cosine of the fact (subject id, relation, object id) to the embedded question `q`;
    /// None while it has no vector.
    pub fn cosine(&self, s: &str, r: &str, o: &str, q: &[f32]) -> Option<f32> {
        let t = self.table.read().expect("fact vectors lock");
        t.find(s, r, o).map(|i| dot(t.vector(i), q))
    }

    /// The cosines of many facts at once (one lock), None for those without a vector.
    pub fn cosines<'a>(&self, facts: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>, q: &[f32]) -> Vec<Option<f32>> {
        let t = self.table.read().expect("fact vectors lock");
        facts.into_iter().map(|(s, r, o)| t.find(s, r, o).map(|i| dot(t.vector(i), q))).collect()
    }

    /// Where the store stands in the graph-changes topic (partition -> next offset).
    pub fn position(&self) -> BTreeMap<i32, i64> {
        self.store.position()
    }

    /// Makes what was applied durable, recording `next` as the position it reflects.
    pub fn commit(&self, next: &BTreeMap<i32, i64>) -> Result<(), StageFault> {
        self.store.commit(next)
    }
}

/// Keeps a [`FactVectors`] from the graph-changes topic. A record that does not decode is
/// skipped (the kg-writer wrote it; nothing here can mend it).
pub struct FactsReader {
    topics: Topics,
    index: Arc<FactVectors>,
    progress: Arc<Mutex<BTreeMap<i32, i64>>>,
}

impl FactsReader {
    pub fn new(topics: Topics, index: Arc<FactVectors>) -> Self {
        let progress = Arc::new(Mutex::new(index.position()));
        FactsReader { topics, index, progress }
    }

    /// Next graph-changes offset per partition the index holds.
    pub fn progress(&self) -> BTreeMap<i32, i64> {
        self.progress.lock().expect("progress lock").clone()
    }

    pub fn topic(&self) -> &str {
        &self.topics.graph_changes
    }

    /// Applies one batch of graph-changes records and commits its position.
    pub fn apply(&self, batch: &[Record]) -> Result<(), StageFault> {
        let changes: Vec<GraphChange> = batch
            .iter()
            .filter_map(|r| match decode::<GraphChange>(&r.payload) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(partition = r.partition, offset = r.offset, error = %e, "a graph-changes record that does not decode: its facts get no vectors");
                    None
                }
            })
            .collect();
        blocking(|| self.index.apply(&changes))?;
        let mut next = self.progress();
        for r in batch {
            next.insert(r.partition, r.offset + 1);
        }
        blocking(|| self.index.commit(&next))?;
        *self.progress.lock().expect("progress lock") = next;
        Ok(())
    }
}

impl Operator for FactsReader {
    fn name(&self) -> &'static str {
        "facts-reader"
    }
    fn input(&self) -> String {
        self.topics.graph_changes.clone()
    }
    fn start_from(&self) -> StartFrom {
        StartFrom::Offsets(self.progress())
    }
    fn consumed(&self) -> Consumed {
        let p = self.progress.clone();
        Consumed::Own(Arc::new(move || p.lock().expect("progress lock").clone()))
    }
    fn max_batch(&self) -> Option<usize> {
        // a change carries a document's new facts (a few to a few dozen): some hundreds of
        // texts per batch, about a second of embedding on 2 cores
        Some(16)
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        self.apply(batch)?;
        Ok(batch.iter().map(|_| Ok(vec![])).collect())
    }
}
