//! The docs topic kept per document, for what needs a passage's text after the graph is built
//! (the graph keeps no text): the passages the answering LLM reads, the dense index, the BM25
//! index. One stage, the [`DocsReader`], hands each upsert and deletion to its [`DocSink`]s and
//! keeps its own position, so "caught up" is a question it can answer. Sinks in memory are
//! filled from the start of the topic on every start; a persistent sink (BM25) commits its
//! position with its data and is read on from there.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use crate::access::Reader;
use crate::config::{Limits, Topics};
use crate::error::StageFault;
use crate::openie::{doc_change, DocChange};
use crate::runtime::{blocking, Consumed, Operator, Outcome, Progress, StartFrom};
use crate::transport::Record;

/// Something kept per document from the docs topic.
pub trait DocSink: Send + Sync {
    /// Stores (id, title, text) passages, replacing earlier versions.
    fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), StageFault>;
    fn remove(&self, id: &str) -> Result<(), StageFault>;
    /// The access labels of the documents about to be upserted (id, labels; empty: public).
    /// Handed over before their text, so new text is never read under the old labels.
    fn access(&self, _docs: &[(String, Vec<String>)]) {}
    /// Where a persistent sink's durable state stands in the docs topic (partition -> next
    /// offset); None: the sink lives in memory and starts empty.
    fn position(&self) -> Option<BTreeMap<i32, i64>> {
        None
    }
    /// Makes a batch durable, recording `next` as the position it reflects.
    fn commit(&self, _next: &BTreeMap<i32, i64>) -> Result<(), StageFault> {
        Ok(())
    }
}

/// Passage texts by document id (upserts replace, deletes remove), and how many passages
/// hold each word (what the answerer asks to tell a name the corpus never saw).
#[derive(Default)]
pub struct Passages {
    docs: RwLock<HashMap<String, (String, String)>>,
    words: RwLock<HashMap<String, u32>>,
    /// The access labels of the documents that have some (the others are public).
    access: RwLock<HashMap<String, Box<[String]>>>,
}

impl Passages {
    /// Whether `reader` may read the passage of `id` as the docs topic has it now: a passage
    /// this store does not hold is read by [`Reader::All`] alone.
    pub fn may_read(&self, id: &str, reader: &Reader) -> bool {
        if reader.is_all() {
            return true;
        }
        // the text lock first, as upserts take it
        let known = self.docs.read().expect("passages lock").contains_key(id);
        known && reader.may_read(self.access.read().expect("passages lock").get(id).into_iter().flat_map(|a| a.iter().map(String::as_str)))
    }
    pub fn get(&self, id: &str) -> Option<(String, String)> {
        self.docs.read().expect("passages lock").get(id).cloned()
    }
    pub fn len(&self) -> usize {
        self.docs.read().expect("passages lock").len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// How many passages hold the normalised `word`.
    pub fn frequency(&self, word: &str) -> u32 {
        self.words.read().expect("passages lock").get(word).copied().unwrap_or(0)
    }

    fn count(&self, title: &str, text: &str, add: bool) {
        let mut w = self.words.write().expect("passages lock");
        for word in crate::answer::support::passage_words(title, text) {
            if add {
                *w.entry(word).or_default() += 1;
            } else if let Some(c) = w.get_mut(&word) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    w.remove(&word);
                }
            }
        }
    }
}

impl DocSink for Passages {
    fn access(&self, docs: &[(String, Vec<String>)]) {
        let mut m = self.access.write().expect("passages lock");
        for (id, labels) in docs {
            if labels.is_empty() {
                m.remove(id);
            } else {
                m.insert(id.clone(), labels.clone().into());
            }
        }
    }
    fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), StageFault> {
        let mut m = self.docs.write().expect("passages lock");
        for (id, title, text) in docs {
            if let Some((t, x)) = m.insert(id.clone(), (title.clone(), text.clone())) {
                self.count(&t, &x, false);
            }
            self.count(title, text, true);
        }
        Ok(())
    }
    fn remove(&self, id: &str) -> Result<(), StageFault> {
        if let Some((t, x)) = self.docs.write().expect("passages lock").remove(id) {
            self.count(&t, &x, false);
        }
        self.access.write().expect("passages lock").remove(id);
        Ok(())
    }
}

/// Reads the docs topic into its sinks. Malformed records, and those outside the limits, are
/// skipped here (the openie stage dead-letters them).
pub struct DocsReader {
    pub topics: Topics,
    limits: Limits,
    sinks: Vec<Arc<dyn DocSink>>,
    /// Partition -> next offset already handed to every sink.
    progress: Progress,
}

