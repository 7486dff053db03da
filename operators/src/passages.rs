//! The docs topic read into memory, for what needs a passage's text after the graph is built
//! (the graph keeps no text): the passages the answering LLM reads and the dense index. One
//! stage, the [`DocsReader`], reads the topic from the start on every start and hands each
//! upsert and deletion to its [`DocSink`]s; it keeps its own position, so "caught up" is a
//! question it can answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use crate::config::Topics;
use crate::error::StageFault;
use crate::openie::{doc_change, DocChange};
use crate::runtime::{blocking, Consumed, Operator, Outcome, StartFrom};
use crate::transport::Record;

/// Something kept per document from the docs topic.
pub trait DocSink: Send + Sync {
    /// Stores (id, title, text) passages, replacing earlier versions.
    fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), StageFault>;
    fn remove(&self, id: &str);
}

/// Passage texts by document id (upserts replace, deletes remove).
#[derive(Default)]
pub struct Passages {
    docs: RwLock<HashMap<String, (String, String)>>,
}

impl Passages {
    pub fn get(&self, id: &str) -> Option<(String, String)> {
        self.docs.read().expect("passages lock").get(id).cloned()
    }
    pub fn len(&self) -> usize {
        self.docs.read().expect("passages lock").len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl DocSink for Passages {
    fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), StageFault> {
        let mut m = self.docs.write().expect("passages lock");
        for (id, title, text) in docs {
            m.insert(id.clone(), (title.clone(), text.clone()));
        }
        Ok(())
    }
    fn remove(&self, id: &str) {
        self.docs.write().expect("passages lock").remove(id);
    }
}

/// Reads the docs topic into its sinks. Malformed records are skipped here (the openie stage
/// dead-letters them).
pub struct DocsReader {
    pub topics: Topics,
    sinks: Vec<Arc<dyn DocSink>>,
    /// Partition -> next offset already handed to every sink.
    progress: Arc<Mutex<BTreeMap<i32, i64>>>,
}

impl DocsReader {
    pub fn new(topics: Topics, sinks: Vec<Arc<dyn DocSink>>) -> Self {
        DocsReader { topics, sinks, progress: Arc::default() }
    }

    /// Next docs offset per partition that every sink holds.
    pub fn progress(&self) -> BTreeMap<i32, i64> {
        self.progress.lock().expect("progress lock").clone()
    }

    /// Hands one batch to every sink: runs of upserts together (one embedding pass for the
    /// dense index), a deletion in its place, so the order of the topic is kept.
    pub fn apply(&self, batch: &[Record]) -> Result<(), StageFault> {
        let mut upserts = Vec::new();
        let flush = |upserts: &mut Vec<(String, String, String)>| -> Result<(), StageFault> {
            if !upserts.is_empty() {
                for s in &self.sinks {
                    blocking(|| s.upsert(upserts))?;
                }
                upserts.clear();
            }
            Ok(())
        };
        for r in batch {
            match doc_change(&r.payload) {
                Some(DocChange::Upsert { id, title, text }) => upserts.push((id, title, text)),
                Some(DocChange::Delete { id }) => {
                    flush(&mut upserts)?;
                    self.sinks.iter().for_each(|s| s.remove(&id));
                }
                None => {}
            }
        }
        flush(&mut upserts)?;
        let mut p = self.progress.lock().expect("progress lock");
        for r in batch {
            p.insert(r.partition, r.offset + 1);
        }
        Ok(())
    }
}

impl Operator for DocsReader {
    fn name(&self) -> &'static str {
        "docs-reader"
    }
    fn input(&self) -> String {
        self.topics.docs.clone()
    }
    fn start_from(&self) -> StartFrom {
        StartFrom::Offsets(BTreeMap::new())
    }
    fn consumed(&self) -> Consumed {
        let p = self.progress.clone();
        Consumed::Own(Arc::new(move || p.lock().expect("progress lock").clone()))
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        self.apply(batch)?;
        Ok(batch.iter().map(|_| Ok(vec![])).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(o: i64, p: &str) -> Record {
        Record { topic: "docs".into(), partition: 0, offset: o, key: None, payload: p.as_bytes().to_vec(), timestamp_ms: 0 }
    }

    #[test]
    fn upserts_and_deletions_reach_every_sink_in_topic_order() {
        let (a, b) = (Arc::new(Passages::default()), Arc::new(Passages::default()));
        let r = DocsReader::new(Topics::default(), vec![a.clone(), b.clone()]);
        r.apply(&[
            rec(0, r#"{"id":"x","title":"X","text":"first"}"#),
            rec(1, r#"{"op":"delete","id":"x"}"#),
            rec(2, r#"{"id":"x","title":"X","text":"second"}"#),
            rec(3, "garbage"),
            rec(4, r#"{"id":"y","title":"Y","text":"why"}"#),
            rec(5, r#"{"op":"delete","id":"y"}"#),
        ])
        .unwrap();
        for s in [&a, &b] {
            assert_eq!(s.get("x"), Some(("X".into(), "second".into())), "the delete came between the two versions");
            assert_eq!(s.get("y"), None);
        }
        assert_eq!(r.progress(), [(0, 6)].into());
        let Consumed::Own(f) = r.consumed() else { panic!("the reader keeps its own position") };
        assert_eq!(f(), [(0, 6)].into());
    }
}
