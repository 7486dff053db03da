//! `streamrag train`, `streamrag eval` (glm, ppr, dense) and the query stage with a GLM
//! checkpoint, through the real binary, on a small dataset in the 2Wiki layout built from the
//! synthetic corpus (gzipped corpus, questions, derived gold titles).

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use common::*;
use serde_json::{json, Value};
use streamrag::synth;

fn gz(path: &Path, v: &Value) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    w.write_all(serde_json::to_string(v).unwrap().as_bytes()).unwrap();
    w.finish().unwrap();
}

/// 80 documents, their questions; question 13 has unresolved gold.
fn dataset(dir: &Path) -> (Vec<streamrag_schemas::Document>, usize) {
    let (docs, qs) = synth::corpus(80, 7);
    let title: HashMap<&str, &str> = docs.iter().map(|d| (d.id.as_str(), d.title.as_str())).collect();
    let corpus: Vec<Value> = docs.iter().map(|d| json!({"title": d.title, "text": d.text})).collect();
    gz(&dir.join("corpus.json.gz"), &json!(corpus));
    let kind = |q: &str| if q.starts_with("Which") { "comparison" } else { "compositional" };
    let questions: Vec<Value> =
        qs.iter().enumerate().map(|(i, q)| json!({"id": format!("q{i}"), "question": q.question, "question_type": kind(&q.question), "answer": ""})).collect();
    gz(&dir.join("questions.json.gz"), &json!(questions));
    let gold: Vec<Value> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| json!({"id": format!("q{i}"), "gold_titles": q.gold.iter().map(|g| title[g.as_str()]).collect::<Vec<_>>(), "fully_resolved": i != 13}))
        .collect();
    gz(&dir.join("gold_titles_derived.json.gz"), &json!(gold));
    (docs, qs.len())
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn train_resumes_eval_reports_and_the_query_stage_uses_the_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    std::fs::create_dir(&ds).unwrap();
    let (docs, n_questions) = dataset(&ds);
    assert!(n_questions >= 24, "{n_questions}");
    let (ds_s, m) = (ds.to_str().unwrap(), minilm());
    let ck = tmp.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    let train = |extra: &[&str]| {
        let mut a = vec!["train", "--dataset", ds_s, "--questions", "0..12", "--out", ck_s, "--epochs", "1", "--max-triplets", "40"];
        a.extend_from_slice(&["--backbone", m.to_str().unwrap(), "--question-model", m.to_str().unwrap()]);
        a.extend_from_slice(extra);
        streamrag(&a)
    };
    // two steps, stop, resume to the end of the epoch
    train(&["--max-steps", "2"]);
    let g = read(&ck.join("glm.json"));
    assert_eq!((g["training"]["steps"].as_u64(), g["training"]["epochs_done"].as_u64(), g["training"]["next"].as_u64()), (Some(2), Some(0), Some(4)), "{g}");
    for f in ["model.safetensors", "optimizer.safetensors", "backbone/config.json", "backbone/tokenizer.json", "question/model.safetensors"] {
        assert!(ck.join(f).exists(), "{f}");
    }
    let out = train(&[]);
    let g = read(&ck.join("glm.json"));
    let examples = g["training"]["examples"].as_u64().unwrap();
    assert!(examples >= 8, "most training questions are usable: {g}");
    assert_eq!(g["training"]["epochs_done"], 1);
    assert_eq!(g["training"]["steps"].as_u64().unwrap(), examples.div_ceil(2), "the resumed run did not redo the first steps: {g}");
    assert!(g["training"]["last_loss"].as_f64().unwrap().is_finite());
    assert!(out.contains("trained 0..12"), "{out}");
    assert_eq!(g["max_triplets"], 40);

    // evaluation on the other questions, all three retrievers
    let eval = |retriever: &str, extra: &[&str]| -> Value {
        let report = tmp.path().join(format!("{retriever}.json"));
        let mut a = vec!["eval", "--dataset", ds_s, "--retriever", retriever, "--questions", "12..", "--report", report.to_str().unwrap()];
        a.extend_from_slice(extra);
        let out = streamrag(&a);
        assert!(out.contains("Recall@2") && out.contains("compositional"), "{out}");
        read(&report)
    };
    let n_test = (n_questions - 12) as u64;
    let ppr = eval("ppr", &[]);
    let dense = eval("dense", &["--sentence-model", m.to_str().unwrap()]);
    let glm = eval("glm", &["--checkpoint", ck_s]);
    let bm25 = eval("bm25", &[]);
    let hybrid = eval("hybrid", &["--sentence-model", m.to_str().unwrap(), "--ablate"]);
    for (name, r) in [("ppr", &ppr), ("dense", &dense), ("glm", &glm), ("bm25", &bm25), ("hybrid", &hybrid)] {
        assert_eq!(r["retriever"], name);
        assert_eq!(r["n"].as_u64(), Some(n_test), "{name}");
        assert_eq!(r["fully_resolved"]["n"].as_u64(), Some(n_test - 1), "{name}: question 13 is unresolved");
        let types = r["by_type"].as_object().unwrap();
        assert_eq!(types.values().map(|t| t["n"].as_u64().unwrap()).sum::<u64>(), n_test, "{name}");
        let (r2, r5) = (r["recall@2"].as_f64().unwrap(), r["recall@5"].as_f64().unwrap());
        assert!((0.0..=100.0).contains(&r2) && r2 <= r5, "{name}: {r2} {r5}");
        assert_eq!(r["per_question"].as_array().unwrap().len() as u64, n_test);
        assert_eq!(r["graph"]["documents"].as_u64(), Some(docs.len() as u64));
    }
    // the baselines find most gold documents of these questions (names in the question)
    assert!(ppr["recall@5"].as_f64().unwrap() >= 50.0, "{}", ppr["recall@5"]);
    assert!(dense["recall@5"].as_f64().unwrap() >= 40.0, "{}", dense["recall@5"]);
    assert!(bm25["recall@5"].as_f64().unwrap() >= 40.0, "{}", bm25["recall@5"]);
    assert!(hybrid["recall@5"].as_f64().unwrap() >= 40.0, "{}", hybrid["recall@5"]);
    // the ablation: each part of the hybrid switched off in turn, each measured on every question
    let abl = hybrid["ablation"].as_array().unwrap();
    assert_eq!(abl.len(), 21, "{abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without the prior boost"), "the walk's passages are boosted by their prior by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without the common scaling (BM25 from 0)"), "BM25 and dense are scaled alike by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without the absolute restart"), "the restart is HippoRAG 2's by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without the concept edge weight"), "concept edges weigh less by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without hop pages"), "hop pages are on by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without titled pages"), "titled pages are on by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without qualified titles"), "pages titled with a qualifier count by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without facts per name"), "facts per named thing are on by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without fact embeddings"), "the facts' vectors are on by default: {abl:?}");
    assert!(abl.iter().any(|a| a["without"] == "without entity embeddings"), "the entity names' vectors are on by default: {abl:?}");
    assert!(abl.iter().all(|a| a["all"]["n"].as_u64() == Some(n_test)), "{abl:?}");
    // the GLM ranks entities of its subgraph: its top documents are about the question's seeds
    let seeded = glm["per_question"].as_array().unwrap().iter().filter(|q| !q["seeds"].as_array().unwrap().is_empty()).count();
    assert!(seeded as u64 >= n_test - 2, "questions link to entities: {seeded}");
    assert!(glm["recall@5"].as_f64().unwrap() > 0.0, "{}", glm["recall@5"]);

    // the query stage of `streamrag run` answers with the GLM when given the checkpoint
    let data = tmp.path().join("data");
    let (mut p, addr) = start_run(&["--data", data.to_str().unwrap(), "--checkpoint", ck_s]);
    let jsonl = tmp.path().join("docs.jsonl");
    write_jsonl(&jsonl, &docs);
    streamrag(&["ingest", "--http", &addr, jsonl.to_str().unwrap()]);
    wait_stats(&addr, std::time::Duration::from_secs(60), |s| s.documents == docs.len());
    let (_, qs) = synth::corpus(80, 7);
    let out = streamrag(&["ask", "--http", &addr, "--json", &qs[20].question]);
    let a: streamrag_schemas::Answer = serde_json::from_str(&out).unwrap();
    assert_eq!(a.retriever, "glm");
    assert!(!a.documents.is_empty() && !a.seeds.is_empty(), "{a:?}");
    p.stop();

    // once it is stopped, `ask --data` answers with the retriever the node was configured with
    let d = data.to_str().unwrap();
    let ask_data = |extra: &[&str]| -> streamrag_schemas::Answer {
        let mut a = vec!["ask", "--data", d, "--json"];
        a.extend_from_slice(extra);
        a.push(&qs[20].question);
        serde_json::from_str(&streamrag(&a)).unwrap()
    };
    // the default, the hybrid, keeps its BM25 and vector indexes under DATA
    let a = ask_data(&[]);
    assert_eq!((a.retriever.as_str(), a.documents.len()), ("hybrid", 5), "{a:?}");
    assert!(data.join("vectors").is_dir());
    // the same answer from the kept indexes (scores to rounding: sums run in hash order)
    let again = ask_data(&[]).documents;
    assert_eq!(again.iter().map(|d| &d.id).collect::<Vec<_>>(), a.documents.iter().map(|d| &d.id).collect::<Vec<_>>());
    assert!(again.iter().zip(&a.documents).all(|(x, y)| (x.score - y.score).abs() <= 1e-9 * y.score.abs().max(1.0)), "{again:?} {a:?}");
    assert_eq!(ask_data(&["--retriever", "ppr"]).retriever, "ppr");
    // BM25 indexes the stopped node's docs topic into DATA/bm25 once, then reads on from there
    let a = ask_data(&["--retriever", "bm25"]);
    assert_eq!((a.retriever.as_str(), a.documents.len()), ("bm25", 5), "{a:?}");
    assert!(data.join("bm25").is_dir());
    assert_eq!(ask_data(&["--retriever", "bm25"]).documents, a.documents, "the same answer from the kept index");
    let a = ask_data(&["--checkpoint", ck_s]);
    assert_eq!(a.retriever, "glm");
    assert!(!a.documents.is_empty(), "{a:?}");
    // the checkpoint inside the hybrid: its entities restart the walk, and the answer names it
    let fused = tmp.path().join("fused.toml");
    std::fs::write(&fused, format!("[query]\nretriever = \"hybrid\"\ncheckpoint = {ck_s:?}\n[query.hybrid]\nglm_seed = 0.3\n")).unwrap();
    let a = ask_data(&["--config", fused.to_str().unwrap()]);
    assert_eq!((a.retriever.as_str(), a.documents.len()), ("hybrid", 5), "{a:?}");
    assert!(a.checkpoint.as_deref().is_some_and(|c| c.starts_with(ck_s)), "{a:?}");
    // with its weights at 0 (the default) the hybrid does not ask it
    let a = ask_data(&["--retriever", "hybrid", "--checkpoint", ck_s]);
    assert_eq!((a.retriever.as_str(), a.checkpoint), ("hybrid", None));
    let cfg = tmp.path().join("dense.toml");
    std::fs::write(&cfg, format!("[query]\nretriever = \"dense\"\nsentence_model = {:?}\n", m.to_str().unwrap())).unwrap();
    let a = ask_data(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(a.retriever, "dense");
    // the dense index was rebuilt from the data directory's docs topic: the passages are there
    assert_eq!(a.documents.len(), 5, "{a:?}");
    assert!(a.documents.iter().any(|x| qs[20].gold.contains(&x.id)), "{a:?} gold {:?}", qs[20].gold);
}

