//! The trace page (`GET /`) in a real headless Chromium (Debian's package; scripts/test.sh
//! installs it): the page asks a sample question on load (`?q=`), and the DOM the browser built
//! holds the ranked documents, the supporting facts and the drawn subgraph with its seeds
//! marked. The screenshot is kept as a test artifact, target/tmp/trace-page.png.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

fn chromium() -> PathBuf {
    let p = std::env::var("STREAMRAG_CHROMIUM").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from("/usr/bin/chromium"));
    assert!(p.exists(), "no Chromium at {} (scripts/test.sh installs Debian's chromium)", p.display());
    p
}

/// Chromium, headless, on `url`, with time for the page's requests; its stdout.
fn headless(url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--virtual-time-budget=15000", "--window-size=1366,900"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .unwrap();
    assert!(o.status.success(), "chromium failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_page_asks_and_shows_documents_facts_and_the_subgraph_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    let q = "In which city was the husband of Marie Curie born?";
    let url = format!("http://{addr}/?q={}", q.replace(' ', "%20").replace('?', "%3F"));

    let dom = headless(&url, &["--dump-dom"]);
    assert!(dom.contains("data-answered=\"true\""), "the page never showed an answer:\n{dom}");
    // the answer text, cited, and the cited document marked in the ranking
    assert!(dom.contains("data-abstained=\"false\">Paris ["), "no cited answer:\n{dom}");
    assert!(dom.contains("answered by extractive; cites [") && dom.contains("class=\"cited\""), "no citations shown:\n{dom}");
    // the documents, ranked, with their ids: the husband's page among the first three
    let ranked: Vec<&str> = dom.split("<li data-id=\"").skip(1).filter_map(|s| s.split('"').next()).collect();
    assert!(ranked.iter().take(3).any(|d| *d == "pierre-curie"), "{ranked:?}");
    // the supporting facts and the live counts
    assert!(dom.matches("<tr>").count() >= 2, "no supporting facts:\n{dom}");
    assert!(dom.contains("graph: 24 documents"), "no live counts:\n{dom}");
    // the subgraph: drawn nodes, the question's seed marked, edges between them
    assert!(dom.contains("class=\"node seed") && dom.contains("data-name=\"Marie Curie\""), "no seed drawn:\n{dom}");
    assert!(dom.matches("class=\"edge\"").count() >= 2, "no edges drawn:\n{dom}");
    assert!(dom.contains("class=\"node page") || dom.contains("seed page"), "no entity marked as a ranked document's subject:\n{dom}");

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-page.png");
    let _ = std::fs::remove_file(&shot);
    headless(&url, &[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "screenshot {} is {} bytes", shot.display(), png.len());
    eprintln!("screenshot: {}", shot.display());

    // a question the node refuses (over max_question_bytes) shows the node's reason
    let long = "why%20".repeat(1100);
    let dom = headless(&format!("http://{addr}/?q={long}"), &["--dump-dom"]);
    assert!(dom.contains("The node could not answer:") && dom.contains("max_question_bytes"), "{dom}");
    node.stop();
}
