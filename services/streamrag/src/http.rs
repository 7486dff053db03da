//! The HTTP API: `GET /` (the trace page, `page.html`), `POST /documents`, `GET
//! /documents/{id}` (a live document's text), `POST /query`
//! (answers synchronously), `GET /health`, `GET /stats`, standing queries under
//! `/subscriptions` and `GET /events` ([`crate::subscriptions`]), and the OpenAI-compatible `/v1/models` and
//! `/v1/chat/completions` ([`crate::openai`]). Bodies over the limit get 413;
//! input that fails validation gets 400 with the reason, and nothing of a rejected request is
//! published.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use streamrag_operators::{openie, StageError};
use streamrag_schemas::{Answer, Document, Query, SCHEMA_VERSION};

use crate::auth::{reader_of, MaybeCaller};
use crate::node::Node;

pub struct ApiState {
    pub node: Arc<Node>,
    pub answer_timeout: Duration,
}

pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// The address to listen on: a bare port (`8080`) or one without a host (`:8080`) binds to
/// 127.0.0.1; exposing the API beyond the machine takes an explicit host (`0.0.0.0:8080`).
pub fn bind_addr(s: &str) -> String {
    let s = s.trim();
    if s.parse::<u16>().is_ok() {
        format!("127.0.0.1:{s}")
    } else if let Some(port) = s.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        s.to_string()
    }
}

/// The API's routes; with `tokens` configured, every route but `/`, `/health` and `/metrics`
/// needs a bearer token with its scope ([`crate::auth`]).
pub fn router(state: Arc<ApiState>, tokens: Arc<crate::auth::Tokens>) -> Router {
    let body_limit = state.node.config.limits.max_text_bytes * 4 + 64 * 1024;
    Router::new()
        .route("/", get(page))
        .route("/health", get(health))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .route("/documents", post(documents))
        .route("/documents/{id}", get(document))
        .route("/query", post(query))
        .route("/subscriptions", post(crate::subscriptions::subscribe).get(crate::subscriptions::list))
        .route("/events", get(crate::subscriptions::all_events))
        .route("/subscriptions/{id}", get(crate::subscriptions::latest).delete(crate::subscriptions::unsubscribe))
        .route("/subscriptions/{id}/events", get(crate::subscriptions::events))
        .route("/v1/models", get(crate::openai::models))
        .route("/v1/chat/completions", post(crate::openai::chat))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(tokens, crate::auth::check))
        .with_state(state)
}

/// The trace page: ask a question, see the answer, the ranked documents, the supporting facts,
/// the seeds and the retrieved subgraph drawn, with the live graph's counts. One static file
/// in the binary; it calls `/query` and `/stats`.
async fn page() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("page.html"))
}

async fn health(State(s): State<Arc<ApiState>>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "transport": s.node.transport.name(),
        "stages": s.node.config.stages.iter().map(|k| k.name()).collect::<Vec<_>>(),
        "started_from_snapshot": s.node.started_from,
        // every stage, index readers included, at the end of its input (embedded only: on
        // Kafka watch streamrag_stage_consumer_lag)
        "caught_up": (s.node.transport.name() == "embedded").then(|| s.node.drained().unwrap_or(false)),
    }))
}

/// Of the graph the caller may read: a restricted token counts only its documents' part.
async fn stats(State(s): State<Arc<ApiState>>, caller: MaybeCaller) -> Response {
    match &s.node.graph {
        Some(g) => {
            let st = g.current_for(&reader_of(&caller)).stats();
            Json(serde_json::to_value(st).unwrap()).into_response()
        }
        None => error(StatusCode::NOT_FOUND, "this process holds no graph (run the kg-writer or query stage)"),
    }
}

/// `GET /documents/{id}`: a live document's title and text, as the query stage reads them.
/// A document the caller may not read is as absent as one that does not exist.
async fn document(State(s): State<Arc<ApiState>>, caller: MaybeCaller, axum::extract::Path(id): axum::extract::Path<String>) -> Response {
    let Some(passages) = &s.node.passages else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "this process runs no query stage, so it keeps no document text");
    };
    match passages.get(&id).filter(|_| passages.may_read(&id, &reader_of(&caller))) {
        Some((title, text)) => Json(json!({ "id": id, "title": title, "text": text })).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no live document {id:?}")),
    }
}

/// Prometheus text exposition of the process's metrics (stages, freshness, LLMs, graph).
async fn metrics() -> Response {
    let mut out = String::new();
    streamrag_operators::metrics::global().render(&mut out);
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// The status of a refused input: 413 when it is over a limit, else 400.
pub(crate) fn status_of(e: &StageError) -> StatusCode {
    if e.over_limit {
        StatusCode::PAYLOAD_TOO_LARGE
    } else {
        StatusCode::BAD_REQUEST
    }
}

/// Parses the body as one document or an array of documents, checking each.
#[allow(clippy::result_large_err)] // the error is the HTTP response itself
fn parse_documents(body: &[u8], limits: &streamrag_operators::Limits) -> Result<Vec<Document>, Response> {
    let text = std::str::from_utf8(body).map_err(|e| error(StatusCode::BAD_REQUEST, format!("body is not UTF-8: {e}")))?;
    let value: Value = serde_json::from_str(text).map_err(|e| error(StatusCode::BAD_REQUEST, format!("body is not JSON: {e}")))?;
    let items = match value {
        Value::Array(a) => a,
        v => vec![v],
    };
    let mut docs = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let doc: Document = serde_json::from_value(item)
            .map_err(|e| error(StatusCode::BAD_REQUEST, format!("document {i}: {e}")))?;
        if doc.schema_version != SCHEMA_VERSION {
            return Err(error(StatusCode::BAD_REQUEST, format!("document {i}: schema_version {} is not supported", doc.schema_version)));
        }
        openie::validate(&doc, limits).map_err(|e| error(status_of(&e), format!("document {i}: {}", e.message)))?;
        docs.push(doc);
    }
    Ok(docs)
}

