//! What a reader may see of the live graph: for each set of access labels in use, the graph its
//! readable documents alone build. Every retriever (the walk, fact matching, seeds, the GLM's
//! subgraph, the evidence) then runs on that graph unchanged, so a fact, an entity name or a
//! synonym link another document supports cannot reach an answer: it is not there.
//!
//! A view is built from the live graph the first time its labels ask (one pass over the
//! documents), then kept up to date from the steps the writer applies (a document's new entry,
//! kept or withdrawn by its labels; offsets, so the version is the live graph's), brought up
//! to date when a reader next asks. The step log is kept only while views exist, up to
//! [`MAX_LOG`] steps; a view further behind, or unused for [`IDLE`], is rebuilt when next asked.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Dirty, DocEntry, GraphState};
use crate::access::Reader;

/// One step the writer applied to the live graph.
#[derive(Debug, Clone)]
pub enum Step {
    Apply(String, Option<DocEntry>),
    Offset(String, i32, i64),
}

impl Step {
    /// Applies the step to `g`.
    pub fn apply(self, g: &mut GraphState, dirty: &mut Dirty) {
        match self {
            Step::Apply(doc, entry) => {
                g.apply(&doc, entry.as_ref(), dirty);
            }
            Step::Offset(t, p, o) => g.set_offset(&t, p, o, dirty),
        }
    }

    /// Applies the step to `g` as `reader` sees it: a document it may not read is withdrawn.
    pub fn apply_to(&self, g: &mut GraphState, reader: &Reader, dirty: &mut Dirty) {
        let mut seen = self.clone();
        if let Step::Apply(_, entry) = &mut seen {
            *entry = entry.take().filter(|e| reader.may_read(e.access.iter().map(String::as_str)));
        }
        seen.apply(g, dirty);
    }
}

/// Steps kept for the views to catch up on; a view further behind is rebuilt.
pub const MAX_LOG: usize = 20_000;
/// A view nobody asked for this long is dropped.
pub const IDLE: Duration = Duration::from_secs(600);
/// At most this many label sets have a view; the least recently used goes first.
pub const MAX_VIEWS: usize = 64;

struct View {
    g: Arc<GraphState>,
    /// The live graph's step count this view has applied.
    seq: u64,
    used: Instant,
    /// The version before `g` and its step count: brought up to date in place the next time
    /// a reader still holds `g` (as the writer does with the live graph), so that a view in
    /// use is not copied at every change.
    spare: Option<(Arc<GraphState>, u64)>,
}

/// Applies the logged steps from number `at` on (`first` being the log's first) to `g`.
fn catch_up(g: &mut GraphState, log: &VecDeque<Step>, first: u64, at: u64, reader: &Reader) {
    let mut scratch = Dirty::default();
    for step in log.iter().skip((at - first) as usize) {
        step.apply_to(g, reader, &mut scratch);
    }
}

#[derive(Default)]
struct Inner {
    /// Steps applied to the live graph since it was loaded.
    seq: u64,
    /// The last steps, the first of them number `seq - log.len()`; kept only while views exist.
    log: VecDeque<Step>,
    views: HashMap<Reader, View>,
    /// Views being built outside the lock: the log is kept for them to catch up on.
    building: usize,
}

/// The views of one live graph (see the module doc).
#[derive(Default)]
pub struct Views {
    inner: Mutex<Inner>,
}

impl Views {
    /// Installs the live graph's next version (`install`, run under this lock, so that no view
    /// is built from a version the log has not caught up with) and records the steps that
    /// made it, which `install` returns. The lock order is always this one, then the live graph's.
    pub fn record<T>(&self, install: impl FnOnce() -> (T, Vec<Step>)) -> T {
        let mut inner = self.inner.lock().expect("views lock");
        let (out, steps) = install();
        inner.seq += steps.len() as u64;
        if inner.views.is_empty() && inner.building == 0 {
            inner.log.clear();
            return out;
        }
        inner.log.extend(steps);
        let over = inner.log.len().saturating_sub(MAX_LOG);
        inner.log.drain(..over);
        out
    }

    /// The graph `reader` may see; `live` reads the current version (under this lock, as in
    /// [`Views::record`]; see [`crate::kg_writer::LiveGraph::current_for`]).
    pub fn view(&self, reader: &Reader, live: impl Fn() -> Arc<GraphState>) -> Arc<GraphState> {
        let mut inner = self.inner.lock().expect("views lock");
        let now = Instant::now();
        inner.views.retain(|_, v| now.duration_since(v.used) < IDLE);
        let (seq, first) = (inner.seq, inner.seq - inner.log.len() as u64);
        let Inner { log, views, .. } = &mut *inner;
        let caught_up = match views.get_mut(reader) {
            Some(v) if v.seq >= first => {
                if v.seq < seq {
                    if let Some(g) = Arc::get_mut(&mut v.g) {
                        catch_up(g, log, first, v.seq, reader);
                    } else {
                        // a reader holds it: the spare if nobody holds that, else a copy
                        let next = match v.spare.take() {
                            Some((mut spare, at)) if at >= first && Arc::strong_count(&spare) == 1 && Arc::weak_count(&spare) == 0 => {
                                catch_up(Arc::get_mut(&mut spare).expect("checked"), log, first, at, reader);
                                spare
                            }
                            _ => {
                                let mut copy = (*v.g).clone();
                                catch_up(&mut copy, log, first, v.seq, reader);
                                Arc::new(copy)
                            }
                        };
                        let old = std::mem::replace(&mut v.g, next);
                        v.spare = Some((old, v.seq));
                    }
                    v.seq = seq;
                }
                v.used = now;
                Some(v.g.clone())
            }
            _ => None,
        };
        if let Some(g) = caught_up {
            return g;
        }
        // built outside the lock, so that neither the writer nor other readers wait on it,
        // from the live version of step `seq`; then caught up on the steps logged meanwhile
        let base = live();
        inner.building += 1;
        drop(inner);
        let t0 = Instant::now();
        let mut built = build(&base, reader);
        drop(base);
        let mut inner = self.inner.lock().expect("views lock");
        inner.building -= 1;
        let first = inner.seq - inner.log.len() as u64;
        if seq < first {
            // the log moved on past it (a burst over MAX_LOG steps): built again under the lock
            built = build(&live(), reader);
        } else {
            catch_up(&mut built, &inner.log, first, seq, reader);
        }
        let seq = inner.seq;
        tracing::debug!(reader = %reader, documents = built.document_count(), ms = t0.elapsed().as_millis() as u64, "built an access view of the graph");
        let g = Arc::new(built);
        let views = &mut inner.views;
        if views.len() >= MAX_VIEWS && !views.contains_key(reader) {
            if let Some(oldest) = views
                .iter()
                .min_by_key(|(_, v)| v.used)
                .map(|(k, _)| k.clone())
            {
                views.remove(&oldest);
            }
        }
        views.insert(
            reader.clone(),
            View {
                g: g.clone(),
                seq,
                used: now,
                spare: None,
            },
        );
        g
    }

    /// How many label sets have a view now.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("views lock").views.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The graph the documents of `live` that `reader` may read build, at `live`'s version.
pub fn build(live: &GraphState, reader: &Reader) -> GraphState {
    let mut g = GraphState::new();
    g.mark_view();
    let mut scratch = Dirty::default();
    for d in live.docs().filter(|d| reader.may_read(d.access())) {
        g.apply(d.id(), Some(&d.to_entry()), &mut scratch);
    }
    for (key, offset) in live.offsets() {
        g.restore_offset(key.clone(), *offset);
    }
    g
}
