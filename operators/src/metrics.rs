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
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            stages: Mutex::default(),
            freshness: Mutex::default(),
            llms: Mutex::default(),
            extractor: Mutex::default(),
            graph_documents: AtomicI64::new(-1),
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

    pub fn stage(&self, name: &str) -> Arc<StageMetrics> {
        self.stages.lock().expect("metrics lock").entry(name.to_string()).or_default().clone()
    }

    pub fn freshness(&self, graph: &'static str) -> Arc<Histogram> {
        self.freshness.lock().expect("metrics lock").entry(graph).or_default().clone()
    }

    /// Everything, in the Prometheus text exposition format.
    pub fn render(&self, out: &mut String) {
        let stages = self.stages.lock().expect("metrics lock").clone();
        type Counter = fn(&StageMetrics) -> u64;
        let counters: [(&str, &str, Counter); 3] = [
            ("streamrag_stage_records_in_total", "Records a stage consumed", |m| m.records_in.load(Relaxed)),
            ("streamrag_stage_records_out_total", "Records a stage produced (dead letters excluded)", |m| m.records_out.load(Relaxed)),
            ("streamrag_stage_dead_lettered_total", "Records a stage sent to the dead-letter topic", |m| m.dead_lettered.load(Relaxed)),
        ];
        for (name, help, get) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (stage, m) in &stages {
                let _ = writeln!(out, "{name}{{stage=\"{stage}\"}} {}", get(m));
            }
        }
        let name = "streamrag_stage_consumer_lag";
        let _ = writeln!(out, "# HELP {name} Records behind the end of the stage's input topic\n# TYPE {name} gauge");
        for (stage, m) in &stages {
            let _ = writeln!(out, "{name}{{stage=\"{stage}\"}} {}", m.lag.load(Relaxed));
        }
        let name = "streamrag_stage_batch_seconds";
        let _ = writeln!(out, "# HELP {name} Time to process, produce and commit one batch\n# TYPE {name} histogram");
        for (stage, m) in &stages {
            m.batch_seconds.render(name, &format!("stage=\"{stage}\""), out);
        }
        let name = "streamrag_freshness_seconds";
        let _ = writeln!(out, "# HELP {name} From a document's topic timestamp to its triples being queryable\n# TYPE {name} histogram");
        for (graph, h) in self.freshness.lock().expect("metrics lock").iter() {
            h.render(name, &format!("graph=\"{graph}\""), out);
        }
        self.render_llms(out);
        let docs = self.graph_documents.load(Relaxed);
        if docs >= 0 {
            let name = "streamrag_graph_documents";
            let _ = writeln!(out, "# HELP {name} Live documents in the graph\n# TYPE {name} gauge\n{name} {docs}");
        }
    }

    fn render_llms(&self, out: &mut String) {
        let llms = self.llms.lock().expect("metrics lock").clone();
        type Counter = fn(&LlmStats) -> u64;
        let families: [(&str, &str, Counter); 6] = [
            ("streamrag_llm_calls_total", "LLM requests sent (retries included)", |st| st.calls.load(Relaxed)),
            ("streamrag_llm_failures_total", "LLM requests that failed", |st| st.failures.load(Relaxed)),
            ("streamrag_llm_prompt_tokens_total", "Prompt tokens sent to the LLM", |st| st.prompt_tokens.load(Relaxed)),
            ("streamrag_llm_completion_tokens_total", "Tokens the LLM generated", |st| st.completion_tokens.load(Relaxed)),
            ("streamrag_llm_prefill_microseconds_total", "Local model: time reading prompts", |st| st.prefill_us.load(Relaxed)),
            ("streamrag_llm_decode_microseconds_total", "Local model: time generating", |st| st.decode_us.load(Relaxed)),
        ];
        for (name, help, get) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (role, model, st) in &llms {
                let _ = writeln!(out, "{name}{{role=\"{role}\",model=\"{}\"}} {}", model.replace('"', "'"), get(st));
            }
        }
        if let Some(x) = self.extractor.lock().expect("metrics lock").clone() {
            for (name, help, v) in [
                ("streamrag_llm_cache_hits_total", "Extraction steps answered from the LLM response cache", x.cache_hits.load(Relaxed)),
                ("streamrag_llm_cache_misses_total", "Extraction steps that needed the LLM", x.cache_misses.load(Relaxed)),
                ("streamrag_llm_unreadable_total", "LLM responses that did not parse", x.unreadable.load(Relaxed)),
                ("streamrag_llm_dropped_triples_total", "Extracted triples dropped by validation", x.dropped_triples.load(Relaxed)),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
            }
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
}
