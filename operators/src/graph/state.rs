//! The graph in memory, compact: entity, document and relation ids are interned to `u32`, a
//! triple is three of those. What most entities and triples have only one or two of (supporting
//! documents, mentions, neighbours, incident triples, entities per word) is kept inline, without
//! an allocation of its own, and a document's names share one string (`streamrag bench graph`
//! prints the resident bytes per triple).
//!
//! An entity's display name is the name used by the smallest (by id) document that mentions
//! it, so it does not depend on arrival order: a rebuild from the documents alone, in any
//! order, gives the same graph, names included.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use streamrag_schemas::{DocOp, GraphDelta, GraphVersion};

use crate::hash::fnv1a;
use crate::normalize::{normalize, words};

/// A triple over canonical ids: (subject id, relation, object id). The relation is stored in
/// its canonical form (trimmed, lower case, single spaces).
pub type TripleKey = (String, String, String);

type Ix = u32;
type TIx = (Ix, Ix, Ix);

/// Canonical form of a relation phrase.
pub fn canonical_relation(r: &str) -> String {
    r.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// What one live document contributes (the form the store and deltas use).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocEntry {
    pub title: String,
    /// Entity id -> the name this document used.
    pub entities: BTreeMap<String, String>,
    pub triples: BTreeSet<TripleKey>,
    /// Synonym links from the entities this document names: (entity id, linked entity id,
    /// confidence in thousandths).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub links: BTreeSet<(String, String, u16)>,
    /// Its access labels (empty: public; see [`crate::access`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub access: BTreeSet<String>,
}

/// Keys changed since the last persist, for the store to write.
#[derive(Debug, Default)]
pub struct Dirty {
    pub docs: BTreeSet<String>,
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
    /// Synonym links (entity pairs, either way round) some live document carries.
    #[serde(default)]
    pub links: usize,
    /// FNV-1a over the sorted triples with their support, the entities with their names and
    /// documents, and the documents with their titles.
    pub digest: String,
    pub version: GraphVersion,
}

#[derive(Debug, Clone)]
struct Entity {
    id: Arc<str>,
    /// The document whose name for the entity is displayed (the smallest id).
    name_doc: Ix,
    docs: SmallVec<[Ix; 2]>,
    /// (neighbour, number of live triples between the two), sorted by neighbour (a self-loop
    /// counts once).
    adj: SmallVec<[(Ix, u32); 2]>,
    /// The live triples with this entity at either end (a self-loop once).
    incident: SmallVec<[TIx; 1]>,
    /// How many of the documents that mention it write its name in lower case, less how many
    /// write it with a capital ([`written_case`]): kept as documents come and go, so that
    /// retrieval can tell a concept from a named thing without reading every document's name.
    case: i32,
}

/// +1 for a name whose first letter is lower case ("film"), -1 for one whose first letter is a
/// capital ("Film"), 0 for a name without letters.
fn written_case(name: &str) -> i32 {
    match name.chars().find(|c| c.is_alphabetic()) {
        Some(c) if c.is_lowercase() => 1,
        Some(_) => -1,
        None => 0,
    }
}

#[derive(Debug, Clone)]
struct Doc {
    id: Arc<str>,
    title: Box<str>,
    /// The title normalised as entity ids are (kept: retrieval compares it per passage).
    title_key: Box<str>,
    /// The entities it mentions with the names it writes them by.
    entities: Mentions,
    /// Sorted.
    triples: Box<[TIx]>,
    /// Sorted, as in [`DocEntry::links`].
    links: Vec<(Arc<str>, Arc<str>, u16)>,
    /// Its access labels, sorted (empty: public).
    access: Box<[Box<str>]>,
}

impl Doc {
    fn name_of(&self, e: Ix) -> Option<&str> {
        self.entities.name_of(e)
    }
}

/// The entities one document mentions, sorted by slot, each with the name the document writes
/// it by; the names are kept end to end in one string, not one allocation each.
#[derive(Debug, Clone, Default)]
struct Mentions {
    /// (entity slot, where its name ends in `text`).
    at: Box<[(Ix, u32)]>,
    text: Box<str>,
}

impl Mentions {
    /// From (slot, name) pairs sorted by slot.
    fn new<'a>(list: impl Iterator<Item = (Ix, &'a str)>) -> Self {
        let mut text = String::new();
        let at = list
            .map(|(e, n)| {
                text.push_str(n);
                (e, text.len() as u32)
            })
            .collect();
        Mentions { at, text: text.into() }
    }
    fn name_at(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.at[i - 1].1 as usize };
        &self.text[start..self.at[i].1 as usize]
    }
    fn name_of(&self, e: Ix) -> Option<&str> {
        self.at.binary_search_by_key(&e, |x| x.0).ok().map(|i| self.name_at(i))
    }
    fn slots(&self) -> impl Iterator<Item = Ix> + '_ {
        self.at.iter().map(|x| x.0)
    }
    fn iter(&self) -> impl Iterator<Item = (Ix, &str)> {
        (0..self.at.len()).map(|i| (self.at[i].0, self.name_at(i)))
    }
}

/// The entities whose name has one word: most words name one or two, kept inline; a common
/// word's many in a set, so that adding or removing one stays O(1).
#[derive(Debug, Clone)]
enum WordEntities {
    /// Sorted.
    Few(SmallVec<[Ix; 2]>),
    Many(HashSet<Ix>),
}

impl Default for WordEntities {
    fn default() -> Self {
        WordEntities::Few(SmallVec::new())
    }
}

impl WordEntities {
    /// Above this many a word's entities go into a set; at a quarter of it, back into a list.
    const FEW: usize = 32;

