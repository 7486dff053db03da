//! `streamrag bench ...`: benchmarks that print figures, each against a baseline measured in
//! the same command.

pub mod extract;
pub mod freshness;
pub mod glm;
pub mod graph;
pub mod pipeline;
pub mod resolve;
pub mod subscriptions;

use anyhow::Result;
use clap::Subcommand;

use crate::config::FileConfig;
use crate::node::NodeConfig;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Documents/s through the whole pipeline with the built-in extractor.
    Pipeline(pipeline::BenchPipelineArgs),
    /// kg-writer apply rate and update latency at growing graph sizes, then snapshot and
    /// replay time and peak memory at the largest.
    Graph(graph::BenchGraphArgs),
    /// GLM encoder latency and throughput on a synthetic subgraph with T5 dimensions.
    Glm(glm::BenchGlmArgs),
    /// The built-in extractor alone: documents/s with concepts against names only.
    Extract(extract::BenchExtractArgs),
    /// Freshness (document topic timestamp -> queryable) and consumer lag while documents with
    /// pre-extracted triples stream in at a fixed rate.
    Freshness(freshness::BenchFreshnessArgs),
    /// Entity resolution: names/s at growing entity counts (HNSW against exact search), and
    /// merge precision / recall on aliases built from 2WikiMultihopQA titles.
    Resolve(resolve::BenchResolveArgs),
    /// Standing queries: acknowledgement -> changed answer on the topic while documents stream
    /// in, and evaluations per document against evaluating every subscription at every change.
    Subscriptions(subscriptions::BenchSubscriptionsArgs),
}

pub async fn run(cmd: BenchCmd, file: FileConfig) -> Result<()> {
    match cmd {
        BenchCmd::Pipeline(a) => pipeline::run(a, file).await,
        BenchCmd::Graph(a) => graph::run(a).await,
        BenchCmd::Glm(a) => glm::run(a),
        BenchCmd::Extract(a) => tokio::task::spawn_blocking(move || extract::run(a)).await?,
        BenchCmd::Freshness(a) => freshness::run(a, file).await,
        BenchCmd::Resolve(a) => tokio::task::spawn_blocking(move || resolve::run(a)).await?,
        BenchCmd::Subscriptions(a) => subscriptions::run(a, file).await,
    }
}

/// Latency samples (seconds) as "N samples: p50 .. ms, p90 .. ms, p99 .. ms, max .. ms".
pub fn latency_line(s: &mut [f64]) -> String {
    let q = |s: &mut [f64], p: f64| streamrag_operators::metrics::quantile(s, p) * 1e3;
    format!("{} samples: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms", s.len(), q(s, 0.5), q(s, 0.9), q(s, 0.99), q(s, 1.0))
}

/// Peak resident memory of this process (VmHWM), in MiB.
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// The memory resident now, in MiB (NaN where /proc cannot tell).
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// On Kafka, fresh topics and groups so a benchmark's figures are its run's alone.
fn isolate_bench_run(cfg: &mut NodeConfig) {
    if cfg.transport.brokers.is_some() {
        let run_id = streamrag_operators::transport::now_ms();
        for name in cfg.topics.all_mut() {
            *name = format!("{name}.bench-{run_id}");
        }
        cfg.group_prefix = format!("streamrag.bench-{run_id}");
    }
}