/// The synthetic dataset in `dir/ds`: its directory and its number of questions.
fn dataset_in(dir: &Path) -> (std::path::PathBuf, usize) {
    let ds = dir.join("ds");
    std::fs::create_dir(&ds).unwrap();
    let (_, n) = dataset(&ds);
    (ds, n)
}

/// Runs the binary; (success, stdout, stderr).
fn run_bin(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(bin()).args(args).env("STREAMRAG_LOG", "warn").output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn train_on_questions_the_graph_poses_itself_from_a_nodes_data_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (ds, n_questions) = dataset_in(tmp.path());
    let (ds_s, m) = (ds.to_str().unwrap(), minilm());
    let m_s = m.to_str().unwrap();
    // a node's data directory holding the corpus (what a deployment has: no dataset, no labels)
    let data = tmp.path().join("node");
    let data_s = data.to_str().unwrap();
    streamrag(&["eval", "--dataset", ds_s, "--questions", "0..1", "--retriever", "ppr", "--data", data_s]);

    let ck = tmp.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    let train = |extra: &[&str]| {
        let mut a = vec!["train", "--self-made", "20", "--data", data_s, "--indexed", "--out", ck_s, "--epochs", "1", "--max-triplets", "40", "--backbone", m_s, "--question-model", m_s];
        a.extend_from_slice(extra);
        let (ok, out, err) = run_bin(&a);
        assert!(ok, "{a:?}: {err}");
        (out, err)
    };
    let (_, err) = train(&["--max-steps", "2"]);
    let made = err.lines().find(|l| l.contains("self-made questions:")).unwrap_or_else(|| panic!("{err}"));
    let n_made: u64 = made.split_whitespace().next().unwrap().parse().unwrap();
    assert!(n_made >= 10, "the graph poses most of what was asked: {made}");
    // "20 self-made questions: 8 facts, 8 two-hop, 4 comparisons (...)": every kind posed
    for kind in ["facts", "two-hop", "comparisons"] {
        let before = &made[..made.find(&format!(" {kind}")).unwrap_or_else(|| panic!("{made}"))];
        let n: u64 = before.rsplit([' ', ':']).next().unwrap().parse().unwrap();
        assert!(n > 0, "{kind} posed: {made}");
    }
    let g = read(&ck.join("glm.json"));
    assert_eq!(g["training"]["questions"], "self-made 20 (seed 0)", "{g}");
    assert_eq!(g["training"]["dataset"], data_s, "the node's directory is the source: {g}");
    assert_eq!(g["training"]["steps"].as_u64(), Some(2), "{g}");
    // resumed to the end of the epoch on the same questions
    let (out, _) = train(&[]);
    let g = read(&ck.join("glm.json"));
    assert_eq!(g["training"]["epochs_done"], 1, "{g}");
    assert!(g["training"]["examples"].as_u64().unwrap() >= 8, "{g}");
    assert!(out.contains("trained self-made 20 (seed 0)"), "{out}");
    // another seed is another run: refused in the same directory
    let (ok, _, err) = run_bin(&["train", "--self-made", "20", "--self-seed", "3", "--data", data_s, "--indexed", "--out", ck_s, "--backbone", m_s, "--question-model", m_s]);
    assert!(!ok && err.contains("self-made 20 (seed 3)"), "{err}");
    // the checkpoint answers through eval
    let report = tmp.path().join("glm.json");
    streamrag(&["eval", "--dataset", ds_s, "--questions", "12..", "--retriever", "glm", "--checkpoint", ck_s, "--data", data_s, "--indexed", "--report", report.to_str().unwrap()]);
    assert_eq!(read(&report)["n"].as_u64(), Some((n_questions - 12) as u64));

    // labelled questions mixed in; the dataset's other questions are held out
    let ck2 = tmp.path().join("ck2");
    let (ok, _, err) = run_bin(&["train", "--dataset", ds_s, "--questions", "0..12", "--self-made", "20", "--data", data_s, "--indexed", "--out", ck2.to_str().unwrap(), "--max-triplets", "40", "--max-steps", "1", "--backbone", m_s, "--question-model", m_s]);
    assert!(ok, "{err}");
    assert!(err.contains(&format!("({} dataset questions held out)", n_questions - 12)), "{err}");
    assert_eq!(read(&ck2.join("glm.json"))["training"]["questions"], "0..12 + self-made 20 (seed 0)");

    // bad input: a clear error, not a panic
    let (ok, _, err) = run_bin(&["train", "--self-made", "20", "--out", ck_s]);
    assert!(!ok && err.contains("--data DIR --indexed"), "{err}");
    let (ok, _, err) = run_bin(&["train", "--out", ck_s]);
    assert!(!ok && err.contains("--dataset"), "neither labels nor self-made questions: {err}");
}

