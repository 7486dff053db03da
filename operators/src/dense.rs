//! The dense baseline: question vs passage embeddings (all-MiniLM-L6-v2), cosine, top k. The
//! [`DenseIndexer`] stage keeps the index from the docs topic (upserts and deletes), reading
//! it from the start on every start: the index lives in memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use streamrag_glm::sentence::dot;
use streamrag_glm::SentenceEncoder;
use streamrag_schemas::ScoredDocument;

use crate::config::Topics;
use crate::error::TransportError;
use crate::openie::{doc_change, DocChange};
use crate::query::Retrieved;
use crate::runtime::{blocking, Operator, Outcome, StartFrom};
use crate::transport::Record;

pub struct DenseIndex {
    pub encoder: SentenceEncoder,
    docs: RwLock<HashMap<String, (String, Vec<f32>)>>,
    /// Partition -> next offset of the docs topic already indexed.
    progress: Mutex<BTreeMap<i32, i64>>,
}

/// The text a passage is embedded from.
pub fn passage_text(title: &str, text: &str) -> String {
    if title.is_empty() { text.to_string() } else { format!("{title}\n{text}") }
}

impl DenseIndex {
    pub fn new(encoder: SentenceEncoder) -> Self {
        DenseIndex { encoder, docs: RwLock::new(HashMap::new()), progress: Mutex::new(BTreeMap::new()) }
    }

    pub fn len(&self) -> usize {
        self.docs.read().expect("index lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Embeds and stores (id, title, text) passages.
    pub fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), String> {
        let texts: Vec<String> = docs.iter().map(|(_, t, x)| passage_text(t, x)).collect();
        let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
        let vecs = self.encoder.embed_vecs(&refs)?;
        let mut m = self.docs.write().expect("index lock");
        for ((id, title, _), v) in docs.iter().zip(vecs) {
            m.insert(id.clone(), (title.clone(), v));
        }
        Ok(())
    }

    pub fn remove(&self, id: &str) {
        self.docs.write().expect("index lock").remove(id);
    }

    /// Next docs offset per partition already in the index.
    pub fn progress(&self) -> BTreeMap<i32, i64> {
        self.progress.lock().expect("progress lock").clone()
    }

    /// The `top_k` passages closest to each question.
    pub fn retrieve_batch(&self, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>, String> {
        let texts: Vec<&str> = qs.iter().map(|q| q.0).collect();
        let qv = self.encoder.embed_vecs(&texts)?;
        let m = self.docs.read().expect("index lock");
        Ok(qv
            .iter()
            .zip(qs)
            .map(|(q, (_, k))| {
                let mut scored: Vec<(f32, &String, &String)> =
                    m.iter().map(|(id, (title, v))| (dot(v, q), id, title)).collect();
                let k = (*k).min(scored.len());
                if k > 0 && k < scored.len() {
                    scored.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
                    scored.truncate(k);
                }
                scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
                let documents = scored.into_iter().take(k).map(|(s, id, t)| ScoredDocument { id: id.clone(), title: t.clone(), score: s as f64 }).collect();
                Retrieved { seeds: vec![], documents, triples: vec![] }
            })
            .collect())
    }
}

/// Keeps a [`DenseIndex`] from the docs topic. Malformed records are skipped here (the
/// openie stage dead-letters them).
pub struct DenseIndexer {
    pub topics: Topics,
    pub index: Arc<DenseIndex>,
}

impl Operator for DenseIndexer {
    fn name(&self) -> &'static str {
        "dense-index"
    }
    fn input(&self) -> String {
        self.topics.docs.clone()
    }
    fn start_from(&self) -> StartFrom {
        StartFrom::Offsets(BTreeMap::new())
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, TransportError> {
        let mut upserts = Vec::new();
        for r in batch {
            match doc_change(&r.payload) {
                Some(DocChange::Delete { id }) => self.index.remove(&id),
                Some(DocChange::Upsert { id, title, text }) => upserts.push((id, title, text)),
                None => {}
            }
        }
        if !upserts.is_empty() {
            let index = self.index.clone();
            let res = blocking(move || index.upsert(&upserts));
            if let Err(e) = res {
                return Err(TransportError::Other(format!("dense index: {e}")));
            }
        }
        let mut p = self.index.progress.lock().expect("progress lock");
        for r in batch {
            p.insert(r.partition, r.offset + 1);
        }
        Ok(batch.iter().map(|_| Ok(vec![])).collect())
    }
}
