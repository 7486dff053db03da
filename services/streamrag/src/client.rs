//! The clients behind `streamrag ingest` and `streamrag ask`: over Kafka, over the HTTP API of
//! a running process, or straight into the data directory of a stopped embedded node.

use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use streamrag_operators::answer::Answerer;
use streamrag_operators::passages::{DocSink, DocsReader, Passages};
use streamrag_operators::query;
use streamrag_operators::retrieve::{FactsReader, RetrieverChoice};
use streamrag_operators::transport::{connect_kafka, Output, Record, Transport, TransportConfig};
use streamrag_operators::StageFault;
use streamrag_operators::{DataDir, Limits, Topics};
use streamrag_schemas::{decode, encode, Answer, Document, Query, SCHEMA_VERSION};

use crate::node::AnswerRouter;

/// Where a client sends its records.
#[derive(Debug, Clone)]
pub enum Target {
    /// The HTTP API of a running `streamrag run --http ADDR`.
    Http(String),
    /// A Kafka cluster (`brokers` is set).
    Kafka(TransportConfig),
    /// The embedded log of a data directory no process holds open.
    Embedded(DataDir),
}

/// An HTTP request's failure in one line, naming the fix when nothing answers at `addr`.
fn http_error(addr: &str, e: reqwest::Error) -> anyhow::Error {
    if e.is_connect() {
        anyhow::anyhow!(
            "nothing answers at http://{addr}: is `streamrag run --http {addr}` running? (it serves HTTP once its models are loaded; wait for \"HTTP API listening\" in its log)"
        )
    } else if e.is_timeout() {
        anyhow::anyhow!("http://{addr} did not answer in time")
    } else {
        anyhow::anyhow!("http://{addr}: {e}")
    }
}

/// A request to a running process's HTTP API, with the bearer token of `STREAMRAG_TOKEN`
/// when there is one (a node configured with tokens wants it).
fn with_token(r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match std::env::var("STREAMRAG_TOKEN") {
        Ok(t) if !t.trim().is_empty() => r.bearer_auth(t.trim()),
        _ => r,
    }
}

/// What to do about a 401 or 403.
fn token_hint(status: reqwest::StatusCode) -> &'static str {
    match status.as_u16() {
        401 => " (the node wants a bearer token: set STREAMRAG_TOKEN)",
        403 => " (STREAMRAG_TOKEN's token lacks the scope this needs)",
        _ => "",
    }
}

/// GETs a JSON document from a running process's HTTP API.
pub async fn get_json(addr: &str, path: &str) -> Result<serde_json::Value> {
    let resp = with_token(reqwest::Client::new().get(format!("http://{addr}{path}"))).send().await.map_err(|e| http_error(addr, e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| http_error(addr, e))?;
    if !status.is_success() {
        bail!("the server answered {status}: {text}{}", token_hint(status));
    }
    Ok(serde_json::from_str(&text)?)
}

/// One input line: a document, a raw payload, or the reason it was rejected.
pub enum Line {
    Doc(Document),
    Raw(Vec<u8>),
    Rejected { line: usize, reason: String },
}

/// Reads JSON lines `{"id","title","text"[,"triples"]}` from a file or `-` (stdin).
/// With `raw`, lines are passed on as bytes without any check.
pub fn read_lines(path: &str, raw: bool, limits: &Limits) -> Result<Vec<Line>> {
    let reader: Box<dyn BufRead> = if path == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("opening {path}"))?))
    };
    parse_lines(reader, raw, limits)
}

/// [`read_lines`] over any reader.
pub fn parse_lines(reader: impl BufRead, raw: bool, limits: &Limits) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    for (i, line) in reader.split(b'\n').enumerate() {
        let mut line = line?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        if raw {
            out.push(Line::Raw(line));
            continue;
        }
        out.push(match decode::<Document>(&line) {
            Ok(doc) => match streamrag_operators::openie::validate(&doc, limits) {
                Ok(()) => Line::Doc(doc),
                Err(e) => Line::Rejected { line: i + 1, reason: e.message },
            },
            Err(e) => Line::Rejected { line: i + 1, reason: e.to_string() },
        });
    }
    Ok(out)
}

