//! Standing queries: a question registered once (a record on the subscriptions topic, key =
//! its id) whose answer follows the graph. Every answer remembers what it depended on (its
//! documents, the entities of its seeds and facts, and the question's distinctive
//! words); a graph change is matched against that index, and only the subscriptions it can
//! affect are answered again. A new answer goes to the answers topic (key = the subscription
//! id, with its `reason`) only when its documents or its text changed.
//!
//! - [`Registry`]: the subscriptions, their latest answers and the dependency index; shared
//!   with the HTTP API (`GET /subscriptions/{id}`, the event stream).
//! - [`Standing`]: evaluation (the query stage's retriever and answerer on the live graph) and
//!   the store of the last published answers (`DATA/standing`), so a restart publishes only
//!   what changed while it was down.
//! - [`readers`]: the two operators that drive it, one reading the subscriptions topic from
//!   its start (every replica holds every subscription), one reading the graph changes.

mod owed;
pub mod readers;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streamrag_schemas::{encode, Answer, GraphChange, Query, SCHEMA_VERSION};
use tokio::sync::broadcast;

use crate::answer::text::STOP;
use crate::answer::Answerer;
use crate::config::Topics;
use crate::error::StageFault;
use crate::access::Reader;
use crate::graph::GraphState;
use crate::kg_writer::LiveGraph;
use crate::normalize::{normalize, words};
use crate::retrieve::Retriever;
use crate::runtime::Consumed;
use crate::transport::{Output, Transport};

/// A question word that names more entities than this is not distinctive: a new entity
/// bearing it does not make the question worth answering again.
const COMMON_WORD_ENTITIES: usize = 20;

/// An entity at the end of a supporting fact that more documents than this name is not a
/// dependency (the question's own seeds always are).
const COMMON_ENTITY_DOCUMENTS: usize = 20;

/// The longest name (in words) the question may write that the graph does not hold yet.
const NAME_WORDS: usize = 10;

/// How long an evaluation waits for the retriever's indexes (passages from the docs topic,
/// fact vectors from the graph changes) to read what their topics hold.
const INDEX_WAIT: Duration = Duration::from_secs(5);

/// After a graph change the answer is not held back by an index that embeds slower than
/// documents arrive: it waits this long, answers from what the graph and the indexes hold, and
/// answers again when the indexes have the change (reason `indexed <doc>`), up to
/// [`REFINE_WAIT`] later.
const QUICK_WAIT: Duration = Duration::from_millis(200);
const REFINE_WAIT: Duration = Duration::from_secs(300);

/// Owed answers made together (one retrieval batch), then published at once: small, so that
/// the first owed go out while the rest are made.
const CHUNK: usize = 16;

/// Index positions to reach: each index's position and the offsets it must reach.
type Marks = Vec<(Arc<dyn Fn() -> BTreeMap<i32, i64> + Send + Sync>, BTreeMap<i32, i64>)>;

