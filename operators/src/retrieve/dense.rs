//! The dense baseline: question vs passage embeddings (all-MiniLM-L6-v2), cosine, top k. The
//! index is a [`DocSink`]: the docs reader ([`crate::passages::DocsReader`]) keeps it from the
//! docs topic (upserts and deletes), reading it from the start on every start: the index lives
//! in memory.

use std::collections::HashMap;
use std::sync::RwLock;

use streamrag_glm::sentence::dot;
use streamrag_glm::{Result, SentenceEncoder};
use streamrag_schemas::ScoredDocument;

use crate::error::StageFault;
use crate::passages::DocSink;

use super::Retrieved;

pub struct DenseIndex {
    pub encoder: SentenceEncoder,
    docs: RwLock<HashMap<String, (String, Vec<f32>)>>,
}

/// The text a passage is embedded from.
pub fn passage_text(title: &str, text: &str) -> String {
    if title.is_empty() { text.to_string() } else { format!("{title}\n{text}") }
}

impl DenseIndex {
    pub fn new(encoder: SentenceEncoder) -> Self {
        DenseIndex { encoder, docs: RwLock::new(HashMap::new()) }
    }

    pub fn len(&self) -> usize {
        self.docs.read().expect("index lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Embeds and stores (id, title, text) passages.
    pub fn upsert(&self, docs: &[(String, String, String)]) -> Result<()> {
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

    /// The `top_k` passages closest to each question.
    pub fn retrieve_batch(&self, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>> {
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

impl DocSink for DenseIndex {
    fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), StageFault> {
        Ok(DenseIndex::upsert(self, docs)?)
    }
    fn remove(&self, id: &str) {
        DenseIndex::remove(self, id)
    }
}