fn key_of(payload: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(payload)
        .ok()
        .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(str::to_string))
        .unwrap_or_default()
}

async fn transport_for(target: &Target, topics: &Topics) -> Result<Transport> {
    match target {
        Target::Kafka(cfg) => Ok(connect_kafka(cfg.brokers.as_deref().unwrap_or_default(), cfg, topics).await?),
        Target::Embedded(dir) => Ok(Transport::Embedded(dir.open_log()?)),
        Target::Http(_) => bail!("no transport for HTTP"),
    }
}

/// Publishes documents (or raw payloads) onto the docs topic; returns how many were acknowledged.
pub async fn ingest(target: &Target, topics: &Topics, items: Vec<Line>) -> Result<usize> {
    let mut payloads: Vec<(String, Vec<u8>)> = Vec::new();
    for item in items {
        match item {
            Line::Doc(d) => payloads.push((d.id.clone(), encode(&d))),
            Line::Raw(r) => payloads.push((key_of(&r), r)),
            Line::Rejected { .. } => {}
        }
    }
    let mut sent = 0;
    match target {
        Target::Http(addr) => {
            let client = reqwest::Client::new();
            for chunk in payloads.chunks(500) {
                let mut body = b"[".to_vec();
                for (i, (_, p)) in chunk.iter().enumerate() {
                    if i > 0 {
                        body.push(b',');
                    }
                    body.extend_from_slice(p);
                }
                body.push(b']');
                let resp = with_token(client.post(format!("http://{addr}/documents")))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| http_error(addr, e))?;
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                if !status.is_success() {
                    bail!("the server refused the documents ({status}): {text}{}", token_hint(status));
                }
                sent += chunk.len();
            }
        }
        _ => {
            let t = transport_for(target, topics).await?;
            for chunk in payloads.chunks(1000) {
                let outs: Vec<Output> = chunk
                    .iter()
                    .map(|(k, p)| Output { topic: topics.docs.clone(), key: k.clone(), payload: p.clone() })
                    .collect();
                t.produce(&outs).await?;
                sent += outs.len();
            }
        }
    }
    Ok(sent)
}

