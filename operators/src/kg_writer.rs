//! The kg-writer stage: applies graph deltas to the in-memory graph that queries read and to
//! sled, with the consumed offsets in the same atomic batch. A record at or below the stored
//! offset of its partition is skipped, and re-applying a document version changes nothing, so
//! a re-delivered record changes nothing.

use std::sync::{Arc, RwLock};

use streamrag_schemas::{decode, GraphDelta};
use tokio::sync::watch;

use crate::config::Topics;
use crate::error::{StageError, TransportError};
use crate::graph::{Dirty, GraphState, GraphStore};
use crate::runtime::{Operator, Outcome};
use crate::transport::Record;

/// The live graph shared by the kg-writer and the query stage of one process.
pub type SharedGraph = Arc<RwLock<GraphState>>;

pub struct KgWriter {
    pub topics: Topics,
    pub graph: SharedGraph,
    /// None for a query replica, which keeps its graph in memory only.
    pub store: Option<GraphStore>,
    /// Bumped after every persisted batch (number of documents), for waiters.
    pub applied: watch::Sender<usize>,
}

impl Operator for KgWriter {
    fn name(&self) -> &'static str {
        if self.store.is_some() {
            "kg-writer"
        } else {
            "query-replica"
        }
    }
    fn input(&self) -> String {
        self.topics.graph_deltas.clone()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, TransportError> {
        let mut dirty = Dirty::default();
        let mut outcomes = Vec::with_capacity(batch.len());
        {
            let mut g = self.graph.write().unwrap();
            for r in batch {
                if g.already_applied(&r.topic, r.partition, r.offset) {
                    outcomes.push(Ok(vec![]));
                    continue;
                }
                let outcome = decode::<GraphDelta>(&r.payload).map_err(StageError::from).and_then(|d| {
                    if d.doc_id.trim().is_empty() {
                        return Err(StageError::user("graph delta has an empty doc_id"));
                    }
                    g.apply(&d.doc_id, GraphState::entry_of(&d), &mut dirty);
                    Ok(vec![])
                });
                // A bad record is still consumed: its offset moves with the batch.
                g.set_offset(&r.topic, r.partition, r.offset, &mut dirty);
                outcomes.push(outcome);
            }
        }
        if !dirty.is_empty() {
            let g = self.graph.read().unwrap();
            if let Some(store) = &self.store {
                store.persist(&g, &dirty).map_err(|e| TransportError::Other(e.to_string()))?;
            }
            self.applied.send_replace(g.document_count());
        }
        Ok(outcomes)
    }
}
