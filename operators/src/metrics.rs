//! Process-wide metrics and their one renderer (the Prometheus text format): per stage records
//! in / out / dead-lettered, batch processing latency and consumer lag; freshness (a document's
//! topic timestamp to the moment its triples are queryable); the LLMs' calls and tokens per
//! role, the extraction cache; the graph's size. No dependency: counters are atomics,
//! histograms have fixed buckets.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use crate::llm::{Llm, LlmStats};
use crate::llm_extract::ExtractStats;

/// Bucket upper bounds in seconds: 1 ms to 5 min.
const BOUNDS: [f64; 18] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, f64::INFINITY];

#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BOUNDS.len()],
    sum_us: AtomicU64,
    /// Raw samples (seconds), kept only while a benchmark asks for exact quantiles.
    samples: Mutex<Option<Vec<f64>>>,
}

impl Histogram {
    pub fn observe(&self, seconds: f64) {
        let s = seconds.max(0.0);
        let i = BOUNDS.iter().position(|b| s <= *b).unwrap_or(BOUNDS.len() - 1);
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add((s * 1e6) as u64, Relaxed);
        if let Some(v) = self.samples.lock().expect("samples lock").as_mut() {
            v.push(s);
        }
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// The sum of the observed seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_us.load(Relaxed) as f64 / 1e6
    }

    /// Starts keeping raw samples (dropping any kept before).
    pub fn keep_samples(&self) {
        *self.samples.lock().expect("samples lock") = Some(Vec::new());
    }

    /// The raw samples kept since [`Histogram::keep_samples`], sorted.
    pub fn samples(&self) -> Vec<f64> {
        let mut v = self.samples.lock().expect("samples lock").clone().unwrap_or_default();
        v.sort_by(f64::total_cmp);
        v
    }

    fn render(&self, name: &str, labels: &str, out: &mut String) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cum = 0;
        for (b, c) in BOUNDS.iter().zip(&self.counts) {
            cum += c.load(Relaxed);
            let le = if b.is_infinite() { "+Inf".to_string() } else { b.to_string() };
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cum}");
        }
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum_us.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{{{labels}}} {cum}");
    }
}

/// The q-quantile (0..=1, nearest rank) of `samples`, which it sorts; NaN when empty.
pub fn quantile(samples: &mut [f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}

#[derive(Debug, Default)]
pub struct StageMetrics {
    pub records_in: AtomicU64,
    pub records_out: AtomicU64,
    pub dead_lettered: AtomicU64,
    /// Processing time of each batch (process, produce, commit), per batch.
    pub batch_seconds: Histogram,
    /// Of that, the time spent producing the batch's outputs until every one was acknowledged
    /// (the broker's round trip on Kafka, the local log's append embedded).
    pub produce_seconds: Histogram,
    /// Records behind the end of the input topic, as of the last measurement.
    pub lag: AtomicI64,
}

#[derive(Debug)]
pub struct Metrics {
    stages: Mutex<BTreeMap<String, Arc<StageMetrics>>>,
    /// Document topic timestamp -> its triples queryable in the live graph, by graph
    /// (`writer` or `replica`).
    freshness: Mutex<BTreeMap<&'static str, Arc<Histogram>>>,
    /// (role, model, counters) of each LLM this process opened.
    llms: Mutex<Vec<(&'static str, String, Arc<LlmStats>)>>,
    /// The LLM extractor's cache and validation counters, when openie runs with one.
    extractor: Mutex<Option<Arc<ExtractStats>>>,
    /// Live documents in the graph this process writes or replicates; -1: none.
    pub graph_documents: AtomicI64,
    /// Counters and gauges a component registered by name ([`Metrics::counter`],
    /// [`Metrics::gauge`]): name -> (help, kind, value).
    named: Mutex<BTreeMap<&'static str, (&'static str, &'static str, Arc<AtomicI64>)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            stages: Mutex::default(),
            freshness: Mutex::default(),
            llms: Mutex::default(),
            extractor: Mutex::default(),
            graph_documents: AtomicI64::new(-1),
            named: Mutex::default(),
        }
    }
}

