use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use petgraph::stable_graph::{NodeIndex, StableUnGraph};
use petgraph::visit::EdgeRef;
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
    pub node: NodeIndex,
    /// Documents that mention it; its document frequency is `docs.len()`.
    pub docs: HashSet<String>,
}

/// A live triple and the documents that support it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TripleEntry {
    pub support: BTreeSet<String>,
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
    /// FNV-1a over the sorted triples with their support and the entities with their documents.
    pub digest: String,
    pub version: GraphVersion,
}

/// The whole graph in memory, with the entity graph as a petgraph for walks.
#[derive(Debug, Default)]
pub struct GraphState {
    docs: HashMap<String, DocEntry>,
    entities: HashMap<String, EntityEntry>,
    triples: HashMap<TripleKey, TripleEntry>,
    /// Entity graph: one node per entity (weight: entity id), one edge per connected pair
    /// (weight: number of live triples between them, either direction).
    graph: StableUnGraph<String, u32>,
    /// Normalised word -> entities whose name contains it (for fuzzy seed linking).
    words: HashMap<String, HashSet<String>>,
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

    /// Replaces what `doc_id` supports by `entry` (None: deletes the document).
    /// Returns whether anything changed.
    pub fn apply(&mut self, doc_id: &str, entry: Option<DocEntry>, dirty: &mut Dirty) -> bool {
        let old = self.docs.get(doc_id);
        if old == entry.as_ref() {
            return false;
        }
        let old = self.docs.remove(doc_id);
        let empty_e = BTreeMap::new();
        let empty_t = BTreeSet::new();
        let (old_e, old_t) = old.as_ref().map(|o| (&o.entities, &o.triples)).unwrap_or((&empty_e, &empty_t));
        let (new_e, new_t) = entry.as_ref().map(|n| (&n.entities, &n.triples)).unwrap_or((&empty_e, &empty_t));
        for t in old_t.difference(new_t) {
            self.unsupport(t, doc_id, dirty);
        }
        for (id, name) in new_e {
            if !old_e.contains_key(id) {
                self.mention(id, name, doc_id, dirty);
            }
        }
        for t in new_t.difference(old_t) {
            self.support(t, doc_id, dirty);
        }
        for id in old_e.keys() {
            if !new_e.contains_key(id) {
                self.unmention(id, doc_id, dirty);
            }
        }
        if let Some(e) = entry {
            self.docs.insert(doc_id.to_string(), e);
        }
        dirty.docs.insert(doc_id.to_string());
        true
    }

    fn mention(&mut self, id: &str, name: &str, doc: &str, dirty: &mut Dirty) {
        if !self.entities.contains_key(id) {
            let node = self.graph.add_node(id.to_string());
            for w in words(&normalize(name)) {
                self.words.entry(w.to_string()).or_default().insert(id.to_string());
            }
            self.entities.insert(id.to_string(), EntityEntry { name: name.to_string(), node, docs: HashSet::new() });
            dirty.entities.insert(id.to_string());
        }
        self.entities.get_mut(id).unwrap().docs.insert(doc.to_string());
        dirty.mentions.insert((id.to_string(), doc.to_string()));
    }

    fn unmention(&mut self, id: &str, doc: &str, dirty: &mut Dirty) {
        let Some(e) = self.entities.get_mut(id) else { return };
        e.docs.remove(doc);
        dirty.mentions.insert((id.to_string(), doc.to_string()));
        if e.docs.is_empty() {
            let e = self.entities.remove(id).unwrap();
            self.graph.remove_node(e.node);
            for w in words(&normalize(&e.name)) {
                if let Some(set) = self.words.get_mut(w) {
                    set.remove(id);
                    if set.is_empty() {
                        self.words.remove(w);
                    }
                }
            }
            dirty.entities.insert(id.to_string());
        }
    }

    fn support(&mut self, t: &TripleKey, doc: &str, dirty: &mut Dirty) {
        let entry = self.triples.entry(t.clone()).or_insert_with(|| TripleEntry { support: BTreeSet::new() });
        if entry.support.is_empty() {
            let (a, b) = (self.entities[&t.0].node, self.entities[&t.2].node);
            match self.graph.find_edge(a, b) {
                Some(ix) => self.graph[ix] += 1,
                None => {
                    self.graph.add_edge(a, b, 1);
                }
            }
            dirty.triples.insert(t.clone());
        }
        entry.support.insert(doc.to_string());
        dirty.support.insert((t.clone(), doc.to_string()));
    }

    fn unsupport(&mut self, t: &TripleKey, doc: &str, dirty: &mut Dirty) {
        let Some(entry) = self.triples.get_mut(t) else { return };
        entry.support.remove(doc);
        dirty.support.insert((t.clone(), doc.to_string()));
        if entry.support.is_empty() {
            self.triples.remove(t);
            let (a, b) = (self.entities[&t.0].node, self.entities[&t.2].node);
            if let Some(ix) = self.graph.find_edge(a, b) {
                self.graph[ix] -= 1;
                if self.graph[ix] == 0 {
                    self.graph.remove_edge(ix);
                }
            }
            dirty.triples.insert(t.clone());
        }
    }

