//! The trace page (`GET /`) in a real headless Chromium (Debian's package; scripts/test.sh
//! installs it), driven over the DevTools protocol by tests/page_driver.py: the page asks a
//! sample question on load (`?q=`), and the DOM the browser built holds the ranked documents,
//! the supporting facts and the drawn subgraph with its seeds marked; a standing query the page
//! registers shows its new answer live when a document completes it. The screenshots are kept
//! as test artifacts, target/tmp/trace-page.png and target/tmp/trace-page-standing.png.

mod common;

use std::path::PathBuf;

use common::*;

fn chromium() -> PathBuf {
    let p = std::env::var("STREAMRAG_CHROMIUM").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from("/usr/bin/chromium"));
    assert!(p.exists(), "no Chromium at {} (scripts/test.sh installs Debian's chromium)", p.display());
    p
}

/// The page at `url` in headless Chromium, once it answered or failed: its DOM; the
/// screenshot goes to `shot` (tests/page_driver.py drives it over the DevTools protocol).
fn page_dom(url: &str, shot: &std::path::Path) -> String {
    let seen = python_client_quiet("page_driver.py", &["ask", chromium().to_str().unwrap(), url, shot.to_str().unwrap()], "chromium (Debian)");
    assert!(seen["screenshot_bytes"].as_i64().unwrap() > 20_000, "screenshot {} is {} bytes", shot.display(), seen["screenshot_bytes"]);
    seen["dom"].as_str().unwrap().to_string()
}

#[test]
fn the_page_asks_and_shows_documents_facts_and_the_subgraph_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    let q = "In which city was the husband of Marie Curie born?";
    let url = format!("http://{addr}/?q={}", q.replace(' ', "%20").replace('?', "%3F"));

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-page.png");
    let _ = std::fs::remove_file(&shot);
    let dom = page_dom(&url, &shot);
    assert!(dom.contains("data-answered=\"true\""), "the page never showed an answer:\n{dom}");
    // the answer text, cited, and the cited document marked in the ranking
    assert!(dom.contains("data-abstained=\"false\">Paris ["), "no cited answer:\n{dom}");
    assert!(dom.contains("answered by extractive; cites [") && dom.contains("class=\"cited\""), "no citations shown:\n{dom}");
    // the documents, ranked, with their ids: the husband's page among the first three
    let ranked: Vec<&str> = dom.split("<li data-id=\"").skip(1).filter_map(|s| s.split('"').next()).collect();
    assert!(ranked.iter().take(3).any(|d| *d == "pierre-curie"), "{ranked:?}");
    // each ranked document's text, fetched from GET /documents/{id}
    assert!(dom.contains("data-loaded=\"true\"") && dom.contains("He married Marie Curie in 1895."), "no document text shown:\n{dom}");
    assert_eq!(dom.matches("data-loaded=\"true\"").count(), ranked.len(), "a ranked document without its text:\n{dom}");
    // the supporting facts and the live counts
    assert!(dom.matches("<tr>").count() >= 2, "no supporting facts:\n{dom}");
    assert!(dom.contains("graph: 24 documents"), "no live counts:\n{dom}");
    // the subgraph: drawn nodes, the question's seed marked, edges between them
    assert!(dom.contains("class=\"node seed") && dom.contains("data-name=\"Marie Curie\""), "no seed drawn:\n{dom}");
    assert!(dom.matches("class=\"edge\"").count() >= 2, "no edges drawn:\n{dom}");
    assert!(dom.contains("class=\"node page") || dom.contains("seed page"), "no entity marked as a ranked document's subject:\n{dom}");
    // the retriever's score of each drawn entity: the best is 1, the others below
    let scores: Vec<f64> = dom.split("data-score=\"").skip(1).filter_map(|s| s.split('"').next()?.parse().ok()).collect();
    assert!(scores.len() >= 3 && scores.contains(&1.0) && scores.iter().all(|x| (0.0..=1.0).contains(x)) && scores.iter().any(|x| *x < 1.0), "{scores:?}");

    // the text route itself: a live document, and a clear 404 for one that is not
    let doc: serde_json::Value = serde_json::from_str(&blocking_get(&format!("http://{addr}/documents/pierre-curie")).unwrap()).unwrap();
    assert_eq!((doc["title"].as_str(), doc["id"].as_str()), (Some("Pierre Curie"), Some("pierre-curie")), "{doc}");
    assert!(doc["text"].as_str().unwrap().starts_with("Pierre Curie was a French physicist"), "{doc}");
    assert_eq!(blocking_get(&format!("http://{addr}/documents/nobody")).unwrap_err(), "404 Not Found");

    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "screenshot {} is no PNG", shot.display());
    eprintln!("screenshot: {}", shot.display());

    // a question the node refuses (over max_question_bytes) shows the node's reason
    let long = "why%20".repeat(1100);
    let dom = page_dom(&format!("http://{addr}/?q={long}"), &std::env::temp_dir().join(format!("trace-page-refused-{}.png", std::process::id())));
    assert!(dom.contains("The node could not answer:") && dom.contains("max_question_bytes"), "{dom}");
    node.stop();
}

