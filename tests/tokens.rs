//! Bearer tokens through the real binary: `streamrag token` makes them (the tokens file holds
//! only their hashes), a node started with `--tokens` answers 401 without a known token and
//! 403 without the route's scope, in OpenAI's error shape on the chat routes, the CLI clients
//! present STREAMRAG_TOKEN, a non-loopback bind without tokens refuses to start unless told,
//! and no token ever reaches the log (at debug level) or /metrics.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// `streamrag token ARGS`: the token (from stderr) and the entry (stdout).
fn make_token(args: &[&str]) -> (String, String) {
    let o = Command::new(bin()).arg("token").args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8(o.stderr).unwrap();
    let token = err.split_whitespace().find(|w| w.starts_with("srk_")).unwrap_or_else(|| panic!("no token on stderr: {err}")).to_string();
    let entry = String::from_utf8(o.stdout).unwrap();
    assert!(!entry.contains(&token), "the entry holds the token in the clear: {entry}");
    (token, entry)
}

/// `method path` with `token` (if any) and `body`: the status, the WWW-Authenticate header
/// and the body.
fn call(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Option<String>, Value) {
    rt().block_on(async {
        let c = reqwest::Client::new();
        let url = format!("http://{addr}{path}");
        let mut r = if method == "POST" { c.post(url) } else { c.get(url) };
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let www = resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
        let text = resp.text().await.unwrap();
        (status, www, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    })
}

#[test]
fn tokens_gate_every_route_by_scope_and_never_reach_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, reader_entry) = make_token(&["--name", "team-a-reader", "--scopes", "query", "--access", "team-a"]);
    let (writer, writer_entry) = make_token(&["--name", "feed-writer", "--scopes", "ingest"]);
    let (admin, admin_entry) = make_token(&["--name", "ops", "--scopes", "admin"]);
    assert!(reader_entry.contains("access = [\"team-a\"]") && reader_entry.contains("scopes = [\"query\"]"), "{reader_entry}");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, format!("{reader_entry}\n{writer_entry}\n{admin_entry}")).unwrap();

    let data = dir.path().join("data");
    let log = dir.path().join("stderr.log");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut node = Proc {
        child: Command::new(bin())
            .args(["run", "--data", data.to_str().unwrap(), "--http", &addr, "--tokens", tokens.to_str().unwrap()])
            .env("STREAMRAG_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        name: "streamrag run --tokens".into(),
    };
    wait_http(&addr, Duration::from_secs(60));

    let doc = json!({ "id": "ada", "title": "Ada Lovelace", "text": "Ada Lovelace was born in London." });
    let question = json!({ "question": "Where was Ada Lovelace born?" });

    // no token, an unknown one, a malformed header: 401 with the reason and the challenge
    for t in [None, Some("srk_not-a-token")] {
        let (status, www, body) = call(&addr, "POST", "/documents", t, Some(doc.clone()));
        assert_eq!(status, 401, "{body}");
        assert_eq!(www.as_deref(), Some("Bearer realm=\"streamrag\""));
        assert!(body["error"].as_str().is_some_and(|e| e.contains("token")), "{body}");
    }
    let basic = rt().block_on(async {
        reqwest::Client::new().get(format!("http://{addr}/stats")).header("authorization", format!("Basic {reader}")).send().await.unwrap()
    });
    assert_eq!(basic.status().as_u16(), 401);
    // a known token without the scope: 403 naming the token and the scope, never the token
    let (status, _, body) = call(&addr, "POST", "/documents", Some(&reader), Some(doc.clone()));
    assert_eq!(status, 403, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(e.contains("team-a-reader") && e.contains("ingest") && !e.contains(&reader), "{e}");
    assert_eq!(call(&addr, "POST", "/query", Some(&writer), Some(question.clone())).0, 403);
    assert_eq!(call(&addr, "GET", "/subscriptions", Some(&writer), None).0, 403);
    assert_eq!(call(&addr, "GET", "/stats", None, None).0, 401);
    assert_eq!(call(&addr, "GET", "/events", None, None).0, 401);

    // the right scopes pass; admin holds them all
    assert_eq!(call(&addr, "POST", "/documents", Some(&writer), Some(doc.clone())).0, 202);
    let deadline = Instant::now() + Duration::from_secs(60);
    while call(&addr, "GET", "/stats", Some(&reader), None).2["documents"] != 1 {
        assert!(Instant::now() < deadline, "the document never reached the graph");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _, a) = call(&addr, "POST", "/query", Some(&reader), Some(question.clone()));
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["documents"][0]["id"], "ada", "{a}");
    assert_eq!(call(&addr, "POST", "/query", Some(&admin), Some(question.clone())).0, 200);
    assert_eq!(call(&addr, "GET", "/subscriptions", Some(&admin), None).0, 200);

    // open routes: probes, scrapers, the page's HTML
    assert_eq!(call(&addr, "GET", "/health", None, None).0, 200);
    assert_eq!(call(&addr, "GET", "/", None, None).0, 200);
    let (status, _, metrics) = call(&addr, "GET", "/metrics", None, None);
    assert_eq!(status, 200);

    // the chat routes refuse in OpenAI's error shape
    let chat = json!({ "model": "streamrag", "messages": [{ "role": "user", "content": "Where was Ada Lovelace born?" }] });
    let (status, _, body) = call(&addr, "POST", "/v1/chat/completions", Some("srk_wrong"), Some(chat.clone()));
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("invalid_api_key")), "{body}");
    let (status, _, body) = call(&addr, "POST", "/v1/chat/completions", Some(&reader), Some(chat));
    assert_eq!(status, 200, "{body}");
    assert!(body["choices"][0]["message"]["content"].as_str().is_some_and(|c| c.contains("London")), "{body}");

    // the CLI presents STREAMRAG_TOKEN, and says what to do without it
    let asked = Command::new(bin()).args(["ask", "--http", &addr, "--json", "Where was Ada Lovelace born?"]).env("STREAMRAG_TOKEN", &reader).output().unwrap();
    assert!(asked.status.success(), "{}", String::from_utf8_lossy(&asked.stderr));
    assert!(String::from_utf8_lossy(&asked.stdout).contains("London"));
    let refused = Command::new(bin()).args(["ask", "--http", &addr, "Where was Ada Lovelace born?"]).env_remove("STREAMRAG_TOKEN").output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("STREAMRAG_TOKEN"), "{}", String::from_utf8_lossy(&refused.stderr));
    node.stop();

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("HTTP API listening") && text.contains("tokens=3"), "{text}");
    for t in [&reader, &writer, &admin] {
        assert!(!text.contains(t.as_str()), "a token is in the log");
        assert!(!metrics.to_string().contains(t.as_str()), "a token is in /metrics");
    }
}

