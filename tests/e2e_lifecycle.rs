//! The graph's lifecycle through the real binary: updates and deletes stay exact, Parquet
//! snapshots open in pyarrow and replay to an equal graph (also as of a past point in the
//! log), and a query replica started late catches up from a snapshot plus the deltas after it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;
use streamrag::synth;
use streamrag_operators::graph::GraphStats;
use streamrag_operators::transport::kafka::{KafkaConfig, KafkaTransport};
use streamrag_schemas::{decode, Document, GraphChange};

fn stats_of(data: &Path) -> GraphStats {
    serde_json::from_str(&streamrag(&["stats", "--data", data.to_str().unwrap()])).unwrap()
}

fn deletions(ids: &[String]) -> Vec<Document> {
    ids.iter().map(|id| Document::delete(id.clone())).collect()
}

#[test]
fn a_thousand_documents_with_updates_and_deletes_equal_a_fresh_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (docs, _) = synth::corpus(1000, 11);
    let all = dir.path().join("all.jsonl");
    write_jsonl(&all, &docs);
    let (mut node, addr) = start_run(&["--data", data.to_str().unwrap()]);
    streamrag(&["ingest", "--http", &addr, all.to_str().unwrap()]);
    // 100 new versions (one more sentence, one changed word) and 100 deletions, as one stream.
    let mut finals = docs.clone();
    let mut changes = Vec::new();
    for d in finals.iter_mut().skip(3).step_by(7).take(100) {
        let text = d.text.as_deref().unwrap().replacen(" in ", " near ", 1);
        d.text = Some(format!("{text} It was later renamed Qorvath Imre by Selu Danek."));
        changes.push(d.clone());
    }
    let deleted: Vec<String> = finals.iter().skip(5).step_by(9).filter(|d| !changes.iter().any(|c| c.id == d.id)).take(100).map(|d| d.id.clone()).collect();
    assert_eq!((changes.len(), deleted.len()), (100, 100));
    // 99 deletions as JSON lines, the last one with `ingest --delete`
    changes.extend(deletions(&deleted[..99]));
    let upd = dir.path().join("changes.jsonl");
    write_jsonl(&upd, &changes);
    streamrag(&["ingest", "--http", &addr, upd.to_str().unwrap()]);
    streamrag(&["ingest", "--http", &addr, "--delete", &deleted[99]]);
    finals.retain(|d| !deleted.contains(&d.id));
    let want = expected(&finals);
    let got = wait_stats(&addr, Duration::from_secs(120), |s| s.documents == 900 && s.digest == want.digest);
    assert_same_graph(&got, &want);
    node.stop();
    // and it survives a restart unchanged
    assert_same_graph(&stats_of(&data), &want);
    // the hybrid's fact vectors follow the same changes: `ask --data` reads the graph changes on
    // from where they stand, and then exactly the live facts have a vector
    streamrag(&["ask", "--data", data.to_str().unwrap(), "Where was Qorvath Imre born?"]);
    let g = streamrag_operators::graph::GraphStore::open(&data.join("graph")).unwrap().load().unwrap();
    let mut live: Vec<(String, String, String)> = g.triples().map(|t| t.key()).map(|(s, r, o)| (s.into(), r.into(), o.into())).collect();
    live.sort();
    let model = streamrag_operators::retrieve::default_sentence_model();
    let enc = std::sync::Arc::new(streamrag_glm::SentenceEncoder::load(&model, &candle_core::Device::Cpu).unwrap());
    let id = streamrag_operators::retrieve::encoder_id(&model);
    let fv = streamrag_operators::retrieve::FactVectors::open(enc, &data.join("fact-vectors"), &id).unwrap();
    assert!(!live.is_empty());
    assert_eq!(fv.facts(), live, "a vector for every live fact and for nothing else");
    let mut live_entities: Vec<String> = g.entities().map(|e| e.id().to_string()).collect();
    live_entities.sort();
    assert!(!live_entities.is_empty());
    assert_eq!(fv.entities(), live_entities, "a name vector for every live entity and for nothing else");
}

