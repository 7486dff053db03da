//! The graph in sled. One tree, keys by prefix:
//! - `d\0<doc>` -> the document's entry: title, the entities it mentions (id -> the name it
//!   used) and its resolved triples. These are the graph's facts: each triple with its
//!   supporting documents and each entity with its documents are the inverse of this index.
//! - `o\0<topic/partition>` -> last applied offset
//! - `x\0<seq>` -> an output the kg-writer has yet to see acknowledged (its outbox)
//!
//! A persist writes every dirty key and the offsets in one atomic batch and flushes, so the
//! graph and the position it reflects never disagree after a crash. The inverse indexes
//! (triple -> supporting documents, entity -> documents, the entity graph) are rebuilt in
//! memory at load and written out by snapshots; keeping them in sled too cost three more keys
//! per triple and most of the apply rate (`streamrag bench graph`).

use std::path::Path;


use super::state::{Dirty, DocEntry, GraphState};
use crate::transport::Output;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("graph store: {0}")]
    Sled(#[from] sled::Error),
    #[error("graph store: corrupt value under {key}: {reason}")]
    Corrupt { key: String, reason: String },
}

fn key(prefix: u8, part: &str) -> Vec<u8> {
    let mut k = vec![prefix, 0];
    k.extend_from_slice(part.as_bytes());
    k
}

fn outbox_key(seq: u64) -> Vec<u8> {
    let mut k = vec![b'x', 0];
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn encode_output(o: &Output) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + o.topic.len() + o.key.len() + o.payload.len());
    for part in [o.topic.as_bytes(), o.key.as_bytes()] {
        v.extend_from_slice(&(part.len() as u32).to_be_bytes());
        v.extend_from_slice(part);
    }
    v.extend_from_slice(&o.payload);
    v
}

fn decode_output(v: &[u8]) -> Option<Output> {
    let mut at = 0;
    let mut parts = Vec::new();
    for _ in 0..2 {
        let n = u32::from_be_bytes(v.get(at..at + 4)?.try_into().ok()?) as usize;
        parts.push(String::from_utf8(v.get(at + 4..at + 4 + n)?.to_vec()).ok()?);
        at += 4 + n;
    }
    let key = parts.pop()?;
    let topic = parts.pop()?;
    Some(Output { topic, key, payload: v[at..].to_vec() })
}

/// The sled side of the graph.
#[derive(Clone)]
pub struct GraphStore {
    db: sled::Db,
    tree: sled::Tree,
}

