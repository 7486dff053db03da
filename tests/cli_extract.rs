//! `streamrag bench extract` through the real binary: the name layer alone against names and
//! concepts over a dataset's passages, with a hash of what each extracted.

mod common;

use common::*;

#[test]
fn bench_extract_measures_both_layers_and_concepts_find_more_in_lower_case_text() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = serde_json::json!([
        {"title": "p0", "text": "aspirin reduces the risk of myocardial infarction in patients with stable angina. it is taken daily."},
        {"title": "p1", "text": "heart failure is treated with beta blockers. the dose is raised slowly."},
        {"title": "Ada Lovelace", "text": "Ada Lovelace was born in London. She worked with Charles Babbage."},
    ]);
    std::fs::write(dir.path().join("corpus.json"), corpus.to_string()).unwrap();
    let questions = serde_json::json!([{"id": "q0", "question": "what reduces the risk of myocardial infarction?", "question_type": "compositional", "gold_titles": ["p0"], "answer": "aspirin"}]);
    std::fs::write(dir.path().join("questions.json"), questions.to_string()).unwrap();
    let out = streamrag(&["bench", "extract", "--dataset", dir.path().to_str().unwrap(), "--passes", "2"]);
    let row = |layers: &str| -> Vec<String> {
        let line = out.lines().find(|l| l.starts_with(&format!("| {layers} |"))).unwrap_or_else(|| panic!("no row {layers:?} in {out}"));
        line.split('|').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect()
    };
    let (names, both) = (row("names only"), row("names and concepts"));
    assert!(out.contains("3 passages"), "{out}");
    // columns: layers, documents/s, MB/s, entities, triples, output hash, time against names only
    let num = |r: &[String], i: usize| r[i].parse::<f64>().unwrap_or_else(|_| panic!("{r:?}"));
    assert!(num(&names, 1) > 0.0 && num(&both, 1) > 0.0, "{out}");
    assert!(num(&both, 3) > num(&names, 3) && num(&both, 4) > num(&names, 4), "the lower-case passages give concepts: {out}");
    assert_ne!(names[5], both[5], "different output, different hash: {out}");
    assert_eq!(names[6], "1.00x", "{out}");
    // the same input extracts the same: the hash is stable across runs
    let again = streamrag(&["bench", "extract", "--dataset", dir.path().to_str().unwrap(), "--passes", "1"]);
    assert!(again.contains(&both[5]), "{again}");
}