    fn insert(&mut self, e: Ix) {
        match self {
            WordEntities::Few(v) => {
                if let Err(i) = v.binary_search(&e) {
                    v.insert(i, e);
                }
                if v.len() > Self::FEW {
                    *self = WordEntities::Many(v.iter().copied().collect());
                }
            }
            WordEntities::Many(set) => {
                set.insert(e);
            }
        }
    }
    fn remove(&mut self, e: Ix) {
        match self {
            WordEntities::Few(v) => {
                if let Ok(i) = v.binary_search(&e) {
                    v.remove(i);
                }
            }
            WordEntities::Many(set) => {
                set.remove(&e);
                if set.len() <= Self::FEW / 4 {
                    let mut v: SmallVec<[Ix; 2]> = set.iter().copied().collect();
                    v.sort_unstable();
                    *self = WordEntities::Few(v);
                }
            }
        }
    }
    fn is_empty(&self) -> bool {
        match self {
            WordEntities::Few(v) => v.is_empty(),
            WordEntities::Many(set) => set.is_empty(),
        }
    }
    fn iter(&self) -> Box<dyn Iterator<Item = Ix> + '_> {
        match self {
            WordEntities::Few(v) => Box::new(v.iter().copied()),
            WordEntities::Many(set) => Box::new(set.iter().copied()),
        }
    }
}

/// A triple's supporting documents: one document's slot kept in place (most triples), or with
/// [`POOLED`] set, the index of the list in [`GraphState`]'s support pool.
type Support = u32;
const POOLED: u32 = 1 << 31;

/// Interned strings with reusable slots.
#[derive(Debug, Clone)]
struct Slots<T> {
    ix: HashMap<Arc<str>, Ix>,
    items: Vec<Option<T>>,
    free: Vec<Ix>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { ix: HashMap::default(), items: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slots<T> {
    fn get(&self, id: &str) -> Option<Ix> {
        self.ix.get(id).copied()
    }
    fn at(&self, i: Ix) -> &T {
        self.items[i as usize].as_ref().expect("live slot")
    }
    fn at_mut(&mut self, i: Ix) -> &mut T {
        self.items[i as usize].as_mut().expect("live slot")
    }
    fn insert(&mut self, id: Arc<str>, item: T) -> Ix {
        let i = match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(item);
                i
            }
            None => {
                self.items.push(Some(item));
                (self.items.len() - 1) as Ix
            }
        };
        self.ix.insert(id, i);
        i
    }
    fn remove(&mut self, id: &str) -> Option<T> {
        let i = self.ix.remove(id)?;
        self.free.push(i);
        self.items[i as usize].take()
    }
    fn len(&self) -> usize {
        self.ix.len()
    }
    fn iter(&self) -> impl Iterator<Item = (Ix, &T)> {
        self.items.iter().enumerate().filter_map(|(i, x)| x.as_ref().map(|x| (i as Ix, x)))
    }
}

/// The whole graph in memory.
#[derive(Debug, Clone, Default)]
pub struct GraphState {
    ents: Slots<Entity>,
    docs: Slots<Doc>,
    rel_ix: HashMap<Arc<str>, Ix>,
    rels: Vec<Arc<str>>,
    /// Triple -> supporting documents.
    triples: HashMap<TIx, Support>,
    /// The support lists of triples with more than one document, and the free places in it.
    pool: Vec<Vec<Ix>>,
    pool_free: Vec<u32>,
    /// Normalised word -> entities whose (displayed) name contains it.
    words: HashMap<Box<str>, WordEntities>,
    /// `"topic/partition"` -> last applied offset.
    offsets: BTreeMap<String, i64>,
    /// Entity id -> (linked entity id, the document that carries the link, confidence in
    /// thousandths), both ways round. By id, not slot: either end may not be live.
    synonyms: HashMap<Arc<str>, Vec<(Arc<str>, Ix, u16)>>,
    /// An access view ([`super::Views`]): the documents a restricted reader may read, and
    /// nothing outside them may be read (passage indexes' hits included).
    view: bool,
}

fn offset_key(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// A live entity.
#[derive(Clone, Copy)]
pub struct EntityView<'g> {
    g: &'g GraphState,
    ix: Ix,
}

impl<'g> EntityView<'g> {
    fn e(&self) -> &'g Entity {
        self.g.ents.at(self.ix)
    }
    pub fn id(&self) -> &'g str {
        &self.e().id
    }
    pub fn name(&self) -> &'g str {
        self.g.docs.at(self.e().name_doc).name_of(self.ix).unwrap_or(&self.e().id)
    }
    /// Ids of the documents that mention it.
    pub fn docs(&self) -> impl Iterator<Item = &'g str> + 'g {
        let g = self.g;
        self.e().docs.iter().map(move |d| &*g.docs.at(*d).id)
    }
    /// Its document frequency.
    pub fn df(&self) -> usize {
        self.e().docs.len()
    }
    /// Its slot (see [`GraphState::entity_at`]).
    pub fn slot(&self) -> u32 {
        self.ix
    }
    /// The slots of its neighbours, with the number of live triples to each.
    pub fn neighbour_slots(&self) -> impl Iterator<Item = (u32, u32)> + 'g {
        self.e().adj.iter().copied()
    }
    /// How many neighbours it has.
    pub fn neighbour_count(&self) -> usize {
        self.e().adj.len()
    }
    /// The number of live triples between it and the entity in `slot` (None: not neighbours).
    pub fn triples_with(&self, slot: u32) -> Option<u32> {
        let adj = &self.e().adj;
        adj.binary_search_by_key(&slot, |x| x.0).ok().map(|i| adj[i].1)
    }
    /// The names the documents that mention it write it by, one per document.
    pub fn names(&self) -> impl Iterator<Item = &'g str> + 'g {
        let (g, ix) = (self.g, self.ix);
        self.e().docs.iter().filter_map(move |d| g.docs.at(*d).name_of(ix))
    }
    /// The slots of the documents that mention it.
    pub fn doc_slots(&self) -> &'g [u32] {
        &self.e().docs
    }
    /// Whether more of the documents that mention it write its name in lower case than with a
    /// capital: a concept ("film", "husband"), not a named thing. Kept by the graph, no
    /// document read.
    pub fn written_lower_case(&self) -> bool {
        self.e().case > 0
    }
}

