//! Passage embeddings (all-MiniLM-L6-v2): question vs passage cosine, top k. The index is a
//! [`DocSink`] of the docs reader ([`crate::passages::DocsReader`]), which keeps it from the
//! docs topic (upserts and deletes).
//!
//! Embedding is the slow part on CPU (~60 passages/s on 2 cores), so a node keeps the vectors
//! under its data directory (`DATA/vectors`, sled): each passage is embedded once, when a
//! version of it first arrives, and stored with a hash of its text and the docs-topic position
//! the batch reached; a restart loads them and reads the topic on from that position. A
//! passage re-sent unchanged is not embedded again. Vectors of another encoder are dropped at
//! open. Without a store (tests, `eval` baselines) the index lives in memory.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, RwLock};

use streamrag_glm::sentence::dot;
use streamrag_glm::{Result, SentenceEncoder};
use streamrag_schemas::ScoredDocument;

use crate::error::StageFault;
use crate::passages::DocSink;

use super::Retrieved;

/// The most questions [`DenseIndex::embed_questions`] embeds on one thread.
const SMALL_BATCH: usize = 2;

/// Question vectors kept, the most recently asked (1.5 KB each with MiniLM): a standing query
/// answered again at every change that reaches it, or a question asked again, is not embedded
/// again.
const QUESTIONS_KEPT: usize = 16_384;

/// A pool of one thread (None if the system would not give one: then the global pool serves).
fn one_thread() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "question-embed".into()).build().ok()).as_ref()
}

const POSITION: &[u8] = b"position";
const ENCODER: &[u8] = b"encoder";

struct Entry {
    title: String,
    hash: u64,
    vector: Vec<f32>,
}

pub struct DenseIndex {
    pub encoder: Arc<SentenceEncoder>,
    docs: RwLock<HashMap<String, Entry>>,
    store: Option<VectorStore>,
    /// Question -> its vector, the [`QUESTIONS_KEPT`] most recently asked.
    questions: Mutex<lru::LruCache<String, Vec<f32>>>,
}

fn question_cache() -> Mutex<lru::LruCache<String, Vec<f32>>> {
    Mutex::new(lru::LruCache::new(NonZeroUsize::new(QUESTIONS_KEPT).expect("not zero")))
}


/// The text a passage is embedded from.
pub fn passage_text(title: &str, text: &str) -> String {
    if title.is_empty() { text.to_string() } else { format!("{title}\n{text}") }
}

fn encode_entry(e: &Entry) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + e.title.len() + 4 * e.vector.len());
    v.extend_from_slice(&e.hash.to_le_bytes());
    v.extend_from_slice(&(e.title.len() as u32).to_le_bytes());
    v.extend_from_slice(e.title.as_bytes());
    for x in &e.vector {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn decode_entry(b: &[u8], dim: usize) -> Option<Entry> {
    let hash = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let tl = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?) as usize;
    let title = std::str::from_utf8(b.get(12..12 + tl)?).ok()?.to_string();
    let rest = b.get(12 + tl..)?;
    if rest.len() != 4 * dim {
        return None;
    }
    let vector = rest.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    Some(Entry { title, hash, vector })
}

/// A vector store (`DATA/vectors`, `DATA/fact-vectors`) could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[error("vectors under {dir}: {source}", dir = dir.display())]
pub struct VectorStoreError {
    pub dir: std::path::PathBuf,
    #[source]
    pub source: sled::Error,
}

fn store_fault(dir: &std::path::Path) -> impl Fn(sled::Error) -> StageFault + '_ {
    move |source| StageFault::Vectors(VectorStoreError { dir: dir.to_path_buf(), source })
}

/// One persistent vector index's sled database (the passages' and the facts'): a tree of
/// entries, the encoder that wrote them, and the topic position they reflect.
pub(super) struct VectorStore {
    dir: std::path::PathBuf,
    db: sled::Db,
    tree: sled::Tree,
}

impl VectorStore {
    /// Opens the tree `tree` under `dir`; what another encoder wrote (`encoder_id`, `dim`) is
    /// dropped with the position, so the topic is read again.
    pub(super) fn open(dir: &std::path::Path, tree: &str, encoder_id: &str, dim: usize) -> std::result::Result<Self, VectorStoreError> {
        let fail = |source| VectorStoreError { dir: dir.to_path_buf(), source };
        let db = sled::open(dir).map_err(fail)?;
        let tree = db.open_tree(tree).map_err(fail)?;
        let id = format!("{encoder_id} dim={dim}");
        if db.get(ENCODER).map_err(fail)?.as_deref() != Some(id.as_bytes()) {
            // every tree of the database: their vectors are all the old encoder's
            for name in db.tree_names() {
                if name != db.name() {
                    db.open_tree(name).and_then(|t| t.clear()).map_err(fail)?;
                }
            }
            db.remove(POSITION).map_err(fail)?;
            db.insert(ENCODER, id.as_bytes()).map_err(fail)?;
        }
        Ok(VectorStore { dir: dir.to_path_buf(), db, tree })
    }

