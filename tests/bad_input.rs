//! Bad input at every door, through the real binary (issue 27): the HTTP API, records on the
//! docs and queries topics (embedded log and a real Kafka-protocol broker), `ingest FILE`, the
//! flags and the config file. Each bad input gets a clear refusal naming the field and the
//! bound; a good record sent after them is accepted and answered.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use streamrag_operators::transport::embedded::EmbeddedLog;
use streamrag_operators::transport::kafka::{KafkaConfig, KafkaTransport};
use streamrag_operators::transport::Output;
use streamrag_schemas::{decode, DeadLetter, ErrorKind};

/// Runs the binary expecting failure; returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).env("STREAMRAG_LOG", "warn").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "streamrag {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    err
}

fn post(addr: &str, path: &str, body: Value) -> (u16, Value) {
    rt().block_on(async {
        let r = reqwest::Client::new().post(format!("http://{addr}{path}")).json(&body).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    })
}

fn doc(id: &str, title: &str, text: &str) -> Value {
    json!({"schema_version": 1, "id": id, "title": title, "text": text})
}

/// The bad documents every door is shown, each with a word its refusal must hold.
fn bad_documents() -> Vec<(Value, &'static str)> {
    vec![
        (doc(&"x".repeat(100_000), "Long", "A long id."), "512 bytes"),
        (doc("nul\u{0}id", "Nul", "An id with a NUL."), "U+0000"),
        (doc("del-title", "Bell\u{7}", "A title with a BEL."), "U+0007"),
        (doc("c1\u{85}id", "C1", "An id with a C1 control."), "U+0085"),
        (doc("long-title", &"t".repeat(1025), "A long title."), "1024 bytes"),
    ]
}

/// Asks `ask(question)` until the answer ranks `want` first (the passage indexes follow the
/// docs topic beside the graph, so a document can be in the graph a moment before BM25 and
/// the vectors hold it; a debug build embeds slowly); returns the last answer.
fn answered_with(want: &str, ask: impl Fn() -> Value) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let a = ask();
        if a["documents"][0]["id"] == want || std::time::Instant::now() > deadline {
            return a;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

const GOOD: &str = "Ada Lovelace wrote the first program for the Analytical Engine of Charles Babbage.";

#[test]
fn http_refuses_each_bad_field_with_400_and_accepts_a_good_record_after() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut node, addr) = start_run(&["--data", data.to_str().unwrap()]);
    for (d, says) in bad_documents() {
        let (status, body) = post(&addr, "/documents", d);
        assert_eq!(status, 400, "{body}");
        let msg = body["error"].as_str().unwrap();
        assert!(msg.contains(says), "{msg}");
        assert!(msg.len() < 300, "the refusal echoes the input whole: {} bytes", msg.len());
    }
    let queries = [
        (json!({"question": "Who wrote it?", "top_k": 1_000_000_000u64}), "1 to 100"),
        (json!({"question": "Who wrote it?", "top_k": 0}), "1 to 100"),
        (json!({"question": "w ".repeat(250_000)}), "4096 bytes"),
        (json!({"question": "Who?", "query_id": "q\u{1b}[31m"}), "U+001B"),
        (json!({"question": "Who?", "query_id": "q".repeat(600)}), "512 bytes"),
    ];
    for (q, says) in queries {
        let (status, body) = post(&addr, "/query", q);
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
    // a good document after all that: accepted, indexed, answered
    let (status, _) = post(&addr, "/documents", doc("ada", "Ada Lovelace", GOOD));
    assert_eq!(status, 202);
    wait_stats(&addr, Duration::from_secs(60), |s| s.documents == 1);
    let a = answered_with("ada", || {
        let (status, a) = post(&addr, "/query", json!({"question": "Who wrote the first program for the Analytical Engine?", "top_k": 100}));
        assert_eq!(status, 200, "{a}");
        a
    });
    assert_eq!(a["documents"][0]["id"], "ada", "{a}");
    node.stop();
}