/// A live document.
#[derive(Clone, Copy)]
pub struct DocView<'g> {
    g: &'g GraphState,
    ix: Ix,
}

impl<'g> DocView<'g> {
    fn d(&self) -> &'g Doc {
        self.g.docs.at(self.ix)
    }
    pub fn id(&self) -> &'g str {
        &self.d().id
    }
    pub fn title(&self) -> &'g str {
        &self.d().title
    }
    /// Its title normalised as entity ids are: the id of the entity the page is about, when
    /// the graph holds one.
    pub fn title_key(&self) -> &'g str {
        &self.d().title_key
    }
    /// Its slot (see [`GraphState::doc_at`]).
    pub fn slot(&self) -> u32 {
        self.ix
    }
    /// The slots of the entities it mentions.
    pub fn entity_slots(&self) -> impl Iterator<Item = u32> + 'g {
        self.d().entities.slots()
    }
    /// (entity id, the name this document used).
    pub fn entities(&self) -> impl Iterator<Item = (&'g str, &'g str)> + 'g {
        let g = self.g;
        self.d().entities.iter().map(move |(e, n)| (&*g.ents.at(e).id, n))
    }
    /// Its triples as (subject id, relation, object id).
    pub fn triples(&self) -> impl Iterator<Item = (&'g str, &'g str, &'g str)> + 'g {
        let g = self.g;
        self.d().triples.iter().map(move |t| g.triple_strs(t))
    }
    pub fn triple_count(&self) -> usize {
        self.d().triples.len()
    }
    /// The synonym links this document carries: (entity id, linked entity id, confidence).
    pub fn links(&self) -> impl Iterator<Item = (&'g str, &'g str, f32)> + 'g {
        self.d().links.iter().map(|(a, b, c)| (&**a, &**b, *c as f32 / 1000.0))
    }
    /// Its access labels, sorted (empty: public).
    pub fn access(&self) -> impl Iterator<Item = &'g str> + 'g {
        self.d().access.iter().map(|a| &**a)
    }
    /// The store's form of this document.
    pub fn to_entry(&self) -> DocEntry {
        DocEntry {
            title: self.title().to_string(),
            entities: self.entities().map(|(i, n)| (i.to_string(), n.to_string())).collect(),
            triples: self.triples().map(|(s, r, o)| (s.to_string(), r.to_string(), o.to_string())).collect(),
            links: self.d().links.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), *c)).collect(),
            access: self.access().map(str::to_string).collect(),
        }
    }
}

/// A live triple.
#[derive(Clone, Copy)]
pub struct TripleView<'g> {
    g: &'g GraphState,
    key: &'g TIx,
    support: &'g [Ix],
}

impl<'g> TripleView<'g> {
    /// (subject id, relation, object id).
    pub fn key(&self) -> (&'g str, &'g str, &'g str) {
        self.g.triple_strs(self.key)
    }
    /// Ids of the supporting documents.
    pub fn support(&self) -> impl Iterator<Item = &'g str> + 'g {
        let g = self.g;
        self.support.iter().map(move |d| &*g.docs.at(*d).id)
    }
    pub fn support_count(&self) -> usize {
        self.support.len()
    }
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
        let links = delta
            .links
            .iter()
            .filter(|l| !l.id.is_empty() && !l.to_id.is_empty() && l.id != l.to_id)
            .map(|l| (l.id.clone(), l.to_id.clone(), (l.confidence.clamp(0.0, 1.0) * 1000.0).round() as u16))
            .collect();
        let access = delta.access.iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
        Some(DocEntry { title: delta.title.clone(), entities, triples, links, access })
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

    fn triple_strs(&self, t: &TIx) -> (&str, &str, &str) {
        (&self.ents.at(t.0).id, &self.rels[t.1 as usize], &self.ents.at(t.2).id)
    }

    fn triple_key(&self, t: &TIx) -> TripleKey {
        let (s, r, o) = self.triple_strs(t);
        (s.to_string(), r.to_string(), o.to_string())
    }

    fn relation(&mut self, r: &str) -> Ix {
        if let Some(&i) = self.rel_ix.get(r) {
            return i;
        }
        let a: Arc<str> = Arc::from(r);
        self.rels.push(a.clone());
        let i = (self.rels.len() - 1) as Ix;
        self.rel_ix.insert(a, i);
        i
    }