async fn documents(State(s): State<Arc<ApiState>>, body: axum::body::Bytes) -> Response {
    let docs = match parse_documents(&body, &s.node.config.limits) {
        Ok(d) => d,
        Err(r) => return r,
    };
    match s.node.publish_documents(&docs).await {
        Ok(pos) => (
            StatusCode::ACCEPTED,
            Json(json!({ "accepted": pos.len(), "offsets": pos.iter().map(|p| json!({"partition": p.partition, "offset": p.offset})).collect::<Vec<_>>() })),
        )
            .into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, format!("could not publish: {e}")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryBody {
    question: String,
    #[serde(default)]
    top_k: Option<u32>,
    #[serde(default)]
    query_id: Option<String>,
}

/// A fresh query id: time, process and a counter.
pub fn new_query_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("q-{}-{}-{}", streamrag_operators::transport::now_ms(), std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

async fn query(State(s): State<Arc<ApiState>>, caller: MaybeCaller, body: axum::body::Bytes) -> Response {
    let q: QueryBody = match serde_json::from_slice(&body) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("expected {{\"question\": ...}}: {e}")),
    };
    let access = reader_of(&caller).to_field();
    let query = Query { schema_version: SCHEMA_VERSION, query_id: q.query_id.unwrap_or_else(new_query_id), question: q.question, top_k: q.top_k, access };
    match answer(&s, &query).await {
        Ok(a) => Json(a).into_response(),
        Err((status, message)) => error(status, message),
    }
}

/// Checks a query against the limits and asks the node; a refusal as its status and reason:
/// 400 / 413 for the query, 504 when no answer came in time, 503 when it could not be asked.
pub(crate) async fn answer(s: &ApiState, query: &Query) -> Result<Answer, (StatusCode, String)> {
    streamrag_operators::query::validate(query, &s.node.config.limits).map_err(|e| (status_of(&e), e.message))?;
    s.node.ask(query, s.answer_timeout).await.map_err(|e| {
        let status = if e.is::<crate::node::AskTimeout>() { StatusCode::GATEWAY_TIMEOUT } else { StatusCode::SERVICE_UNAVAILABLE };
        (status, e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(r: Result<Vec<Document>, Response>) -> StatusCode {
        r.map(|_| StatusCode::OK).unwrap_or_else(|r| r.status())
    }

    #[test]
    fn an_address_without_a_host_binds_to_localhost() {
        assert_eq!(bind_addr("8080"), "127.0.0.1:8080");
        assert_eq!(bind_addr(":8080"), "127.0.0.1:8080");
        assert_eq!(bind_addr("0.0.0.0:80"), "0.0.0.0:80");
        assert_eq!(bind_addr("[::1]:80"), "[::1]:80");
    }

    #[test]
    fn bodies_are_checked_document_by_document() {
        let l = streamrag_operators::Limits { max_text_bytes: 10, ..Default::default() };
        let l = &l;
        assert_eq!(status(parse_documents(br#"{"id":"a","text":"x"}"#, l)), StatusCode::OK);
        assert_eq!(parse_documents(br#"[{"id":"a","text":"x"},{"id":"b","text":"y"}]"#, l).unwrap().len(), 2);
        assert_eq!(status(parse_documents(b"\xff", l)), StatusCode::BAD_REQUEST);
        assert_eq!(status(parse_documents(b"{", l)), StatusCode::BAD_REQUEST);
        assert_eq!(status(parse_documents(br#"[{"id":"a","text":"x"},{"text":"y"}]"#, l)), StatusCode::BAD_REQUEST);
        assert_eq!(status(parse_documents(br#"{"id":"a"}"#, l)), StatusCode::BAD_REQUEST);
        assert_eq!(status(parse_documents(br#"{"id":"a","text":"much too long"}"#, l)), StatusCode::PAYLOAD_TOO_LARGE);
        // the status comes from the error's kind: a message that merely mentions a limit is a 400
        assert_eq!(status(parse_documents(br#"{"id":"over the limit"}"#, l)), StatusCode::BAD_REQUEST);
        // an id or title over its bound, or holding a control character, is a 400 naming it
        let long_id = format!(r#"{{"id":"{}","text":"x"}}"#, "i".repeat(513));
        assert_eq!(status(parse_documents(long_id.as_bytes(), l)), StatusCode::BAD_REQUEST);
        assert_eq!(status(parse_documents(br#"{"id":"a\u0000b","text":"x"}"#, l)), StatusCode::BAD_REQUEST);
        assert_eq!(status(parse_documents(br#"{"id":"a","title":"t\u0007","text":"x"}"#, l)), StatusCode::BAD_REQUEST);
    }
}
