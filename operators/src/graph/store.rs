//! The graph in sled. One tree, keys by prefix:
//! - `d\0<doc>` -> the document's entry (title, entities with names, triples)
//! - `e\0<entity>` -> name
//! - `t\0<s>\x1f<r>\x1f<o>` -> `{subject, relation, object}` with display names
//! - `s\0<triple>\0<doc>` -> support; `m\0<entity>\0<doc>` -> mention (entity -> documents)
//! - `o\0<topic/partition>` -> last applied offset
//! - `x\0<seq>` -> an output the kg-writer has yet to see acknowledged (its outbox)
//!
//! A persist writes every dirty key and the offsets in one atomic batch and flushes, so the
//! graph and the position it reflects never disagree after a crash.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::state::{Dirty, DocEntry, GraphState, TripleKey};
use crate::transport::Output;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("graph store: {0}")]
    Sled(#[from] sled::Error),
    #[error("graph store: corrupt value under {key}: {reason}")]
    Corrupt { key: String, reason: String },
}

#[derive(Serialize, Deserialize)]
struct TripleRow<'a> {
    subject: &'a str,
    relation: &'a str,
    object: &'a str,
}

fn key(prefix: u8, parts: &[&str]) -> Vec<u8> {
    let mut k = vec![prefix, 0];
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            k.push(if prefix == b't' { 0x1f } else { 0 });
        }
        k.extend_from_slice(p.as_bytes());
    }
    k
}

fn triple_key(prefix: u8, t: &TripleKey, doc: Option<&str>) -> Vec<u8> {
    let mut k = vec![prefix, 0];
    k.extend_from_slice(t.0.as_bytes());
    k.push(0x1f);
    k.extend_from_slice(t.1.as_bytes());
    k.push(0x1f);
    k.extend_from_slice(t.2.as_bytes());
    if let Some(d) = doc {
        k.push(0);
        k.extend_from_slice(d.as_bytes());
    }
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
        let db = sled::Config::new().path(dir).open()?;
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
            g.apply(&doc, Some(entry), &mut scratch);
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
                Some(e) => b.insert(key(b'd', &[d]), serde_json::to_vec(e).expect("serializable")),
                None => b.remove(key(b'd', &[d])),
            }
        }
        for id in &dirty.entities {
            match g.entity(id) {
                Some(e) => b.insert(key(b'e', &[id]), e.name.as_bytes()),
                None => b.remove(key(b'e', &[id])),
            }
        }
        for t in &dirty.triples {
            if g.triple(t).is_some() {
                let name = |id: &str| g.entity(id).map(|e| e.name.clone()).unwrap_or_default();
                let (s, o) = (name(&t.0), name(&t.2));
                let row = TripleRow { subject: &s, relation: &t.1, object: &o };
                b.insert(triple_key(b't', t, None), serde_json::to_vec(&row).expect("serializable"));
            } else {
                b.remove(triple_key(b't', t, None));
            }
        }
        for (t, d) in &dirty.support {
            if g.triple(t).is_some_and(|e| e.support.contains(d)) {
                b.insert(triple_key(b's', t, Some(d)), &[]);
            } else {
                b.remove(triple_key(b's', t, Some(d)));
            }
        }
        for (e, d) in &dirty.mentions {
            if g.entity(e).is_some_and(|x| x.docs.contains(d)) {
                b.insert(key(b'm', &[e, d]), &[]);
            } else {
                b.remove(key(b'm', &[e, d]));
            }
        }
        for o in &dirty.offsets {
            if let Some(v) = g.offsets().get(o) {
                b.insert(key(b'o', &[o]), &v.to_be_bytes());
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
        for (id, doc) in g.docs() {
            dirty.docs.insert(id.clone());
            for (e, _) in &doc.entities {
                dirty.mentions.insert((e.clone(), id.clone()));
            }
            for t in &doc.triples {
                dirty.support.insert((t.clone(), id.clone()));
            }
            pending += 1 + doc.entities.len() + doc.triples.len();
            if pending >= chunk {
                flush(&mut dirty, &mut pending)?;
            }
        }
        for (id, _) in g.entities() {
            dirty.entities.insert(id.clone());
            pending += 1;
            if pending >= chunk {
                flush(&mut dirty, &mut pending)?;
            }
        }
        for (t, _) in g.triples() {
            dirty.triples.insert(t.clone());
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

    /// Counts keys by prefix: (documents, entities, triples, support, mentions).
    pub fn counts(&self) -> Result<[usize; 5], StoreError> {
        let mut out = [0; 5];
        for (i, p) in [b'd', b'e', b't', b's', b'm'].iter().enumerate() {
            out[i] = self.tree.scan_prefix([*p, 0]).count();
        }
        Ok(out)
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
        DocEntry { title: "T".into(), entities, triples: ts }
    }

    #[test]
    fn persist_then_load_gives_the_same_graph_and_keys_match_counts() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::open(dir.path()).unwrap();
        let mut g = GraphState::new();
        let mut dirty = Dirty::default();
        g.apply("d1", Some(entry(&[("a", "b"), ("b", "c")])), &mut dirty);
        g.apply("d2", Some(entry(&[("a", "b")])), &mut dirty);
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
        assert_eq!(store.counts().unwrap(), [s.documents, s.entities, s.triples, s.support, s.mentions]);
        // the same graph written whole, in small chunks, reads back equal too
        let dir2 = tempfile::tempdir().unwrap();
        let store2 = GraphStore::open(dir2.path()).unwrap();
        store2.persist_all(&g, 2, |_| {}).unwrap();
        assert_eq!(store2.load().unwrap().stats(), g.stats());
        assert_eq!(store2.counts().unwrap(), store.counts().unwrap());
    }
}