    /// Another tree of the same database, under the same encoder and position. A tree the
    /// database did not have yet drops the position: the topic is read again to fill it.
    pub(super) fn sibling(&self, tree: &str) -> std::result::Result<Self, VectorStoreError> {
        let fail = |source| VectorStoreError { dir: self.dir.clone(), source };
        let new = !self.db.tree_names().iter().any(|n| n.as_ref() == tree.as_bytes());
        let t = self.db.open_tree(tree).map_err(fail)?;
        if new {
            self.db.remove(POSITION).map_err(fail)?;
        }
        Ok(VectorStore { dir: self.dir.clone(), db: self.db.clone(), tree: t })
    }

    /// Hands each entry to `load`; one it cannot read (false) is removed with the position, so
    /// the topic is read again.
    pub(super) fn load(&self, mut load: impl FnMut(&[u8], &[u8]) -> bool) -> std::result::Result<(), VectorStoreError> {
        let fail = |source| VectorStoreError { dir: self.dir.clone(), source };
        for kv in self.tree.iter() {
            let (k, v) = kv.map_err(fail)?;
            if !load(&k, &v) {
                self.tree.remove(&k).map_err(fail)?;
                self.db.remove(POSITION).map_err(fail)?;
            }
        }
        Ok(())
    }

    pub(super) fn apply(&self, batch: sled::Batch) -> std::result::Result<(), StageFault> {
        self.tree.apply_batch(batch).map_err(store_fault(&self.dir))
    }

    pub(super) fn remove(&self, key: &[u8]) -> std::result::Result<(), StageFault> {
        self.tree.remove(key).map(|_| ()).map_err(store_fault(&self.dir))
    }

    /// Where the store stands in its topic (partition -> next offset); empty when unreadable
    /// (the topic is read again; unchanged entries are not re-embedded).
    pub(super) fn position(&self) -> BTreeMap<i32, i64> {
        self.db.get(POSITION).ok().flatten().and_then(|p| serde_json::from_slice(&p).ok()).unwrap_or_default()
    }

    /// Makes what was applied durable, recording `next` as the position it reflects.
    pub(super) fn commit(&self, next: &BTreeMap<i32, i64>) -> std::result::Result<(), StageFault> {
        self.db.insert(POSITION, serde_json::to_vec(next).expect("offsets serialise")).map_err(store_fault(&self.dir))?;
        self.db.flush().map_err(store_fault(&self.dir))?;
        Ok(())
    }
}

impl DenseIndex {
    /// An index in memory, empty.
    pub fn new(encoder: SentenceEncoder) -> Self {
        DenseIndex { encoder: Arc::new(encoder), docs: RwLock::new(HashMap::new()), store: None, questions: question_cache() }
    }

    /// An index kept in `db` (see the module notes): loads what it holds; vectors another
    /// encoder (`encoder_id`: its directory and dimension) wrote are dropped.
    pub fn open(encoder: SentenceEncoder, dir: &std::path::Path, encoder_id: &str) -> std::result::Result<Self, VectorStoreError> {
        let dim = encoder.dim();
        let store = VectorStore::open(dir, "vectors", encoder_id, dim)?;
        let mut docs = HashMap::new();
        store.load(|k, v| match (std::str::from_utf8(k), decode_entry(v, dim)) {
            (Ok(id), Some(e)) => {
                docs.insert(id.to_string(), e);
                true
            }
            _ => false,
        })?;
        Ok(DenseIndex { encoder: Arc::new(encoder), docs: RwLock::new(docs), store: Some(store), questions: question_cache() })
    }