/// Documents that carry their triples: `n` documents of `per_doc` distinct triples.
fn triple_docs(n: usize, per_doc: usize, from: usize) -> Vec<Document> {
    (from..from + n)
        .map(|i| {
            let mut d = Document::upsert(format!("doc-{i:05}"), format!("Topic {i}"), "pre-extracted");
            d.triples = Some(
                (0..per_doc)
                    .map(|k| [format!("Topic {i}"), format!("relation {}", k % 13), format!("Entity {}", (i * 31 + k * 17) % 20_000)])
                    .collect(),
            );
            d
        })
        .collect()
}

fn run_until_indexed(data: &Path, documents: usize) {
    let (mut node, addr) = start_run(&["--data", data.to_str().unwrap()]);
    wait_stats(&addr, Duration::from_secs(180), |s| s.documents == documents);
    node.stop();
}

#[test]
fn snapshots_open_in_pyarrow_and_replay_to_an_equal_graph() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let part1 = triple_docs(1000, 70, 0);
    let part2 = triple_docs(500, 70, 1000);
    let (f1, f2) = (dir.path().join("p1.jsonl"), dir.path().join("p2.jsonl"));
    write_jsonl(&f1, &part1);
    write_jsonl(&f2, &part2);

    // Part 1 indexed, snapshot S1; part 2 indexed, snapshot S2.
    streamrag(&["ingest", "--data", d, f1.to_str().unwrap()]);
    run_until_indexed(&data, 1000);
    let s1 = dir.path().join("s1");
    streamrag(&["snapshot", "--data", d, "--out", s1.to_str().unwrap()]);
    streamrag(&["ingest", "--data", d, f2.to_str().unwrap()]);
    run_until_indexed(&data, 1500);
    let s2 = dir.path().join("s2");
    let out = streamrag(&["snapshot", "--data", d, "--out", s2.to_str().unwrap()]);
    assert!(out.contains("rows/s"), "{out}");
    let full = stats_of(&data);
    assert!(full.triples >= 100_000, "{full:?}");

    // An independent reader: pyarrow.
    let py = std::env::var("STREAMRAG_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/read_snapshot.py");
    let o = std::process::Command::new(&py).arg(&script).arg(&s2).output().unwrap();
    assert!(o.status.success(), "pyarrow could not read the snapshot (scripts/test.sh installs it): {}", String::from_utf8_lossy(&o.stderr));
    let seen: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(seen["rows"], seen["manifest_rows"]);
    assert_eq!(seen["rows"]["triples"].as_u64().unwrap() as usize, full.triples);
    assert_eq!(seen["rows"]["entities"].as_u64().unwrap() as usize, full.entities);
    assert_eq!(seen["rows"]["documents"].as_u64().unwrap() as usize, full.documents);
    assert_eq!(seen["rows"]["entity_documents"].as_u64().unwrap() as usize, full.mentions);
    assert_eq!(seen["support"].as_u64().unwrap() as usize, full.support);
    assert_eq!(seen["mentions"].as_u64().unwrap() as usize, full.mentions);
    assert_eq!(seen["distinct_triple_ids"], seen["rows"]["triples"]);
    assert_eq!(seen["empty_support"], 0);
    assert_eq!(seen["named_subjects"], seen["rows"]["triples"]);
    assert_eq!(seen["offsets"]["streamrag.graph-deltas/0"], 1499);

    // Replay S2 alone into a fresh directory: the same graph.
    let fresh = dir.path().join("fresh");
    let out = streamrag(&["replay", "--snapshot", s2.to_str().unwrap(), "--data", fresh.to_str().unwrap(), "--no-log"]);
    assert!(out.contains("rows/s"), "{out}");
    assert_same_graph(&stats_of(&fresh), &full);

    // Replay S1, then the log up to the 250th document of part 2: the graph as of that point.
    let out = streamrag(&["replay", "--snapshot", s1.to_str().unwrap(), "--data", d, "--force", "--until", "0=1249"]);
    assert!(out.contains("250 applied"), "{out}");
    let mut upto: Vec<Document> = part1.clone();
    upto.extend_from_slice(&part2[..250]);
    assert_same_graph(&stats_of(&data), &expected(&upto));
    // A replay never goes back past its snapshot.
    let e = std::process::Command::new(bin())
        .args(["replay", "--snapshot", s2.to_str().unwrap(), "--data", d, "--force", "--until", "0=10"])
        .output()
        .unwrap();
    assert!(!e.status.success() && String::from_utf8_lossy(&e.stderr).contains("past --until"));
    // And then the rest of the log, to the end: the full graph again.
    streamrag(&["replay", "--snapshot", s1.to_str().unwrap(), "--data", d, "--force"]);
    assert_same_graph(&stats_of(&data), &full);
}

