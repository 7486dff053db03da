use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::{HashMap as PMap, HashSet as PSet, OrdSet};
use serde::{Deserialize, Serialize};
use streamrag_schemas::{DocOp, GraphDelta, GraphVersion};

use crate::normalize::{normalize, words};

/// A triple over canonical ids: (subject id, relation, object id). The relation is stored in
/// its canonical form (trimmed, lower case, single spaces).
pub type TripleKey = (String, String, String);

/// Canonical form of a relation phrase.
pub fn canonical_relation(r: &str) -> String {
    r.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// What one live document contributes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocEntry {
    pub title: String,
    /// Entity id -> the name this document used.
    pub entities: BTreeMap<String, String>,
    pub triples: BTreeSet<TripleKey>,
}

/// A live entity.
#[derive(Debug, Clone)]
pub struct EntityEntry {
    pub name: String,
    /// Documents that mention it; its document frequency is `docs.len()`.
    pub docs: PSet<String>,
}

/// A live triple and the documents that support it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TripleEntry {
    pub support: OrdSet<String>,
}

/// Keys changed since the last persist, for the store to write.
#[derive(Debug, Default)]
pub struct Dirty {
    pub docs: BTreeSet<String>,
    pub entities: BTreeSet<String>,
    pub triples: BTreeSet<TripleKey>,
    pub support: BTreeSet<(TripleKey, String)>,
    pub mentions: BTreeSet<(String, String)>,
    pub offsets: BTreeSet<String>,
}

impl Dirty {
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty() && self.offsets.is_empty()
    }
}

/// What applying one document version changed in the graph as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// Triples that became live (their first supporting document).
    pub asserted: Vec<TripleKey>,
    /// Triples that lost their last supporting document.
    pub retracted: Vec<TripleKey>,
    /// Entities that became live, with their names.
    pub entities_added: Vec<(String, String)>,
    /// Entities no document mentions any more, with their last names.
    pub entities_removed: Vec<(String, String)>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        self.asserted.is_empty() && self.retracted.is_empty() && self.entities_added.is_empty() && self.entities_removed.is_empty()
    }
}

/// Counts that describe a graph, and a digest of its whole content for equality checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphStats {
    pub documents: usize,
    pub entities: usize,
    pub triples: usize,
    /// Sum over triples of their number of supporting documents.
    pub support: usize,
    /// Sum over entities of their document frequency.
    pub mentions: usize,
    /// FNV-1a over the sorted triples with their support, the entities with their documents,
    /// and the documents with their titles.
    pub digest: String,
    pub version: GraphVersion,
}

/// The whole graph in memory, in persistent (structurally shared) maps: cloning a version is
/// O(1), so the writer builds the next version while queries read the current one, and a
/// snapshot writes a version without holding any lock.
#[derive(Debug, Clone, Default)]
pub struct GraphState {
    docs: PMap<String, Arc<DocEntry>>,
    entities: PMap<String, EntityEntry>,
    triples: PMap<TripleKey, TripleEntry>,
    /// Entity graph: entity -> neighbour -> number of live triples between them (either
    /// direction; a self-loop counts once).
    adj: PMap<String, PMap<String, u32>>,
    /// Normalised word -> entities whose name contains it (for fuzzy seed linking).
    words: PMap<String, PSet<String>>,
    /// `"topic/partition"` -> last applied offset.
    offsets: BTreeMap<String, i64>,
}

