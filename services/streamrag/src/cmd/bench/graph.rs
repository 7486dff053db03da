//! `streamrag bench graph`: the kg-writer's real code path (decode, apply, persist to sled with
//! the offsets, publish-ready changes) on pre-resolved synthetic deltas, measured at growing
//! graph sizes; then a snapshot and a replay of the largest graph, and the peak memory.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use streamrag_operators::graph::{GraphState, GraphStore};
use streamrag_operators::kg_writer::{KgWriter, LiveGraph};
use streamrag_operators::runtime::Operator;
use streamrag_operators::metrics::quantile;
use streamrag_operators::progress::NoProgress;
use streamrag_operators::snapshot;
use streamrag_operators::transport::Record;
use streamrag_operators::Topics;
use streamrag_schemas::{encode, EntityRef, GraphDelta, ResolvedTriple, SourceRef, SCHEMA_VERSION};

use super::{peak_rss_mib, rss_mib};
use crate::synth::Lcg;

/// Synthetic pre-resolved documents: each links its own entity and random others (skewed
/// towards frequent ones) by one of 40 relations.
struct Gen {
    rng: Lcg,
    vocabulary: usize,
    per_doc: usize,
}

impl Gen {
    fn delta(&mut self, doc: usize, version: u64, offset: i64) -> GraphDelta {
        let me = format!("doc entity {doc}");
        let mut triples = Vec::with_capacity(self.per_doc);
        for k in 0..self.per_doc {
            let u = (self.rng.next_u64() % 1_000_000) as f64 / 1e6;
            let other = format!("entity {}", (self.vocabulary as f64 * u * u) as usize);
            let rel = format!("relation {}", (self.rng.next_u64() as usize + k + version as usize) % 40);
            let (s, o) = if k % 3 == 2 { (other.clone(), me.clone()) } else { (me.clone(), other.clone()) };
            triples.push(ResolvedTriple { subject_id: s.clone(), subject: s, relation: rel, object_id: o.clone(), object: o });
        }
        GraphDelta {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: Default::default(),
            doc_id: format!("doc-{doc}"),
            title: format!("Document {doc}"),
            entities: vec![EntityRef { id: me.clone(), name: me }],
            triples,
            links: vec![],
            source: SourceRef { topic: "streamrag.docs".into(), partition: 0, offset, timestamp_ms: None },
        }
    }
}

/// Document updates timed at each size, one per batch.
const UPDATES: usize = 5000;

fn record(topic: &str, offset: i64, d: &GraphDelta) -> Record {
    Record { topic: topic.into(), partition: 0, offset, key: Some(d.doc_id.clone().into_bytes()), payload: encode(d), timestamp_ms: 0 }
}

#[derive(Args)]
pub struct BenchGraphArgs {
    /// Graph sizes in triples at which to measure.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    pub sizes: Vec<usize>,
    /// Triples per synthetic document.
    #[arg(long, default_value_t = 10)]
    pub triples_per_doc: usize,
}

pub async fn run(a: BenchGraphArgs) -> Result<()> {
    graph(&a.sizes, a.triples_per_doc).await
}

