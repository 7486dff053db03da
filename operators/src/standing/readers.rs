//! The operators that drive the standing queries: [`SubscriptionsReader`] reads the
//! subscriptions topic from its start at every start (so every process that answers holds
//! every subscription, and a restart holds them again), and [`ChangesWatcher`] reads the graph
//! changes from where the graph stood when it started (what came before is answered when each
//! subscription is read again).

use std::collections::BTreeMap;
use std::sync::Arc;

use streamrag_schemas::{decode, DocOp, GraphChange, Subscription};

use super::Standing;
use crate::access::Reader;
use crate::config::Limits;
use crate::error::{StageError, StageFault};
use crate::runtime::{Consumed, Operator, Outcome, Progress, StartFrom};
use crate::transport::Record;

/// Checks a subscription record against the limits (an unsubscribe needs only its id).
pub fn validate(s: &Subscription, limits: &Limits) -> Result<(), StageError> {
    limits.check_id("subscription_id", &s.subscription_id).map_err(StageError::user)?;
    if s.op == DocOp::Delete {
        return Ok(());
    }
    let what = format!("subscription {}", s.subscription_id);
    limits.check_question(&what, &s.question).map_err(StageError::user)?;
    if let Some(k) = s.top_k {
        limits.check_top_k(&what, k).map_err(StageError::user)?;
    }
    if let Some(a) = &s.access {
        limits.check_access(&what, a).map_err(StageError::user)?;
    }
    Ok(())
}

/// Subscribes and unsubscribes as the subscriptions topic says; a record that does not
/// decode or breaks a limit goes to the dead letters, and the others go on.
pub struct SubscriptionsReader {
    standing: Arc<Standing>,
    limits: Limits,
    progress: Progress,
}

impl SubscriptionsReader {
    pub fn new(standing: Arc<Standing>, limits: Limits) -> Self {
        SubscriptionsReader { standing, limits, progress: Progress::default() }
    }
}

impl Operator for SubscriptionsReader {
    fn name(&self) -> &'static str {
        "subscriptions"
    }
    fn input(&self) -> String {
        self.standing.topics.subscriptions.clone()
    }
    fn start_from(&self) -> StartFrom {
        StartFrom::Offsets(BTreeMap::new())
    }
    fn consumed(&self) -> Consumed {
        self.progress.consumed()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        let mut out: Vec<Outcome> = Vec::with_capacity(batch.len());
        // registered in order, answered together (one retrieval batch)
        let mut fresh: Vec<String> = Vec::new();
        for r in batch {
            let s = match decode::<Subscription>(&r.payload).map_err(StageError::from).and_then(|s| validate(&s, &self.limits).map(|_| s)) {
                Ok(s) => s,
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            if r.key_str().is_some_and(|k| k != s.subscription_id) {
                out.push(Err(StageError::user(format!("subscription {} was keyed {:?}: the key must be its id", s.subscription_id, r.key_str().unwrap_or_default()))));
                continue;
            }
            fresh.retain(|id| *id != s.subscription_id);
            match s.op {
                DocOp::Delete => {
                    self.standing.unsubscribe(&s.subscription_id)?;
                }
                DocOp::Upsert => {
                    self.standing.register(&s.subscription_id, &s.question, s.top_k, Reader::of(s.access.as_deref()))?;
                    fresh.push(s.subscription_id);
                }
            }
            out.push(Ok(vec![]));
        }
        let published = self.standing.evaluate(&fresh, "subscribed").await?;
        // the answers go out with the batch's last good record (one outcome per record)
        if let Some(last) = out.iter_mut().rev().find(|o| o.is_ok()) {
            *last = Ok(published);
        }
        self.progress.advance(batch);
        Ok(out)
    }
}

/// Answers again the subscriptions each graph change can reach.
pub struct ChangesWatcher {
    standing: Arc<Standing>,
    progress: Progress,
    batch: usize,
}

impl ChangesWatcher {
    /// Starts reading the graph changes at `from` (partition -> next offset: the end of the
    /// topic when the process started).
    pub fn new(standing: Arc<Standing>, from: BTreeMap<i32, i64>) -> Self {
        ChangesWatcher { standing, progress: Progress::at(from), batch: Self::BATCH }
    }

    /// Most graph changes read at once by default. Reading only owes the subscriptions they
    /// reach an answer ([`Standing::changed`]); however the changes are read, a subscription
    /// several changes reach before its turn is answered once for all of them.
    pub const BATCH: usize = 256;

    /// Reads at most `n` graph changes at once (default [`Self::BATCH`]).
    pub fn with_batch(mut self, n: Option<usize>) -> Self {
        self.batch = n.unwrap_or(Self::BATCH).max(1);
        self
    }
}

impl Operator for ChangesWatcher {
    fn name(&self) -> &'static str {
        "standing"
    }
    fn input(&self) -> String {
        self.standing.topics.graph_changes.clone()
    }
    fn start_from(&self) -> StartFrom {
        StartFrom::Offsets(self.progress.get())
    }
    fn consumed(&self) -> Consumed {
        self.progress.consumed()
    }
    fn max_batch(&self) -> Option<usize> {
        Some(self.batch)
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, StageFault> {
        let changes: Vec<GraphChange> = batch
            .iter()
            .filter_map(|r| match decode::<GraphChange>(&r.payload) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(partition = r.partition, offset = r.offset, error = %e, "a graph-changes record that does not decode: no standing query sees it");
                    None
                }
            })
            .collect();
        let published = self.standing.changed(&changes).await?;
        self.progress.advance(batch);
        // the answers go out with the batch's first record (one outcome per record)
        let mut out: Vec<Outcome> = batch.iter().map(|_| Ok(vec![])).collect();
        if let Some(first) = out.first_mut() {
            *first = Ok(published);
        }
        Ok(out)
    }
}
