//! `streamrag bench pipeline`: documents/s through the whole pipeline with the built-in
//! extractor, against the extractor alone in the same process, and with `--brokers`
//! against the embedded run of the same documents in the same command. The clock starts once
//! a few warm-up documents are queryable, so the rate is the pipeline's and not its start's
//! (a Kafka consumer joining its group takes seconds); the start is printed apart.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;

use super::isolate_bench_run;
use crate::cmd::{node_config, Conn};
use crate::config::FileConfig;
use crate::node::Node;
use crate::synth;

#[derive(Args)]
pub struct BenchPipelineArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Number of synthetic documents.
    #[arg(long, value_parser = super::super::at_least_one, default_value_t = 5000)]
    pub docs: usize,
}

/// Documents published and awaited before the clock starts: they carry every stage through its
/// start (a Kafka consumer joining its group takes seconds, once per process).
const WARM_UP: usize = 200;

/// One run through a fresh node on `conn`'s transport.
struct Run {
    transport: &'static str,
    /// From start to the warm-up documents queryable.
    ready_s: f64,
    /// Seconds to acknowledge the ingest, and until the graph holds every document.
    ingest_s: f64,
    total_s: f64,
    /// What each stage of the path spent on the timed documents.
    stages: Vec<StageTime>,
}

/// A stage's batches, and the seconds it spent on them and, of those, producing.
struct StageTime {
    stage: &'static str,
    batches: u64,
    busy_s: f64,
    produce_s: f64,
}

/// The stages a document crosses, in order.
const PATH: [&str; 3] = ["openie", "resolve", "kg-writer"];

fn stage_times() -> Vec<StageTime> {
    PATH.iter()
        .map(|&stage| {
            let m = streamrag_operators::metrics::global().stage(stage);
            StageTime { stage, batches: m.batch_seconds.count(), busy_s: m.batch_seconds.sum_seconds(), produce_s: m.produce_seconds.sum_seconds() }
        })
        .collect()
}

/// `warm` then, timed, `docs` through a fresh node on `conn`'s transport.
async fn through(conn: &Conn, warm: &[streamrag_schemas::Document], docs: &[streamrag_schemas::Document], file: &FileConfig) -> Result<Run> {
    let dir = crate::scratch_dir("streamrag-demo")?;
    let mut cfg = node_config(conn, &dir, file);
    isolate_bench_run(&mut cfg);
    let t0 = Instant::now();
    let (node, tasks) = Node::start(cfg).await?;
    let mut applied = node.applied.clone();
    node.publish_documents(warm).await?;
    tokio::time::timeout(Duration::from_secs(300), applied.wait_for(|&n| n >= warm.len())).await.context("the warm-up documents did not arrive")??;
    let ready_s = t0.elapsed().as_secs_f64();
    // the process's stage metrics add up over runs: what this one's timed part adds
    let before = stage_times();
    let t1 = Instant::now();
    for chunk in docs.chunks(1000) {
        node.publish_documents(chunk).await?;
    }
    let ingest_s = t1.elapsed().as_secs_f64();
    tokio::time::timeout(Duration::from_secs(600), applied.wait_for(|&n| n >= warm.len() + docs.len())).await.context("pipeline did not finish")??;
    let total_s = t1.elapsed().as_secs_f64();
    let stages = stage_times()
        .into_iter()
        .zip(before)
        .map(|(a, b)| StageTime { stage: a.stage, batches: a.batches - b.batches, busy_s: a.busy_s - b.busy_s, produce_s: a.produce_s - b.produce_s })
        .collect();
    tasks.join(&node).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Run { transport: node.transport.name(), ready_s, ingest_s, total_s, stages })
}

pub async fn run(a: BenchPipelineArgs, file: FileConfig) -> Result<()> {
    let (mut docs, _) = synth::corpus(a.docs + WARM_UP, 1);
    let warm: Vec<_> = docs.drain(..WARM_UP).collect();
    // Baseline in the same process: the built-in extractor alone, no transport, no store.
    let t0 = Instant::now();
    let mut triples = 0;
    for d in &docs {
        triples += streamrag_operators::extract::extract(&d.title, d.text.as_deref().unwrap_or("")).triples.len();
    }
    let extract_rate = docs.len() as f64 / t0.elapsed().as_secs_f64();
    // with brokers, the embedded run of the same documents first: the baseline the Kafka path
    // is measured against
    let embedded = match &a.conn.brokers {
        Some(_) => Some(through(&Conn { brokers: None, ..a.conn.clone() }, &warm, &docs, &file).await?),
        None => None,
    };
    let r = through(&a.conn, &warm, &docs, &file).await?;
    let rate = docs.len() as f64 / r.total_s;
    println!("bench pipeline: transport {}, {} documents after {WARM_UP} to warm up, {} triples extracted", r.transport, docs.len(), triples);
    println!("  built-in extractor alone (baseline, same process): {extract_rate:.0} docs/s");
    println!("  start to the warm-up documents queryable:          {:.2}s (the stages start; a Kafka consumer joins its group)", r.ready_s);
    println!("  ingest acknowledged:                               {:.0} docs/s ({:.2}s)", docs.len() as f64 / r.ingest_s, r.ingest_s);
    println!("  end to end (ingest -> queryable graph):            {rate:.0} docs/s ({:.2}s)", r.total_s);
    println!("  pipeline / extractor-alone ratio:                  {:.3}", rate / extract_rate);
    let profile = |run: &Run| {
        let parts: Vec<String> = run.stages.iter().map(|t| format!("{} {} batches, busy {:.2}s ({:.2}s producing)", t.stage, t.batches, t.busy_s, t.produce_s)).collect();
        println!("  {:<51}{}", format!("stages on {}:", run.transport), parts.join("; "));
    };
    profile(&r);
    if let Some(e) = &embedded {
        profile(e);
    }
    if let Some(e) = embedded {
        let base = docs.len() as f64 / e.total_s;
        println!("  the same documents embedded, same process:         {base:.0} docs/s ({:.2}s; warm-up queryable {:.2}s after start)", e.total_s, e.ready_s);
        println!("  {:<51}{:.2}", format!("{} / embedded ratio:", r.transport), rate / base);
        println!(
            "  {:<51}{:.2}",
            format!("{} / embedded, from start (warm-up included):", r.transport),
            (e.ready_s + e.total_s) / (r.ready_s + r.total_s)
        );
    }
    Ok(())
}
