//! The knowledge graph: [`GraphState`] in memory (what queries read) and [`GraphStore`] in sled
//! (what survives a restart). Each document version is applied as a whole: the triples and
//! entities only it supported are retracted, its new ones asserted; support is counted per
//! document, so re-applying a version changes nothing.

mod state;
mod store;
mod views;

pub use state::{canonical_relation, Change, DocEntry, DocView, Dirty, EntityView, GraphState, GraphStats, TripleKey, TripleView};
pub use store::{GraphStore, StoreError};
pub use views::{build as view_of, Step, Views};