    pub fn document_count(&self) -> usize {
        self.docs.len()
    }
    pub fn doc(&self, id: &str) -> Option<&DocEntry> {
        self.docs.get(id)
    }
    pub fn docs(&self) -> impl Iterator<Item = (&String, &DocEntry)> {
        self.docs.iter()
    }
    pub fn entity(&self, id: &str) -> Option<&EntityEntry> {
        self.entities.get(id)
    }
    pub fn entities(&self) -> impl Iterator<Item = (&String, &EntityEntry)> {
        self.entities.iter()
    }
    pub fn triple(&self, t: &TripleKey) -> Option<&TripleEntry> {
        self.triples.get(t)
    }
    pub fn triples(&self) -> impl Iterator<Item = (&TripleKey, &TripleEntry)> {
        self.triples.iter()
    }
    pub fn graph(&self) -> &StableUnGraph<String, u32> {
        &self.graph
    }
    /// Entities whose name contains the normalised word `w`.
    pub fn entities_with_word(&self, w: &str) -> Option<&HashSet<String>> {
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

    /// The neighbours of an entity node with the edge weights.
    pub fn neighbours(&self, n: NodeIndex) -> impl Iterator<Item = (NodeIndex, u32)> + '_ {
        self.graph.edges(n).map(move |e| (if e.source() == n { e.target() } else { e.source() }, *e.weight()))
    }

    pub fn stats(&self) -> GraphStats {
        let mut h = Fnv::new();
        let mut triples: Vec<_> = self.triples.iter().collect();
        triples.sort_by(|a, b| a.0.cmp(b.0));
        let mut support = 0;
        for ((s, r, o), e) in &triples {
            h.write_all(&[s, r, o]);
            for d in &e.support {
                h.write_all(&[d]);
            }
            support += e.support.len();
        }
        let mut ents: Vec<_> = self.entities.iter().collect();
        ents.sort_by(|a, b| a.0.cmp(b.0));
        let mut mentions = 0;
        for (id, e) in &ents {
            h.write_all(&[id, &e.name]);
            let mut ds: Vec<_> = e.docs.iter().collect();
            ds.sort();
            for d in ds {
                h.write_all(&[d]);
            }
            mentions += e.docs.len();
        }
        let mut docs: Vec<_> = self.docs.iter().collect();
        docs.sort_by(|a, b| a.0.cmp(b.0));
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

    fn apply(g: &mut GraphState, d: &GraphDelta) -> bool {
        g.apply(&d.doc_id, GraphState::entry_of(d), &mut Dirty::default())
    }

    #[test]
    fn support_is_counted_per_document() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d1", &[("a", "r", "b"), ("b", "r", "c")]));
        apply(&mut g, &delta("d2", &[("a", "r", "b")]));
        let ab = ("a".to_string(), "r".to_string(), "b".to_string());
        assert_eq!(g.triple(&ab).unwrap().support.len(), 2);
        assert_eq!(g.document_frequency("a"), 2);
        assert_eq!(g.document_frequency("c"), 1);
        // d1 withdrawn: a-r-b survives through d2, b-r-c and c disappear.
        let mut del = delta("d1", &[]);
        del.op = DocOp::Delete;
        assert!(apply(&mut g, &del));
        assert_eq!(g.triple(&ab).unwrap().support.iter().collect::<Vec<_>>(), vec!["d2"]);
        assert!(g.entity("c").is_none());
        assert_eq!(g.graph().node_count(), 3); // a, b, d2 (d1 and c gone)
        assert_eq!(g.graph().edge_count(), 1);
    }

    #[test]
    fn reapplying_changes_nothing_and_upsert_equals_fresh() {
        let mut g = GraphState::new();
        let v1 = delta("d1", &[("a", "r", "b"), ("b", "r2", "c")]);
        let v2 = delta("d1", &[("a", "r", "b"), ("a", "r3", "d")]);
        assert!(apply(&mut g, &v1));
        assert!(!apply(&mut g, &v1));
        assert!(apply(&mut g, &v2));
        let mut fresh = GraphState::new();
        apply(&mut fresh, &v2);
        assert_eq!(g.stats().digest, fresh.stats().digest);
        assert_eq!(g.stats(), fresh.stats());
    }

    #[test]
    fn self_loops_and_parallel_relations() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d", &[("a", "likes", "a"), ("a", "r1", "b"), ("a", "R1 ", "b"), ("b", "r2", "a")]));
        assert_eq!(g.triples().count(), 3); // "R1 " canonicalises to "r1"
        let (na, nb) = (g.entity("a").unwrap().node, g.entity("b").unwrap().node);
        assert_eq!(g.graph()[g.graph().find_edge(na, nb).unwrap()], 2);
        let mut del = delta("d", &[]);
        del.op = DocOp::Delete;
        apply(&mut g, &del);
        assert_eq!(g.stats().triples, 0);
        assert_eq!(g.graph().node_count(), 0);
        assert!(g.entities_with_word("a").is_none());
    }
}
