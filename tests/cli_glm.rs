//! `streamrag glm inspect` and `streamrag bench glm` through the real binary.

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::Value;

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models")
}

#[test]
fn inspect_prints_tokens_positions_mask_buckets_and_entity_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.json");
    std::fs::write(&g, r#"[["dog", "is a", "animal"], ["black poodle", "is a", "dog"]]"#).unwrap();
    let tok = models().join("t5-tokenizer/tokenizer.json");
    assert!(tok.exists(), "scripts/fetch-models.sh fetches the T5 tokenizer");
    let out = streamrag(&["glm", "inspect", "--tokenizer", tok.to_str().unwrap(), "--graph", g.to_str().unwrap(), "--mode", "local"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let tokens = v["tokens"].as_array().unwrap();
    let n = tokens.len();
    let idx = |tok: &str, node: &str| tokens.iter().position(|t| t["token"] == tok && t["node"]["id"] == node).unwrap();
    let (dog, animal) = (idx("▁dog", "dog"), idx("▁animal", "animal"));
    assert_eq!(v["relative_position"][dog][animal], 4, "'is a' is three T5 tokens: ▁is ▁ a");
    assert_eq!(v["mask"].as_array().unwrap().len(), n);
    let black = idx("▁black", "black poodle");
    assert_eq!(v["mask"][animal][black], 0, "local mode: no shared triplet");
    assert!(v["buckets"][animal][black].is_null());
    assert_eq!(v["buckets"][dog][dog], 0);
    // global mode with a question, and a checkpoint: entity vectors
    let minilm = models().join("all-MiniLM-L6-v2");
    let out = streamrag(&[
        "glm", "inspect", "--tokenizer", minilm.join("tokenizer.json").to_str().unwrap(), "--graph", g.to_str().unwrap(),
        "--question", "What is a dog?", "--checkpoint", minilm.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["num_extra_buckets"], 3);
    let ents = v["entities"].as_object().unwrap();
    assert_eq!(ents.len(), 3);
    assert_eq!(ents["dog"].as_array().unwrap().len(), 384);
}

#[test]
fn bench_glm_prints_figures() {
    let out = streamrag(&["bench", "glm", "--models", "small", "--triplets", "8", "--batch", "1,2", "--iters", "1", "--warmup", "0"]);
    let rows: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("small ")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    let qps: f64 = rows[0].split_whitespace().nth(5).unwrap().parse().unwrap();
    assert!(qps > 0.0, "{out}");
}

/// The GPU's correctness check, run on the CPU against itself: both encoders get the same
/// weights, so their entity vectors are equal (a difference would be the check's own fault).
#[test]
fn bench_glm_compares_the_same_weights_across_devices() {
    let out = streamrag(&["bench", "glm", "--models", "small", "--triplets", "8", "--iters", "1", "--warmup", "0", "--compare-cpu"]);
    let line = out.lines().find(|l| l.starts_with("small: max |cpu - ")).unwrap_or_else(|| panic!("{out}"));
    let diff: f64 = line.split(" = ").nth(1).and_then(|x| x.split_whitespace().next()).unwrap().parse().unwrap();
    let scale: f64 = line.split(" = ").nth(2).and_then(|x| x.split_whitespace().next()).unwrap().parse().unwrap();
    assert_eq!(diff, 0.0, "{out}");
    assert!(scale > 0.0, "{out}");
}
