//! The resolve stage: mentions -> canonical entity ids. The id of a name is its normalised
//! form ([`crate::normalize::normalize`]), stable across runs and processes. With an
//! [`EntityResolver`] a name never seen before joins an existing entity only when the two are
//! the same name ([`name_key`]); otherwise it is embedded (all-MiniLM-L6-v2) and becomes its
//! own entity with synonym links to the entities it probably also names (cosine >= 0.8, as
//! HippoRAG's synonym edges; found with an HNSW index, so resolving a name costs about
//! log(entities)), and to the other forms of its name ("X (film)", "X, Duke of Y" and "X"). A
//! merge shows in the graph delta as an entity ref whose id is not its name's normalised form.
//! With or without a resolver, a document that states an alias ("also known as") carries a link
//! between the two names ([`stated_links`]).

use std::collections::{BTreeMap, HashMap};

use streamrag_glm::SentenceEncoder;
use streamrag_schemas::{decode, encode, EntityLink, EntityRef, Extraction, GraphDelta, ResolvedTriple, SCHEMA_VERSION};

use crate::ann::{Hnsw, HnswParams};
use crate::config::Topics;
use crate::error::StageFault;
use crate::stages::{BuildError, ResolveConfig, Shared};
use crate::normalize::{is_alias_relation, normalize};
use crate::runtime::{blocking, Operator, Outcome};
use crate::transport::{Output, Record};

/// The canonical id of an entity name; empty when the name has no letters or digits.
pub fn entity_id(name: &str) -> String {
    normalize(name)
}

/// Resolves an extraction into a graph delta, each name's id being its normalised form.
/// Triples with an unnamable end are dropped.
pub fn resolve(ex: &Extraction) -> GraphDelta {
    resolve_with(ex, &|id: &str| id.to_string())
}

/// [`resolve`] with `canonical` mapping each normalised name to its entity's id.
pub fn resolve_with(ex: &Extraction, canonical: &dyn Fn(&str) -> String) -> GraphDelta {
    let mut entities: BTreeMap<String, String> = BTreeMap::new();
    let mut order = Vec::new();
    // The entity id of a name (empty when it has none), recording the first name used for it.
    fn add(entities: &mut BTreeMap<String, String>, order: &mut Vec<String>, canonical: &dyn Fn(&str) -> String, name: &str) -> String {
        let norm = entity_id(name);
        if norm.is_empty() {
            return norm;
        }
        let id = canonical(&norm);
        if !entities.contains_key(&id) {
            entities.insert(id.clone(), name.trim().to_string());
            order.push(id.clone());
        }
        id
    }
    for m in &ex.entities {
        add(&mut entities, &mut order, canonical, &m.name);
    }
    let mut triples = Vec::new();
    for t in &ex.triples {
        let s = add(&mut entities, &mut order, canonical, &t.subject);
        let o = add(&mut entities, &mut order, canonical, &t.object);
        if s.is_empty() || o.is_empty() || t.relation.trim().is_empty() {
            continue;
        }
        triples.push(ResolvedTriple {
            subject: entities[&s].clone(),
            subject_id: s,
            relation: t.relation.trim().to_string(),
            object: entities[&o].clone(),
            object_id: o,
        });
    }
    GraphDelta {
        access: ex.access.clone(),
        schema_version: SCHEMA_VERSION,
        op: ex.op,
        doc_id: ex.doc_id.clone(),
        title: ex.title.clone(),
        entities: order.into_iter().map(|id| EntityRef { name: entities[&id].clone(), id }).collect(),
        links: stated_links(&triples),
        triples,
        source: ex.source.clone(),
    }
}

/// The synonym links a document states: one for each of its facts whose relation says that its
/// two ends name one thing ("Frederick I, Holy Roman Emperor" "also known as" "Frederick
/// Barbarossa"; [`is_alias_relation`]), between two different entities, at confidence 1. The
/// document carries them, so they go with it when it is deleted or no longer says so; no model
/// is needed, so they are made with entity resolution off too.
pub fn stated_links(triples: &[ResolvedTriple]) -> Vec<EntityLink> {
    let mut out: Vec<EntityLink> = Vec::new();
    for t in triples.iter().filter(|t| t.subject_id != t.object_id && is_alias_relation(&t.relation)) {
        if !out.iter().any(|l| joins(l, &t.subject_id, &t.object_id)) {
            out.push(EntityLink { id: t.subject_id.clone(), to_id: t.object_id.clone(), confidence: 1.0 });
        }
    }
    out
}

