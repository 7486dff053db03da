//! Security through the real binary: secrets given by environment never reach the logs (at
//! debug level, with an LLM endpoint that fails so its errors are logged), the HTTP API
//! answers oversized bodies with 413, and a bare port binds to 127.0.0.1 only.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// `streamrag ARGS` with debug logging and `env`, its stderr written to `log`.
fn run_logged(args: &[&str], env: &[(&str, &str)], log: &std::path::Path) -> Proc {
    let child = Command::new(bin())
        .args(args)
        .env("STREAMRAG_LOG", "debug")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Proc { child, name: format!("streamrag {}", args.join(" ")) }
}

#[test]
fn secrets_stay_out_of_the_logs_and_oversized_bodies_get_413() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("stderr.log");
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, "sk-file-secret-7f3a\n").unwrap();
    let port = free_port();
    // A dead endpoint: every answer attempt fails and is logged.
    let dead = format!("http://127.0.0.1:{}/v1", free_port());
    let mut p = run_logged(
        &[
            &["run", "--data", data.to_str().unwrap(), "--http", &port.to_string(), "--max-text-bytes", "1000"][..],
            &["--answer-llm", "openai:gpt-test", "--llm-base-url", &dead, "--llm-timeout-s", "1"],
            &["--kafka-option", "sasl.username=alice"],
        ]
        .concat(),
        &[("OPENAI_API_KEY", "sk-env-secret-91c2"), ("STREAMRAG_KAFKA_OPT_SASL_PASSWORD", "kafka-secret-5b8e")],
        &log,
    );
    let addr = format!("127.0.0.1:{port}");
    wait_http(&addr, Duration::from_secs(60));

    // 413: a body over the limit (4 x max text + 64 KiB), and one document over max text.
    let post = |body: String| {
        rt().block_on(async {
            reqwest::Client::new().post(format!("http://{addr}/documents")).body(body).send().await.unwrap().status().as_u16()
        })
    };
    assert_eq!(post(format!("{{\"id\":\"big\",\"text\":\"{}\"}}", "x".repeat(200_000))), 413);
    assert_eq!(post(format!("{{\"id\":\"long\",\"text\":\"{}\"}}", "x".repeat(1_500))), 413);
    assert_eq!(post(r#"{"id":"ok","title":"Ada Lovelace","text":"Ada Lovelace was born in London."}"#.into()), 202);
    wait_stats(&addr, Duration::from_secs(30), |s| s.documents == 1);
    // The answering LLM is down: after the retries the answer is extractive, not lost.
    let a: serde_json::Value = serde_json::from_str(&streamrag(&["ask", "--http", &addr, "--json", "Where was Ada Lovelace born?"])).unwrap();
    assert_eq!(a["answered_by"], "extractive", "{a}");
    assert!(a["answer"].as_str().is_some_and(|t| t.starts_with("London [1]")), "{a}");
    assert!(!a["documents"].as_array().unwrap().is_empty(), "{a}");
    p.stop();

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("the answering LLM failed"), "the failure is logged: {text}");
    for secret in ["sk-env-secret-91c2", "kafka-secret-5b8e", "sk-file-secret-7f3a"] {
        assert!(!text.contains(secret), "{secret} is in the log");
    }
    // Bound to 127.0.0.1 only: the log names the address.
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");

    // The same with the key in a file.
    let log2 = dir.path().join("stderr2.log");
    let port2 = free_port();
    let mut p = run_logged(
        &[
            &["run", "--data", data.to_str().unwrap(), "--http", &format!(":{port2}"), "--stages", "query"][..],
            &["--answer-llm", "openai:gpt-test", "--llm-base-url", &dead, "--llm-api-key-file", key_file.to_str().unwrap()],
        ]
        .concat(),
        &[],
        &log2,
    );
    let addr2 = format!("127.0.0.1:{port2}");
    wait_http(&addr2, Duration::from_secs(60));
    // A request with the file's key fails, and the failure is logged.
    let a: serde_json::Value = serde_json::from_str(&streamrag(&["ask", "--http", &addr2, "--json", "Where was Ada Lovelace born?"])).unwrap();
    assert_eq!(a["answered_by"], "extractive", "the LLM failed, so the answer is extractive: {a}");
    p.stop();
    let text = std::fs::read_to_string(&log2).unwrap();
    assert!(text.contains("the answering LLM failed"), "the failure is logged: {text}");
    assert!(!text.contains("sk-file-secret-7f3a"), "the key file's secret is in the log");
}