#[test]
fn an_open_api_on_a_non_loopback_address_needs_tokens_or_an_explicit_yes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let refused = Command::new(bin())
        .args(["run", "--data", data.to_str().unwrap(), "--http", &format!("0.0.0.0:{port}")])
        .env("STREAMRAG_LOG", "warn")
        .env_remove("STREAMRAG_TOKENS")
        .env_remove("STREAMRAG_TOKENS_FILE")
        .env_remove("STREAMRAG_ALLOW_UNAUTHENTICATED")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("refusing to serve the HTTP API") && err.contains("--allow-unauthenticated") && err.contains("--tokens"), "{err}");

    // a tokens file that holds a token in the clear is refused with the reason
    let bad = dir.path().join("tokens.toml");
    std::fs::write(&bad, "[[token]]\nname = \"x\"\nsha256 = \"srk_plain\"\nscopes = [\"query\"]\n").unwrap();
    let o = Command::new(bin()).args(["run", "--data", data.to_str().unwrap(), "--http", &port.to_string(), "--tokens", bad.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("64 hex digits"), "{}", String::from_utf8_lossy(&o.stderr));

    // told explicitly, it serves
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--data", data.to_str().unwrap(), "--http", &format!("0.0.0.0:{port}"), "--allow-unauthenticated"]).env("STREAMRAG_LOG", "warn");
    let mut node = Proc::spawn("streamrag run --allow-unauthenticated", &mut cmd);
    wait_http(&format!("127.0.0.1:{port}"), Duration::from_secs(60));
    assert_eq!(call(&format!("127.0.0.1:{port}"), "GET", "/stats", None, None).0, 200);
    node.stop();
}
