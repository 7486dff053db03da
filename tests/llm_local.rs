//! The local LLM (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, run in-process by candle) through
//! the real pipeline: it extracts triples from 5 sample documents; a replay of the docs topic
//! and a re-ingest of the same texts make no LLM call (counted on /metrics).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use streamrag_operators::graph::GraphStore;
use streamrag_operators::normalize::normalize;
use streamrag_schemas::Document;

fn gguf() -> PathBuf {
    let p = std::env::var("STREAMRAG_QWEN_GGUF").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models/qwen2.5-0.5b/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    });
    assert!(p.exists(), "scripts/fetch-models.sh fetches the Qwen2.5-Coder-0.5B GGUF into .models/qwen2.5-0.5b/");
    p
}

/// A counter on /metrics (see [`metric`]), as an integer.
fn counter(addr: &str, prefix: &str) -> u64 {
    metric(addr, prefix) as u64
}

fn wait_counter(addr: &str, prefix: &str, at_least: u64, timeout: Duration) -> u64 {
    let deadline = Instant::now() + timeout;
    loop {
        let v = counter(addr, prefix);
        if v >= at_least {
            return v;
        }
        assert!(Instant::now() < deadline, "{prefix} stayed at {v} (< {at_least}) for {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_local_model_extracts_and_replays_make_no_llm_call() {
    let model = format!("local:{}", gguf().display());
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let data_s = data.to_str().unwrap();
    let corpus = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/corpus.jsonl")).unwrap();
    let docs: Vec<Document> = corpus.lines().take(5).map(|l| serde_json::from_str(l).unwrap()).collect();
    let jsonl = tmp.path().join("docs.jsonl");
    write_jsonl(&jsonl, &docs);

    // First run: every document goes through the model (2 prompts each).
    let (mut p, addr) = start_run(&["--data", data_s, "--extract-llm", &model]);
    let t = Instant::now();
    streamrag(&["ingest", "--http", &addr, jsonl.to_str().unwrap()]);
    let s1 = wait_stats(&addr, Duration::from_secs(900), |s| s.documents == 5);
    let secs = t.elapsed().as_secs_f64();
    let calls = counter(&addr, "streamrag_llm_calls_total{role=\"extract\"");
    let generated = counter(&addr, "streamrag_llm_completion_tokens_total{role=\"extract\"");
    let prompt = counter(&addr, "streamrag_llm_prompt_tokens_total{role=\"extract\"");
    let prefill_s = counter(&addr, "streamrag_llm_prefill_microseconds_total{role=\"extract\"") as f64 / 1e6;
    let decode_s = counter(&addr, "streamrag_llm_decode_microseconds_total{role=\"extract\"") as f64 / 1e6;
    eprintln!(
        "local extraction: 5 documents in {secs:.1} s, {calls} LLM calls; prompts {prompt} tokens in {prefill_s:.1} s ({:.1} tokens/s), generated {generated} tokens in {decode_s:.1} s ({:.1} tokens/s)",
        prompt as f64 / prefill_s,
        generated as f64 / decode_s
    );
    assert!(calls >= 10, "two prompts per document: {calls}");
    assert_eq!(counter(&addr, "streamrag_llm_cache_hits_total"), 0);
    assert!(s1.triples > 0, "{s1:?}");
    p.stop();

    // The triples are well formed and their entities occur in their documents.
    let state = GraphStore::open(&data.join("graph")).unwrap().load().unwrap();
    let mut with_triples = 0;
    for d in &docs {
        let view = state.doc(&d.id).unwrap_or_else(|| panic!("document {} is in the graph", d.id));
        let text = format!(" {} ", normalize(&format!("{}\n{}", d.title, d.text.as_deref().unwrap())));
        let triples: Vec<(&str, &str, &str)> = view.triples().collect();
        with_triples += usize::from(!triples.is_empty());
        for t in &triples {
            // Entity ids are normalised names: each must occur, as whole words, in the text.
            for end in [t.0, t.2] {
                assert!(!end.is_empty() && text.contains(&format!(" {end} ")), "{end:?} of {t:?} is not in {}", d.id);
            }
            assert!(!t.1.trim().is_empty(), "{t:?}");
        }
        eprintln!("{}: {triples:?}", d.id);
    }
    assert!(with_triples >= 4, "the model found triples in {with_triples} of 5 documents");

    // Replay: a new consumer-group prefix re-reads the docs topic from the start; then the same
    // texts are ingested again. The cache answers all of it: no LLM call in this process.
    // This run also writes answers with the same model (--llm: both roles, loaded once).
    let (mut p, addr) = start_run(&["--data", data_s, "--llm", &model, "--group-prefix", "replay"]);
    wait_counter(&addr, "streamrag_llm_cache_hits_total", 10, Duration::from_secs(120));
    streamrag(&["ingest", "--http", &addr, jsonl.to_str().unwrap()]);
    wait_counter(&addr, "streamrag_llm_cache_hits_total", 20, Duration::from_secs(120));
    assert_eq!(counter(&addr, "streamrag_llm_calls_total{role=\"extract\""), 0, "a replay made LLM calls");
    let s2 = stats(&addr);
    assert_eq!((s2.documents, s2.triples, &s2.digest), (5, s1.triples, &s1.digest), "the replayed graph differs");

    // An answer written by the model from the retrieved passages.
    let question = format!("What is {} known for?", docs[0].title);
    let a: serde_json::Value = serde_json::from_str(&streamrag(&["ask", "--http", &addr, "--json", &question])).unwrap();
    let text = a["answer"].as_str().unwrap_or_else(|| panic!("no answer text: {a}"));
    eprintln!("answer to {question:?}: {text:?} (documents {})", a["documents"]);
    assert!(!text.trim().is_empty());
    assert!(counter(&addr, "streamrag_llm_calls_total{role=\"answer\"") >= 1);
    assert_eq!(counter(&addr, "streamrag_llm_calls_total{role=\"extract\""), 0);
    p.stop();
}