    /// Replaces what `doc_id` supports by `entry` (None: deletes the document) and returns
    /// what changed in the graph; None when the document already had exactly this content.
    pub fn apply(&mut self, doc_id: &str, entry: Option<&DocEntry>, dirty: &mut Dirty) -> Option<Change> {
        let old_ix = self.docs.get(doc_id);
        if let (Some(i), Some(e)) = (old_ix, entry) {
            if (DocView { g: self, ix: i }).to_entry() == *e {
                return None;
            }
        }
        if old_ix.is_none() && entry.is_none() {
            return None;
        }
        let mut change = Change::default();
        // The document slot: kept through the update (its index is referenced by support
        // lists), created for a new document, freed after a deletion.
        let d = match (old_ix, entry) {
            (Some(i), _) => i,
            (None, Some(e)) => {
                let id: Arc<str> = Arc::from(doc_id);
                self.docs.insert(id.clone(), Doc { id, title: e.title.clone().into(), title_key: normalize(&e.title).into(), entities: Mentions::default(), triples: Box::default(), links: vec![], access: Box::default() })
            }
            (None, None) => unreachable!("handled above"),
        };
        // New entities first (so triples can reference them), with this document's names.
        let mut new_ents: Vec<(Ix, &str)> = Vec::new();
        let mut new_triples: Vec<TIx> = Vec::new();
        if let Some(e) = entry {
            for (id, name) in &e.entities {
                let ix = match self.ents.get(id) {
                    Some(ix) => ix,
                    None => {
                        let a: Arc<str> = Arc::from(id.as_str());
                        let ix = self.ents.insert(a.clone(), Entity { id: a, name_doc: d, docs: SmallVec::new(), adj: SmallVec::new(), incident: SmallVec::new(), case: 0 });
                        change.entities_added.push((id.clone(), name.clone()));
                        ix
                    }
                };
                new_ents.push((ix, name.as_str()));
            }
            new_ents.sort_unstable_by_key(|x| x.0);
            for (s, r, o) in &e.triples {
                let (Some(si), Some(oi)) = (self.ents.get(s), self.ents.get(o)) else { continue };
                let ri = self.relation(r);
                new_triples.push((si, ri, oi));
            }
            new_triples.sort_unstable();
            new_triples.dedup();
        }
        // Install the new content before touching names, so name lookups see it; what the
        // slot held (nothing for a new document) is the old content, sorted like the new.
        let (old_ents, old_triples) = {
            let doc = self.docs.at_mut(d);
            if let Some(e) = entry {
                doc.title = e.title.clone().into();
                doc.title_key = normalize(&e.title).into();
                doc.access = e.access.iter().map(|a| a.as_str().into()).collect();
            }
            (std::mem::replace(&mut doc.entities, Mentions::new(new_ents.iter().copied())), std::mem::replace(&mut doc.triples, new_triples.as_slice().into()))
        };
        let new_links: Vec<(Arc<str>, Arc<str>, u16)> =
            entry.iter().flat_map(|e| e.links.iter()).map(|(a, b, c)| (Arc::from(a.as_str()), Arc::from(b.as_str()), *c)).collect();
        let old_links = std::mem::replace(&mut self.docs.at_mut(d).links, new_links.clone());
        for l in old_links.iter().filter(|l| new_links.binary_search(l).is_err()) {
            self.synonym(l, d, false);
        }
        for l in new_links.iter().filter(|l| old_links.binary_search(l).is_err()) {
            self.synonym(l, d, true);
        }
        let old_name_of = |e: Ix| old_ents.name_of(e).map(str::to_string);
        for t in old_triples.iter().filter(|t| new_triples.binary_search(t).is_err()) {
            self.unsupport(t, d, &mut change);
        }
        for t in new_triples.iter().filter(|t| old_triples.binary_search(t).is_err()) {
            self.support(t, d, &mut change);
        }
        let new_ix: Vec<Ix> = new_ents.iter().map(|x| x.0).collect();
        let old_ix: Vec<Ix> = old_ents.slots().collect();
        for &e in new_ix.iter().filter(|e| old_ix.binary_search(e).is_err()) {
            self.mention(e, d);
        }
        // A name may change where this document names the entity differently.
        for &e in new_ix.iter().filter(|e| old_ix.binary_search(e).is_ok()) {
            // the case this document writes the name in may change with it (no name copied)
            let now = self.docs.at(d).name_of(e).map(written_case).unwrap_or(0);
            let before = old_ents.name_of(e).map_or(0, written_case);
            if now != before {
                self.ents.at_mut(e).case += now - before;
            }
            if self.ents.at(e).name_doc == d {
                if let Some(n) = old_name_of(e) {
                    self.rename(e, &n);
                }
            }
        }
        for &e in old_ix.iter().filter(|e| new_ix.binary_search(e).is_err()) {
            let old_name = old_name_of(e).unwrap_or_default();
            self.unmention(e, d, &old_name, &mut change);
        }
        if entry.is_none() {
            self.docs.remove(doc_id);
        }
        dirty.docs.insert(doc_id.to_string());
        change.asserted.sort();
        change.retracted.sort();
        Some(change)
    }

    /// Adds or withdraws document `d`'s support for a synonym link, both ways round.
    fn synonym(&mut self, (a, b, c): &(Arc<str>, Arc<str>, u16), d: Ix, add: bool) {
        for (x, y) in [(a, b), (b, a)] {
            let list = self.synonyms.entry(x.clone()).or_default();
            if add {
                list.push((y.clone(), d, *c));
            } else if let Some(p) = list.iter().position(|(o, doc, conf)| o == y && *doc == d && conf == c) {
                list.swap_remove(p);
            }
            if list.is_empty() {
                self.synonyms.remove(x);
            }
        }
    }

