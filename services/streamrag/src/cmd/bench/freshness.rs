//! `streamrag bench freshness`: how long a document takes from its topic timestamp to being
//! queryable, and each stage's consumer lag, while documents stream in at a fixed rate.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use streamrag_operators::metrics::global;

use super::isolate_bench_run;
use crate::cmd::{node_config, Conn};
use crate::config::FileConfig;
use crate::node::Node;
use crate::synth;

#[derive(Args)]
pub struct BenchFreshnessArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Documents per second offered.
    #[arg(long, value_parser = super::super::at_least_one, default_value_t = 1000)]
    pub rate: usize,
    /// Seconds of streaming measured.
    #[arg(long, value_parser = super::super::at_least_one, default_value_t = 30)]
    pub seconds: usize,
    /// Seconds of streaming first, not measured (consumer groups join, caches warm).
    #[arg(long, default_value_t = 5)]
    pub warmup_s: usize,
    /// Kafka partitions of the fresh topics (with --brokers).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..))]
    pub partitions: i32,
}

pub async fn run(a: BenchFreshnessArgs, file: FileConfig) -> Result<()> {
    let n = a.rate * (a.seconds + a.warmup_s);
    let warm_docs = a.rate * a.warmup_s;
    let (mut docs, _) = synth::corpus(n, 3);
    for d in &mut docs {
        let got = streamrag_operators::extract::extract(&d.title, d.text.as_deref().unwrap_or(""));
        d.triples = Some(got.triples.into_iter().map(|t| [t.subject, t.relation, t.object]).collect());
    }
    let dir = crate::scratch_dir("streamrag-bench")?;
    let mut cfg = node_config(&a.conn, &dir, &file);
    cfg.transport.partitions = a.partitions;
    // the query stage as the config file's [query] sets it (the hybrid by default)
    cfg.query.retriever = file.query.retriever_choice()?;
    isolate_bench_run(&mut cfg);
    let (node, tasks) = Node::start(cfg).await?;
    let fresh = global().freshness("writer");
    fresh.keep_samples();
    // Offer the documents in ticks of 10 ms; watch the lag gauges every 100 ms.
    let per_tick = (a.rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let stages = ["openie", "resolve", "kg-writer"];
    let mut max_lag = [0i64; 3];
    let mut lag_sum = [0i64; 3];
    let mut lag_n = 0;
    let mut t0 = Instant::now();
    let mut last_watch = Instant::now();
    let mut sent = 0;
    for chunk in docs.chunks(per_tick) {
        tick.tick().await;
        if sent < warm_docs && sent + chunk.len() >= warm_docs {
            // Warm-up over: measure from here.
            fresh.keep_samples();
            (max_lag, lag_sum, lag_n, t0) = ([0; 3], [0; 3], 0, Instant::now());
        }
        node.publish_documents(chunk).await?;
        sent += chunk.len();
        if last_watch.elapsed() >= Duration::from_millis(100) {
            last_watch = Instant::now();
            lag_n += 1;
            for (i, s) in stages.iter().enumerate() {
                let l = global().stage(s).lag.load(std::sync::atomic::Ordering::Relaxed);
                max_lag[i] = max_lag[i].max(l);
                lag_sum[i] += l;
            }
        }
    }
    let offered_s = t0.elapsed().as_secs_f64();
    let mut applied = node.applied.clone();
    tokio::time::timeout(Duration::from_secs(600), applied.wait_for(|&c| c >= n)).await.context("pipeline did not finish")??;
    let total_s = t0.elapsed().as_secs_f64();
    // the passage indexes (BM25, the passage vectors the hybrid embeds) follow the docs topic
    // beside the graph, and the fact vectors the graph changes, all off the path that makes a
    // triple queryable: how far behind they finish
    node.wait_drained(Duration::from_secs(3600)).await?;
    let indexed_s = t0.elapsed().as_secs_f64();
    tasks.join(&node).await?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = fresh.samples();
    println!(
        "bench freshness: transport {}, {} documents with pre-extracted triples offered at {} docs/s for {offered_s:.1} s after {} s of warm-up ({:.0} docs/s achieved); all queryable {total_s:.1} s after the warm-up",
        node.transport.name(),
        n - warm_docs,
        a.rate,
        a.warmup_s,
        (n - warm_docs) as f64 / offered_s
    );
    println!("  freshness (topic timestamp -> queryable), {}", super::latency_line(&mut s));
    println!(
        "  indexes of the {} retriever (BM25, passage, fact and entity-name embeddings) complete {indexed_s:.1} s after the warm-up, {:.1} s after the graph",
        node.retriever.as_ref().map(|r| r.name()).unwrap_or("no"),
        indexed_s - total_s
    );
    for (i, st) in stages.iter().enumerate() {
        println!("  consumer lag {st}: mean {:.0}, max {} records (sampled every 100 ms)", lag_sum[i] as f64 / lag_n.max(1) as f64, max_lag[i]);
    }
    Ok(())
}
