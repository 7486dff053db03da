//! `streamrag bench pipeline`: documents/s through the whole pipeline with the built-in
//! extractor, against the extractor alone in the same process, and with `--brokers`
//! against the embedded run of the same documents in the same command.

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

/// One run of `docs` through a fresh node on `conn`'s transport: its name, seconds to
/// acknowledge the ingest, seconds until the graph holds every document.
async fn through(conn: &Conn, docs: &[streamrag_schemas::Document], file: &FileConfig) -> Result<(&'static str, f64, f64)> {
    let dir = crate::scratch_dir("streamrag-demo")?;
    let mut cfg = node_config(conn, &dir, file);
    isolate_bench_run(&mut cfg);
    let (node, tasks) = Node::start(cfg).await?;
    let t1 = Instant::now();
    for chunk in docs.chunks(1000) {
        node.publish_documents(chunk).await?;
    }
    let ingest_s = t1.elapsed().as_secs_f64();
    let mut applied = node.applied.clone();
    tokio::time::timeout(Duration::from_secs(600), applied.wait_for(|&n| n >= docs.len())).await.context("pipeline did not finish")??;
    let total_s = t1.elapsed().as_secs_f64();
    tasks.join(&node).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((node.transport.name(), ingest_s, total_s))
}

pub async fn run(a: BenchPipelineArgs, file: FileConfig) -> Result<()> {
    let (docs, _) = synth::corpus(a.docs, 1);
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
        Some(_) => Some(through(&Conn { brokers: None, ..a.conn.clone() }, &docs, &file).await?),
        None => None,
    };
    let (transport, ingest_s, total_s) = through(&a.conn, &docs, &file).await?;
    let rate = docs.len() as f64 / total_s;
    println!("bench pipeline: transport {transport}, {} documents, {} triples extracted", docs.len(), triples);
    println!("  built-in extractor alone (baseline, same process): {extract_rate:.0} docs/s");
    println!("  ingest acknowledged:                               {:.0} docs/s ({ingest_s:.2}s)", docs.len() as f64 / ingest_s);
    println!("  end to end (ingest -> queryable graph):            {rate:.0} docs/s ({total_s:.2}s)");
    println!("  pipeline / extractor-alone ratio:                  {:.3}", rate / extract_rate);
    if let Some((_, _, embedded_s)) = embedded {
        let base = docs.len() as f64 / embedded_s;
        println!("  the same documents embedded, same process:         {base:.0} docs/s ({embedded_s:.2}s)");
        println!("  {:<51}{:.2}", format!("{transport} / embedded ratio:"), rate / base);
    }
    Ok(())
}
