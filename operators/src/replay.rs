//! Replay: a graph rebuilt from a Parquet snapshot, caught up from the snapshot's offsets
//! through the graph-deltas topic (applying each delta exactly as the kg-writer does) up to a
//! target position, and persisted as a data directory's graph store. `streamrag replay` is
//! [`replay`] with progress bars.

use std::collections::BTreeMap;
use std::time::Duration;

use streamrag_schemas::{decode, GraphDelta};

use std::path::PathBuf;
use std::time::Instant;

use crate::data_dir::{DataDir, OpenError};
use crate::error::TransportError;
use crate::graph::{Dirty, GraphState, GraphStats, StoreError};
use crate::progress::Progress;
use crate::runtime::blocking;
use crate::snapshot::{Manifest, SnapshotError};
use crate::transport::Transport;

/// What a catch-up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUp {
    pub records: u64,
    pub applied: u64,
    /// Records that were not graph deltas (the kg-writer dead-letters them).
    pub skipped_bad: u64,
}

/// Parses `P=OFFSET[,P=OFFSET...]` (the last offset to include, per partition).
pub fn parse_until(s: &str) -> Result<BTreeMap<i32, i64>, String> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|kv| {
            let (p, o) = kv.split_once('=').ok_or_else(|| format!("expected PARTITION=OFFSET, got {kv:?}"))?;
            let p = p.trim().rsplit('/').next().unwrap_or("").parse::<i32>().map_err(|e| format!("partition in {kv:?}: {e}"))?;
            let o = o.trim().parse::<i64>().map_err(|e| format!("offset in {kv:?}: {e}"))?;
            Ok((p, o))
        })
        .collect()
}

/// Applies the deltas of `topic` after the graph's offsets, up to `last` (the last offset to
/// include per partition; partitions not named are not read). `progress` gets the records read.
pub async fn catch_up(
    g: &mut GraphState,
    transport: &Transport,
    topic: &str,
    last: &BTreeMap<i32, i64>,
    mut progress: impl FnMut(u64),
) -> Result<CatchUp, TransportError> {
    let from = g.resume_offsets(topic);
    let mut todo: BTreeMap<i32, i64> =
        last.iter().filter(|(p, &o)| o >= from.get(p).copied().unwrap_or(0)).map(|(p, o)| (*p, *o)).collect();
    let mut out = CatchUp::default();
    if todo.is_empty() {
        return Ok(out);
    }
    let mut sub = transport.assign(topic, &from).await?;
    let mut scratch = Dirty::default();
    let mut idle = 0;
    while !todo.is_empty() {
        let batch = sub.next_batch(1024, Duration::from_millis(500)).await?;
        if batch.is_empty() {
            idle += 1;
            if idle > 60 {
                return Err(TransportError::Other(format!("{topic} ended before the target offsets {todo:?}")));
            }
            continue;
        }
        idle = 0;
        for r in &batch {
            let Some(&end) = todo.get(&r.partition) else { continue };
            if r.offset > end || g.already_applied(&r.topic, r.partition, r.offset) {
                continue;
            }
            out.records += 1;
            match decode::<GraphDelta>(&r.payload) {
                Ok(d) if !d.doc_id.trim().is_empty() => {
                    g.apply(&d.doc_id, GraphState::entry_of(&d).as_ref(), &mut scratch);
                    out.applied += 1;
                }
                _ => out.skipped_bad += 1,
            }
            g.set_offset(&r.topic, r.partition, r.offset, &mut scratch);
            if r.offset >= end {
                todo.remove(&r.partition);
            }
        }
        scratch = Dirty::default();
        progress(out.records);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::resolve;
    use crate::transport::embedded::EmbeddedLog;
    use crate::transport::Output;
    use streamrag_schemas::{encode, Extraction, SourceRef, Triple};

    fn delta(doc: &str, s: &str, o: &str) -> Vec<u8> {
        let ex = Extraction {
            access: Default::default(),
            schema_version: streamrag_schemas::SCHEMA_VERSION,
            op: Default::default(),
            doc_id: doc.into(),
            title: doc.into(),
            entities: vec![],
            triples: vec![Triple { subject: s.into(), relation: "r".into(), object: o.into() }],
            extractor: "test".into(),
            source: SourceRef { topic: "docs".into(), partition: 0, offset: 0, timestamp_ms: None },
        };
        encode(&resolve(&ex))
    }

    #[test]
    fn until_parses() {
        assert_eq!(parse_until("0=5,streamrag.graph-deltas/2=7").unwrap(), BTreeMap::from([(0, 5), (2, 7)]));
        assert!(parse_until("0:5").is_err());
    }

    #[tokio::test]
    async fn catches_up_to_a_past_point_from_the_graphs_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(dir.path()).unwrap();
        let outs: Vec<Output> = [("d1", "a", "b"), ("d2", "b", "c"), ("d1", "a", "x"), ("d3", "x", "y")]
            .iter()
            .map(|(d, s, o)| Output { topic: "deltas".into(), key: d.to_string(), payload: delta(d, s, o) })
            .chain(std::iter::once(Output { topic: "deltas".into(), key: "bad".into(), payload: b"nope".to_vec() }))
            .collect();
        log.produce(&outs).await.unwrap();
        let t = Transport::Embedded(log);
        // The graph as of offset 1, then caught up to offset 2: d1 was rewritten (a-r-x).
        let mut g = GraphState::new();
        let first = catch_up(&mut g, &t, "deltas", &BTreeMap::from([(0, 1)]), |_| {}).await.unwrap();
        assert_eq!(first.applied, 2);
        assert!(g.triple("a", "r", "b").is_some());
        let second = catch_up(&mut g, &t, "deltas", &BTreeMap::from([(0, 2)]), |_| {}).await.unwrap();
        assert_eq!((second.records, second.applied), (1, 1));
        assert!(g.triple("a", "r", "b").is_none());
        assert!(g.triple("a", "r", "x").is_some());
        assert!(g.doc("d3").is_none(), "offset 3 is past the target");
        // To the end: the bad record is counted, not applied.
        let rest = catch_up(&mut g, &t, "deltas", &BTreeMap::from([(0, 4)]), |_| {}).await.unwrap();
        assert_eq!((rest.applied, rest.skipped_bad), (1, 1));
        assert_eq!(g.offsets()["deltas/0"], 4);
        // Nothing left to do.
        assert_eq!(catch_up(&mut g, &t, "deltas", &BTreeMap::from([(0, 4)]), |_| {}).await.unwrap(), CatchUp::default());
    }
}