    /// The live entities a synonym link joins to `id`, each with its best confidence, most
    /// confident first.
    pub fn synonyms(&self, id: &str) -> Vec<(&str, f32)> {
        let mut out: Vec<(&str, f32)> = Vec::new();
        for (other, _, c) in self.synonyms.get(id).into_iter().flatten() {
            if self.ents.get(other).is_none() {
                continue;
            }
            let c = *c as f32 / 1000.0;
            match out.iter_mut().find(|(o, _)| *o == &**other) {
                Some(x) => x.1 = x.1.max(c),
                None => out.push((other, c)),
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        out
    }

    fn index_words(&mut self, e: Ix, name: &str, add: bool) {
        for w in words(&normalize(name)) {
            if add {
                self.words.entry(w.into()).or_default().insert(e);
            } else if let Some(v) = self.words.get_mut(w) {
                v.remove(e);
                if v.is_empty() {
                    self.words.remove(w);
                }
            }
        }
    }

    fn display_name(&self, e: Ix) -> String {
        EntityView { g: self, ix: e }.name().to_string()
    }

    /// Re-derives the display name of `e` after its naming document changed; `old_name` is
    /// the name it had.
    fn rename(&mut self, e: Ix, old_name: &str) {
        let new = self.display_name(e);
        if new != old_name {
            self.index_words(e, old_name, false);
            self.index_words(e, &new, true);
        }
    }

    fn mention(&mut self, e: Ix, d: Ix) {
        let ent = self.ents.at(e);
        let first = ent.docs.is_empty();
        let old_name = if first { None } else { Some(self.display_name(e)) };
        let takes_name = first || *self.docs.at(d).id < *self.docs.at(ent.name_doc).id;
        let case = self.docs.at(d).name_of(e).map(written_case).unwrap_or(0);
        let ent = self.ents.at_mut(e);
        ent.docs.push(d);
        ent.case += case;
        if takes_name {
            ent.name_doc = d;
        }
        match old_name {
            None => {
                let n = self.display_name(e);
                self.index_words(e, &n, true);
            }
            Some(o) if takes_name => self.rename(e, &o),
            Some(_) => {}
        }
    }

    fn unmention(&mut self, e: Ix, d: Ix, name_in_d: &str, change: &mut Change) {
        let ent = self.ents.at_mut(e);
        if let Some(p) = ent.docs.iter().position(|x| *x == d) {
            ent.docs.swap_remove(p);
            ent.case -= written_case(name_in_d);
        }
        if ent.docs.is_empty() {
            let id = ent.id.clone();
            let shown = if ent.name_doc == d { name_in_d.to_string() } else { self.display_name(e) };
            self.index_words(e, &shown, false);
            self.ents.remove(&id);
            change.entities_removed.push((id.to_string(), shown));
            return;
        }
        if ent.name_doc == d {
            let docs = &self.docs;
            let next = *ent.docs.iter().min_by(|a, b| docs.at(**a).id.cmp(&docs.at(**b).id)).expect("non-empty");
            ent.name_doc = next;
            self.rename(e, name_in_d);
        }
    }

    fn bump_edge(&mut self, a: Ix, b: Ix, up: bool) {
        for (x, y) in [(a, b), (b, a)] {
            let adj = &mut self.ents.at_mut(x).adj;
            match (adj.binary_search_by_key(&y, |n| n.0), up) {
                (Ok(i), true) => adj[i].1 += 1,
                (Err(i), true) => adj.insert(i, (y, 1)),
                (Ok(i), false) => {
                    adj[i].1 -= 1;
                    if adj[i].1 == 0 {
                        adj.remove(i);
                    }
                }
                (Err(_), false) => {}
            }
            if a == b {
                break;
            }
        }
    }

    fn link(&mut self, t: &TIx, up: bool) {
        self.bump_edge(t.0, t.2, up);
        let ends = [t.0, t.2];
        for e in &ends[..if t.0 == t.2 { 1 } else { 2 }] {
            let inc = &mut self.ents.at_mut(*e).incident;
            if up {
                inc.push(*t);
            } else if let Some(p) = inc.iter().position(|x| x == t) {
                inc.swap_remove(p);
            }
        }
    }

    fn support(&mut self, t: &TIx, d: Ix, change: &mut Change) {
        match self.triples.get_mut(t) {
            None => {
                self.triples.insert(*t, d);
                self.link(t, true);
                change.asserted.push(self.triple_key(t));
            }
            Some(s) if *s & POOLED != 0 => self.pool[(*s & !POOLED) as usize].push(d),
            Some(s) => {
                let list = vec![*s, d];
                let at = match self.pool_free.pop() {
                    Some(i) => {
                        self.pool[i as usize] = list;
                        i
                    }
                    None => {
                        self.pool.push(list);
                        (self.pool.len() - 1) as u32
                    }
                };
                *s = at | POOLED;
            }
        }
    }

    fn unsupport(&mut self, t: &TIx, d: Ix, change: &mut Change) {
        let Some(s) = self.triples.get_mut(t) else { return };
        if *s & POOLED != 0 {
            let at = *s & !POOLED;
            let list = &mut self.pool[at as usize];
            if let Some(p) = list.iter().position(|x| *x == d) {
                list.swap_remove(p);
            }
            if list.len() == 1 {
                *s = list[0];
                self.pool[at as usize] = Vec::new();
                self.pool_free.push(at);
            }
        } else if *s == d {
            self.triples.remove(t);
            self.link(t, false);
            change.retracted.push(self.triple_key(t));
        }
    }

    /// The supporting documents `s` stands for.
    fn support_of<'g>(&'g self, s: &'g Support) -> &'g [Ix] {
        if *s & POOLED != 0 {
            &self.pool[(*s & !POOLED) as usize]
        } else {
            std::slice::from_ref(s)
        }
    }

    pub fn document_count(&self) -> usize {
        self.docs.len()
    }
    pub fn entity_count(&self) -> usize {
        self.ents.len()
    }
    pub fn triple_count(&self) -> usize {
        self.triples.len()
    }
    pub fn doc(&self, id: &str) -> Option<DocView<'_>> {
        self.docs.get(id).map(|ix| DocView { g: self, ix })
    }
    pub fn docs(&self) -> impl Iterator<Item = DocView<'_>> {
        self.docs.iter().map(move |(ix, _)| DocView { g: self, ix })
    }
    /// Slots number live entities and documents densely (below [`Self::entity_slot_count`] and
    /// [`Self::doc_slot_count`]) for as long as they live, so that a walk over one version of the
    /// graph can keep its nodes in arrays rather than in maps keyed by id.
    pub fn entity_slot_count(&self) -> usize {
        self.ents.items.len()
    }
    pub fn doc_slot_count(&self) -> usize {
        self.docs.items.len()
    }
    /// The entity in `slot`, if one lives there.
    pub fn entity_at(&self, slot: u32) -> Option<EntityView<'_>> {
        self.ents.items.get(slot as usize)?.as_ref().map(|_| EntityView { g: self, ix: slot })
    }
    /// The document in `slot`, if one lives there.
    pub fn doc_at(&self, slot: u32) -> Option<DocView<'_>> {
        self.docs.items.get(slot as usize)?.as_ref().map(|_| DocView { g: self, ix: slot })
    }
    pub fn entity(&self, id: &str) -> Option<EntityView<'_>> {
        self.ents.get(id).map(|ix| EntityView { g: self, ix })
    }
    pub fn entities(&self) -> impl Iterator<Item = EntityView<'_>> {
        self.ents.iter().map(move |(ix, _)| EntityView { g: self, ix })
    }
    pub fn triples(&self) -> impl Iterator<Item = TripleView<'_>> {
        self.triples.iter().map(move |(key, s)| TripleView { g: self, key, support: self.support_of(s) })
    }
    /// The triple's view, if it is live.
    pub fn triple(&self, s: &str, r: &str, o: &str) -> Option<TripleView<'_>> {
        let key = (self.ents.get(s)?, *self.rel_ix.get(r)?, self.ents.get(o)?);
        self.triples.get_key_value(&key).map(|(key, s)| TripleView { g: self, key, support: self.support_of(s) })
    }
    /// The entities connected to `id` by live triples, with the number of such triples.
    pub fn neighbours(&self, id: &str) -> impl Iterator<Item = (&str, u32)> {
        self.ents.get(id).into_iter().flat_map(move |ix| self.ents.at(ix).adj.iter().map(move |&(n, c)| (&*self.ents.at(n).id, c)))
    }
    /// The live triples with `id` at either end, as (subject id, relation, object id), in no
    /// particular order.
    pub fn incident(&self, id: &str) -> impl Iterator<Item = (&str, &str, &str)> {
        self.ents.get(id).into_iter().flat_map(move |ix| self.ents.at(ix).incident.iter().map(move |t| self.triple_strs(t)))
    }
    /// Ids of the entities whose name contains the normalised word `w`.
    pub fn entities_with_word(&self, w: &str) -> Vec<&str> {
        self.words.get(w).map(|v| v.iter().map(|e| &*self.ents.at(e).id).collect()).unwrap_or_default()
    }
    /// Number of documents mentioning the entity (0 if it is not live).
    pub fn document_frequency(&self, id: &str) -> usize {
        self.entity(id).map(|e| e.df()).unwrap_or(0)
    }
    /// Whether this is an access view: a document it does not hold may not be read (see
    /// [`GraphState::readable`]).
    pub fn is_view(&self) -> bool {
        self.view
    }

    pub(super) fn mark_view(&mut self) {
        self.view = true;
    }

    /// Whether a passage index's hit `doc_id` may be returned from this graph: any document
    /// from the whole graph (one not extracted yet included), only its own from a view.
    pub fn readable(&self, doc_id: &str) -> bool {
        !self.view || self.docs.get(doc_id).is_some()
    }

    pub fn version(&self) -> GraphVersion {
        GraphVersion { offsets: self.offsets.clone() }
    }
    pub fn offsets(&self) -> &BTreeMap<String, i64> {
        &self.offsets
    }

    /// Counts and a content digest. The digest sums a 64-bit FNV-1a hash per triple (with its
    /// supporting documents), per entity (with its name and documents) and per document (with
    /// its title): independent of iteration order, so no sorting, O(size).
    pub fn stats(&self) -> GraphStats {
        let mut digest: u64 = 0;
        let mut support = 0;
        for t in self.triples() {
            let (s, r, o) = t.key();
            let h = fnv1a(&[s, r, o]);
            let mut docs = fnv_sum(t.support());
            support += t.support_count();
            docs = docs.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            digest = digest.wrapping_add(h ^ docs);
        }
        let mut mentions = 0;
        for e in self.entities() {
            let h = fnv1a(&[e.id(), e.name()]);
            mentions += e.df();
            digest = digest.wrapping_add(h ^ fnv_sum(e.docs()).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
        }
        for d in self.docs() {
            digest = digest.wrapping_add(fnv1a(&["doc", d.id(), d.title()]));
            for a in d.access() {
                digest = digest.wrapping_add(fnv1a(&["access", d.id(), a]));
            }
            for (a, b, c) in &d.d().links {
                digest = digest.wrapping_add(fnv1a(&["link", d.id(), a, b, &c.to_string()]));
            }
        }
        let links = self.synonyms.iter().map(|(a, list)| list.iter().filter(|(b, _, _)| a < b).map(|(b, _, _)| b).collect::<HashSet<_>>().len()).sum();
        GraphStats {
            documents: self.docs.len(),
            entities: self.ents.len(),
            triples: self.triples.len(),
            support,
            mentions,
            links,
            digest: format!("{digest:016x}"),
            version: self.version(),
        }
    }
}

