//! Fact embeddings (all-MiniLM-L6-v2): each live fact of the graph, written as "subject
//! relation object" with its entities' names, embedded once, so the hybrid can score a fact by
//! its cosine to the question beside its words. The index is kept from the graph-changes topic
//! by a [`FactsReader`]: a fact is embedded when it is asserted (its first supporting document)
//! and dropped when it is retracted (its last one gone), off the path that makes a triple
//! queryable (the kg-writer never waits for it); until its vector is there a fact is scored by
//! its words alone. The entities' names the same way: an entity's id (its normalised name) is
//! embedded when the entity first appears and dropped when its last mention goes, so the hybrid
//! can link a name the question writes shorter than the graph holds it.
//!
//! A node keeps the vectors under its data directory (`DATA/fact-vectors`, sled: trees `facts`
//! and `entities`) with the graph-changes position they reflect; a restart loads them and reads
//! the topic on from there. A fact re-asserted with the same text keeps its vector. Vectors of
//! another encoder are dropped at open.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use streamrag_glm::sentence::dot;
use streamrag_glm::SentenceEncoder;
use streamrag_schemas::{decode, GraphChange};

use crate::config::Topics;
use crate::error::StageFault;
use crate::hash::fnv1a;
use crate::runtime::{blocking, Consumed, Operator, Outcome, Progress, StartFrom};
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

/// What a table is keyed by: a fact (its three parts) or an entity (its id).
trait VectorKey: Clone + Ord {
    /// The hash a lookup by parts computes too (a fact's over its three parts, so a lookup needs
    /// no key built).
    fn hash(&self) -> u64;
    /// The key in the sled tree.
    fn store_key(&self) -> Vec<u8>;
}

impl VectorKey for Key {
    fn hash(&self) -> u64 {
        key_hash(&self.0, &self.1, &self.2)
    }
    fn store_key(&self) -> Vec<u8> {
        serde_json::to_vec(&[&self.0, &self.1, &self.2]).expect("strings serialise")
    }
}

