//! Standing queries through the real binary (embedded transport): a subscription's answer
//! follows the documents that arrive, change and disappear, reaches the answers topic keyed by
//! the subscription with the newer graph version and the reason, streams as server-sent
//! events, survives a restart, and a change far from the question is not evaluated at all.
//! Bad subscriptions get a 4xx over HTTP and go to the dead letters from the topic.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use streamrag_operators::transport::embedded::EmbeddedLog;
use streamrag_operators::transport::Output;
use streamrag_schemas::{decode, Answer, DeadLetter};

const QUESTION: &str = "In which city was the husband of Marie Curie born?";
const ID: &str = "husband";

fn sample_docs() -> Vec<Value> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/corpus.jsonl");
    std::fs::read_to_string(corpus).unwrap().lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn send(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    rt().block_on(async {
        let c = reqwest::Client::new();
        let mut r = match method {
            "POST" => c.post(url),
            "DELETE" => c.delete(url),
            _ => c.get(url),
        };
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    })
}

fn doc_ids(a: &Value) -> Vec<String> {
    a["documents"].as_array().map(|d| d.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()).unwrap_or_default()
}

/// Polls the subscription's latest answer until `pred` holds.
fn wait_answer(addr: &str, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (status, a) = send("GET", &format!("http://{addr}/subscriptions/{id}"), None);
        if status == 200 && pred(&a) {
            return a;
        }
        assert!(Instant::now() < deadline, "the standing answer never became {what}: {status} {a}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last applied offset of the graph-deltas topic in an answer's graph version.
fn version(a: &Value) -> i64 {
    a["graph_version"]["offsets"].as_object().unwrap().values().map(|v| v.as_i64().unwrap()).sum()
}

/// Reads `GET /subscriptions/{id}/events` on a plain socket: each `data:` line, decoded.
fn events(addr: &str, id: &str) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /subscriptions/{id}/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")) {
                if tx.send(serde_json::from_str(data).unwrap()).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A reason that names `doc` as what changed the answer: the change itself, or (when the
/// passage and fact indexes were behind the graph the first time) the answer computed again
/// once they had it. `deleted` for a deletion.
fn reached_by(reason: &Value, doc: &str, deleted: bool) -> bool {
    let r = reason.as_str().unwrap_or_default();
    let first = if deleted { format!("deleted {doc}") } else { format!("changed {doc}") };
    r == first || r == format!("indexed {doc}")
}

/// The reasons with the answers computed again once the indexes caught up folded in (whether
/// there are any depends on how far the indexes were behind): one after an answer about the
/// same document is dropped; one whose first answer went unpublished (unchanged) stands for it.
fn first_reasons(reasons: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in reasons {
        match r.strip_prefix("indexed ") {
            Some(doc) if out.last().is_some_and(|l| l.ends_with(&format!(" {doc}"))) => {}
            Some(doc) => out.push(format!("changed {doc}")),
            None => out.push(r),
        }
    }
    out
}

fn post_docs(addr: &str, docs: Value) {
    let (status, body) = send("POST", &format!("http://{addr}/documents"), Some(docs));
    assert_eq!(status, 202, "{body}");
}

/// The sample corpus without Pierre Curie's page, written to `dir/rest.jsonl`: that page, how
/// many documents the file holds, and the file.
fn samples_but_pierre(dir: &Path) -> (Value, usize, std::path::PathBuf) {
    let all = sample_docs();
    let pierre = all.iter().find(|d| d["id"] == "pierre-curie").unwrap().clone();
    let rest: Vec<&Value> = all.iter().filter(|d| d["id"] != "pierre-curie").collect();
    let jsonl = dir.join("rest.jsonl");
    std::fs::write(&jsonl, rest.iter().map(|d| d.to_string() + "\n").collect::<String>()).unwrap();
    (pierre, rest.len(), jsonl)
}

#[test]
fn a_standing_query_follows_documents_that_arrive_change_and_disappear() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let (pierre, rest, jsonl) = samples_but_pierre(dir.path());
    streamrag(&["ingest", "--data", data_s, jsonl.to_str().unwrap()]);
    let (mut node, addr) = start_run(&["--data", data_s]);
    wait_stats(&addr, Duration::from_secs(120), |s| s.documents == rest);
    wait_caught_up(&addr, Duration::from_secs(120));

    // Subscribe: the first answer comes back at once, without Pierre Curie's page.
    let (status, created) = send("POST", &format!("http://{addr}/subscriptions"), Some(json!({ "question": QUESTION, "id": ID })));
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["subscription_id"], ID);
    let first = created["answer"].clone();
    assert_eq!(first["query_id"], ID, "{first}");
    assert_eq!(first["reason"], "subscribed", "{first}");
    assert!(!doc_ids(&first).contains(&"pierre-curie".to_string()), "{first}");
    let stream = events(&addr, ID);
    let streamed = stream.recv_timeout(Duration::from_secs(10)).expect("the event stream opens with the latest answer");
    assert_eq!(doc_ids(&streamed), doc_ids(&first));

    // A document far from the question: seen, matched, and nothing evaluated.
    let evaluations = metric(&addr, "streamrag_standing_evaluations_total");
    let changes = metric(&addr, "streamrag_standing_changes_total");
    assert!(evaluations >= 1.0, "the subscription was evaluated: {evaluations}");
    post_docs(&addr, json!({ "id": "kilimanjaro", "title": "Mount Kilimanjaro", "text": "Mount Kilimanjaro is a dormant volcano in Tanzania. It is the highest mountain in Africa." }));
    wait_stats(&addr, Duration::from_secs(60), |s| s.documents == rest + 1);
    wait_caught_up(&addr, Duration::from_secs(60));
    assert!(metric(&addr, "streamrag_standing_changes_total") > changes, "the far change never reached the standing queries");
    assert_eq!(metric(&addr, "streamrag_standing_evaluations_total"), evaluations, "a change far from the question was evaluated");

    // The document that completes the answer: a new answer with it, a newer graph version.
    post_docs(&addr, pierre.clone());
    let completed = wait_answer(&addr, ID, "with pierre-curie", |a| doc_ids(a).contains(&"pierre-curie".to_string()));
    assert!(reached_by(&completed["reason"], "pierre-curie", false), "{completed}");
    assert!(version(&completed) > version(&first), "{completed}");
    assert!(completed["answer"].as_str().unwrap().starts_with("Paris ["), "{completed}");
    let streamed = stream.recv_timeout(Duration::from_secs(30)).expect("the new answer is streamed");
    assert!(reached_by(&streamed["reason"], "pierre-curie", false), "{streamed}");

    // Deleted: the standing answer leaves it.
    post_docs(&addr, json!({ "op": "delete", "id": "pierre-curie" }));
    let without = wait_answer(&addr, ID, "without pierre-curie", |a| !doc_ids(a).contains(&"pierre-curie".to_string()));
    assert!(reached_by(&without["reason"], "pierre-curie", true), "{without}");
    assert!(version(&without) > version(&completed));
    // the stream carries every published answer in order: the last one is the delete's
    let mut last = stream.recv_timeout(Duration::from_secs(30)).expect("the answer after the delete is streamed");
    while let Ok(next) = stream.recv_timeout(Duration::from_millis(500)) {
        last = next;
    }
    assert!(reached_by(&last["reason"], "pierre-curie", true), "{last}");
    assert_eq!(doc_ids(&last), doc_ids(&without));
    node.stop();

    // The answers topic holds each published answer, keyed by the subscription.
    let reasons: Vec<String> = {
        let log = EmbeddedLog::open(&data.join("log")).unwrap();
        log.read("streamrag.answers", 0, 1000)
            .unwrap()
            .into_iter()
            .filter(|r| r.key_str().as_deref() == Some(ID))
            .map(|r| decode::<Answer>(&r.payload).unwrap().reason.unwrap())
            .collect()
    };
    assert_eq!(first_reasons(reasons), ["subscribed", "changed pierre-curie", "deleted pierre-curie"]);

    // Restarted: the subscription is still there with its answer, nothing changed is published
    // again, and it still fires.
    let (mut node, addr) = start_run(&["--data", data_s]);
    wait_caught_up(&addr, Duration::from_secs(120));
    let again = wait_answer(&addr, ID, "known after the restart", |_| true);
    assert_eq!(doc_ids(&again), doc_ids(&without));
    post_docs(&addr, pierre);
    let back = wait_answer(&addr, ID, "with pierre-curie again", |a| doc_ids(a).contains(&"pierre-curie".to_string()));
    assert!(reached_by(&back["reason"], "pierre-curie", false), "{back}");

    // Unsubscribed: gone.
    let (status, _) = send("DELETE", &format!("http://{addr}/subscriptions/{ID}"), None);
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while send("GET", &format!("http://{addr}/subscriptions/{ID}"), None).0 != 404 {
        assert!(Instant::now() < deadline, "the subscription outlived its delete");
        std::thread::sleep(Duration::from_millis(100));
    }
    node.stop();
    let log = EmbeddedLog::open(&data.join("log")).unwrap();
    let published: Vec<String> = log
        .read("streamrag.answers", 0, 1000)
        .unwrap()
        .into_iter()
        .filter(|r| r.key_str().as_deref() == Some(ID))
        .map(|r| decode::<Answer>(&r.payload).unwrap().reason.unwrap())
        .collect();
    assert_eq!(
        first_reasons(published),
        ["subscribed", "changed pierre-curie", "deleted pierre-curie", "changed pierre-curie"],
        "the restart published an answer that had not changed"
    );
}

#[test]
fn bad_subscriptions_are_refused_over_http_and_dead_lettered_from_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let jsonl = dir.path().join("docs.jsonl");
    std::fs::write(&jsonl, sample_docs().iter().take(5).map(|d| d.to_string() + "\n").collect::<String>()).unwrap();
    streamrag(&["ingest", "--data", data_s, jsonl.to_str().unwrap()]);

    // Bad records straight onto the stopped node's subscriptions topic, between two good ones.
    {
        let log = EmbeddedLog::open(&data.join("log")).unwrap();
        let rec = |key: &str, payload: &str| Output { topic: "streamrag.subscriptions".into(), key: key.into(), payload: payload.as_bytes().to_vec() };
        rt().block_on(log.produce(&[
            rec("a", r#"{"subscription_id": "a", "question": "Where was Marie Curie born?"}"#),
            rec("x", "not json"),
            rec("y", r#"{"subscription_id": "y"}"#),
            rec("z", r#"{"subscription_id": "other", "question": "Where was Marie Curie born?"}"#),
            rec("w", r#"{"subscription_id": "w", "question": "Where?", "top_k": 0}"#),
            rec("b", r#"{"subscription_id": "b", "question": "Which river flows through Warsaw?"}"#),
        ]))
        .unwrap();
        log.flush().unwrap();
    }
    let (mut node, addr) = start_run(&["--data", data_s]);
    wait_caught_up(&addr, Duration::from_secs(120));
    for id in ["a", "b"] {
        wait_answer(&addr, id, "answered", |a| !doc_ids(a).is_empty());
    }
    for id in ["x", "y", "other", "z", "w"] {
        assert_eq!(send("GET", &format!("http://{addr}/subscriptions/{id}"), None).0, 404, "{id}");
    }

    // Over HTTP: a clear 4xx, and nothing published.
    let url = format!("http://{addr}/subscriptions");
    for (body, want) in [
        (json!({ "question": "" }), 400),
        (json!({ "question": "   " }), 400),
        (json!({ "question": "x".repeat(5000) }), 400),
        (json!({ "question": "Where?", "top_k": 0 }), 400),
        (json!({ "question": "Where?", "colour": "red" }), 400),
        (json!({ "question": "Where?", "id": "" }), 400),
    ] {
        let (status, resp) = send("POST", &url, Some(body.clone()));
        assert_eq!(status, want, "{body} -> {resp}");
        assert!(resp["error"].as_str().is_some_and(|e| !e.is_empty()), "{resp}");
    }
    assert_eq!(send("GET", &format!("{url}/nobody"), None).0, 404);
    assert_eq!(send("DELETE", &format!("{url}/nobody"), None).0, 404);
    assert_eq!(send("GET", &format!("{url}/nobody/events"), None).0, 404);

    // The list: only the good ones, a page at a time; bad paging is a 400 with the reason.
    let (status, page) = send("GET", &format!("{url}?limit=1"), None);
    assert_eq!(status, 200, "{page}");
    assert_eq!((page["total"].as_u64(), page["next"].as_str()), (Some(2), Some("a")), "{page}");
    assert_eq!(page["subscriptions"][0]["subscription_id"], "a", "{page}");
    assert_eq!(page["subscriptions"][0]["question"], "Where was Marie Curie born?", "{page}");
    assert!(!doc_ids(&page["subscriptions"][0]["answer"]).is_empty(), "{page}");
    let (_, rest) = send("GET", &format!("{url}?limit=1&after=a"), None);
    assert_eq!(rest["subscriptions"].as_array().map(|v| v.len()), Some(1), "{rest}");
    assert_eq!((rest["subscriptions"][0]["subscription_id"].as_str(), rest["next"].as_str()), (Some("b"), None), "{rest}");
    for bad in ["limit=0", "limit=1001", "limit=many", "colour=red"] {
        let (status, resp) = send("GET", &format!("{url}?{bad}"), None);
        assert_eq!(status, 400, "{bad} -> {resp}");
        assert!(resp["error"].as_str().is_some_and(|e| !e.is_empty()), "{bad} -> {resp}");
    }
    node.stop();

    let log = EmbeddedLog::open(&data.join("log")).unwrap();
    let dead: Vec<DeadLetter> = log.read("streamrag.dead-letters", 0, 100).unwrap().iter().map(|r| decode(&r.payload).unwrap()).collect();
    let ours: Vec<&DeadLetter> = dead.iter().filter(|d| d.stage == "subscriptions").collect();
    assert_eq!(ours.len(), 4, "{dead:?}");
    assert!(ours.iter().all(|d| !d.reason.is_empty()), "{ours:?}");
    let subs = log.read("streamrag.subscriptions", 0, 100).unwrap();
    assert_eq!(subs.len(), 6, "a refused HTTP subscription reached the topic");
}

/// Waits until every stage of the node at `addr` reports no records behind its input's end
/// (`streamrag_stage_consumer_lag` all 0) for a second on end: on Kafka, what /health's
/// `caught_up` says on the embedded transport.
fn wait_no_lag(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut since: Option<Instant> = None;
    loop {
        let m = common::blocking_get(&format!("http://{addr}/metrics")).unwrap_or_default();
        let lags: Vec<i64> = m.lines().filter(|l| l.starts_with("streamrag_stage_consumer_lag{")).filter_map(|l| l.rsplit(' ').next()?.parse().ok()).collect();
        if !lags.is_empty() && lags.iter().all(|l| *l == 0) {
            if since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(1) {
                return;
            }
        } else {
            since = None;
        }
        assert!(Instant::now() < deadline, "the node never caught up: {lags:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// On a real Kafka-protocol broker: the subscription is a record on the broker's subscriptions
/// topic, its answers reach the broker's answers topic keyed by the subscription, and a node
/// started again reads the subscription back from the broker and still answers it.
#[test]
fn a_standing_query_on_a_broker_survives_a_restart() {
    let (_broker, brokers) = start_broker();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let (pierre, rest, jsonl) = samples_but_pierre(dir.path());
    let (mut node, addr) = start_run(&["--brokers", &brokers, "--data", data_s]);
    streamrag(&["ingest", "--brokers", &brokers, jsonl.to_str().unwrap()]);
    wait_stats(&addr, Duration::from_secs(120), |s| s.documents == rest);
    // the fact and passage indexes too: a first answer from half-read indexes would differ
    // from the one the restarted node computes, and be published again, rightly
    wait_no_lag(&addr);

    let (status, created) = send("POST", &format!("http://{addr}/subscriptions"), Some(json!({ "question": QUESTION, "id": ID })));
    assert_eq!(status, 201, "{created}");
    assert!(!created["answer"].is_null(), "{created}");
    node.stop();

    // Started again: the subscription comes back from the broker, and fires.
    let (mut node, addr) = start_run(&["--brokers", &brokers, "--data", data_s]);
    let known = wait_answer(&addr, ID, "known after the restart", |_| true);
    // the restarted node answers the subscription again (before the next document arrives,
    // or that answer would rightly be a new one) and publishes nothing: nothing changed
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(&addr, "streamrag_standing_evaluations_total") < 1.0 {
        assert!(Instant::now() < deadline, "the restarted node never answered the subscription again");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(metric(&addr, "streamrag_standing_published_total"), 0.0, "the restart published an unchanged answer again");
    assert!(!doc_ids(&known).contains(&"pierre-curie".to_string()), "{known}");
    post_docs(&addr, pierre);
    let completed = wait_answer(&addr, ID, "with pierre-curie", |a| doc_ids(a).contains(&"pierre-curie".to_string()));
    assert!(reached_by(&completed["reason"], "pierre-curie", false), "{completed}");
    node.stop();

    let answers = rt().block_on(async {
        use streamrag_operators::transport::kafka::{KafkaConfig, KafkaTransport};
        let t = KafkaTransport::connect(KafkaConfig::new(brokers.clone())).unwrap();
        let mut sub = t.subscribe("standing-test-reader", "streamrag.answers", false).await.unwrap();
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline {
            out.extend(sub.next_batch(100, Duration::from_secs(2)).await.unwrap().into_iter().filter(|r| r.key_str().as_deref() == Some(ID)));
        }
        out.into_iter().map(|r| decode::<Answer>(&r.payload).unwrap()).collect::<Vec<Answer>>()
    });
    let shown: Vec<String> = answers
        .iter()
        .map(|a| format!("{:?} {:?}: {}", a.reason, a.answer, a.documents.iter().map(|d| format!("{} {:.6}", d.id, d.score)).collect::<Vec<_>>().join(", ")))
        .collect();
    let reasons = answers.into_iter().map(|a| a.reason.unwrap()).collect();
    assert_eq!(first_reasons(reasons), ["subscribed", "changed pierre-curie"], "the restart published again an answer that had not changed, or lost one:\n{}", shown.join("\n"));
}