impl Metrics {
    /// Counts an LLM's calls and tokens under its role.
    pub fn register_llm(&self, role: &'static str, llm: &Llm) {
        self.llms.lock().expect("metrics lock").push((role, llm.model_id(), llm.stats_handle()));
    }

    pub fn register_extractor(&self, stats: Arc<ExtractStats>) {
        *self.extractor.lock().expect("metrics lock") = Some(stats);
    }

    /// A counter of its own, rendered as `name` (the same one on every call with that name).
    pub fn counter(&self, name: &'static str, help: &'static str) -> Arc<AtomicI64> {
        self.named(name, help, "counter")
    }

    /// A gauge of its own, rendered as `name`.
    pub fn gauge(&self, name: &'static str, help: &'static str) -> Arc<AtomicI64> {
        self.named(name, help, "gauge")
    }

    fn named(&self, name: &'static str, help: &'static str, kind: &'static str) -> Arc<AtomicI64> {
        self.named.lock().expect("metrics lock").entry(name).or_insert_with(|| (help, kind, Arc::default())).2.clone()
    }

    pub fn stage(&self, name: &str) -> Arc<StageMetrics> {
        self.stages.lock().expect("metrics lock").entry(name.to_string()).or_default().clone()
    }

    pub fn freshness(&self, graph: &'static str) -> Arc<Histogram> {
        self.freshness.lock().expect("metrics lock").entry(graph).or_default().clone()
    }

    /// Everything, in the Prometheus text exposition format.
    pub fn render(&self, out: &mut String) {
        let stages = self.stages.lock().expect("metrics lock").clone();
        let by_stage = |get: fn(&StageMetrics) -> i64| stages.iter().map(move |(s, m)| (format!("stage=\"{s}\""), get(m))).collect::<Vec<_>>();
        family(out, "streamrag_stage_records_in_total", "counter", "Records a stage consumed", by_stage(|m| m.records_in.load(Relaxed) as i64));
        family(out, "streamrag_stage_records_out_total", "counter", "Records a stage produced (dead letters excluded)", by_stage(|m| m.records_out.load(Relaxed) as i64));
        family(out, "streamrag_stage_dead_lettered_total", "counter", "Records a stage sent to the dead-letter topic", by_stage(|m| m.dead_lettered.load(Relaxed) as i64));
        family(out, "streamrag_stage_consumer_lag", "gauge", "Records behind the end of the stage's input topic", by_stage(|m| m.lag.load(Relaxed)));
        let name = "streamrag_stage_batch_seconds";
        family(out, name, "histogram", "Time to process, produce and commit one batch", []);
        for (stage, m) in &stages {
            m.batch_seconds.render(name, &format!("stage=\"{stage}\""), out);
        }
        let name = "streamrag_stage_produce_seconds";
        family(out, name, "histogram", "Time to produce one batch's outputs until all are acknowledged", []);
        for (stage, m) in &stages {
            m.produce_seconds.render(name, &format!("stage=\"{stage}\""), out);
        }
        let name = "streamrag_freshness_seconds";
        family(out, name, "histogram", "From a document's topic timestamp to its triples being queryable", []);
        for (graph, h) in self.freshness.lock().expect("metrics lock").iter() {
            h.render(name, &format!("graph=\"{graph}\""), out);
        }
        let llms = self.llms.lock().expect("metrics lock").clone();
        let by_llm = |get: fn(&LlmStats) -> u64| {
            llms.iter().map(move |(role, model, st)| (format!("role=\"{role}\",model=\"{}\"", model.replace('"', "'")), get(st) as i64)).collect::<Vec<_>>()
        };
        family(out, "streamrag_llm_calls_total", "counter", "LLM requests sent (retries included)", by_llm(|st| st.calls.load(Relaxed)));
        family(out, "streamrag_llm_failures_total", "counter", "LLM requests that failed", by_llm(|st| st.failures.load(Relaxed)));
        family(out, "streamrag_llm_prompt_tokens_total", "counter", "Prompt tokens sent to the LLM", by_llm(|st| st.prompt_tokens.load(Relaxed)));
        family(out, "streamrag_llm_completion_tokens_total", "counter", "Tokens the LLM generated", by_llm(|st| st.completion_tokens.load(Relaxed)));
        family(out, "streamrag_llm_prefill_microseconds_total", "counter", "Local model: time reading prompts", by_llm(|st| st.prefill_us.load(Relaxed)));
        family(out, "streamrag_llm_decode_microseconds_total", "counter", "Local model: time generating", by_llm(|st| st.decode_us.load(Relaxed)));
        if let Some(x) = self.extractor.lock().expect("metrics lock").clone() {
            let one = |v: &AtomicU64| [(String::new(), v.load(Relaxed) as i64)];
            family(out, "streamrag_llm_cache_hits_total", "counter", "Extraction steps answered from the LLM response cache", one(&x.cache_hits));
            family(out, "streamrag_llm_cache_misses_total", "counter", "Extraction steps that needed the LLM", one(&x.cache_misses));
            family(out, "streamrag_llm_unreadable_total", "counter", "LLM responses that did not parse", one(&x.unreadable));
            family(out, "streamrag_llm_dropped_triples_total", "counter", "Extracted triples dropped by validation", one(&x.dropped_triples));
        }
        let docs = self.graph_documents.load(Relaxed);
        if docs >= 0 {
            family(out, "streamrag_graph_documents", "gauge", "Live documents in the graph", [(String::new(), docs)]);
        }
        for (name, (help, kind, v)) in self.named.lock().expect("metrics lock").iter() {
            family(out, name, kind, help, [(String::new(), v.load(Relaxed))]);
        }
    }
}