    pub fn len(&self) -> usize {
        self.docs.read().expect("index lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Embeds and stores (id, title, text) passages; a passage whose title and text are
    /// unchanged keeps its vector. Returns how many were embedded.
    pub fn upsert(&self, docs: &[(String, String, String)]) -> std::result::Result<usize, StageFault> {
        // the last version of each id in the batch wins
        let mut latest: BTreeMap<&str, (&str, &str, u64)> = BTreeMap::new();
        for (id, title, text) in docs {
            latest.insert(id, (title, text, crate::hash::fnv1a(&[title, text])));
        }
        let todo: Vec<(&str, &str, &str, u64)> = {
            let m = self.docs.read().expect("index lock");
            latest.iter().filter(|(id, (_, _, h))| m.get(**id).map(|e| e.hash) != Some(*h)).map(|(id, (t, x, h))| (*id, *t, *x, *h)).collect()
        };
        if todo.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = todo.iter().map(|(_, t, x, _)| passage_text(t, x)).collect();
        let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
        let vecs = self.encoder.embed_vecs(&refs)?;
        let mut batch = sled::Batch::default();
        let mut m = self.docs.write().expect("index lock");
        for ((id, title, _, hash), vector) in todo.iter().zip(vecs) {
            let e = Entry { title: title.to_string(), hash: *hash, vector };
            if self.store.is_some() {
                batch.insert(id.as_bytes(), encode_entry(&e));
            }
            m.insert(id.to_string(), e);
        }
        drop(m);
        if let Some(s) = &self.store {
            s.apply(batch)?;
        }
        Ok(todo.len())
    }

    pub fn remove(&self, id: &str) -> std::result::Result<(), StageFault> {
        self.docs.write().expect("index lock").remove(id);
        if let Some(s) = &self.store {
            s.remove(id.as_bytes())?;
        }
        Ok(())
    }

    /// The questions' embeddings: those asked lately from the cache, the others in one forward
    /// pass. A question or two are embedded on one thread: at a few rows candle's matrix
    /// products lose more handing work between threads than they gain (on 2 cores 17 ms against
    /// 22 ms for one 2Wiki question); a batch is spread over all of them.
    pub fn embed_questions(&self, qs: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let mut kept = self.questions.lock().expect("question cache lock");
            qs.iter().map(|q| kept.get(*q).cloned()).collect()
        };
        let mut new: Vec<&str> = qs.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(q, _)| *q).collect();
        new.sort_unstable();
        new.dedup();
        if !new.is_empty() {
            let vs = match one_thread().filter(|_| new.len() <= SMALL_BATCH) {
                Some(pool) => pool.install(|| self.encoder.embed_vecs(&new))?,
                None => self.encoder.embed_vecs(&new)?,
            };
            let made: HashMap<&str, Vec<f32>> = new.into_iter().zip(vs).collect();
            for (slot, q) in out.iter_mut().zip(qs).filter(|(slot, _)| slot.is_none()) {
                *slot = made.get(*q).cloned();
            }
            let mut kept = self.questions.lock().expect("question cache lock");
            for (q, v) in made {
                kept.put(q.to_string(), v);
            }
        }
        Ok(out.into_iter().map(|v| v.expect("every question embedded")).collect())
    }

    /// How many question vectors are kept ([`QUESTIONS_KEPT`] at most).
    pub fn questions_kept(&self) -> usize {
        self.questions.lock().expect("question cache lock").len()
    }

    /// The `k` passages closest to the embedded question `q`, best first (ties by id), as
    /// (id, title, cosine).
    pub fn nearest(&self, q: &[f32], k: usize) -> Vec<ScoredDocument> {
        let m = self.docs.read().expect("index lock");
        let mut scored: Vec<(f32, &String, &String)> = m.iter().map(|(id, e)| (dot(&e.vector, q), id, &e.title)).collect();
        let k = k.min(scored.len());
        let order = |a: &(f32, &String, &String), b: &(f32, &String, &String)| b.0.total_cmp(&a.0).then(a.1.cmp(b.1));
        if k > 0 && k < scored.len() {
            scored.select_nth_unstable_by(k - 1, order);
            scored.truncate(k);
        }
        scored.sort_by(order);
        scored.into_iter().take(k).map(|(s, id, t)| ScoredDocument { id: id.clone(), title: t.clone(), score: s as f64 }).collect()
    }

    /// The `top_k` passages closest to each question.
    pub fn retrieve_batch(&self, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>> {
        let texts: Vec<&str> = qs.iter().map(|q| q.0).collect();
        let qv = self.embed_questions(&texts)?;
        Ok(qv.iter().zip(qs).map(|(q, (_, k))| Retrieved { seeds: vec![], documents: self.nearest(q, *k), triples: vec![], entities: vec![], checkpoint: None }).collect())
    }
}

impl DocSink for DenseIndex {
    fn upsert(&self, docs: &[(String, String, String)]) -> std::result::Result<(), StageFault> {
        DenseIndex::upsert(self, docs).map(|_| ())
    }
    fn remove(&self, id: &str) -> std::result::Result<(), StageFault> {
        DenseIndex::remove(self, id)
    }
    fn position(&self) -> Option<BTreeMap<i32, i64>> {
        self.store.as_ref().map(VectorStore::position)
    }
    fn commit(&self, next: &BTreeMap<i32, i64>) -> std::result::Result<(), StageFault> {
        match &self.store {
            Some(s) => s.commit(next),
            None => Ok(()),
        }
    }
}