fn http_stats(addr: &str) -> GraphStats {
    stats(addr)
}

#[test]
fn a_late_query_replica_catches_up_from_a_snapshot_and_the_deltas() {
    let (_broker, brokers) = start_broker();
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snapshots");
    let (docs, questions) = synth::corpus(300, 5);
    let (f1, f2) = (dir.path().join("p1.jsonl"), dir.path().join("p2.jsonl"));
    write_jsonl(&f1, &docs[..200]);
    write_jsonl(&f2, &docs[200..]);
    let data = dir.path().join("writer");
    let (mut writer, wa) = start_run(&[
        "--brokers", &brokers, "--data", data.to_str().unwrap(),
        "--snapshot-dir", snaps.to_str().unwrap(), "--snapshot-every-s", "1",
    ]);
    streamrag(&["ingest", "--brokers", &brokers, f1.to_str().unwrap()]);
    wait_stats(&wa, Duration::from_secs(120), |s| s.documents == 200);
    // wait for a snapshot of those 200
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let snap_offsets = loop {
        if let Ok(Some(dir)) = streamrag_operators::snapshot::resolve(&snaps) {
            if let Ok(m) = streamrag_operators::snapshot::read_manifest(&dir) {
                if m.stats.documents == 200 {
                    break m.offsets;
                }
            }
        }
        assert!(std::time::Instant::now() < deadline, "no snapshot of 200 documents");
        std::thread::sleep(Duration::from_millis(200));
    };
    streamrag(&["ingest", "--brokers", &brokers, f2.to_str().unwrap()]);
    let want = wait_stats(&wa, Duration::from_secs(120), |s| s.documents == 300);

    // The replica starts now: from the snapshot, then the deltas after its offsets.
    let (mut replica, ra) = start_run(&[
        "--brokers", &brokers, "--stages", "query", "--data", dir.path().join("replica").to_str().unwrap(),
        "--snapshot-dir", snaps.to_str().unwrap(),
    ]);
    let health: Value = serde_json::from_str(&blocking_get(&format!("http://{ra}/health")).unwrap()).unwrap();
    assert_eq!(health["started_from_snapshot"], serde_json::to_value(&snap_offsets).unwrap());
    let got = wait_stats(&ra, Duration::from_secs(60), |s| s.digest == want.digest);
    assert_same_graph(&got, &want);
    assert_eq!(got.version, want.version);
    assert_same_graph(&http_stats(&ra), &expected(&docs));

    // Both answer alike, once the replica's own passage indexes (BM25, the hybrid's vectors,
    // kept from the docs topic beside its graph) have caught up.
    for q in &questions[..5] {
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let w = ask_all(&["--http", &wa], std::slice::from_ref(q));
            let r = ask_all(&["--http", &ra], std::slice::from_ref(q));
            if w == r {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{}: writer {w:?}, replica {r:?}", q.question);
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    replica.stop();
    writer.stop();

    // The writer published what changed: one graph change per applied document.
    let rt = rt();
    let changes = rt.block_on(async {
        let t = KafkaTransport::connect(KafkaConfig::new(brokers.clone())).unwrap();
        let mut sub = t.assign("streamrag.graph-changes", &Default::default()).await.unwrap();
        let mut out = Vec::new();
        for _ in 0..20 {
            out.extend(sub.next_batch(1000, Duration::from_millis(500)).await.unwrap());
            if out.len() >= 300 {
                break;
            }
        }
        out
    });
    assert_eq!(changes.len(), 300);
    let c: GraphChange = decode(&changes[0].payload).unwrap();
    assert_eq!(c.source.topic, "streamrag.graph-deltas");
    assert!(!c.asserted.is_empty() && !c.entities_added.is_empty());
}