/// One metric family: its HELP and TYPE lines, then one sample per (labels, value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: impl IntoIterator<Item = (String, i64)>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_render_cumulative_buckets() {
        let h = Histogram::default();
        h.keep_samples();
        for s in [0.0005, 0.02, 0.02, 3.0, 1000.0] {
            h.observe(s);
        }
        let mut out = String::new();
        h.render("x", "a=\"b\"", &mut out);
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.001\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.025\"} 3\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"5\"} 4\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 5\n"), "{out}");
        assert!(out.contains("x_count{a=\"b\"} 5\n"), "{out}");
        let mut s = h.samples();
        assert_eq!((quantile(&mut s, 0.5), quantile(&mut s, 1.0)), (0.02, 1000.0));
        assert_eq!(quantile(&mut [3.0, 1.0, 2.0], 0.5), 2.0, "unsorted samples are sorted first");
        assert!(quantile(&mut [], 0.5).is_nan());
    }

    #[test]
    fn one_renderer_writes_stage_llm_and_graph_families() {
        let m = Metrics::default();
        m.stage("openie").records_in.fetch_add(3, Relaxed);
        m.stage("openie").lag.store(-1, Relaxed);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("# HELP streamrag_stage_records_in_total Records a stage consumed\n# TYPE streamrag_stage_records_in_total counter\nstreamrag_stage_records_in_total{stage=\"openie\"} 3\n"), "{out}");
        assert!(out.contains("streamrag_stage_consumer_lag{stage=\"openie\"} -1\n"), "{out}");
        assert!(out.contains("# TYPE streamrag_llm_calls_total counter\n"), "{out}");
        assert!(!out.contains("streamrag_graph_documents"), "no graph in this process: {out}");
        m.graph_documents.store(7, Relaxed);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("# TYPE streamrag_graph_documents gauge\nstreamrag_graph_documents 7\n"), "{out}");
    }
}