#[test]
fn adapt_fine_tunes_the_sentence_encoder_on_the_graphs_own_questions() {
    let tmp = tempfile::tempdir().unwrap();
    let (ds, n_questions) = dataset_in(tmp.path());
    let (ds_s, m) = (ds.to_str().unwrap(), minilm());
    let m_s = m.to_str().unwrap();
    let data = tmp.path().join("node");
    let data_s = data.to_str().unwrap();
    let out = tmp.path().join("adapted");
    let out_s = out.to_str().unwrap();
    // the corpus ingested by adapt itself, then the graph's own questions
    let (ok, stdout, err) = run_bin(&["adapt", "--dataset", ds_s, "--data", data_s, "--self-made", "40", "--out", out_s, "--model", m_s, "--batch-size", "8"]);
    assert!(ok, "{err}");
    let pairs_line = err.lines().find(|l| l.contains("(question, passage) pairs")).unwrap_or_else(|| panic!("{err}"));
    assert!(stdout.contains("adapted ") && stdout.contains(&format!("--sentence-model {out_s}")), "{stdout}");
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(out.join(f).exists(), "{f}: {pairs_line}");
    }
    // the adapted encoder serves the dense retriever like the original
    let report = tmp.path().join("dense.json");
    streamrag(&["eval", "--dataset", ds_s, "--questions", "12..", "--retriever", "dense", "--sentence-model", out_s, "--report", report.to_str().unwrap()]);
    let r = read(&report);
    assert_eq!(r["n"].as_u64(), Some((n_questions - 12) as u64));
    assert!(r["recall@5"].as_f64().unwrap() >= 40.0, "{}", r["recall@5"]);
    // bad input: a clear error
    let (ok, _, err) = run_bin(&["adapt", "--data", data_s, "--out", out_s]);
    assert!(!ok && err.contains("--dataset"), "no corpus: {err}");
    let (ok, _, err) = run_bin(&["adapt", "--data", data_s, "--indexed", "--out", out_s, "--model", m_s, "--batch-size", "1"]);
    assert!(!ok && err.contains("--batch-size must be 2"), "{err}");
}