impl DocsReader {
    /// A reader for `sinks`, starting where the least advanced of them stands (the start of
    /// the topic when one lives in memory).
    pub fn new(topics: Topics, sinks: Vec<Arc<dyn DocSink>>) -> Self {
        let mut from: Option<BTreeMap<i32, i64>> = None;
        for s in &sinks {
            let p = s.position().unwrap_or_default();
            from = Some(match from {
                None => p,
                // per partition the smaller; a partition one sink lacks starts at the beginning
                Some(f) => f.into_iter().filter_map(|(k, v)| p.get(&k).map(|w| (k, v.min(*w)))).collect(),
            });
        }
        DocsReader { topics, limits: Limits::default(), sinks, progress: Progress::at(from.unwrap_or_default()) }
    }

    /// Skips what these limits refuse (the node's; default: [`Limits::default`]), as openie does.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Next docs offset per partition that every sink holds.
    pub fn progress(&self) -> BTreeMap<i32, i64> {
        self.progress.get()
    }

    /// Hands one batch to every sink: runs of upserts together (one embedding pass for the
    /// dense index), a deletion in its place, so the order of the topic is kept.
    pub fn apply(&self, batch: &[Record]) -> Result<(), StageFault> {
        let (mut upserts, mut labels) = (Vec::new(), Vec::new());
        let flush = |upserts: &mut Vec<(String, String, String)>, labels: &mut Vec<(String, Vec<String>)>| -> Result<(), StageFault> {
            if !upserts.is_empty() {
                for s in &self.sinks {
                    s.access(labels);
                    blocking(|| s.upsert(upserts))?;
                }
                upserts.clear();
                labels.clear();
            }
            Ok(())
        };
        for r in batch {
            match doc_change(&r.payload, &self.limits) {
                Some(DocChange::Upsert { id, title, text, access }) => {
                    labels.push((id.clone(), access));
                    upserts.push((id, title, text));
                }
                Some(DocChange::Delete { id }) => {
                    flush(&mut upserts, &mut labels)?;
                    for s in &self.sinks {
                        blocking(|| s.remove(&id))?;
                    }
                }
                None => {}
            }
        }
        flush(&mut upserts, &mut labels)?;
        let next = self.progress.after(batch);
        for s in &self.sinks {
            blocking(|| s.commit(&next))?;
        }
        self.progress.set(next);
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
        StartFrom::Offsets(self.progress())
    }
    fn consumed(&self) -> Consumed {
        self.progress.consumed()
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
            // word counts follow the versions: the replaced and the deleted text count no more
            assert_eq!((s.frequency("second"), s.frequency("x"), s.frequency("first"), s.frequency("why")), (1, 1, 0, 0));
        }
        assert_eq!(r.progress(), [(0, 6)].into());
        let Consumed::Own(f) = r.consumed() else { panic!("the reader keeps its own position") };
        assert_eq!(f(), [(0, 6)].into());
    }

    #[test]
    fn a_persistent_sink_is_read_on_from_its_committed_position() {
        let dir = tempfile::tempdir().unwrap();
        let batch = [rec(0, r#"{"id":"x","title":"X","text":"alpha"}"#), rec(1, r#"{"id":"y","title":"Y","text":"beta"}"#)];
        {
            let ix = Arc::new(crate::retrieve::bm25::Bm25Index::open(dir.path()).unwrap());
            let r = DocsReader::new(Topics::default(), vec![ix.clone()]);
            assert_eq!(r.start_from(), StartFrom::Offsets(BTreeMap::new()), "a new index reads from the start");
            r.apply(&batch).unwrap();
        }
        let ix = Arc::new(crate::retrieve::bm25::Bm25Index::open(dir.path()).unwrap());
        assert_eq!(ix.len(), 2);
        let r = DocsReader::new(Topics::default(), vec![ix.clone()]);
        assert_eq!(r.start_from(), StartFrom::Offsets([(0, 2)].into()), "reopened: no re-read of the topic");
        assert_eq!(r.progress(), [(0, 2)].into(), "caught up as far as it committed");
        // beside a sink in memory, the reader starts from the beginning again
        let both = DocsReader::new(Topics::default(), vec![ix, Arc::new(Passages::default())]);
        assert_eq!(both.start_from(), StartFrom::Offsets(BTreeMap::new()));
    }
}