#[test]
fn ingest_refuses_a_file_with_a_bad_line_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let file = dir.path().join("docs.jsonl");
    let mut lines = vec![doc("good-1", "Good", GOOD).to_string()];
    lines.push(doc("bad\u{0}", "Bad", "x").to_string());
    lines.push(doc("good-2", "Good too", GOOD).to_string());
    std::fs::write(&file, lines.join("\n")).unwrap();
    let err = refused(&["ingest", "--data", data_s, file.to_str().unwrap()]);
    assert!(err.contains("line 2") && err.contains("U+0000") && err.contains("nothing was published"), "{err}");
    // nothing reached the log: the docs topic is empty
    let log = EmbeddedLog::open(&data.join("log")).unwrap();
    assert!(log.read("streamrag.docs", 0, 10).unwrap().is_empty());
    drop(log);
    let err = refused(&["ingest", "--data", data_s, "--delete", &"d".repeat(513)]);
    assert!(err.contains("512 bytes"), "{err}");
}

/// Records that bypass the doors that check (`ingest --raw` straight into the log) are checked
/// by the stage: dead-lettered with the reason, and the good record after them is answered.
#[test]
fn the_embedded_docs_topic_dead_letters_each_bad_record_and_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let bad = bad_documents();
    let mut lines: Vec<String> = bad.iter().map(|(d, _)| d.to_string()).collect();
    lines.push(doc("ada", "Ada Lovelace", GOOD).to_string());
    std::fs::write(&raw, lines.join("\n")).unwrap();
    streamrag(&["ingest", "--data", data_s, "--raw", raw.to_str().unwrap()]);
    let (mut node, addr) = start_run(&["--data", data_s]);
    wait_stats(&addr, Duration::from_secs(60), |s| s.documents == 1);
    let a = answered_with("ada", || {
        serde_json::from_str(&streamrag(&["ask", "--json", "--http", &addr, "Who wrote the first program for the Analytical Engine?"])).unwrap()
    });
    assert_eq!(a["documents"][0]["id"], "ada", "{a}");
    node.stop();
    let log = EmbeddedLog::open(&data.join("log")).unwrap();
    let dl = log.read("streamrag.dead-letters", 0, 100).unwrap();
    let reasons: Vec<DeadLetter> = dl.iter().map(|r| decode(&r.payload).unwrap()).collect();
    assert_eq!(reasons.len(), bad.len(), "{reasons:?}");
    for (i, ((_, says), d)) in bad.iter().zip(&reasons).enumerate() {
        assert_eq!((d.stage.as_str(), d.source.offset, d.error_kind), ("openie", i as i64, ErrorKind::User));
        assert!(d.reason.contains(says), "{}", d.reason);
    }
}

#[test]
fn kafka_topics_dead_letter_bad_documents_and_queries_and_answer_the_good_ones() {
    let (_broker, brokers) = start_broker();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut node, addr) = start_run(&["--brokers", &brokers, "--data", data.to_str().unwrap()]);
    let bad = bad_documents();
    let t = KafkaTransport::connect(KafkaConfig::new(brokers.clone())).unwrap();
    let rt = rt();
    let out = |topic: &str, key: &str, v: Value| Output { topic: topic.into(), key: key.into(), payload: v.to_string().into_bytes() };
    let mut docs: Vec<Output> = bad.iter().map(|(d, _)| out("streamrag.docs", "bad", d.clone())).collect();
    docs.push(out("streamrag.docs", "ada", doc("ada", "Ada Lovelace", GOOD)));
    rt.block_on(t.produce(&docs)).unwrap();
    wait_stats(&addr, Duration::from_secs(60), |s| s.documents == 1);
    let q = |id: &str, question: Value, top_k: Value| json!({"schema_version": 1, "query_id": id, "question": question, "top_k": top_k});
    let queries = vec![
        out("streamrag.queries", "q-big-k", q("q-big-k", json!("Who?"), json!(1_000_000_000u64))),
        out("streamrag.queries", "q-long", q("q-long", json!("w ".repeat(250_000)), json!(3))),
        out("streamrag.queries", "q\u{7f}", q("q\u{7f}", json!("Who?"), json!(3))),
    ];
    rt.block_on(t.produce(&queries)).unwrap();
    // the good question after them is answered
    let a = answered_with("ada", || {
        let out = streamrag(&["ask", "--json", "--brokers", &brokers, "--timeout-s", "60", "Who wrote the first program for the Analytical Engine?"]);
        serde_json::from_str(&out).unwrap()
    });
    assert_eq!(a["documents"][0]["id"], "ada", "{a}");
    node.stop();
    let dls = rt.block_on(async {
        let mut sub = t.subscribe("bad-input-reader", "streamrag.dead-letters", false).await.unwrap();
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while got.len() < bad.len() + 3 && tokio::time::Instant::now() < deadline {
            got.extend(sub.next_batch(100, Duration::from_secs(2)).await.unwrap());
        }
        got
    });
    let dls: Vec<DeadLetter> = dls.iter().map(|r| decode(&r.payload).unwrap()).collect();
    let from = |stage: &str| dls.iter().filter(|d| d.stage == stage).map(|d| d.reason.clone()).collect::<Vec<_>>();
    let (docs_dl, queries_dl) = (from("openie"), from("query"));
    assert_eq!(docs_dl.len(), bad.len(), "{dls:?}");
    for ((_, says), reason) in bad.iter().zip(&docs_dl) {
        assert!(reason.contains(says), "{reason}");
    }
    assert_eq!(queries_dl.len(), 3, "{dls:?}");
    for says in ["1 to 100", "4096 bytes", "U+007F"] {
        assert!(queries_dl.iter().any(|r| r.contains(says)), "no {says} in {queries_dl:?}");
    }
}