/// The page's standing queries, live: "Keep answering" registers the asked question, and when
/// a document that completes its answer reaches the node, the open page shows the new answer
/// without a reload (server-sent events on `GET /events`). Driven over the DevTools protocol
/// by tests/page_driver.py; its screenshot is target/tmp/trace-page-standing.png.
#[test]
fn the_page_shows_a_standing_answer_change_live_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/corpus.jsonl");
    let all: Vec<serde_json::Value> = std::fs::read_to_string(corpus).unwrap().lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    let (pierre, rest): (Vec<_>, Vec<_>) = all.into_iter().partition(|d| d["id"] == "pierre-curie");
    let rest_file = dir.path().join("rest.jsonl");
    std::fs::write(&rest_file, rest.iter().map(|d| d.to_string() + "\n").collect::<String>()).unwrap();
    let pierre_file = dir.path().join("pierre.json");
    std::fs::write(&pierre_file, pierre[0].to_string()).unwrap();
    streamrag(&["ingest", "--data", data.to_str().unwrap(), rest_file.to_str().unwrap()]);
    let (mut node, addr) = start_run(&["--data", data.to_str().unwrap()]);
    wait_stats(&addr, std::time::Duration::from_secs(120), |s| s.documents == rest.len());
    wait_caught_up(&addr, std::time::Duration::from_secs(120));

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-page-standing.png");
    let chromium = chromium();
    let q = "In which city was the husband of Marie Curie born?";
    let seen = python_client(
        "page_driver.py",
        &["standing", chromium.to_str().unwrap(), &format!("http://{addr}"), q, pierre_file.to_str().unwrap(), shot.to_str().unwrap()],
        "chromium (Debian)",
    );
    let ids = |v: &serde_json::Value| -> Vec<String> { v["docs"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect() };
    // first shown without the husband's page, then with it, on the same open page
    assert!(!ids(&seen["before"]).contains(&"pierre-curie".to_string()), "{seen}");
    assert_eq!(seen["before"]["reason"], "subscribed", "{seen}");
    assert!(ids(&seen["after"]).contains(&"pierre-curie".to_string()), "{seen}");
    let reason = seen["after"]["reason"].as_str().unwrap();
    assert!(reason == "changed pierre-curie" || reason == "indexed pierre-curie", "{seen}");
    assert!(seen["after"]["updates"].as_i64().unwrap() >= 1, "{seen}");
    assert_eq!(seen["after"]["id"], seen["before"]["id"], "{seen}");
    // the node lists the subscription the page registered, with the answer the page shows
    let listed = &seen["listed"]["subscriptions"];
    assert_eq!(listed.as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(listed[0]["subscription_id"], seen["after"]["id"], "{seen}");
    assert_eq!(listed[0]["question"], q, "{seen}");
    assert!(seen["screenshot_bytes"].as_i64().unwrap() > 20_000, "{seen}");
    eprintln!("screenshot: {}", shot.display());
    node.stop();
}