/// Whether a link joins `a` and `b`, either way round.
fn joins(l: &EntityLink, a: &str, b: &str) -> bool {
    (l.id == a && l.to_id == b) || (l.id == b && l.to_id == a)
}

/// The numbers of a normalised name, its digit runs and its regnal numbers after the first word
/// ("louis xiv" -> 14): names whose numbers differ ("apollo 11" / "apollo 13", "1961" / "1962",
/// "henry ii" / "henry iii") are different things however close their embeddings are.
fn numbers(norm: &str) -> Vec<String> {
    // digits as the number they write ("011" is 11), of any length
    let digits = norm.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| match s.trim_start_matches('0') {
        "" => "0".to_string(),
        t => t.to_string(),
    });
    let regnal = crate::normalize::words(norm).skip(1).filter_map(roman).map(|n| n.to_string());
    let mut v: Vec<String> = digits.chain(regnal).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The value of a Roman numeral written in canonical form, in lower case, up to 39 ("ii",
/// "xiv"); None for any other word ("vix", "iiii", "civil").
fn roman(w: &str) -> Option<u64> {
    const TENS: [&str; 4] = ["", "x", "xx", "xxx"];
    const UNITS: [&str; 10] = ["", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix"];
    if w.is_empty() || w.len() > 7 {
        return None;
    }
    let t = TENS.iter().rposition(|p| w.starts_with(p))?;
    let u = UNITS.iter().position(|p| *p == &w[TENS[t].len()..])?;
    Some((t * 10 + u) as u64)
}

/// One set of numbers contains the other.
fn numbers_compatible(a: &str, b: &str) -> bool {
    let (na, nb) = (numbers(a), numbers(b));
    let (small, large) = if na.len() <= nb.len() { (na, nb) } else { (nb, na) };
    small.iter().all(|x| large.contains(x))
}

/// The generation a normalised name states: "junior" ("jr"), "senior" ("sr"), or none.
fn generation(norm: &str) -> Option<&str> {
    crate::normalize::words(norm).map(spelled_out).find(|w| is_generation(w))
}

/// Whether a word spelled out ([`spelled_out`]) states a generation.
fn is_generation(w: &str) -> bool {
    matches!(w, "junior" | "senior")
}

/// Whether two normalised names may name one person by their qualifiers: the same generation
/// ("John Middleton Murry" is not "John Middleton Murry Jr"), and, when both write a middle name
/// between the same first and last names, the fewer middle names found in order among the
/// others, an initial agreeing with a word it begins ("Theodore Dwight Woolsey" is not
/// "Theodore Salisbury Woolsey"; "John F Kennedy" may be "John Fitzgerald Kennedy").
fn qualifiers_agree(a: &str, b: &str) -> bool {
    if generation(a) != generation(b) {
        return false;
    }
    fn plain(n: &str) -> Vec<&str> {
        crate::normalize::words(n).filter(|w| !is_generation(spelled_out(w))).collect()
    }
    let (wa, wb) = (plain(a), plain(b));
    if wa.len() < 3 || wb.len() < 3 || wa[0] != wb[0] || wa[wa.len() - 1] != wb[wb.len() - 1] {
        return true;
    }
    let (ma, mb) = (&wa[1..wa.len() - 1], &wb[1..wb.len() - 1]);
    let (short, long) = if ma.len() <= mb.len() { (ma, mb) } else { (mb, ma) };
    // the fewer middle names each stand, in order, for one of the others (a full name writes
    // more of them: "Juan Manuel de Rosas", "Juan Manuel Jose Ortiz de Rosas")
    let same = |x: &str, y: &str| x == y || (x.len() == 1 && y.starts_with(x)) || (y.len() == 1 && x.starts_with(y));
    let mut rest = long.iter();
    short.iter().all(|x| rest.any(|y| same(x, y)))
}

/// The form under which two names are the same name, so that joining them needs no other
/// evidence: the normalised name with "jr", "sr" and "st" written out ("Martin Luther King
/// Jr." and "Martin Luther King Junior"). Articles stay: "Outlaw Express" and "The Outlaw
/// Express" are two films. "Barack H. Obama" and "Barack Obama" differ too: a middle initial can
/// part two people (George Bush, George W. Bush). Empty when nothing is left.
pub fn name_key(norm: &str) -> String {
    crate::normalize::words(norm).map(spelled_out).collect::<Vec<_>>().join(" ")
}

/// A normalised word with "jr", "sr" and "st" written out.
fn spelled_out(w: &str) -> &str {
    match w {
        "jr" => "junior",
        "sr" => "senior",
        "st" => "saint",
        w => w,
    }
}

/// The normalised name a qualified name is built on, for a name that has one: without its
/// parenthesised qualifier ("David Bradley (director)" -> "david bradley"), or before the comma
/// of a styled title ("Siemowit IV, Duke of Masovia" -> "siemowit iv",
/// [`crate::normalize::styled_base`]).
fn base_of(name: &str) -> Option<String> {
    crate::normalize::unqualified(name).or_else(|| crate::normalize::styled_base(name)).map(normalize).filter(|b| !b.is_empty())
}

/// The store key of an index node's links (sorted as the nodes are).
fn node_key(i: u32) -> Vec<u8> {
    format!("h\0{i:08x}").into_bytes()
}

/// Opens (or creates) the resolver's decision store under `dir`.
pub fn open_store(dir: &std::path::Path) -> Result<sled::Tree, sled::Error> {
    sled::open(dir)?.open_tree("decisions")
}

/// What resolving one name did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Seen before (this normalised form): no embedding, no search.
    Known,
    /// A new entity, like no other.
    New,
    /// A new entity with synonym links to existing ones (see [`EntityResolver::links`]).
    Linked,
    /// Joined an existing entity: the two are the same name ([`name_key`]).
    Merged,
}

/// A synonym link: the entity a name probably also names, and how sure (the cosine of the two
/// names' embeddings).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Link {
    pub to: String,
    pub confidence: f32,
}