async fn graph(sizes: &[usize], per_doc: usize) -> Result<()> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    let largest = *sizes.last().context("no sizes")?;
    let dir = std::env::temp_dir().join(format!("streamrag-bench-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let topics = Topics::default();
    let topic = topics.graph_deltas.clone();
    let live = LiveGraph::new(GraphState::new());
    let (tx, _rx) = tokio::sync::watch::channel(0);
    let mut writer = KgWriter::new(topics, live.clone(), Some(GraphStore::open(&dir.join("graph"))?), tx);
    let mut gen = Gen { rng: Lcg::new(7), vocabulary: (largest / 2).max(1000), per_doc };
    let mut offset: i64 = 0;
    let mut docs = 0usize;
    println!("bench graph: kg-writer on pre-resolved deltas ({per_doc} triples/document), sled persisted, batches of 256; apply rate over the writer's time (the deltas are made and encoded outside it)");
    println!(
        "{:>10} {:>12} {:>13} {:>14} {:>14} {:>14} {:>9} {:>14}",
        "triples", "apply trip/s", "last 10% t/s", "update p50 ms", "update p99 ms", "peak RSS MiB", "RSS MiB", "RSS B/triple"
    );
    // what the process holds before any graph (binary, runtime, sled's cache not yet filled)
    let base_mib = rss_mib();
    let t_all = Instant::now();
    for &size in &sizes {
        // the writer's time only: making and encoding the synthetic deltas is the producer's
        let mut apply_s = 0.0;
        let mut sent_triples = 0usize;
        // the rate over the last tenth of the way, where the graph is largest
        let tail_from = size - size / 10;
        let mut tail_start: Option<(f64, usize)> = None;
        while live.current().triple_count() < size {
            if tail_start.is_none() && live.current().triple_count() >= tail_from {
                tail_start = Some((apply_s, sent_triples));
            }
            let batch: Vec<Record> = (0..256)
                .map(|_| {
                    let d = gen.delta(docs, 0, offset);
                    sent_triples += d.triples.len();
                    docs += 1;
                    let r = record(&topic, offset, &d);
                    offset += 1;
                    r
                })
                .collect();
            let t = Instant::now();
            writer.process_batch(&batch).await?;
            writer.after_commit(&batch);
            apply_s += t.elapsed().as_secs_f64();
        }
        let (tail_s, tail_triples) = tail_start.unwrap_or((0.0, 0));
        let tail_rate = (sent_triples - tail_triples) as f64 / (apply_s - tail_s).max(1e-9);
        // Updates: a new version of an existing document, one per batch, as it would arrive
        // (enough of them that the p99 is not a handful of samples).
        let mut lat = Vec::new();
        for k in 0..UPDATES {
            let doc = (k * 7919) % docs;
            let d = gen.delta(doc, 1 + k as u64, offset);
            let r = [record(&topic, offset, &d)];
            offset += 1;
            let t = Instant::now();
            writer.process_batch(&r).await?;
            writer.after_commit(&r);
            lat.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (triples, rss) = (live.current().triple_count(), rss_mib());
        println!(
            "{:>10} {:>12.0} {:>13.0} {:>14.3} {:>14.3} {:>14.0} {:>9.0} {:>14.0}",
            triples,
            sent_triples as f64 / apply_s,
            tail_rate,
            quantile(&mut lat, 0.5),
            quantile(&mut lat, 0.99),
            peak_rss_mib(),
            rss,
            (rss - base_mib) * 1048576.0 / triples as f64
        );
        let g = live.current();
        println!("  {} entities, {} documents; {}", g.entity_count(), g.document_count(), snapshot_and_replay(&g, &dir)?);
        // what the replayed copy freed goes back to the system, so the next size's resident
        // figure is its graph's, not the high-water mark of this replay
        trim();
    }
    println!("(RSS B/triple: resident memory after the updates less {base_mib:.0} MiB resident before the graph, per live triple; sled's page cache is up to 64 MiB of it)");
    println!("all sizes in {:.1}s; peak RSS {:.0} MiB (a snapshot read back is a second graph)", t_all.elapsed().as_secs_f64(), peak_rss_mib());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Writes a snapshot of `g`, reads it back into a queryable graph (digest checked) and persists
/// that into a fresh sled store; the three times, on one line.
fn snapshot_and_replay(g: &GraphState, dir: &std::path::Path) -> Result<String> {
    let (snap, replayed) = (dir.join("snap"), dir.join("replayed"));
    let _ = std::fs::remove_dir_all(&snap);
    let _ = std::fs::remove_dir_all(&replayed);
    let t = Instant::now();
    let m = snapshot::write(g, &snap, &mut NoProgress)?;
    let snap_s = t.elapsed().as_secs_f64();
    let rows: u64 = m.rows.values().sum();
    let t = Instant::now();
    let (back, _) = snapshot::read(&snap, &mut NoProgress)?;
    let read_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let store = GraphStore::open(&replayed)?;
    store.persist_all(&back, 200_000, |_| {})?;
    let persist_s = t.elapsed().as_secs_f64();
    Ok(format!(
        "snapshot {rows} rows in {snap_s:.2}s ({:.0} rows/s); replay (snapshot -> queryable graph, digest checked) {read_s:.2}s; its persist to a fresh sled store {persist_s:.2}s",
        rows as f64 / snap_s
    ))
}

/// Returns the allocator's free memory to the system (the binary allocates with mimalloc, so
/// glibc's `malloc_trim` would release nothing of the graph's).
fn trim() {
    // SAFETY: mi_collect only frees and returns memory no allocation uses; safe at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
