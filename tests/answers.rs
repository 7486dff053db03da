//! Answers people can trust, through the real binary with the default install (no LLM): an
//! answerable question gets extractive text citing its passages, with the citations listed; a
//! question about something the corpus does not hold abstains and names nothing, over HTTP and
//! from a stopped node's data directory (`ask --data`).

mod common;

use common::*;
use serde_json::Value;

fn post_query(addr: &str, question: &str) -> Value {
    rt().block_on(async {
        let r = reqwest::Client::new().post(format!("http://{addr}/query")).json(&serde_json::json!({ "question": question })).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        r.json().await.unwrap()
    })
}

/// The answer text names nothing: no capitalised word after its first.
fn names_nothing(text: &str) -> bool {
    text.split_whitespace().skip(1).all(|w| !w.chars().next().is_some_and(char::is_uppercase))
}

fn check_answerable(a: &Value, starts: &str, cited_id: &str) {
    let text = a["answer"].as_str().unwrap_or_default();
    assert!(text.starts_with(starts), "{a}");
    assert_eq!(a["abstained"], false, "{a}");
    assert_eq!(a["answered_by"], "extractive", "{a}");
    let citations = a["citations"].as_array().unwrap();
    assert!(citations.iter().any(|c| c["document_id"] == cited_id), "{a}");
    let docs: Vec<&str> = a["documents"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap()).collect();
    for c in citations {
        let n = c["n"].as_u64().unwrap() as usize;
        assert!(text.contains(&format!("[{n}]")), "citation {n} is not in the text: {a}");
        assert_eq!(docs[n - 1], c["document_id"].as_str().unwrap(), "[{n}] is the document of rank {n}: {a}");
    }
}

fn check_abstained(a: &Value) {
    let text = a["answer"].as_str().unwrap_or_default();
    assert_eq!(a["abstained"], true, "{a}");
    assert_eq!(a["answered_by"], "none", "{a}");
    assert!(a.get("citations").is_none_or(|c| c.as_array().is_some_and(|c| c.is_empty())), "{a}");
    assert!(!text.is_empty() && names_nothing(text), "the abstention names something: {text}");
}

const UNANSWERABLE: &[&str] = &["Who won the 2031 Mars chess championship?", "Where was Zorvath Quillen born?", "In which city was the husband of Ada Shrewsbury born?"];

#[test]
fn answers_cite_their_passages_and_questions_about_nothing_held_abstain() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    check_answerable(&post_query(&addr, "In which city was the husband of Marie Curie born?"), "Paris [", "pierre-curie");
    check_answerable(&post_query(&addr, "Who designed the machine that Ada Lovelace wrote the first program for?"), "Charles Babbage [", "analytical-engine");
    for q in UNANSWERABLE {
        check_abstained(&post_query(&addr, q));
    }
    node.stop();

    // the same from the stopped node's data directory
    let data = dir.path().join("data");
    let ask = |q: &str| -> Value { serde_json::from_str(&streamrag(&["ask", "--data", data.to_str().unwrap(), "--json", q])).unwrap() };
    check_answerable(&ask("In which city was the husband of Marie Curie born?"), "Paris [", "pierre-curie");
    check_abstained(&ask(UNANSWERABLE[0]));
}
