//! The OpenAI-compatible endpoint of a running node, driven by the official `openai` Python
//! package (scripts/test.sh installs it) over the sample corpus, streaming and not; and bad
//! input on its routes, answered in OpenAI's error shape.

mod common;

use common::*;
use serde_json::Value;

#[test]
fn the_openai_python_client_asks_streaming_and_not_and_gets_cited_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    let seen = python_client("openai_client.py", &[&format!("http://{addr}/v1")], "openai");
    assert_eq!(seen["husband"]["answered_by"], "extractive", "no answering LLM is configured here");
    node.stop();
}

#[test]
fn bad_requests_get_openai_shaped_errors_and_the_node_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    let url = format!("http://{addr}/v1/chat/completions");
    let post = |body: Vec<u8>| -> (u16, Value) {
        rt().block_on(async {
            let r = reqwest::Client::new().post(&url).header("content-type", "application/json").body(body).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json().await.unwrap_or(Value::Null))
        })
    };
    let ask = |q: &str| serde_json::to_vec(&serde_json::json!({"model": "streamrag", "messages": [{"role": "user", "content": q}]})).unwrap();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("not JSON", b"{".to_vec(), 400),
        ("not UTF-8", b"\xff\xfe".to_vec(), 400),
        ("no model", br#"{"messages": [{"role": "user", "content": "x"}]}"#.to_vec(), 400),
        ("messages not a list", br#"{"model": "streamrag", "messages": "x"}"#.to_vec(), 400),
        ("a question over max_question_bytes", ask(&"why ".repeat(100_000)), 400),
        ("a body over the limit", ask(&"why ".repeat(1_200_000)), 413),
    ];
    for (what, body, want) in cases {
        let (status, v) = post(body);
        assert_eq!(status, want, "{what}: {v}");
        let e = &v["error"];
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string(), "{what}: not OpenAI's error shape: {v}");
    }
    // nothing of the bad requests stopped the node
    let (status, v) = post(ask("Where is the person who wrote the Principia buried?"));
    assert_eq!(status, 200, "{v}");
    assert!(v["choices"][0]["message"]["content"].as_str().is_some_and(|t| t.contains("[1]")), "{v}");
    node.stop();
}