/// Why the standing-query store failed.
#[derive(Debug, thiserror::Error)]
#[error("the standing-query store: {0}")]
pub struct StandingError(#[from] sled::Error);

impl From<StandingError> for StageFault {
    fn from(e: StandingError) -> Self {
        StageFault::Own { what: "standing queries", source: Box::new(e) }
    }
}

/// One standing query.
#[derive(Debug, Clone)]
struct Sub {
    question: String,
    top_k: Option<u32>,
    /// What its answers may be made from: what its registrar may read.
    reader: Reader,
    /// The dependency keys of its latest evaluation.
    keys: Vec<String>,
    /// The latest published answer.
    last: Option<Answer>,
}

#[derive(Default)]
struct Inner {
    subs: HashMap<String, Sub>,
    /// Dependency key -> the subscriptions whose latest answer depended on it.
    by_key: HashMap<String, HashSet<String>>,
}

impl Inner {
    fn unindex(&mut self, id: &str) {
        let Some(sub) = self.subs.get(id) else { return };
        for k in &sub.keys {
            if let Some(set) = self.by_key.get_mut(k) {
                set.remove(id);
                if set.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
    }

    fn index(&mut self, id: &str, keys: Vec<String>) {
        self.unindex(id);
        for k in &keys {
            self.by_key.entry(k.clone()).or_default().insert(id.to_string());
        }
        if let Some(sub) = self.subs.get_mut(id) {
            sub.keys = keys;
        }
    }
}

/// A subscription as `GET /subscriptions` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listed {
    pub subscription_id: String,
    pub question: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<String>>,
    /// Its latest answer; null until it has one.
    pub answer: Option<Answer>,
}

/// The standing queries this process holds, their latest answers and what each depended on.
pub struct Registry {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Answer>,
    subscriptions: Arc<AtomicI64>,
}

impl Default for Registry {
    fn default() -> Self {
        let m = crate::metrics::global();
        Registry {
            inner: Mutex::default(),
            events: broadcast::channel(1024).0,
            subscriptions: m.gauge("streamrag_standing_subscriptions", "Standing queries this process holds"),
        }
    }
}

impl Registry {
    /// `None`: no such subscription; `Some(None)`: registered, not answered yet.
    pub fn latest(&self, id: &str) -> Option<Option<Answer>> {
        self.inner.lock().expect("registry lock").subs.get(id).map(|s| s.last.clone())
    }

    /// The subscriptions, sorted by id, `limit` at most after `after` (exclusive), each with
    /// its question and latest answer.
    /// Only those whose answers `reader` may see ([`Reader::covers`]).
    pub fn list(&self, after: Option<&str>, limit: usize, reader: &Reader) -> Vec<Listed> {
        let inner = self.inner.lock().expect("registry lock");
        let mut ids: Vec<&String> = inner
            .subs
            .iter()
            .filter(|(id, s)| after.is_none_or(|a| id.as_str() > a) && reader.covers(&s.reader))
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        ids.into_iter()
            .take(limit)
            .map(|id| {
                let s = &inner.subs[id];
                Listed { subscription_id: id.clone(), question: s.question.clone(), top_k: s.top_k, access: s.reader.to_field(), answer: s.last.clone() }
            })
            .collect()
    }

    /// Every standing answer published from now on (subscribers filter by `query_id`).
    /// The labels a subscription's answers are made with (None: no such subscription).
    pub fn reader(&self, id: &str) -> Option<Reader> {
        self.inner.lock().expect("registry lock").subs.get(id).map(|s| s.reader.clone())
    }

    /// How many subscriptions `reader` may see.
    pub fn len_for(&self, reader: &Reader) -> usize {
        self.inner.lock().expect("registry lock").subs.values().filter(|s| reader.covers(&s.reader)).count()
    }

    pub fn events(&self) -> broadcast::Receiver<Answer> {
        self.events.subscribe()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("registry lock").subs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers (or changes) a subscription; the answer it had is kept when the question did
    /// not change.
    fn put(&self, id: &str, question: &str, top_k: Option<u32>, reader: Reader, last: Option<Answer>) {
        let mut inner = self.inner.lock().expect("registry lock");
        let keep = inner.subs.get(id).filter(|s| s.question == question && s.top_k == top_k && s.reader == reader).and_then(|s| s.last.clone());
        // an answer stored before the labels changed was made for other eyes: made again
        let last = keep.or(last.filter(|_| !inner.subs.get(id).is_some_and(|s| s.reader != reader))).filter(|a| a.question == question);
        inner.unindex(id);
        inner.subs.insert(id.to_string(), Sub { question: question.to_string(), top_k, reader, keys: Vec::new(), last });
        self.subscriptions.store(inner.subs.len() as i64, Relaxed);
    }

    fn remove(&self, id: &str) -> bool {
        let mut inner = self.inner.lock().expect("registry lock");
        inner.unindex(id);
        let had = inner.subs.remove(id).is_some();
        self.subscriptions.store(inner.subs.len() as i64, Relaxed);
        had
    }

    /// The subscriptions a graph change can affect (sorted).
    fn affected(&self, keys: &HashSet<String>) -> Vec<String> {
        let inner = self.inner.lock().expect("registry lock");
        let mut out: Vec<String> = keys.iter().filter_map(|k| inner.by_key.get(k)).flatten().cloned().collect::<HashSet<_>>().into_iter().collect();
        out.sort();
        out
    }

    fn query_of(&self, id: &str) -> Option<Query> {
        let inner = self.inner.lock().expect("registry lock");
        inner.subs.get(id).map(|s| Query { access: s.reader.to_field(), schema_version: SCHEMA_VERSION, query_id: id.to_string(), question: s.question.clone(), top_k: s.top_k })
    }
}

/// The dependency keys of an answer: its documents (`d:`), the entities of its seeds and facts
/// (`e:`), and the question's words that few entity names bear (`w:`).
pub fn answer_keys(g: &GraphState, a: &Answer) -> Vec<String> {
    let mut keys: HashSet<String> = HashSet::new();
    // the documents' own entities are not keys: a document naming a city would make every
    // change that names it reach the question (measured: bench subscriptions)
    keys.extend(a.documents.iter().map(|d| format!("d:{}", d.id)));
    let question = normalize(&a.question);
    let ws: Vec<&str> = words(&question).collect();
    let asked: HashSet<&str> = ws.iter().copied().collect();
    // the names the question writes always; the seeds its matched facts led to (a country, a
    // year) only where few documents name them, as the facts' ends below
    for s in &a.seeds {
        let s = normalize(s);
        if words(&s).all(|w| asked.contains(w)) || g.document_frequency(&s) <= COMMON_ENTITY_DOCUMENTS {
            keys.insert(format!("e:{s}"));
        }
    }
    // a fact's ends only where few documents name them: a year or a country at the end of a
    // supporting fact would make most changes reach the question
    for t in &a.triples {
        for end in [normalize(&t.subject), normalize(&t.object)] {
            if g.document_frequency(&end) <= COMMON_ENTITY_DOCUMENTS {
                keys.insert(format!("e:{end}"));
            }
        }
    }
    for &w in &asked {
        if w.len() > 2 && !STOP.contains(&w) && g.entities_with_word(w).len() <= COMMON_WORD_ENTITIES {
            keys.insert(format!("w:{w}"));
        }
    }
    // a name of common words the question writes that no entity bears yet ("Prince Ferdinand
    // of Bavaria"): the page that brings it reaches the question when that entity appears
    let content = |w: &str| !STOP.contains(&w);
    for i in (0..ws.len()).filter(|&i| content(ws[i])) {
        for j in (i + 1..ws.len().min(i + NAME_WORDS)).filter(|&j| content(ws[j])) {
            let name = ws[i..=j].join(" ");
            if g.entity(&name).is_none() {
                keys.insert(format!("e:{name}"));
            }
        }
    }
    keys.remove("e:");
    let mut keys: Vec<String> = keys.into_iter().collect();
    keys.sort();
    keys
}

/// The keys a graph change touches: its document, the entities of the facts that appeared or
/// died and of the entities that appeared or died, every entity the document now names, and
/// the words of new entities' names.
pub fn change_keys(g: &GraphState, c: &GraphChange) -> HashSet<String> {
    let mut keys = HashSet::new();
    keys.insert(format!("d:{}", c.doc_id));
    for t in c.asserted.iter().chain(&c.retracted) {
        keys.insert(format!("e:{}", t.subject_id));
        keys.insert(format!("e:{}", t.object_id));
    }
    for e in c.entities_added.iter().chain(&c.entities_removed) {
        keys.insert(format!("e:{}", e.id));
    }
    for e in &c.entities_added {
        keys.extend(words(&e.id).map(|w| format!("w:{w}")));
    }
    if let Some(doc) = g.doc(&c.doc_id) {
        keys.extend(doc.entities().map(|(id, _)| format!("e:{id}")));
    }
    keys
}

/// Whether two answers differ for a subscriber: other documents, or other text.
fn changed(old: Option<&Answer>, new: &Answer) -> bool {
    match old {
        None => true,
        Some(o) => o.answer != new.answer || o.documents.iter().map(|d| &d.id).ne(new.documents.iter().map(|d| &d.id)),
    }
}

/// Evaluates standing queries and keeps their last published answers.
pub struct Standing {
    pub registry: Arc<Registry>,
    graph: LiveGraph,
    retriever: Retriever,
    answerer: Arc<Answerer>,
    topics: Topics,
    transport: Transport,
    /// The indexes the retriever reads beside the graph (passages from the docs topic, fact
    /// vectors from the graph changes): the topic each reads, and how far it has.
    indexes: Vec<(String, Consumed)>,
    store: sled::Tree,
    /// One evaluation at a time: the two readers never publish out of order for one id.
    turn: tokio::sync::Mutex<()>,
    /// The answers owed since graph changes reached their subscriptions (see [`Self::work`]).
    owed: Mutex<owed::Owed<Marks>>,
    owed_now: Arc<AtomicI64>,
    evaluations: Arc<AtomicI64>,
    changes: Arc<AtomicI64>,
    published: Arc<AtomicI64>,
}

/// Opens the store of last published answers under `dir`.
pub fn open_store(dir: &Path) -> Result<sled::Tree, StandingError> {
    Ok(sled::open(dir)?.open_tree("answers")?)
}

impl Standing {
    /// Standing queries over the query stage's graph, retriever and answerer; the last
    /// published answers kept under `dir` (`DATA/standing`). `indexes`: the readers that keep
    /// the retriever's indexes, with the topic each reads.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        dir: &Path,
        graph: LiveGraph,
        retriever: Retriever,
        answerer: Arc<Answerer>,
        topics: Topics,
        transport: Transport,
        indexes: Vec<(String, Consumed)>,
    ) -> Result<Self, StandingError> {
        let m = crate::metrics::global();
        Ok(Standing {
            registry: Arc::new(Registry::default()),
            graph,
            retriever,
            answerer,
            topics,
            transport,
            indexes,
            store: open_store(dir)?,
            turn: tokio::sync::Mutex::new(()),
            owed: Mutex::default(),
            owed_now: m.gauge("streamrag_standing_owed", "Standing answers owed: subscriptions a graph change reached, not answered yet, or answered before the indexes had the change"),
            evaluations: m.counter("streamrag_standing_evaluations_total", "Standing queries answered again"),
            changes: m.counter("streamrag_standing_changes_total", "Graph changes matched against the standing queries"),
            published: m.counter("streamrag_standing_published_total", "Standing answers published because they changed"),
        })
    }

    /// Registers a subscription, with its last published answer read from the store;
    /// [`Self::evaluate`] answers it.
    pub fn register(&self, id: &str, question: &str, top_k: Option<u32>, reader: Reader) -> Result<(), StandingError> {
        let last = self.store.get(id.as_bytes())?.and_then(|v| serde_json::from_slice::<Answer>(&v).ok());
        self.registry.put(id, question, top_k, reader, last);
        Ok(())
    }

    /// Ends a subscription; its stored answer goes with it.
    pub fn unsubscribe(&self, id: &str) -> Result<bool, StandingError> {
        self.owed.lock().expect("owed lock").forget(id);
        self.store.remove(id.as_bytes())?;
        Ok(self.registry.remove(id))
    }

    /// Owes an answer to each subscription these graph changes can affect, and has them
    /// answered in the order reached ([`Self::work`], which publishes them): returns at once.
    pub async fn changed(self: &Arc<Self>, changes: &[GraphChange]) -> Result<Vec<Output>, StandingError> {
        if self.registry.is_empty() || changes.is_empty() {
            return Ok(Vec::new());
        }
        let g = self.graph.current();
        let reached: Vec<(String, Vec<String>)> = changes
            .iter()
            .map(|c| {
                self.changes.fetch_add(1, Relaxed);
                let what = match c.op {
                    streamrag_schemas::DocOp::Delete => "deleted",
                    streamrag_schemas::DocOp::Upsert => "changed",
                };
                (format!("{what} {}", c.doc_id), self.registry.affected(&change_keys(&g, c)))
            })
            .collect();
        {
            let mut owed = self.owed.lock().expect("owed lock");
            // a subscription owed already keeps the first change's reason
            for (reason, ids) in &reached {
                for id in ids {
                    owed.reach(id, reason);
                }
            }
            self.owed_now.store(owed.len() as i64, Relaxed);
        }
        self.work();
        Ok(Vec::new())
    }

    /// Makes the owed answers unless a task does already: a few at a time, first owed first
    /// ([`CHUNK`]), each few published once made (in order: one publish at a time, while the
    /// next few are made). Those a change reached come first; those owed again once the
    /// indexes have a change wait until the indexes read that far ([`REFINE_WAIT`] at most)
    /// and go when no change is owed an answer. An answer made while the indexes are more than
    /// [`QUICK_WAIT`] behind is owed again (reason `indexed <doc>`); one made again once they
    /// caught up is final.
    fn work(self: &Arc<Self>) {
        {
            let mut owed = self.owed.lock().expect("owed lock");
            if owed.running || owed.is_empty() {
                return;
            }
            owed.running = true;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut publishing: Option<tokio::task::JoinHandle<()>> = None;
            loop {
                enum Job {
                    Quick(Vec<(String, String)>, Option<std::time::Instant>),
                    Again(Vec<(String, String)>),
                    Wait,
                    Flush,
                }
                let job = {
                    let mut owed = me.owed.lock().expect("owed lock");
                    let (quick, since) = owed.take_quick(CHUNK);
                    if !quick.is_empty() {
                        Job::Quick(quick, since)
                    } else if let Some((marks, since)) = owed.round() {
                        if since.elapsed() >= REFINE_WAIT || !Self::behind(marks) {
                            Job::Again(owed.take_round(CHUNK))
                        } else {
                            Job::Wait
                        }
                    } else if publishing.is_some() {
                        Job::Flush
                    } else {
                        // nothing owed, nothing in flight: idle ([`Self::idle`])
                        owed.running = false;
                        me.owed_now.store(owed.len() as i64, Relaxed);
                        break;
                    }
                };
                // `again`: made once more now the indexes have the change
                let (each, wait, again) = match job {
                    Job::Wait => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    Job::Flush => {
                        if let Some(p) = publishing.take() {
                            let _ = p.await;
                        }
                        continue;
                    }
                    // the indexes get QUICK_WAIT from the change, not from each few answers
                    Job::Quick(each, since) => (each, QUICK_WAIT.saturating_sub(since.map_or(Duration::ZERO, |t| t.elapsed())), false),
                    Job::Again(each) => (each, Duration::ZERO, true),
                };
                let outs = match me.evaluate_each(&each, wait).await {
                    Ok((outs, behind)) => {
                        // made again once the indexes had the change: final, whatever came since
                        let behind = behind.filter(|_| !again);
                        let mut owed = me.owed.lock().expect("owed lock");
                        owed.answered(&each, behind, |r| r.replacen("changed ", "indexed ", 1).replacen("deleted ", "indexed ", 1));
                        me.owed_now.store(owed.len() as i64, Relaxed);
                        outs
                    }
                    Err(e) => {
                        // the subscriptions keep their answers; the next change reaches them again
                        tracing::error!(error = %e, subscriptions = each.len(), "standing queries: answering failed");
                        continue;
                    }
                };
                if let Some(p) = publishing.take() {
                    let _ = p.await;
                }
                if !outs.is_empty() {
                    let me = me.clone();
                    // recorded as published once on the topic: an answer lost with the process is
                    // published again when the restarted one answers every subscription
                    publishing = Some(tokio::spawn(async move {
                        if let Err(e) = me.transport.produce(&outs).await {
                            tracing::error!(error = %e, "standing queries: publishing answers failed; the next change answers again");
                        } else if let Err(e) = crate::runtime::blocking(|| me.record(&outs)) {
                            tracing::error!(error = %e, "standing queries: recording the published answers failed");
                        }
                    }));
                }
            }
        });
    }

    /// Whether no answer is owed or being published.
    pub fn idle(&self) -> bool {
        let owed = self.owed.lock().expect("owed lock");
        !owed.running && owed.is_empty()
    }

    /// Where each of the retriever's indexes must read to (its topic's end, now).
    async fn index_marks(&self) -> Marks {
        let mut marks = Vec::with_capacity(self.indexes.len());
        for (topic, consumed) in &self.indexes {
            if let (Consumed::Own(pos), Ok(end)) = (consumed, self.transport.end_offsets(topic).await) {
                marks.push((pos.clone(), end));
            }
        }
        marks
    }

    /// Whether an index has not read to its mark yet.
    fn behind(marks: &Marks) -> bool {
        marks.iter().any(|(pos, end)| {
            let at = pos();
            end.iter().any(|(p, e)| at.get(p).copied().unwrap_or(0) < *e)
        })
    }

    /// Waits until every index reached its mark, `wait` at most; whether they all did.
    async fn reached(marks: &Marks, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if !Self::behind(marks) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Answers the subscriptions `ids` on the graph as it is now, once the retriever's indexes
    /// read what their topics hold (5 s at most); publishes (returns) the answers that
    /// changed, each with `reason`.
    ///
    /// Where the indexes are still behind after that (a node starting, a burst of documents),
    /// a subscription that has a published answer keeps it until they caught up, instead of
    /// trading it for one from half-read indexes; a new one is answered at once. Both are
    /// answered again once the indexes read their marks.
    pub async fn evaluate(self: &Arc<Self>, ids: &[String], reason: &str) -> Result<Vec<Output>, StandingError> {
        let each: Vec<(String, String)> = ids.iter().map(|id| (id.clone(), reason.to_string())).collect();
        let marks = self.index_marks().await;
        if Self::reached(&marks, INDEX_WAIT).await {
            let out = self.evaluate_each(&each, Duration::ZERO).await?.0;
            crate::runtime::blocking(|| self.record(&out))?;
            return Ok(out);
        }
        let new: Vec<(String, String)> = each.iter().filter(|(id, _)| !matches!(self.registry.latest(id), Some(Some(_)))).cloned().collect();
        let out = self.evaluate_each(&new, Duration::ZERO).await?.0;
        crate::runtime::blocking(|| self.record(&out))?;
        {
            let mut owed = self.owed.lock().expect("owed lock");
            owed.answered(&each, Some(marks), |r| r.to_string());
            self.owed_now.store(owed.len() as i64, Relaxed);
        }
        self.work();
        Ok(out)
    }

    /// Keeps these answers as the last published (the store a restart reads).
    fn record(&self, outs: &[Output]) -> Result<(), StandingError> {
        let mut batch = sled::Batch::default();
        for o in outs {
            batch.insert(o.key.as_bytes(), o.payload.clone());
        }
        Ok(self.store.apply_batch(batch)?)
    }

    /// [`Self::evaluate`] with a reason per subscription (one retrieval batch), waiting `wait`
    /// at most for the indexes; with the marks they had not reached when it answered. The
    /// answers that changed are returned, not yet recorded ([`Self::record`]).
    async fn evaluate_each(&self, each: &[(String, String)], wait: Duration) -> Result<(Vec<Output>, Option<Marks>), StandingError> {
        if each.is_empty() {
            return Ok((Vec::new(), None));
        }
        let _turn = self.turn.lock().await;
        let marks = self.index_marks().await;
        let behind = (!Self::reached(&marks, wait).await).then_some(marks);
        let reasons: HashMap<&str, &str> = each.iter().map(|(id, r)| (id.as_str(), r.as_str())).collect();
        let queries: Vec<Query> = each.iter().filter_map(|(id, _)| self.registry.query_of(id)).collect();
        if queries.is_empty() {
            return Ok((Vec::new(), None));
        }
        let answers = match crate::runtime::blocking(|| crate::query::answer_batch_as(&self.graph, &self.retriever, &self.answerer.passages, &queries)) {
            Ok(a) => a,
            Err(e) => {
                // the subscriptions keep their answers and dependencies; the next change tries again
                tracing::error!(error = %e, subscriptions = queries.len(), "standing queries: retrieval failed");
                return Ok((Vec::new(), None));
            }
        };
        self.evaluations.fetch_add(answers.len() as i64, Relaxed);
        let mut out = Vec::new();
        for mut a in answers {
            let w = self.answerer.write(&a.question, &a.documents).await;
            crate::query::written_into(&mut a, w);
            a.reason = reasons.get(a.query_id.as_str()).map(|r| r.to_string());
            // what the answer depends on, read from the whole graph (the keys only match
            // changes), taken after the answer is written: a version held across the LLM's
            // time would make the writer copy the graph (see LiveGraph)
            let keys = answer_keys(&self.graph.current(), &a);
            let id = a.query_id.clone();
            let publish = {
                let mut inner = self.registry.inner.lock().expect("registry lock");
                // unsubscribed meanwhile, or asked another question: this answer is stale
                let current = inner.subs.get(&id).filter(|s| s.question == a.question);
                let Some(sub) = current else { continue };
                let publish = changed(sub.last.as_ref(), &a);
                if publish {
                    inner.subs.get_mut(&id).expect("present").last = Some(a.clone());
                }
                inner.index(&id, keys);
                publish
            };
            if publish {
                let payload = encode(&a);
                let _ = self.registry.events.send(a);
                self.published.fetch_add(1, Relaxed);
                out.push(Output { topic: self.topics.answers.clone(), key: id, payload });
            }
        }
        Ok((out, behind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dirty;
    use crate::kg_writer::change_message;
    use streamrag_schemas::{DocOp, EntityRef, GraphDelta, ResolvedTriple, ScoredDocument, SourceRef, Triple};

    /// A document's delta: its title entity and facts (subject, relation, object) by name.
    fn delta(doc: &str, facts: &[(&str, &str, &str)]) -> GraphDelta {
        let title = facts.first().map_or(doc.to_string(), |f| f.0.to_string());
        let mut names: Vec<&str> = facts.iter().flat_map(|f| [f.0, f.2]).collect();
        names.dedup();
        GraphDelta {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: DocOp::Upsert,
            doc_id: doc.into(),
            title,
            entities: names.iter().map(|n| EntityRef { id: normalize(n), name: n.to_string() }).collect(),
            triples: facts
                .iter()
                .map(|(s, r, o)| ResolvedTriple { subject_id: normalize(s), subject: s.to_string(), relation: r.to_string(), object_id: normalize(o), object: o.to_string() })
                .collect(),
            links: vec![],
            source: SourceRef { topic: "d".into(), partition: 0, offset: 0, timestamp_ms: None },
        }
    }

    /// Applies a delta and gives the change the kg-writer would publish.
    fn apply(g: &mut GraphState, d: &GraphDelta) -> GraphChange {
        let c = g.apply(&d.doc_id, GraphState::entry_of(d).as_ref(), &mut Dirty::default()).expect("a change");
        change_message(g, d, d.source.clone(), &c)
    }

    fn answer(question: &str, docs: &[&str], seeds: &[&str], facts: &[(&str, &str, &str)]) -> Answer {
        Answer {
            schema_version: SCHEMA_VERSION,
            query_id: "s".into(),
            question: question.into(),
            documents: docs.iter().map(|d| ScoredDocument { id: d.to_string(), title: d.to_string(), score: 1.0 }).collect(),
            triples: facts.iter().map(|(s, r, o)| Triple { subject: s.to_string(), relation: r.to_string(), object: o.to_string() }).collect(),
            seeds: seeds.iter().map(|s| s.to_string()).collect(),
            entities: vec![],
            retriever: "hybrid".into(),
            checkpoint: None,
            answer: None,
            abstained: false,
            answered_by: None,
            citations: vec![],
            reason: None,
            graph_version: Default::default(),
            latency_ms: 0.0,
        }
    }

    #[test]
    fn a_change_reaches_the_subscriptions_whose_answer_it_touches_and_no_other() {
        let mut g = GraphState::new();
        apply(&mut g, &delta("marie", &[("Marie Curie", "born in", "Warsaw"), ("Marie Curie", "moved to", "Paris")]));
        apply(&mut g, &delta("warsaw", &[("Warsaw", "capital of", "Poland")]));
        let r = Registry::default();
        let husband = answer("In which city was the husband of Marie Curie born?", &["marie"], &["Marie Curie"], &[("Marie Curie", "born in", "Warsaw")]);
        let river = answer("Which river flows through Warsaw?", &["warsaw"], &["Warsaw"], &[]);
        for (id, a) in [("husband", &husband), ("river", &river)] {
            r.put(id, &a.question, None, Reader::All, None);
            r.inner.lock().unwrap().index(id, answer_keys(&g, a));
        }
        let reached = |r: &Registry, g: &GraphState, c: &GraphChange| r.affected(&change_keys(g, c));

        // far away: nothing
        let far = apply(&mut g, &delta("kili", &[("Mount Kilimanjaro", "volcano in", "Tanzania")]));
        assert!(reached(&r, &g, &far).is_empty());
        // a new page naming Marie Curie: the husband question only
        let pierre = apply(&mut g, &delta("pierre", &[("Pierre Curie", "married", "Marie Curie"), ("Pierre Curie", "born in", "Paris")]));
        assert_eq!(reached(&r, &g, &pierre), ["husband"]);
        // a new entity that bears one of a question's rare words reaches it, with no shared entity
        let vistula = apply(&mut g, &delta("vistula", &[("Vistula River", "longest in", "Europe")]));
        assert_eq!(reached(&r, &g, &vistula), ["river"]);
        // deleted far away: nothing
        let deleted = |g: &mut GraphState, doc: &str| {
            let mut del = delta(doc, &[]);
            del.op = DocOp::Delete;
            apply(g, &del)
        };
        let gone = deleted(&mut g, "kili");
        assert!(reached(&r, &g, &gone).is_empty());
        // a document an answer holds, deleted: that answer, and the husband's too, whose
        // document names Warsaw, a fact of which died with it
        let gone = deleted(&mut g, "warsaw");
        assert_eq!(reached(&r, &g, &gone), ["husband", "river"]);
        // the page of a name the question writes, of words many entities bear, which no
        // entity bore before
        let many: Vec<(String, String)> = (0..=COMMON_WORD_ENTITIES).map(|i| (format!("Prince Karl {i}"), format!("Bavaria Town {i}"))).collect();
        let facts: Vec<(&str, &str, &str)> = many.iter().map(|(p, t)| (p.as_str(), "lived in", t.as_str())).collect();
        apply(&mut g, &delta("princes", &facts));
        let prince = answer("Where did the Prince of Bavaria live?", &[], &[], &[]);
        r.put("prince", &prince.question, None, Reader::All, None);
        r.inner.lock().unwrap().index("prince", answer_keys(&g, &prince));
        let page = apply(&mut g, &delta("prince-of-bavaria", &[("Prince of Bavaria", "lived in", "Munich")]));
        assert_eq!(reached(&r, &g, &page), ["prince"]);
        r.remove("prince");
        // unsubscribed: nothing
        r.remove("husband");
        assert!(reached(&r, &g, &pierre).is_empty());
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn an_answer_is_new_when_its_documents_or_text_differ() {
        let a = answer("q", &["x", "y"], &[], &[]);
        assert!(changed(None, &a));
        assert!(!changed(Some(&a), &a.clone()));
        let mut scored = a.clone();
        scored.documents[0].score = 7.0;
        scored.graph_version.offsets.insert("t/0".into(), 9);
        assert!(!changed(Some(&a), &scored), "scores and versions alone are no news");
        assert!(changed(Some(&a), &answer("q", &["y", "x"], &[], &[])));
        assert!(changed(Some(&a), &Answer { answer: Some("Paris [1]".into()), ..a.clone() }));
    }
}