impl VectorKey for String {
    fn hash(&self) -> u64 {
        fnv1a(&[self])
    }
    fn store_key(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

/// The vectors, one slot each in one arena (a scan over all of them reads memory in order),
/// found by their key's hash.
struct Table<K> {
    dim: usize,
    /// key hash -> slots with that hash (nearly always one)
    slot_of: HashMap<u64, Vec<u32>>,
    keys: Vec<Option<K>>,
    text_hash: Vec<u64>,
    arena: Vec<f32>,
    free: Vec<u32>,
    live: usize,
}

impl<K: VectorKey> Table<K> {
    fn new(dim: usize) -> Self {
        Table { dim, slot_of: HashMap::new(), keys: Vec::new(), text_hash: Vec::new(), arena: Vec::new(), free: Vec::new(), live: 0 }
    }

    fn find(&self, h: u64, is: impl Fn(&K) -> bool) -> Option<u32> {
        let slots = self.slot_of.get(&h)?;
        slots.iter().copied().find(|&i| self.keys[i as usize].as_ref().is_some_and(&is))
    }

    fn vector(&self, slot: u32) -> &[f32] {
        &self.arena[slot as usize * self.dim..(slot as usize + 1) * self.dim]
    }

    fn put(&mut self, key: K, text_hash: u64, v: &[f32]) {
        let h = key.hash();
        let i = match self.find(h, |k| *k == key) {
            Some(i) => i,
            None => {
                let i = self.free.pop().unwrap_or_else(|| {
                    self.arena.resize(self.arena.len() + self.dim, 0.0);
                    self.keys.push(None);
                    self.text_hash.push(0);
                    (self.keys.len() - 1) as u32
                });
                self.slot_of.entry(h).or_default().push(i);
                self.keys[i as usize] = Some(key);
                self.live += 1;
                i
            }
        };
        self.text_hash[i as usize] = text_hash;
        let d = self.dim;
        self.arena[i as usize * d..(i as usize + 1) * d].copy_from_slice(v);
    }

    fn remove(&mut self, key: &K) -> bool {
        let h = key.hash();
        let Some(i) = self.find(h, |k| k == key) else { return false };
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

    /// Drops `gone`, puts `todo` with their vectors (in order); the same as a sled batch for
    /// the table's tree.
    fn write(&mut self, gone: &[K], todo: &[(K, String, u64)], vecs: &[Vec<f32>]) -> sled::Batch {
        let mut batch = sled::Batch::default();
        for k in gone {
            self.remove(k);
            batch.remove(k.store_key());
        }
        for ((k, _, h), v) in todo.iter().zip(vecs) {
            batch.insert(k.store_key(), encode_value(*h, v));
            self.put(k.clone(), *h, v);
        }
        batch
    }

    fn sorted_keys(&self) -> Vec<K> {
        let mut v: Vec<K> = self.keys.iter().flatten().cloned().collect();
        v.sort();
        v
    }
}

fn fact_find(t: &Table<Key>, s: &str, r: &str, o: &str) -> Option<u32> {
    t.find(key_hash(s, r, o), |k| k.0 == s && k.1 == r && k.2 == o)
}

fn entity_find(t: &Table<String>, id: &str) -> Option<u32> {
    t.find(fnv1a(&[id]), |k| k == id)
}

fn encode_value(text_hash: u64, v: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 4 * v.len());
    b.extend_from_slice(&text_hash.to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn decode_value(v: &[u8], dim: usize) -> Option<(u64, Vec<f32>)> {
    let h = u64::from_le_bytes(v.get(..8)?.try_into().ok()?);
    let rest = v.get(8..)?;
    if rest.len() != 4 * dim {
        return None;
    }
    Some((h, rest.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()))
}

fn decode_entry(k: &[u8], v: &[u8], dim: usize) -> Option<(Key, u64, Vec<f32>)> {
    let [s, r, o]: [String; 3] = serde_json::from_slice(k).ok()?;
    let (h, v) = decode_value(v, dim)?;
    Some(((s, r, o), h, v))
}

/// What one batch of graph changes does to a fact: the text to embed, or its removal.
enum Op {
    Put(String),
    Remove,
}

pub struct FactVectors {
    encoder: Arc<SentenceEncoder>,
    table: RwLock<Table<Key>>,
    /// The entities' vectors, by id (the normalised name, which is what is embedded: it does
    /// not change while the entity lives, whichever document's spelling is shown).
    entities: RwLock<Table<String>>,
    store: VectorStore,
    /// The entities' tree, in the same database (one position for both).
    entity_store: VectorStore,
}

impl FactVectors {
    /// The index kept under `dir` (see the module notes): loads what it holds; vectors another
    /// encoder (`encoder_id`) wrote are dropped.
    pub fn open(encoder: Arc<SentenceEncoder>, dir: &std::path::Path, encoder_id: &str) -> Result<Self, VectorStoreError> {
        let dim = encoder.dim();
        let store = VectorStore::open(dir, "facts", encoder_id, dim)?;
        // a store from before entity vectors has no such tree: opening it drops the position,
        // so the topic is read again (facts unchanged are not embedded again)
        let entity_store = store.sibling("entities")?;
        let mut table = Table::new(dim);
        store.load(|k, v| match decode_entry(k, v, dim) {
            Some((key, h, vector)) => {
                table.put(key, h, &vector);
                true
            }
            None => false,
        })?;
        let mut entities = Table::new(dim);
        entity_store.load(|k, v| match (std::str::from_utf8(k), decode_value(v, dim)) {
            (Ok(id), Some((h, vector))) => {
                entities.put(id.to_string(), h, &vector);
                true
            }
            _ => false,
        })?;
        Ok(FactVectors { encoder, table: RwLock::new(table), entities: RwLock::new(entities), store, entity_store })
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
        self.table.read().expect("fact vectors lock").sorted_keys()
    }

    /// The entities with a vector, by id, sorted.
    pub fn entities(&self) -> Vec<String> {
        self.entities.read().expect("entity vectors lock").sorted_keys()
    }

    /// Applies graph changes in order: asserted facts and added entities embedded (unless their
    /// text is the one already embedded), retracted facts and removed entities dropped. Returns
    /// how many texts were embedded.
    pub fn apply(&self, changes: &[GraphChange]) -> Result<usize, StageFault> {
        // the last word on each fact and entity in the batch wins
        let mut ops: BTreeMap<Key, Op> = BTreeMap::new();
        let mut ent_ops: BTreeMap<String, Op> = BTreeMap::new();
        for c in changes {
            for t in &c.retracted {
                ops.insert((t.subject_id.clone(), t.relation.clone(), t.object_id.clone()), Op::Remove);
            }
            for t in &c.asserted {
                ops.insert((t.subject_id.clone(), t.relation.clone(), t.object_id.clone()), Op::Put(fact_text(&t.subject, &t.relation, &t.object)));
            }
            for e in &c.entities_removed {
                ent_ops.insert(e.id.clone(), Op::Remove);
            }
            for e in &c.entities_added {
                ent_ops.insert(e.id.clone(), Op::Put(e.id.clone()));
            }
        }
        let (todo, gone) = {
            let t = self.table.read().expect("fact vectors lock");
            plan(ops, |k| fact_find(&t, &k.0, &k.1, &k.2).map(|i| t.text_hash[i as usize]))
        };
        let (ent_todo, ent_gone) = {
            let t = self.entities.read().expect("entity vectors lock");
            plan(ent_ops, |id| entity_find(&t, id).map(|i| t.text_hash[i as usize]))
        };
        let refs: Vec<&str> = todo.iter().map(|(_, t, _)| t.as_str()).chain(ent_todo.iter().map(|(_, t, _)| t.as_str())).collect();
        let mut vecs = if refs.is_empty() { Vec::new() } else { self.encoder.embed_vecs(&refs)? };
        let ent_vecs = vecs.split_off(todo.len());
        let batch = self.table.write().expect("fact vectors lock").write(&gone, &todo, &vecs);
        let ent_batch = self.entities.write().expect("entity vectors lock").write(&ent_gone, &ent_todo, &ent_vecs);
        self.store.apply(batch)?;
        self.entity_store.apply(ent_batch)?;
        Ok(todo.len() + ent_todo.len())
    }

    /// The cosine of the fact (subject id, relation, object id) to the embedded question `q`;
    /// None while it has no vector.
    pub fn cosine(&self, s: &str, r: &str, o: &str, q: &[f32]) -> Option<f32> {
        let t = self.table.read().expect("fact vectors lock");
        fact_find(&t, s, r, o).map(|i| dot(t.vector(i), q))
    }

    /// The cosines of many facts at once (one lock), None for those without a vector.
    pub fn cosines<'a>(&self, facts: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>, q: &[f32]) -> Vec<Option<f32>> {
        let t = self.table.read().expect("fact vectors lock");
        facts.into_iter().map(|(s, r, o)| fact_find(&t, s, r, o).map(|i| dot(t.vector(i), q))).collect()
    }

    /// The cosine of the entity `id`'s name to `q`; None while it has no vector.
    pub fn entity_cosine(&self, id: &str, q: &[f32]) -> Option<f32> {
        let t = self.entities.read().expect("entity vectors lock");
        entity_find(&t, id).map(|i| dot(t.vector(i), q))
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

/// What a batch's operations ask of a table: the (key, text, text hash) to embed (those whose
/// text is not the one embedded already) and the keys to drop (those that have a vector).
fn plan<K>(ops: BTreeMap<K, Op>, embedded: impl Fn(&K) -> Option<u64>) -> (Vec<(K, String, u64)>, Vec<K>) {
    let mut todo = Vec::new();
    let mut gone = Vec::new();
    for (k, op) in ops {
        let had = embedded(&k);
        match op {
            Op::Put(text) => {
                let h = fnv1a(&[&text]);
                if had != Some(h) {
                    todo.push((k, text, h));
                }
            }
            Op::Remove if had.is_some() => gone.push(k),
            Op::Remove => {}
        }
    }
    (todo, gone)
}

/// Keeps a [`FactVectors`] from the graph-changes topic. A record that does not decode is
/// skipped (the kg-writer wrote it; nothing here can mend it).
pub struct FactsReader {
    topics: Topics,
    index: Arc<FactVectors>,
    progress: Progress,
}

impl FactsReader {
    pub fn new(topics: Topics, index: Arc<FactVectors>) -> Self {
        let progress = Progress::at(index.position());
        FactsReader { topics, index, progress }
    }

    /// Next graph-changes offset per partition the index holds.
    pub fn progress(&self) -> BTreeMap<i32, i64> {
        self.progress.get()
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
        let next = self.progress.after(batch);
        blocking(|| self.index.commit(&next))?;
        self.progress.set(next);
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
        self.progress.consumed()
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