impl GraphStore {
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let db = sled::Config::new().path(dir).cache_capacity(64 << 20).open()?;
        let tree = db.open_tree("graph")?;
        Ok(GraphStore { db, tree })
    }

    /// Rebuilds the in-memory graph from the documents and restores names and offsets.
    pub fn load(&self) -> Result<GraphState, StoreError> {
        let mut g = GraphState::new();
        let mut scratch = Dirty::default();
        for item in self.tree.scan_prefix([b'd', 0]) {
            let (k, v) = item?;
            let doc = String::from_utf8_lossy(&k[2..]).into_owned();
            let entry: DocEntry = serde_json::from_slice(&v)
                .map_err(|e| StoreError::Corrupt { key: format!("d/{doc}"), reason: e.to_string() })?;
            g.apply(&doc, Some(&entry), &mut scratch);
        }
        for item in self.tree.scan_prefix([b'o', 0]) {
            let (k, v) = item?;
            let name = String::from_utf8_lossy(&k[2..]).into_owned();
            let off = i64::from_be_bytes(v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
                key: format!("o/{name}"),
                reason: "offset is not 8 bytes".into(),
            })?);
            g.restore_offset(name, off);
        }
        Ok(g)
    }

    /// Writes the dirty keys of `g`, its offsets and the outbox entries atomically, then
    /// flushes.
    pub fn persist(&self, g: &GraphState, dirty: &Dirty, outbox: &[(u64, Output)]) -> Result<(), StoreError> {
        let mut b = sled::Batch::default();
        for (seq, out) in outbox {
            b.insert(outbox_key(*seq), encode_output(out));
        }
        for d in &dirty.docs {
            match g.doc(d) {
                Some(v) => b.insert(key(b'd', d), serde_json::to_vec(&v.to_entry()).expect("serializable")),
                None => b.remove(key(b'd', d)),
            }
        }
        for o in &dirty.offsets {
            if let Some(v) = g.offsets().get(o) {
                b.insert(key(b'o', o), &v.to_be_bytes());
            }
        }
        self.tree.apply_batch(b)?;
        self.db.flush()?;
        Ok(())
    }

    /// Writes the whole of `g` (a replayed snapshot) in batches of `chunk` keys; the offsets go
    /// last, so a store cut short by a crash carries no offsets and is not taken for complete.
    pub fn persist_all(&self, g: &GraphState, chunk: usize, mut progress: impl FnMut(usize)) -> Result<(), StoreError> {
        let mut dirty = Dirty::default();
        let mut pending = 0;
        let mut flush = |dirty: &mut Dirty, pending: &mut usize| -> Result<(), StoreError> {
            let d = std::mem::take(dirty);
            self.persist(g, &d, &[])?;
            progress(*pending);
            *pending = 0;
            Ok(())
        };
        for d in g.docs() {
            dirty.docs.insert(d.id().to_string());
            pending += 1;
            if pending >= chunk {
                flush(&mut dirty, &mut pending)?;
            }
        }
        dirty.offsets = g.offsets().keys().cloned().collect();
        flush(&mut dirty, &mut pending)
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// The outbox: outputs stored with a graph change and not yet known to be acknowledged.
    pub fn outbox(&self) -> Result<Vec<(u64, Output)>, StoreError> {
        let mut out = Vec::new();
        for item in self.tree.scan_prefix([b'x', 0]) {
            let (k, v) = item?;
            let seq = u64::from_be_bytes(k[2..].try_into().map_err(|_| StoreError::Corrupt { key: "x/?".into(), reason: "bad outbox key".into() })?);
            let o = decode_output(&v).ok_or_else(|| StoreError::Corrupt { key: format!("x/{seq}"), reason: "bad outbox entry".into() })?;
            out.push((seq, o));
        }
        Ok(out)
    }

    /// Drops acknowledged outbox entries (no flush: a lost removal only republishes).
    pub fn clear_outbox(&self, seqs: &[u64]) -> Result<(), StoreError> {
        let mut b = sled::Batch::default();
        for s in seqs {
            b.remove(outbox_key(*s));
        }
        self.tree.apply_batch(b)?;
        Ok(())
    }

    /// Number of stored documents.
    pub fn document_count(&self) -> usize {
        self.tree.scan_prefix([b'd', 0]).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::GraphState;
    use std::collections::{BTreeMap, BTreeSet};

    fn entry(triples: &[(&str, &str)]) -> DocEntry {
        let mut entities = BTreeMap::new();
        let mut ts = BTreeSet::new();
        for (s, o) in triples {
            entities.insert(s.to_string(), s.to_uppercase());
            entities.insert(o.to_string(), o.to_uppercase());
            ts.insert((s.to_string(), "r".to_string(), o.to_string()));
        }
        DocEntry { title: "T".into(), entities, triples: ts, ..Default::default() }
    }

    #[test]
    fn persist_then_load_gives_the_same_graph_and_keys_match_counts() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::open(dir.path()).unwrap();
        let mut g = GraphState::new();
        let mut dirty = Dirty::default();
        g.apply("d1", Some(&entry(&[("a", "b"), ("b", "c")])), &mut dirty);
        g.apply("d2", Some(&entry(&[("a", "b")])), &mut dirty);
        g.set_offset("deltas", 0, 1, &mut dirty);
        let out = Output { topic: "changes".into(), key: "d1".into(), payload: b"{}".to_vec() };
        store.persist(&g, &dirty, &[(7, out.clone())]).unwrap();
        assert_eq!(store.outbox().unwrap(), vec![(7, out)]);
        store.clear_outbox(&[7]).unwrap();
        assert!(store.outbox().unwrap().is_empty());
        let mut dirty = Dirty::default();
        g.apply("d1", None, &mut dirty);
        g.set_offset("deltas", 0, 2, &mut dirty);
        store.persist(&g, &dirty, &[]).unwrap();
        let back = store.load().unwrap();
        assert_eq!(back.stats(), g.stats());
        assert!(back.already_applied("deltas", 0, 2));
        assert!(!back.already_applied("deltas", 0, 3));
        let s = g.stats();
        assert_eq!(store.document_count(), s.documents);
        // the same graph written whole, in small chunks, reads back equal too
        let dir2 = tempfile::tempdir().unwrap();
        let store2 = GraphStore::open(dir2.path()).unwrap();
        store2.persist_all(&g, 2, |_| {}).unwrap();
        assert_eq!(store2.load().unwrap().stats(), g.stats());
        assert_eq!(store2.document_count(), store.document_count());
    }
}