/// Asks a question and waits for its answer. `retriever` is what answers from a data
/// directory (a running node answers with its own).
/// The question is checked against `limits` before it goes anywhere.
pub async fn ask(target: &Target, topics: &Topics, limits: &Limits, question: &str, top_k: Option<u32>, timeout: Duration, retriever: &RetrieverChoice) -> Result<Answer> {
    let q = Query { access: Default::default(), schema_version: SCHEMA_VERSION, query_id: crate::http::new_query_id(), question: question.to_string(), top_k };
    query::validate(&q, limits).map_err(|e| anyhow::anyhow!(e.message))?;
    match target {
        Target::Http(addr) => {
            let resp = with_token(reqwest::Client::new().post(format!("http://{addr}/query")))
                .timeout(timeout + Duration::from_secs(5))
                .json(&serde_json::json!({ "question": q.question, "top_k": q.top_k, "query_id": q.query_id }))
                .send()
                .await
                .map_err(|e| http_error(addr, e))?;
            let status = resp.status();
            let text = resp.text().await.map_err(|e| http_error(addr, e))?;
            if !status.is_success() {
                bail!("the server answered {status}: {text}{}", token_hint(status));
            }
            Ok(serde_json::from_str(&text)?)
        }
        Target::Kafka { .. } => {
            let t = transport_for(target, topics).await?;
            let router = AnswerRouter::default();
            let rx = router.wait_for(&q.query_id);
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            // Assigned at the current end before the query goes out, so the answer is not missed.
            let sub = t.subscribe(&format!("streamrag.ask-{}", q.query_id), &topics.answers, true).await?;
            let listen = tokio::spawn(router.run(sub, stop_rx));
            t.produce(&[Output { topic: topics.queries.clone(), key: q.query_id.clone(), payload: encode(&q) }]).await?;
            let res = tokio::time::timeout(timeout, rx).await;
            let _ = stop_tx.send(true);
            let _ = listen.await;
            match res {
                Ok(Ok(a)) => Ok(a),
                _ => bail!("no answer for {} within {timeout:?}: is a query stage running?", q.query_id),
            }
        }
        Target::Embedded(dir) => {
            // No process holds the directory: answer from its graph directly, with the
            // retriever the node is configured with.
            let store = dir.open_graph()?;
            let (choice, dir, topics, limits) = (retriever.clone(), dir.clone(), topics.clone(), limits.clone());
            let answer = tokio::task::spawn_blocking(move || -> Result<(Answer, Arc<Passages>)> {
                let g = store.load()?;
                let r = choice.load(&dir)?;
                // the passage indexes are kept from the docs topic, the fact vectors from the
                // graph changes: read the log on from where each stands (its last commit)
                let sinks = r.sinks();
                let facts = r.facts();
                if !sinks.is_empty() || facts.is_some() {
                    let log = dir.open_log()?;
                    let read_on = |topic: &str, mut from: i64, apply: &dyn Fn(&[Record]) -> Result<(), StageFault>| -> Result<()> {
                        loop {
                            let batch = log.read(topic, from, 1024)?;
                            let Some(last) = batch.last() else { return Ok(()) };
                            from = last.offset + 1;
                            apply(&batch)?;
                        }
                    };
                    if !sinks.is_empty() {
                        let reader = DocsReader::new(topics.clone(), sinks).with_limits(limits.clone());
                        read_on(&topics.docs, reader.progress().get(&0).copied().unwrap_or(0), &|b| reader.apply(b))?;
                    }
                    if let Some(f) = facts {
                        let reader = FactsReader::new(topics.clone(), f);
                        read_on(reader.topic(), reader.progress().get(&0).copied().unwrap_or(0), &|b| reader.apply(b))?;
                    }
                }
                let a = query::answer(&g, &r, &q)?;
                // the answer's text: extractive, over the passages the docs topic holds
                let passages = Arc::new(Passages::default());
                let reader = DocsReader::new(topics.clone(), vec![passages.clone() as Arc<dyn DocSink>]).with_limits(limits);
                let log = dir.open_log()?;
                let mut from = 0;
                loop {
                    let batch = log.read(&topics.docs, from, 1024)?;
                    let Some(last) = batch.last() else { break };
                    from = last.offset + 1;
                    reader.apply(&batch)?;
                }
                Ok((a, passages))
            })
            .await??;
            let (mut a, passages) = answer;
            let w = Answerer::new(passages).write(&a.question, &a.documents).await;
            query::written_into(&mut a, w);
            Ok(a)
        }
    }
}

/// Human-readable answer.
pub fn render(a: &Answer) -> String {
    let mut s = format!("Q: {}\n", a.question);
    if let Some(text) = &a.answer {
        let by = a.answered_by.as_deref().map(|b| format!(" ({b})")).unwrap_or_default();
        s.push_str(&format!("A: {text}{by}\n"));
    }
    if a.documents.is_empty() {
        s.push_str("  (no documents: no entity of the question was found in the graph)\n");
    }
    for (i, d) in a.documents.iter().enumerate() {
        s.push_str(&format!("  {}. {} [{}] score {:.3}\n", i + 1, d.title, d.id, d.score));
    }
    if !a.triples.is_empty() {
        s.push_str("  supporting triples:\n");
        for t in a.triples.iter().take(5) {
            s.push_str(&format!("    ({}; {}; {})\n", t.subject, t.relation, t.object));
        }
    }
    s.push_str(&format!("  seeds: {:?}; retriever {}; graph version {:?}; {:.2} ms\n", a.seeds, a.retriever, a.graph_version.offsets, a.latency_ms));
    s
}