/// The README's main command from an empty directory: the samples are in the binary, and the
/// sentence encoder is found in the checkout that built it (scripts/fetch-models.sh's .models/)
/// with no variable pointing at it, so the hybrid keeps its dense part there too.
#[test]
fn the_demo_runs_from_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .arg("demo")
        .current_dir(dir.path())
        .env("STREAMRAG_LOG", "warn")
        .env_remove("STREAMRAG_MINILM_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.starts_with("indexed "), "{stdout}");
    assert!(stdout.contains("[charles-babbage]"), "{stdout}");
    assert!(!stderr.contains("no sentence encoder"), "the demo lost its encoder outside the checkout: {stderr}");
    // two questions about Marie Curie that ask different things get different documents
    let answers: Vec<Vec<&str>> = stdout
        .split("\nQ: ")
        .skip(1)
        .map(|a| a.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).collect())
        .collect();
    assert!(answers.len() >= 2 && answers[0] != answers[1], "{stdout}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the demo wrote into the working directory");
    let err = refused(&["demo", "--corpus", dir.path().join("missing.jsonl").to_str().unwrap()]);
    assert!(err.contains("missing.jsonl"), "{err}");
}

#[test]
fn bad_flags_and_config_values_get_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    for (args, says) in [
        (vec!["run", "--partitions", "0"], "--partitions"),
        (vec!["run", "--snapshot-keep", "0"], "at least 1"),
        (vec!["run", "--max-text-bytes", "0"], "at least 1"),
        (vec!["run", "--data", f], "is a file, not a data directory"),
        (vec!["stats", "--data", f], "is a file, not a data directory"),
        (vec!["ingest", "--data", f, "--delete", "x"], "is a file, not a data directory"),
        (vec!["ask", "--data", f, "Who?"], "is a file, not a data directory"),
        (vec!["ask", "--timeout-s", "0", "Who?"], "--timeout-s"),
        (vec!["eval", "--dataset", f, "--concurrency", "0"], "at least 1"),
        (vec!["train", "--dataset", f, "--questions", "0..10", "--out", f, "--epochs", "0"], "at least 1"),
        (vec!["bench", "freshness", "--rate", "0"], "at least 1"),
        (vec!["bench", "extract", "--passes", "0"], "at least 1"),
    ] {
        let err = refused(&args);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.trim().lines().count() <= 3, "{args:?}: {err}");
    }
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[limits]\nmax_top_k = 0\n").unwrap();
    let err = refused(&["--config", cfg.to_str().unwrap(), "stats", "--data", dir.path().to_str().unwrap()]);
    assert!(err.contains("limits.max_top_k"), "{err}");
    let err = refused(&["ask", "--data", dir.path().to_str().unwrap(), "--top-k", "0", "Who?"]);
    assert!(err.contains("top_k"), "{err}");
}