fn offset_key(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

impl GraphState {
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry a delta describes, or None for a deletion.
    pub fn entry_of(delta: &GraphDelta) -> Option<DocEntry> {
        if delta.op == DocOp::Delete {
            return None;
        }
        let mut entities = BTreeMap::new();
        for e in &delta.entities {
            if !e.id.is_empty() {
                entities.entry(e.id.clone()).or_insert_with(|| e.name.clone());
            }
        }
        let mut triples = BTreeSet::new();
        for t in &delta.triples {
            if t.subject_id.is_empty() || t.object_id.is_empty() {
                continue;
            }
            entities.entry(t.subject_id.clone()).or_insert_with(|| t.subject.clone());
            entities.entry(t.object_id.clone()).or_insert_with(|| t.object.clone());
            triples.insert((t.subject_id.clone(), canonical_relation(&t.relation), t.object_id.clone()));
        }
        Some(DocEntry { title: delta.title.clone(), entities, triples })
    }

    /// Whether the record at (topic, partition, offset) was applied already.
    pub fn already_applied(&self, topic: &str, partition: i32, offset: i64) -> bool {
        self.offsets.get(&offset_key(topic, partition)).is_some_and(|&o| offset <= o)
    }

    /// Records that the graph reflects the record at (topic, partition, offset).
    pub fn set_offset(&mut self, topic: &str, partition: i32, offset: i64, dirty: &mut Dirty) {
        let k = offset_key(topic, partition);
        let e = self.offsets.entry(k.clone()).or_insert(offset);
        *e = (*e).max(offset);
        dirty.offsets.insert(k);
    }

    pub fn restore_offset(&mut self, key: String, offset: i64) {
        self.offsets.insert(key, offset);
    }

    /// The next offset to read per partition of `topic`, from the offsets applied.
    pub fn resume_offsets(&self, topic: &str) -> BTreeMap<i32, i64> {
        self.offsets
            .iter()
            .filter_map(|(k, v)| {
                let (t, p) = k.rsplit_once('/')?;
                (t == topic).then(|| p.parse::<i32>().ok().map(|p| (p, v + 1))).flatten()
            })
            .collect()
    }

    /// Replaces what `doc_id` supports by `entry` (None: deletes the document) and returns
    /// what changed in the graph; None when the document already had exactly this content.
    pub fn apply(&mut self, doc_id: &str, entry: Option<DocEntry>, dirty: &mut Dirty) -> Option<Change> {
        let old = self.docs.get(doc_id).cloned();
        if old.as_deref() == entry.as_ref() {
            return None;
        }
        let mut change = Change::default();
        self.docs.remove(doc_id);
        let empty_e = BTreeMap::new();
        let empty_t = BTreeSet::new();
        let (old_e, old_t) = old.as_deref().map(|o| (&o.entities, &o.triples)).unwrap_or((&empty_e, &empty_t));
        let (new_e, new_t) = entry.as_ref().map(|n| (&n.entities, &n.triples)).unwrap_or((&empty_e, &empty_t));
        for t in old_t.difference(new_t) {
            self.unsupport(t, doc_id, dirty, &mut change);
        }
        for (id, name) in new_e {
            if !old_e.contains_key(id) {
                self.mention(id, name, doc_id, dirty, &mut change);
            }
        }
        for t in new_t.difference(old_t) {
            self.support(t, doc_id, dirty, &mut change);
        }
        for id in old_e.keys() {
            if !new_e.contains_key(id) {
                self.unmention(id, doc_id, dirty, &mut change);
            }
        }
        if let Some(e) = entry {
            self.docs.insert(doc_id.to_string(), Arc::new(e));
        }
        dirty.docs.insert(doc_id.to_string());
        Some(change)
    }

    fn index_words(&mut self, id: &str, name: &str, add: bool) {
        for w in words(&normalize(name)) {
            if add {
                self.words.entry(w.to_string()).or_default().insert(id.to_string());
            } else if let Some(set) = self.words.get_mut(w) {
                set.remove(id);
                if set.is_empty() {
                    self.words.remove(w);
                }
            }
        }
    }

    fn mention(&mut self, id: &str, name: &str, doc: &str, dirty: &mut Dirty, change: &mut Change) {
        if !self.entities.contains_key(id) {
            self.index_words(id, name, true);
            self.entities.insert(id.to_string(), EntityEntry { name: name.to_string(), docs: PSet::new() });
            change.entities_added.push((id.to_string(), name.to_string()));
            dirty.entities.insert(id.to_string());
        }
        self.entities.get_mut(id).expect("inserted above").docs.insert(doc.to_string());
        dirty.mentions.insert((id.to_string(), doc.to_string()));
    }

    fn unmention(&mut self, id: &str, doc: &str, dirty: &mut Dirty, change: &mut Change) {
        let Some(e) = self.entities.get_mut(id) else { return };
        e.docs.remove(doc);
        dirty.mentions.insert((id.to_string(), doc.to_string()));
        if e.docs.is_empty() {
            let e = self.entities.remove(id).expect("present");
            self.index_words(id, &e.name, false);
            change.entities_removed.push((id.to_string(), e.name));
            dirty.entities.insert(id.to_string());
        }
    }

    fn bump_edge(&mut self, a: &str, b: &str, up: bool) {
        for (x, y) in [(a, b), (b, a)] {
            let nb = self.adj.entry(x.to_string()).or_default();
            if up {
                *nb.entry(y.to_string()).or_insert(0) += 1;
            } else if let Some(c) = nb.get_mut(y) {
                *c -= 1;
                if *c == 0 {
                    nb.remove(y);
                }
            }
            if nb.is_empty() {
                self.adj.remove(x);
            }
            if a == b {
                break;
            }
        }
    }

    fn support(&mut self, t: &TripleKey, doc: &str, dirty: &mut Dirty, change: &mut Change) {
        let entry = self.triples.entry(t.clone()).or_insert_with(|| TripleEntry { support: OrdSet::new() });
        let new = entry.support.is_empty();
        entry.support.insert(doc.to_string());
        if new {
            self.bump_edge(&t.0, &t.2, true);
            change.asserted.push(t.clone());
            dirty.triples.insert(t.clone());
        }
        dirty.support.insert((t.clone(), doc.to_string()));
    }

    fn unsupport(&mut self, t: &TripleKey, doc: &str, dirty: &mut Dirty, change: &mut Change) {
        let Some(entry) = self.triples.get_mut(t) else { return };
        entry.support.remove(doc);
        dirty.support.insert((t.clone(), doc.to_string()));
        if entry.support.is_empty() {
            self.triples.remove(t);
            self.bump_edge(&t.0, &t.2, false);
            change.retracted.push(t.clone());
            dirty.triples.insert(t.clone());
        }
    }

    /// Sets the display name of a live entity (a snapshot's canonical name).
    pub fn set_entity_name(&mut self, id: &str, name: &str) {
        let Some(old) = self.entities.get(id).map(|e| e.name.clone()) else { return };
        if old == name {
            return;
        }
        self.index_words(id, &old, false);
        self.index_words(id, name, true);
        self.entities.get_mut(id).expect("present").name = name.to_string();
    }

    pub fn document_count(&self) -> usize {
        self.docs.len()
    }
    pub fn doc(&self, id: &str) -> Option<&DocEntry> {
        self.docs.get(id).map(|d| d.as_ref())
    }
    pub fn docs(&self) -> impl Iterator<Item = (&String, &DocEntry)> {
        self.docs.iter().map(|(k, v)| (k, v.as_ref()))
    }
    pub fn entity(&self, id: &str) -> Option<&EntityEntry> {
        self.entities.get(id)
    }
    pub fn entities(&self) -> impl Iterator<Item = (&String, &EntityEntry)> {
        self.entities.iter()
    }
    pub fn entity_count(&self) -> usize {
        self.entities.len()
    }
    pub fn triple(&self, t: &TripleKey) -> Option<&TripleEntry> {
        self.triples.get(t)
    }
    pub fn triples(&self) -> impl Iterator<Item = (&TripleKey, &TripleEntry)> {
        self.triples.iter()
    }
    pub fn triple_count(&self) -> usize {
        self.triples.len()
    }
    /// The entities connected to `id` by live triples, with the number of such triples.
    pub fn neighbours(&self, id: &str) -> impl Iterator<Item = (&String, u32)> {
        self.adj.get(id).into_iter().flat_map(|m| m.iter().map(|(k, v)| (k, *v)))
    }
    /// Entities whose name contains the normalised word `w`.
    pub fn entities_with_word(&self, w: &str) -> Option<&PSet<String>> {
        self.words.get(w)
    }
    /// Number of documents mentioning the entity (0 if it is not live).
    pub fn document_frequency(&self, id: &str) -> usize {
        self.entities.get(id).map(|e| e.docs.len()).unwrap_or(0)
    }
    pub fn version(&self) -> GraphVersion {
        GraphVersion { offsets: self.offsets.clone() }
    }
    pub fn offsets(&self) -> &BTreeMap<String, i64> {
        &self.offsets
    }

    pub fn stats(&self) -> GraphStats {
        let mut h = Fnv::new();
        let mut triples: Vec<_> = self.triples.iter().collect();
        triples.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut support = 0;
        for ((s, r, o), e) in &triples {
            h.write_all(&[s, r, o]);
            for d in &e.support {
                h.write_all(&[d]);
            }
            support += e.support.len();
        }
        let mut ents: Vec<_> = self.entities.iter().collect();
        ents.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut mentions = 0;
        for (id, e) in &ents {
            h.write_all(&[id, &e.name]);
            let mut ds: Vec<_> = e.docs.iter().collect();
            ds.sort_unstable();
            for d in ds {
                h.write_all(&[d]);
            }
            mentions += e.docs.len();
        }
        let mut docs: Vec<_> = self.docs.iter().collect();
        docs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (id, d) in docs {
            h.write_all(&[id, &d.title]);
        }
        GraphStats {
            documents: self.docs.len(),
            entities: self.entities.len(),
            triples: self.triples.len(),
            support,
            mentions,
            digest: format!("{:016x}", h.0),
            version: self.version(),
        }
    }
}

struct Fnv(u64);
impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf29ce484222325)
    }
    fn write_all(&mut self, parts: &[&str]) {
        for p in parts {
            for b in p.bytes().chain(std::iter::once(0xff)) {
                self.0 ^= b as u64;
                self.0 = self.0.wrapping_mul(0x100000001b3);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamrag_schemas::{EntityRef, ResolvedTriple, SourceRef};

    fn delta(doc: &str, triples: &[(&str, &str, &str)]) -> GraphDelta {
        GraphDelta {
            schema_version: 1,
            op: DocOp::Upsert,
            doc_id: doc.into(),
            title: doc.to_uppercase(),
            entities: vec![EntityRef { id: doc.into(), name: doc.to_uppercase() }],
            triples: triples
                .iter()
                .map(|(s, r, o)| ResolvedTriple {
                    subject_id: s.to_string(),
                    subject: s.to_uppercase(),
                    relation: r.to_string(),
                    object_id: o.to_string(),
                    object: o.to_uppercase(),
                })
                .collect(),
            source: SourceRef { topic: "t".into(), partition: 0, offset: 0 },
        }
    }

    fn apply(g: &mut GraphState, d: &GraphDelta) -> Option<Change> {
        g.apply(&d.doc_id, GraphState::entry_of(d), &mut Dirty::default())
    }

    fn key(s: &str, r: &str, o: &str) -> TripleKey {
        (s.into(), r.into(), o.into())
    }

    #[test]
    fn support_is_counted_per_document() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d1", &[("a", "r", "b"), ("b", "r", "c")]));
        let c = apply(&mut g, &delta("d2", &[("a", "r", "b")])).unwrap();
        assert!(c.asserted.is_empty(), "a-r-b was live already: {c:?}");
        assert_eq!(c.entities_added, vec![("d2".to_string(), "D2".to_string())]);
        let ab = key("a", "r", "b");
        assert_eq!(g.triple(&ab).unwrap().support.len(), 2);
        assert_eq!(g.document_frequency("a"), 2);
        assert_eq!(g.document_frequency("c"), 1);
        // d1 withdrawn: a-r-b survives through d2, b-r-c and c disappear.
        let mut del = delta("d1", &[]);
        del.op = DocOp::Delete;
        let c = apply(&mut g, &del).unwrap();
        assert_eq!(c.retracted, vec![key("b", "r", "c")]);
        let mut removed: Vec<_> = c.entities_removed.iter().map(|e| e.0.as_str()).collect();
        removed.sort();
        assert_eq!(removed, vec!["c", "d1"]);
        assert_eq!(g.triple(&ab).unwrap().support.iter().collect::<Vec<_>>(), vec!["d2"]);
        assert!(g.entity("c").is_none());
        assert_eq!(g.entity_count(), 3); // a, b, d2
        assert_eq!(g.neighbours("b").collect::<Vec<_>>(), vec![(&"a".to_string(), 1)]);
        assert_eq!(g.neighbours("c").count(), 0);
    }

    #[test]
    fn reapplying_changes_nothing_and_upsert_equals_fresh() {
        let mut g = GraphState::new();
        let v1 = delta("d1", &[("a", "r", "b"), ("b", "r2", "c")]);
        let v2 = delta("d1", &[("a", "r", "b"), ("a", "r3", "d")]);
        assert!(apply(&mut g, &v1).is_some());
        assert!(apply(&mut g, &v1).is_none());
        let c = apply(&mut g, &v2).unwrap();
        assert_eq!(c.asserted, vec![key("a", "r3", "d")]);
        assert_eq!(c.retracted, vec![key("b", "r2", "c")]);
        let mut fresh = GraphState::new();
        apply(&mut fresh, &v2);
        assert_eq!(g.stats(), fresh.stats());
    }

    #[test]
    fn an_old_version_is_untouched_by_later_writes() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d1", &[("a", "r", "b")]));
        let before = g.clone();
        let digest = before.stats().digest;
        apply(&mut g, &delta("d2", &[("b", "r", "c")]));
        let mut del = delta("d1", &[]);
        del.op = DocOp::Delete;
        apply(&mut g, &del);
        assert_eq!(before.stats().digest, digest);
        assert!(before.entity("a").is_some() && g.entity("a").is_none());
    }

    #[test]
    fn self_loops_and_parallel_relations() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d", &[("a", "likes", "a"), ("a", "r1", "b"), ("a", "R1 ", "b"), ("b", "r2", "a")]));
        assert_eq!(g.triple_count(), 3); // "R1 " canonicalises to "r1"
        let nb: BTreeMap<_, _> = g.neighbours("a").collect();
        assert_eq!(nb[&"b".to_string()], 2);
        assert_eq!(nb[&"a".to_string()], 1);
        let mut del = delta("d", &[]);
        del.op = DocOp::Delete;
        apply(&mut g, &del);
        assert_eq!(g.stats().triples, 0);
        assert_eq!(g.neighbours("a").count(), 0);
        assert!(g.entities_with_word("a").is_none());
    }

    #[test]
    fn resume_offsets_per_partition() {
        let mut g = GraphState::new();
        let mut d = Dirty::default();
        g.set_offset("x.deltas", 0, 9, &mut d);
        g.set_offset("x.deltas", 3, 1, &mut d);
        g.set_offset("other", 0, 5, &mut d);
        assert_eq!(g.resume_offsets("x.deltas"), BTreeMap::from([(0, 10), (3, 2)]));
    }
}