#[test]
fn a_running_node_follows_its_checkpoint_directory_with_queries_in_flight() {
    let tmp = tempfile::tempdir().unwrap();
    let (ds, _) = dataset_in(tmp.path());
    let (ds_s, m) = (ds.to_str().unwrap(), minilm());
    let m_s = m.to_str().unwrap();
    // the directory the node follows, first written by one step of training
    let live = tmp.path().join("live");
    let live_s = live.to_str().unwrap();
    let train = |extra: &[&str]| {
        let mut a = vec!["train", "--dataset", ds_s, "--questions", "0..12", "--out", live_s, "--epochs", "1", "--max-triplets", "40", "--backbone", m_s, "--question-model", m_s];
        a.extend_from_slice(extra);
        let (ok, _, err) = run_bin(&a);
        assert!(ok, "{a:?}: {err}");
    };
    train(&["--max-steps", "1"]);
    let data = tmp.path().join("data");
    let (mut p, addr) = start_run(&["--data", data.to_str().unwrap(), "--checkpoint", live_s]);
    let (docs, qs) = synth::corpus(80, 7);
    let jsonl = tmp.path().join("docs.jsonl");
    write_jsonl(&jsonl, &docs);
    streamrag(&["ingest", "--http", &addr, jsonl.to_str().unwrap()]);
    wait_stats(&addr, std::time::Duration::from_secs(60), |s| s.documents == docs.len());

    // questions asked one after another for as long as the test runs; every one must be answered
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asker = {
        let (stop, addr) = (stop.clone(), addr.clone());
        let questions: Vec<String> = qs.iter().map(|q| q.question.clone()).collect();
        std::thread::spawn(move || {
            let mut named: Vec<(bool, Option<String>, String)> = Vec::new();
            for q in questions.iter().cycle() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let (ok, out, err) = run_bin(&["ask", "--http", &addr, "--json", q]);
                let checkpoint = serde_json::from_str::<streamrag_schemas::Answer>(&out).ok().and_then(|a| a.checkpoint);
                named.push((ok, checkpoint, err));
            }
            named
        })
    };
    let seen = |step: &str| -> bool {
        let out = streamrag(&["ask", "--http", &addr, "--json", &qs[0].question]);
        let a: streamrag_schemas::Answer = serde_json::from_str(&out).unwrap();
        let id = a.checkpoint.unwrap_or_else(|| panic!("the answer names no checkpoint: {out}"));
        assert!(id.starts_with(live_s), "{id}");
        id.contains(&format!(" step {step} #"))
    };
    assert!(seen("1"), "the first answers come from the checkpoint loaded at start");
    std::thread::sleep(std::time::Duration::from_secs(1));
    // training resumes into the same directory, to the end of its epoch, while questions come in
    train(&[]);
    let steps = read(&live.join("glm.json"))["training"]["steps"].as_u64().unwrap();
    assert!(steps > 1, "{steps}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !seen(&steps.to_string()) {
        assert!(std::time::Instant::now() < deadline, "the node never swapped to step {steps}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // a few more answers after the swap, then stop asking
    std::thread::sleep(std::time::Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let named = asker.join().unwrap();
    let failed: Vec<&String> = named.iter().filter(|(ok, c, _)| !ok || c.is_none()).map(|(_, _, e)| e).collect();
    assert!(failed.is_empty(), "{} of {} queries failed or named no checkpoint: {failed:?}", failed.len(), named.len());
    let ids: Vec<&str> = named.iter().filter_map(|(_, c, _)| c.as_deref()).collect();
    let first = ids.iter().position(|c| c.contains(" step 1 #")).expect("answers from the first checkpoint while training ran");
    let last = ids.iter().rposition(|c| c.contains(&format!(" step {steps} #"))).expect("answers from the new checkpoint");
    assert!(first < last && ids[last..].iter().all(|c| c.contains(&format!(" step {steps} #"))), "once swapped, never back: {ids:?}");
    assert!(metric(&addr, "streamrag_glm_checkpoint_swaps_total") >= 1.0);

    // a directory that no longer loads leaves the current model answering
    std::fs::write(live.join("model.safetensors"), b"not weights").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(seen(&steps.to_string()), "a broken checkpoint is not swapped in");
    p.stop();
}