/// Order-independent hash of a set of strings.
fn fnv_sum<'a>(items: impl Iterator<Item = &'a str>) -> u64 {
    items.fold(0u64, |acc, x| acc.wrapping_add(fnv1a(&[x])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamrag_schemas::{EntityRef, ResolvedTriple, SourceRef};

    fn delta(doc: &str, triples: &[(&str, &str, &str)]) -> GraphDelta {
        GraphDelta {
            access: Default::default(),
            schema_version: streamrag_schemas::SCHEMA_VERSION,
            op: DocOp::Upsert,
            doc_id: doc.into(),
            title: doc.to_uppercase(),
            entities: vec![EntityRef { id: doc.into(), name: doc.to_uppercase() }],
            triples: triples
                .iter()
                .map(|(s, r, o)| ResolvedTriple {
                    subject_id: s.to_string(),
                    subject: format!("{} in {doc}", s.to_uppercase()),
                    relation: r.to_string(),
                    object_id: o.to_string(),
                    object: o.to_uppercase(),
                })
                .collect(),
            links: vec![],
            source: SourceRef { topic: "t".into(), partition: 0, offset: 0, timestamp_ms: None },
        }
    }

    fn apply(g: &mut GraphState, d: &GraphDelta) -> Option<Change> {
        g.apply(&d.doc_id, GraphState::entry_of(d).as_ref(), &mut Dirty::default())
    }

    fn delete(g: &mut GraphState, doc: &str) -> Option<Change> {
        let mut d = delta(doc, &[]);
        d.op = DocOp::Delete;
        apply(g, &d)
    }

    fn key(s: &str, r: &str, o: &str) -> TripleKey {
        (s.into(), r.into(), o.into())
    }

    #[test]
    fn a_synonym_link_lives_while_a_document_carries_it() {
        let link = |d: &mut GraphDelta, a: &str, b: &str, c: f32| d.links.push(streamrag_schemas::EntityLink { id: a.into(), to_id: b.into(), confidence: c });
        let mut g = GraphState::new();
        let mut d1 = delta("d1", &[("a", "r", "b")]);
        link(&mut d1, "a", "x", 0.85);
        let mut d2 = delta("d2", &[("a", "r", "c"), ("x", "r", "c")]);
        link(&mut d2, "a", "x", 0.9);
        apply(&mut g, &d1);
        assert!(g.synonyms("a").is_empty(), "x is named by no live document yet");
        apply(&mut g, &d2);
        assert_eq!(g.synonyms("a"), vec![("x", 0.9)], "the best confidence of the documents that carry it");
        assert_eq!(g.synonyms("x"), vec![("a", 0.9)], "both ways round");
        assert_eq!(g.stats().links, 1);
        let before = g.stats().digest;
        // d2 changes its mind: the link stays through d1 at d1's confidence.
        apply(&mut g, &delta("d2", &[("a", "r", "c"), ("x", "r", "c")]));
        assert_eq!(g.synonyms("a"), vec![("x", 0.85)]);
        assert_ne!(g.stats().digest, before, "links are part of the content");
        delete(&mut g, "d1");
        assert!(g.synonyms("a").is_empty() && g.synonyms("x").is_empty(), "withdrawn with the last document that carried it");
        assert_eq!(g.stats().links, 0);
        // Re-applying the same content changes nothing.
        apply(&mut g, &d2);
        assert!(apply(&mut g, &d2).is_none());
        assert_eq!(g.doc("d2").unwrap().to_entry(), GraphState::entry_of(&d2).unwrap());
    }

    #[test]
    fn support_is_counted_per_document() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d1", &[("a", "r", "b"), ("b", "r", "c")]));
        let c = apply(&mut g, &delta("d2", &[("a", "r", "b")])).unwrap();
        assert!(c.asserted.is_empty(), "a-r-b was live already: {c:?}");
        assert_eq!(c.entities_added, vec![("d2".to_string(), "D2".to_string())]);
        assert_eq!(g.triple("a", "r", "b").unwrap().support_count(), 2);
        assert_eq!(g.document_frequency("a"), 2);
        assert_eq!(g.document_frequency("c"), 1);
        // d1 withdrawn: a-r-b survives through d2, b-r-c and c disappear.
        let c = delete(&mut g, "d1").unwrap();
        assert_eq!(c.retracted, vec![key("b", "r", "c")]);
        let mut removed: Vec<_> = c.entities_removed.iter().map(|e| e.0.as_str()).collect();
        removed.sort();
        assert_eq!(removed, vec!["c", "d1"]);
        assert_eq!(g.triple("a", "r", "b").unwrap().support().collect::<Vec<_>>(), vec!["d2"]);
        assert!(g.entity("c").is_none());
        assert_eq!(g.entity_count(), 3); // a, b, d2
        assert_eq!(g.neighbours("b").collect::<Vec<_>>(), vec![("a", 1)]);
        assert_eq!(g.neighbours("c").count(), 0);
        assert_eq!(g.incident("b").collect::<Vec<_>>(), vec![("a", "r", "b")]);
        assert!(delete(&mut g, "never-seen").is_none());
    }

    #[test]
    fn the_written_case_of_a_name_follows_its_documents() {
        // A document naming "film" as `name` (and its own title entity).
        let naming = |doc: &str, name: &str| {
            let mut d = delta(doc, &[("film", "r", doc)]);
            d.triples[0].subject = name.into();
            d
        };
        // The count the graph keeps, against one made from every live document's name.
        let recount = |g: &GraphState| {
            let e = g.entity("film").unwrap();
            let lower = e.names().filter(|n| written_case(n) > 0).count();
            let upper = e.names().filter(|n| written_case(n) < 0).count();
            assert_eq!(e.written_lower_case(), lower > upper, "kept count against a recount");
            e.written_lower_case()
        };
        let mut g = GraphState::new();
        apply(&mut g, &naming("a", "Film"));
        assert!(!recount(&g), "one capital");
        apply(&mut g, &naming("b", "film"));
        assert!(!recount(&g), "a tie is no concept");
        apply(&mut g, &naming("c", "film"));
        assert!(recount(&g), "two lower case against one capital");
        apply(&mut g, &naming("c", "FILM"));
        assert!(!recount(&g), "an update that writes it with a capital");
        apply(&mut g, &naming("a", "film"));
        assert!(recount(&g));
        delete(&mut g, "a");
        delete(&mut g, "b");
        assert!(!recount(&g), "deletes take their names away");
        delete(&mut g, "c");
        assert!(g.entity("film").is_none());
        apply(&mut g, &naming("d", "film"));
        assert!(recount(&g), "a new entity starts from nothing");
    }

    #[test]
    fn names_come_from_the_smallest_document_whatever_the_order() {
        let (x, y) = (delta("x", &[("a", "r", "b")]), delta("y", &[("a", "r", "c")]));
        let mut g1 = GraphState::new();
        apply(&mut g1, &y);
        assert_eq!(g1.entity("a").unwrap().name(), "A in y");
        apply(&mut g1, &x);
        let mut g2 = GraphState::new();
        apply(&mut g2, &x);
        apply(&mut g2, &y);
        assert_eq!(g1.entity("a").unwrap().name(), "A in x");
        assert_eq!(g1.stats(), g2.stats());
        assert!(g1.entities_with_word("x").contains(&"a"));
        // the naming document goes: the name (and the word index) follows the next one
        delete(&mut g1, "x");
        assert_eq!(g1.entity("a").unwrap().name(), "A in y");
        assert!(!g1.entities_with_word("x").contains(&"a"));
        assert!(g1.entities_with_word("y").contains(&"a"));
    }

    /// Everything a reader can see of a graph, in one comparable form: the digest's content
    /// and what it leaves out (neighbours, incident triples, the word index, support order free).
    fn observed(g: &GraphState) -> (GraphStats, Vec<String>) {
        let mut seen = Vec::new();
        for e in g.entities() {
            let mut nb: Vec<_> = g.neighbours(e.id()).collect();
            nb.sort();
            let mut inc: Vec<_> = g.incident(e.id()).collect();
            inc.sort();
            // the neighbour counts are the incident triples counted per other end
            let mut counted: BTreeMap<&str, u32> = BTreeMap::new();
            for (s, _, o) in &inc {
                *counted.entry(if *s == e.id() { o } else { s }).or_default() += 1;
            }
            assert_eq!(nb, counted.into_iter().collect::<Vec<_>>(), "neighbours of {} against its incident triples", e.id());
            for w in words(&normalize(e.name())) {
                assert!(g.entities_with_word(w).contains(&e.id()), "{} indexed by {w}", e.id());
            }
            seen.push(format!("{} {:?} {:?} {}", e.id(), nb, inc, e.neighbour_count()));
        }
        for t in g.triples() {
            let mut docs: Vec<_> = t.support().collect();
            docs.sort();
            seen.push(format!("{:?} {docs:?}", t.key()));
        }
        let mut words_seen: Vec<String> = g.words.iter().map(|(w, v)| {
            let mut ids: Vec<_> = v.iter().map(|e| &*g.ents.at(e).id).collect();
            ids.sort();
            format!("{w} {ids:?}")
        }).collect();
        seen.append(&mut words_seen);
        seen.sort();
        (g.stats(), seen)
    }

    #[test]
    fn random_updates_and_deletes_leave_what_a_fresh_build_gives() {
        // Few entities and relations, so that triples gain and lose several supporting
        // documents, entities their neighbours, and words their entities, many times over.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // every subject's name has the word "in" ("E7 in d3"): its entities cross the line
        // between an inline list and a set both ways
        let mut ents: Vec<String> = (0..60).map(|i| format!("e{i}")).collect();
        ents.extend(["new york", "york", "a b", "a"].map(String::from));
        let mut g = GraphState::new();
        let mut live: BTreeMap<String, GraphDelta> = BTreeMap::new();
        let (mut many, mut back) = (false, false);
        for step in 0..3000 {
            let doc = format!("d{}", next(12));
            if next(4) == 0 {
                delete(&mut g, &doc);
                live.remove(&doc);
            } else {
                let n = next(9) as usize;
                let e = |k: u64| ents[k as usize].as_str();
                let ts: Vec<(&str, &str, &str)> = (0..n).map(|_| (e(next(64)), ["r", "s", "t"][next(3) as usize], e(next(64)))).collect();
                let d = delta(&doc, &ts);
                apply(&mut g, &d);
                live.insert(doc, d);
            }
            let is_set = matches!(g.words.get("in"), Some(WordEntities::Many(_)));
            back |= many && !is_set;
            many |= is_set;
            if step % 50 == 49 {
                let mut fresh = GraphState::new();
                for d in live.values().rev() {
                    apply(&mut fresh, d);
                }
                let (a, b) = (observed(&g), observed(&fresh));
                assert_eq!(a.0.digest, b.0.digest, "step {step}");
                assert_eq!(a.1, b.1, "step {step}");
            }
        }
        assert!(g.pool.len() > 0, "some triple had several supporting documents");
        assert!(many && back, "a word's entities went into a set and back");
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
        assert_eq!(g.doc("d1").unwrap().to_entry(), GraphState::entry_of(&v2).unwrap());
    }

    #[test]
    fn a_clone_is_untouched_by_later_writes() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d1", &[("a", "r", "b")]));
        let before = g.clone();
        let digest = before.stats().digest;
        apply(&mut g, &delta("d2", &[("b", "r", "c")]));
        delete(&mut g, "d1");
        assert_eq!(before.stats().digest, digest);
        assert!(before.entity("a").is_some() && g.entity("a").is_none());
    }

    #[test]
    fn self_loops_and_parallel_relations() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("d", &[("a", "likes", "a"), ("a", "r1", "b"), ("a", "R1 ", "b"), ("b", "r2", "a")]));
        assert_eq!(g.triple_count(), 3); // "R1 " canonicalises to "r1"
        let nb: BTreeMap<_, _> = g.neighbours("a").collect();
        assert_eq!(nb["b"], 2);
        assert_eq!(nb["a"], 1);
        let mut inc: Vec<_> = g.incident("a").collect();
        inc.sort();
        assert_eq!(inc, vec![("a", "likes", "a"), ("a", "r1", "b"), ("b", "r2", "a")]);
        assert_eq!(g.incident("b").count(), 2);
        delete(&mut g, "d");
        assert_eq!(g.incident("a").count(), 0);
        assert_eq!(g.stats().triples, 0);
        assert_eq!(g.neighbours("a").count(), 0);
        assert!(g.entities_with_word("a").is_empty());
        assert_eq!(g.entity_count(), 0);
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