/// A name never seen before, ready to decide: its normalised form, its base when it is
/// qualified ([`base_of`]) and its unit embedding.
#[derive(Debug, Clone)]
pub struct NewName {
    pub norm: String,
    pub base: Option<String>,
    pub vector: Vec<f32>,
}

impl NewName {
    pub fn new(name: &str, vector: Vec<f32>) -> Self {
        NewName { norm: normalize(name), base: base_of(name), vector }
    }
}

/// Why the entity resolver failed.
#[derive(Debug, thiserror::Error)]
pub enum ResolverError {
    #[error("entity resolver store: {0}")]
    Store(#[from] sled::Error),
    #[error("entity resolver store: {0}")]
    Corrupt(String),
    #[error("entity resolver model: {0}")]
    Model(#[from] streamrag_glm::Error),
}

/// Most links one name keeps.
const MAX_LINKS: usize = 3;

/// Entity resolution with bounded cost per name and two outcomes. A new name joins an
/// existing entity only when the two are the same name ([`name_key`]): a merge cannot be taken
/// back, so it needs evidence no document can withdraw. Otherwise it becomes its own entity,
/// linked to the entities it probably also names: the nearest by embedding at or above the
/// threshold whose numbers agree, and the bare name and its qualified forms ("David Bradley",
/// "David Bradley (director)") unless two different qualifiers part them. Decisions persist in
/// a sled tree, with the index's links in the same batches, and are read back at start (the
/// index is not rebuilt).
pub struct EntityResolver {
    encoder: SentenceEncoder,
    pub threshold: f32,
    /// Normalised name -> canonical id, for every name ever resolved.
    names: HashMap<String, String>,
    /// [`name_key`] -> entity id.
    keys: HashMap<String, String>,
    /// Entity id -> HNSW node.
    node_of: HashMap<String, u32>,
    /// Qualified entity id -> its base; base -> the qualified entities with it.
    base: HashMap<String, String>,
    qualified: HashMap<String, Vec<String>>,
    /// Entity id -> its synonym links (see [`Self::link_candidates`]).
    links: HashMap<String, Vec<Link>>,
    /// HNSW node -> canonical id.
    nodes: Vec<String>,
    index: Hnsw,
    store: Option<sled::Tree>,
}

impl EntityResolver {
    /// `store`: where decisions persist (`None`: memory only).
    pub fn open(mut encoder: SentenceEncoder, threshold: f32, store: Option<sled::Tree>) -> Result<Self, ResolverError> {
        // Names are a few tokens long: larger batches than passages.
        encoder.batch_size = encoder.batch_size.max(64);
        let dim = encoder.dim();
        let mut r = EntityResolver {
            encoder,
            threshold,
            names: HashMap::new(),
            keys: HashMap::new(),
            node_of: HashMap::new(),
            base: HashMap::new(),
            qualified: HashMap::new(),
            links: HashMap::new(),
            nodes: Vec::new(),
            index: Hnsw::new(dim, HnswParams::default()),
            store,
        };
        let Some(tree) = r.store.clone() else { return Ok(r) };
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        for kv in tree.scan_prefix(b"n\0") {
            let (k, v) = kv?;
            r.names.insert(text(&k[2..]), text(&v));
        }
        for kv in tree.scan_prefix(b"q\0") {
            let (k, v) = kv?;
            r.add_base(text(&k[2..]), text(&v));
        }
        for kv in tree.scan_prefix(b"l\0") {
            let (k, v) = kv?;
            let links: Vec<Link> = serde_json::from_slice(&v).map_err(|e| ResolverError::Corrupt(format!("the links of {:?}: {e}", text(&k[2..]))))?;
            r.links.insert(text(&k[2..]), links);
        }
        // Vectors in insertion order (the key is a sequence number), and the index's links as
        // last written: the index is the one the decisions were made with, read, not rebuilt.
        let mut ids = Vec::new();
        let mut vectors: Vec<f32> = Vec::new();
        for kv in tree.scan_prefix(b"v\0") {
            let (_, v) = kv?;
            let cut = v.iter().position(|&b| b == 0).ok_or_else(|| ResolverError::Corrupt("a stored vector has no name".into()))?;
            ids.push(text(&v[..cut]));
            let before = vectors.len();
            vectors.extend(v[cut + 1..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
            if vectors.len() - before != dim {
                return Err(ResolverError::Corrupt(format!("a stored vector has {} floats, the encoder makes {dim}", vectors.len() - before)));
            }
        }
        let links: Vec<sled::IVec> = tree.scan_prefix(b"h\0").values().collect::<Result<_, _>>()?;
        let state = tree.get(b"s\0hnsw")?;
        match state.filter(|_| links.len() == ids.len()) {
            Some(state) => {
                let nodes: Vec<&[u8]> = links.iter().map(|l| l.as_ref()).collect();
                r.index = Hnsw::restore(dim, HnswParams::default(), vectors, &nodes, &state).map_err(|e| ResolverError::Corrupt(format!("the name index: {e}")))?;
                for id in ids {
                    r.add_node(id);
                }
            }
            None => {
                // A store from before the index was kept: rebuild it once, and keep it.
                let mut batch = sled::Batch::default();
                for (id, v) in ids.into_iter().zip(vectors.chunks_exact(dim)) {
                    r.index.insert(v);
                    r.add_node(id);
                }
                for i in 0..r.index.len() as u32 {
                    batch.insert(node_key(i), r.index.node_bytes(i));
                }
                batch.insert(b"s\0hnsw".to_vec(), r.index.state_bytes());
                tree.apply_batch(batch)?;
            }
        }
        Ok(r)
    }

    /// Records the entity of the index's newest node.
    fn add_node(&mut self, id: String) {
        let node = self.nodes.len() as u32;
        self.keys.entry(name_key(&id)).or_insert_with(|| id.clone());
        self.node_of.insert(id.clone(), node);
        self.nodes.push(id);
    }

    fn add_base(&mut self, id: String, base: String) {
        self.qualified.entry(base.clone()).or_default().push(id.clone());
        self.base.insert(id, base);
    }

    pub fn entities(&self) -> usize {
        self.nodes.len()
    }

    /// The canonical id of a normalised name already resolved.
    pub fn canonical(&self, norm: &str) -> Option<&str> {
        self.names.get(norm).map(|s| s.as_str())
    }

    /// The synonym links of an entity: its name's other forms, then its nearest, each best first.
    pub fn links(&self, id: &str) -> &[Link] {
        self.links.get(id).map(Vec::as_slice).unwrap_or_default()
    }

    pub fn encoder(&self) -> &SentenceEncoder {
        &self.encoder
    }

    /// The entity a new name would join: one already known under the same [`name_key`].
    pub fn same_name(&self, norm: &str) -> Option<&str> {
        let key = name_key(norm);
        (!key.is_empty()).then(|| self.keys.get(&key)).flatten().map(String::as_str)
    }

    /// The most similar of the `k` nearest entities at or above the threshold whose numbers
    /// and qualifiers agree ([`qualifiers_agree`]), most similar first. `exact` searches every entity instead of the index (the
    /// baseline).
    pub fn nearest(&self, norm: &str, v: &[f32], k: usize, exact: bool) -> Vec<(String, f32)> {
        let found = if exact { self.index.search_exact(v, k) } else { self.index.search(v, k) };
        found
            .into_iter()
            .filter(|&(_, sim)| sim >= self.threshold)
            .map(|(node, sim)| (self.nodes[node as usize].clone(), sim))
            .filter(|(c, _)| c != norm && numbers_compatible(norm, c) && qualifiers_agree(norm, c))
            .collect()
    }

    /// The links a new name would get (before it is added): the bare and qualified forms of its
    /// name ([`base_of`]), then its nearest entities unless two different qualifiers part them;
    /// at most [`MAX_LINKS`], so a form is never crowded out by a name that only embeds near.
    pub fn link_candidates(&self, name: &NewName) -> Vec<Link> {
        let cos = |id: &str| self.node_of.get(id).map(|&n| self.index.vector(n).iter().zip(&name.vector).map(|(a, b)| a * b).sum::<f32>()).unwrap_or(0.0);
        let parted = |id: &str| matches!((&name.base, self.base.get(id)), (Some(a), Some(b)) if a == b);
        // the bare and qualified forms first (the names' form is the evidence, whatever their
        // cosine), then the nearest by embedding; each part most similar first
        let mut forms: Vec<Link> = Vec::new();
        if let Some(id) = name.base.as_deref().and_then(|b| self.names.get(b)) {
            forms.push(Link { to: id.clone(), confidence: cos(id) });
        }
        for id in self.qualified.get(&name.norm).into_iter().flatten() {
            forms.push(Link { to: id.clone(), confidence: cos(id) });
        }
        let mut near: Vec<Link> = self.nearest(&name.norm, &name.vector, 5, false).into_iter().filter(|(id, _)| !parted(id)).map(|(to, confidence)| Link { to, confidence }).collect();
        let mut out: Vec<Link> = Vec::new();
        for part in [&mut forms, &mut near] {
            part.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
            for l in part.drain(..) {
                if l.to != name.norm && !out.iter().any(|o| o.to == l.to) {
                    out.push(l);
                }
            }
        }
        out.truncate(MAX_LINKS);
        out
    }

    /// Resolves names (in order: a later name can join an earlier new one); returns each
    /// one's canonical id and what happened. New names are embedded together.
    pub fn resolve_names(&mut self, names: &[&str]) -> Result<Vec<(String, Resolution)>, ResolverError> {
        let norms: Vec<String> = names.iter().map(|n| normalize(n)).collect();
        let mut fresh: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, n) in norms.iter().enumerate() {
            if !n.is_empty() && !self.names.contains_key(n) && seen.insert(n.as_str()) {
                fresh.push(i);
            }
        }
        let texts: Vec<&str> = fresh.iter().map(|&i| names[i].trim()).collect();
        let vectors = if texts.is_empty() { Vec::new() } else { self.encoder.embed_vecs(&texts)? };
        let embedded: Vec<NewName> = texts.iter().zip(vectors).map(|(t, v)| NewName::new(t, v)).collect();
        let how = self.resolve_embedded(&embedded)?;
        // The first occurrence of a new name says what happened; repeats are then known.
        let mut outcome: HashMap<&str, Resolution> = embedded.iter().map(|n| n.norm.as_str()).zip(how).collect();
        Ok(norms
            .iter()
            .map(|n| {
                let id = self.names.get(n).cloned().unwrap_or_default();
                (id, outcome.remove(n.as_str()).unwrap_or(Resolution::Known))
            })
            .collect())
    }

    /// The graph delta of an extraction whose names were all resolved ([`Self::resolve_names`]):
    /// their entities' ids, the links it states ([`stated_links`]), and the links decided for
    /// every entity it names. Every document that names a linked entity carries its links, so
    /// the graph keeps a link while one of them lives.
    pub fn delta(&self, ex: &Extraction) -> GraphDelta {
        let mut delta = resolve_with(ex, &|norm: &str| self.canonical(norm).unwrap_or(norm).to_string());
        let decided: Vec<EntityLink> = delta
            .entities
            .iter()
            .flat_map(|e| self.links(&e.id).iter().map(|l| EntityLink { id: e.id.clone(), to_id: l.to.clone(), confidence: l.confidence }))
            .collect();
        // what the document states first; a decided link between the same two is then redundant
        for l in decided {
            if !delta.links.iter().any(|s| joins(s, &l.id, &l.to_id)) {
                delta.links.push(l);
            }
        }
        delta
    }

    /// The names an extraction gives, as [`Self::resolve_names`] takes them.
    pub fn names_of(ex: &Extraction) -> impl Iterator<Item = &str> {
        ex.entities.iter().map(|m| m.name.as_str()).chain(ex.triples.iter().flat_map(|t| [t.subject.as_str(), t.object.as_str()]))
    }

    /// Decides new names already embedded, in order, and stores the decisions in one atomic
    /// batch.
    pub fn resolve_embedded(&mut self, items: &[NewName]) -> Result<Vec<Resolution>, ResolverError> {
        let mut batch = sled::Batch::default();
        let mut touched: std::collections::BTreeSet<u32> = Default::default();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let norm = &item.norm;
            if norm.is_empty() || self.names.contains_key(norm) {
                out.push(Resolution::Known);
                continue;
            }
            let (id, how) = match self.same_name(norm).map(str::to_string) {
                Some(c) => (c, Resolution::Merged),
                None => {
                    let links = self.link_candidates(item);
                    let mut val = norm.as_bytes().to_vec();
                    val.push(0);
                    val.extend(item.vector.iter().flat_map(|x| x.to_le_bytes()));
                    batch.insert(format!("v\0{:016x}", self.nodes.len()).into_bytes(), val);
                    touched.extend(self.index.insert_tracked(&item.vector).1);
                    self.add_node(norm.clone());
                    if let Some(b) = &item.base {
                        batch.insert(format!("q\0{norm}").into_bytes(), b.as_bytes());
                        self.add_base(norm.clone(), b.clone());
                    }
                    let how = if links.is_empty() {
                        Resolution::New
                    } else {
                        batch.insert(format!("l\0{norm}").into_bytes(), serde_json::to_vec(&links).expect("links serialise"));
                        self.links.insert(norm.clone(), links);
                        Resolution::Linked
                    };
                    (norm.clone(), how)
                }
            };
            batch.insert(format!("n\0{norm}").into_bytes(), id.as_bytes());
            self.names.insert(norm.clone(), id);
            out.push(how);
        }
        if let Some(tree) = &self.store {
            // The index's links as they now are, in the same batch as the decisions.
            for &i in &touched {
                batch.insert(node_key(i), self.index.node_bytes(i));
            }
            if !touched.is_empty() {
                batch.insert(b"s\0hnsw".to_vec(), self.index.state_bytes());
            }
            tree.apply_batch(batch)?;
        }
        Ok(out)
    }
}

pub struct Resolve {
    pub topics: Topics,
    /// Embedding-based merging; `None` resolves by normalised name only.
    pub resolver: Option<EntityResolver>,
}

impl Resolve {
    /// Builds the stage from its section: by normalised name, or by name embeddings with the
    /// decisions kept under the data directory.
    pub async fn build(cfg: &ResolveConfig, shared: &Shared) -> Result<Self, BuildError> {
        let resolver = match &cfg.model {
            None => None,
            Some(model) => {
                let (model, threshold, tree) = (model.clone(), cfg.threshold, shared.data.open_resolver()?);
                let r = tokio::task::spawn_blocking(move || -> Result<EntityResolver, BuildError> {
                    let enc = SentenceEncoder::load(&model, &streamrag_glm::device::default_device())
                        .map_err(|source| BuildError::Model { what: format!("the sentence encoder {}", model.display()), source })?;
                    Ok(EntityResolver::open(enc, threshold, Some(tree))?)
                })
                .await??;
                tracing::info!(entities = r.entities(), threshold, "entity resolution by name embeddings");
                Some(r)
            }
        };
        Ok(Resolve { topics: shared.topics.clone(), resolver })
    }
}

impl Operator for Resolve {
    fn name(&self) -> &'static str {
        "resolve"
    }
    fn input(&self) -> String {
        self.topics.triples.clone()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        let decoded: Vec<Result<Extraction, _>> = batch.iter().map(|r| decode::<Extraction>(&r.payload)).collect();
        if let Some(resolver) = &mut self.resolver {
            let names: Vec<&str> = decoded.iter().flatten().flat_map(EntityResolver::names_of).collect();
            // The decisions are stored before the deltas go out, so a replay of this batch
            // after a crash finds every name known and resolves it the same way.
            blocking(|| resolver.resolve_names(&names))?;
        }
        let resolver = self.resolver.as_ref();
        Ok(decoded
            .into_iter()
            .map(|ex| {
                let delta = match resolver {
                    Some(r) => r.delta(&ex?),
                    None => resolve(&ex?),
                };
                Ok(vec![Output { topic: self.topics.graph_deltas.clone(), key: delta.doc_id.clone(), payload: encode(&delta) }])
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamrag_schemas::{Mention, SourceRef, Triple};

    #[test]
    fn variants_of_a_name_get_one_id() {
        let ex = Extraction {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: Default::default(),
            doc_id: "d".into(),
            title: "T".into(),
            entities: vec![Mention { name: "Ada  Lovelace".into(), kind: None }],
            triples: vec![
                Triple { subject: "ada lovelace".into(), relation: " born in ".into(), object: "London,".into() },
                Triple { subject: "ADA LOVELACE".into(), relation: "r".into(), object: "!!".into() },
            ],
            extractor: "builtin".into(),
            source: SourceRef { topic: "t".into(), partition: 0, offset: 1, timestamp_ms: None },
        };
        let d = resolve(&ex);
        assert_eq!(d.entities.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), vec!["ada lovelace", "london"]);
        assert_eq!(d.entities[0].name, "Ada  Lovelace");
        assert_eq!(d.triples.len(), 1, "the triple to a punctuation-only name is dropped");
        assert_eq!(d.triples[0].relation, "born in");
        assert_eq!(d.triples[0].object_id, "london");
        assert_eq!(resolve(&ex), d, "deterministic");
    }

    #[test]
    fn a_document_that_says_two_names_are_one_carries_a_link_between_them() {
        let ex = |triples: Vec<Triple>| Extraction {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: Default::default(),
            doc_id: "d".into(),
            title: "Frederick I, Holy Roman Emperor".into(),
            entities: vec![],
            triples,
            extractor: "builtin".into(),
            source: SourceRef { topic: "t".into(), partition: 0, offset: 1, timestamp_ms: None },
        };
        let t = |s: &str, r: &str, o: &str| Triple { subject: s.into(), relation: r.into(), object: o.into() };
        let stating = ex(vec![
            t("Frederick I, Holy Roman Emperor", "also known as", "Frederick Barbarossa"),
            t("Frederick Barbarossa", "better known as", "Frederick I, Holy Roman Emperor"),
            t("Frederick I, Holy Roman Emperor", "was the son of", "Frederick II, Duke of Swabia"),
            t("Barbarossa", "known as", "barbarossa"),
        ]);
        let d = resolve(&stating);
        let links: Vec<(&str, &str, f32)> = d.links.iter().map(|l| (l.id.as_str(), l.to_id.as_str(), l.confidence)).collect();
        assert_eq!(links, vec![("frederick i holy roman emperor", "frederick barbarossa", 1.0)], "once either way round; not for other relations, nor to itself");
        let plain = resolve(&ex(vec![t("Frederick I, Holy Roman Emperor", "was the son of", "Frederick II, Duke of Swabia")]));
        assert!(plain.links.is_empty(), "a version that no longer says so carries none");
    }

    #[test]
    fn regnal_numbers_part_names_as_digits_do() {
        assert_eq!([roman("ii"), roman("xiv"), roman("xxxix"), roman("x"), roman("iv")], [Some(2), Some(14), Some(39), Some(10), Some(4)]);
        for w in ["", "iiii", "vix", "civil", "il", "xl", "mix", "vv"] {
            assert_eq!(roman(w), None, "{w}");
        }
        assert!(!numbers_compatible("henry ii of england", "henry iii of england"));
        assert!(!numbers_compatible("louis xiv", "louis xv"));
        assert!(!numbers_compatible("apollo 11", "apollo 13"));
        assert!(numbers_compatible("louis xiv", "louis xiv of france"));
        assert!(numbers_compatible("malcolm x", "malcolm"), "a number on one side only parts nothing");
        // the first word is a name, not a number: "Vi Hart", "Xi Jinping"
        assert!(numbers_compatible("vi hart", "xi hart"));
        assert!(!numbers_compatible("king george v", "king george vi"));
        assert!(numbers_compatible("apollo 11", "apollo 011"), "digits compare as numbers");
    }

    #[test]
    fn generations_and_middle_names_must_agree() {
        assert!(!qualifiers_agree("john middleton murry", "john middleton murry jr"));
        assert!(!qualifiers_agree("theodore salisbury woolsey jr", "theodore salisbury woolsey sr"));
        assert!(qualifiers_agree("martin luther king jr", "martin luther king junior"));
        assert!(!qualifiers_agree("theodore dwight woolsey", "theodore salisbury woolsey"));
        assert!(qualifiers_agree("john f kennedy", "john fitzgerald kennedy"));
        assert!(qualifiers_agree("george w bush", "george h w bush"), "a full name may write more middle names");
        assert!(qualifiers_agree("juan manuel de rosas", "juan manuel jose ortiz de rosas"));
        assert!(!qualifiers_agree("juan manuel de rosas", "juan jose de rosas"));
        assert!(qualifiers_agree("george bush", "george w bush"), "no middle name on one side parts nothing");
        assert!(qualifiers_agree("ruaidhri mac ruaidhri", "raghnall mac ruaidhri"), "first names differ: not this rule's to say");
    }

    #[test]
    fn the_same_name_is_spelled_out_and_keeps_its_articles() {
        assert_eq!(name_key("martin luther king jr"), name_key("martin luther king junior"));
        assert_eq!(name_key("st louis"), "saint louis");
        assert_ne!(name_key("outlaw express"), name_key("the outlaw express"));
        assert_ne!(name_key("barack h obama"), name_key("barack obama"));
        assert_eq!(base_of("David Bradley (director)").as_deref(), Some("david bradley"));
        assert_eq!(base_of("David Bradley"), None);
        assert_eq!(base_of("Bogislaw XIII, Duke of Pomerania").as_deref(), Some("bogislaw xiii"));
    }
}