/// What to replay, and where to.
pub struct ReplayOptions {
    /// A snapshot directory, or a root of periodic snapshots (the newest is used).
    pub snapshot: PathBuf,
    /// The data directory whose graph store is (re)built.
    pub data: DataDir,
    /// The log to continue from; None: the snapshot alone.
    pub log: Option<Transport>,
    /// The graph-deltas topic.
    pub topic: String,
    /// The last offset to include per partition; None: the end of the log when the replay starts.
    pub until: Option<BTreeMap<i32, i64>>,
    /// Replace a graph store that is not empty.
    pub force: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no snapshot under {}", .0.display())]
    NoSnapshot(PathBuf),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("the graph store under {} is not empty; pass --force to replace it", .0.display())]
    NotEmpty(PathBuf),
    #[error("the snapshot is past --until on partition {partition} (it reflects offsets {offsets:?})")]
    PastUntil { partition: i32, offsets: BTreeMap<String, i64> },
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("removing the old graph store: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

/// What a replay did, with its timings in seconds.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub manifest: Manifest,
    pub snapshot_rows: u64,
    pub snapshot_triples: usize,
    pub read_s: f64,
    /// What the log added (None: no log).
    pub log: Option<(CatchUp, f64)>,
    /// The graph's offsets after the log.
    pub offsets: BTreeMap<String, i64>,
    pub persist_s: f64,
    pub stats: GraphStats,
    pub total_s: f64,
}

/// Reads the snapshot, continues through the log, persists the graph to the data directory.
pub async fn replay(o: ReplayOptions, progress: &mut dyn Progress) -> Result<Replayed, ReplayError> {
    let snap = crate::snapshot::resolve(&o.snapshot)?.ok_or_else(|| ReplayError::NoSnapshot(o.snapshot.clone()))?;
    let t0 = Instant::now();
    let (mut g, manifest) = blocking(|| crate::snapshot::read(&snap, progress))?;
    progress.finish();
    let read_s = t0.elapsed().as_secs_f64();
    let snapshot_rows: u64 = manifest.rows.values().sum();
    let snapshot_triples = g.triple_count();
    let mut store = o.data.open_graph()?;
    if !store.is_empty() {
        if !o.force {
            return Err(ReplayError::NotEmpty(o.data.root().to_path_buf()));
        }
        drop(store);
        o.data.remove_graph()?;
        store = o.data.open_graph()?;
    }
    let mut log = None;
    if let Some(t) = &o.log {
        let t1 = Instant::now();
        let last: BTreeMap<i32, i64> = match &o.until {
            Some(u) => u.clone(),
            None => t.end_offsets(&o.topic).await?.into_iter().map(|(p, end)| (p, end - 1)).collect(),
        };
        for (p, last) in &last {
            if g.already_applied(&o.topic, *p, *last + 1) {
                return Err(ReplayError::PastUntil { partition: *p, offsets: manifest.offsets.clone() });
            }
        }
        let from = g.resume_offsets(&o.topic);
        let total: i64 = last.iter().map(|(p, l)| (l + 1 - from.get(p).copied().unwrap_or(0)).max(0)).sum();
        progress.start("log", total as u64);
        let mut seen = 0;
        let c = catch_up(&mut g, t, &o.topic, &last, |n| {
            progress.inc(n - seen);
            seen = n;
        })
        .await?;
        progress.finish();
        log = Some((c, t1.elapsed().as_secs_f64()));
    }
    let offsets = g.offsets().clone();
    let t2 = Instant::now();
    let keys = (g.document_count() + g.entity_count() + g.triple_count()) as u64;
    progress.start("persist", keys);
    blocking(|| store.persist_all(&g, 200_000, |n| progress.inc(n as u64)))?;
    progress.finish();
    Ok(Replayed {
        manifest,
        snapshot_rows,
        snapshot_triples,
        read_s,
        log,
        offsets,
        persist_s: t2.elapsed().as_secs_f64(),
        stats: g.stats(),
        total_s: t0.elapsed().as_secs_f64(),
    })
}
