//! An OpenAI-compatible face on the node's HTTP port: `GET /v1/models` and
//! `POST /v1/chat/completions`, streaming (server-sent events) and not, so chat clients and
//! agents built on the OpenAI API can ask the live graph.
//!
//! The last user message is the question; earlier turns and sampling options are accepted and
//! not used. The reply is the query stage's answer (the answering LLM's when it has one, else
//! extractive; or an abstention), cited as `[n]`; the text ends with the numbered sources, and the
//! documents, facts and seeds ride along in the extra field `streamrag` (on the completion, and
//! on the last chunk of a stream). Errors come in OpenAI's shape,
//! `{"error": {"message", "type", "param", "code"}}`.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use streamrag_schemas::{Answer, Query, SCHEMA_VERSION};

use crate::http::ApiState;

/// The one model this endpoint serves.
pub const MODEL: &str = "streamrag";

/// An error in OpenAI's shape.
fn error(status: StatusCode, kind: &str, code: Option<&str>, param: Option<&str>, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": { "message": message.into(), "type": kind, "param": param, "code": code } }))).into_response()
}

fn invalid(param: Option<&str>, message: impl Into<String>) -> Response {
    error(StatusCode::BAD_REQUEST, "invalid_request_error", None, param, message)
}

fn now_s() -> i64 {
    streamrag_operators::transport::now_ms() / 1000
}

pub async fn models() -> Json<Value> {
    Json(json!({ "object": "list", "data": [{ "id": MODEL, "object": "model", "created": 0, "owned_by": "streamrag" }] }))
}

#[derive(Deserialize)]
struct ChatRequest {
    model: String,
    messages: Vec<Message>,
    #[serde(default)]
    stream: bool,
    /// Documents to retrieve (an extension; the query stage's default when absent).
    #[serde(default)]
    top_k: Option<u32>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

/// The question: the text of the last user message.
#[allow(clippy::result_large_err)] // the error is the HTTP response itself
fn question(req: &ChatRequest) -> Result<String, Response> {
    if req.messages.is_empty() {
        return Err(invalid(Some("messages"), "messages is empty: send at least one user message"));
    }
    let (i, last) = req.messages.iter().enumerate().rev().find(|(_, m)| m.role == "user").ok_or_else(|| invalid(Some("messages"), "no message with role \"user\": the last user message is the question"))?;
    let param = format!("messages[{i}].content");
    let text = match &last.content {
        None => return Err(invalid(Some(&param), "the last user message has no content")),
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Parts(parts)) => {
            let mut out = Vec::new();
            for p in parts {
                match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => out.push(t.as_str()),
                    ("text", None) => return Err(invalid(Some(&param), "a text part has no text")),
                    (other, _) => return Err(invalid(Some(&param), format!("content parts of type {other:?} are not supported: only text"))),
                }
            }
            out.join("\n")
        }
    };
    if text.trim().is_empty() {
        return Err(invalid(Some(&param), "the last user message is empty"));
    }
    Ok(text)
}

/// The reply's text: the answer (cited as `[n]`, n = the document's rank from 1), then the
/// numbered sources; an abstention alone, naming nothing.
pub fn reply_text(a: &Answer) -> String {
    let mut out = match a.answer.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => t.to_string(),
        None => streamrag_operators::answer::NO_SUPPORT.to_string(),
    };
    if a.abstained {
        return out;
    }
    if !a.documents.is_empty() {
        out.push_str("\n\nSources:");
        for (i, d) in a.documents.iter().enumerate() {
            let title = if d.title.is_empty() { &d.id } else { &d.title };
            out.push_str(&format!("\n[{}] {title} ({})", i + 1, d.id));
        }
    }
    out
}

/// The extra field: what the answer was built from.
fn extra(a: &Answer) -> Value {
    json!({
        "query_id": a.query_id,
        "retriever": a.retriever,
        "answered_by": a.answered_by,
        "abstained": a.abstained,
        "citations": a.citations,
        "documents": a.documents.iter().enumerate().map(|(i, d)| json!({ "n": i + 1, "id": d.id, "title": d.title, "score": d.score })).collect::<Vec<_>>(),
        "facts": a.triples,
        "seeds": a.seeds,
        "graph_version": a.graph_version,
        "latency_ms": a.latency_ms,
    })
}

/// The text cut into stream pieces: a word and the space after it each.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() && i + c.len_utf8() < text.len() && !text[i + c.len_utf8()..].starts_with(char::is_whitespace) {
            out.push(&text[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The server-sent events of a streamed reply: the role, the text a word at a time, then the
/// finish with the extra field, then `[DONE]`. The answer is whole before the first event (the
/// query stage answers at once), so the events go out together.
fn stream_body(id: &str, created: i64, a: &Answer) -> String {
    let chunk = |delta: Value, finish: Option<&str>| json!({ "id": id, "object": "chat.completion.chunk", "created": created, "model": MODEL, "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
    let text = reply_text(a);
    events.extend(pieces(&text).into_iter().map(|p| chunk(json!({ "content": p }), None)));
    let mut last = chunk(json!({}), Some("stop"));
    last["streamrag"] = extra(a);
    events.push(last);
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

pub async fn chat(State(s): State<Arc<ApiState>>, caller: crate::auth::MaybeCaller, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return error(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request_error", Some("request_too_large"), None, "the request body is over the node's limit"),
        Err(e) => return invalid(None, format!("could not read the body: {e}")),
    };
    let req: ChatRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return invalid(None, format!("expected a chat completion request ({{\"model\": \"{MODEL}\", \"messages\": [...]}}): {e}")),
    };
    if req.model != MODEL {
        return error(StatusCode::NOT_FOUND, "invalid_request_error", Some("model_not_found"), Some("model"), format!("the model {:?} does not exist here: this endpoint serves {MODEL:?}", req.model));
    }
    let question = match question(&req) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let query = Query { schema_version: SCHEMA_VERSION, query_id: crate::http::new_query_id(), question, top_k: req.top_k, access: crate::auth::reader_of(&caller).to_field() };
    let a = match crate::http::answer(&s, &query).await {
        Ok(a) => a,
        Err((StatusCode::GATEWAY_TIMEOUT, message)) => return error(StatusCode::GATEWAY_TIMEOUT, "server_error", Some("timeout"), None, message),
        Err((status, message)) if status.is_server_error() => return error(status, "server_error", None, None, message),
        Err((status, message)) => return error(status, "invalid_request_error", None, Some("messages"), message),
    };
    let id = format!("chatcmpl-{}", a.query_id);
    let created = now_s();
    if req.stream {
        return ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from(stream_body(&id, created, &a))).into_response();
    }
    let mut out = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": MODEL,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": reply_text(&a) }, "finish_reason": "stop", "logprobs": null }],
    });
    out["streamrag"] = extra(&a);
    Json(out).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamrag_schemas::{GraphVersion, ScoredDocument, Triple};

    fn answer(llm: Option<&str>) -> Answer {
        let doc = |id: &str, title: &str| ScoredDocument { id: id.into(), title: title.into(), score: 1.0 };
        let fact = |s: &str, r: &str, o: &str| Triple { subject: s.into(), relation: r.into(), object: o.into() };
        Answer {
            schema_version: SCHEMA_VERSION,
            query_id: "q".into(),
            question: "In which city was the husband of Marie Curie born?".into(),
            documents: vec![doc("marie-curie", "Marie Curie"), doc("pierre-curie", "Pierre Curie")],
            triples: vec![fact("Pierre Curie", "born in", "Paris"), fact("Pierre Curie", "married", "Marie Curie"), fact("Paris", "capital of", "France")],
            seeds: vec!["Marie Curie".into()],
            entities: vec![],
            retriever: "hybrid".into(),
            checkpoint: None,
            answer: llm.map(str::to_string),
            abstained: false,
            answered_by: llm.map(|_| "extractive".to_string()),
            citations: vec![],
            reason: None,
            graph_version: GraphVersion::default(),
            latency_ms: 1.0,
        }
    }

    fn request(body: Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn the_question_is_the_last_user_message_in_either_content_form() {
        let r = request(json!({"model": "streamrag", "messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "text", "text": "part"}]}, {"role": "assistant", "content": null}]}));
        assert_eq!(question(&r).ok(), Some("second\npart".to_string()));
        let status = |b: Value| question(&request(b)).err().map(|r| r.status());
        assert_eq!(status(json!({"model": "m", "messages": []})), Some(StatusCode::BAD_REQUEST));
        assert_eq!(status(json!({"model": "m", "messages": [{"role": "system", "content": "be brief"}]})), Some(StatusCode::BAD_REQUEST));
        assert_eq!(status(json!({"model": "m", "messages": [{"role": "user", "content": "  "}]})), Some(StatusCode::BAD_REQUEST));
        assert_eq!(status(json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})), Some(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn the_answer_comes_first_then_its_sources_and_an_abstention_names_nothing() {
        let t = reply_text(&answer(Some("Paris [2]")));
        assert_eq!(t, "Paris [2]\n\nSources:\n[1] Marie Curie (marie-curie)\n[2] Pierre Curie (pierre-curie)");
        let mut no = answer(Some(streamrag_operators::answer::NO_SUPPORT));
        no.abstained = true;
        assert_eq!(reply_text(&no), streamrag_operators::answer::NO_SUPPORT);
        let mut empty = answer(None);
        empty.documents.clear();
        assert_eq!(reply_text(&empty), streamrag_operators::answer::NO_SUPPORT);
    }

    #[test]
    fn a_stream_is_the_same_text_in_word_pieces_then_the_extra_field_then_done() {
        let a = answer(Some("Paris [2]"));
        let body = stream_body("id", 1, &a);
        assert!(body.ends_with("data: [DONE]\n\n"));
        let events: Vec<Value> = body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).filter(|e| *e != "[DONE]").map(|e| serde_json::from_str(e).unwrap()).collect();
        assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
        let text: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
        assert_eq!(text, reply_text(&a));
        assert!(events.len() > 8, "one event per word");
        let last = events.last().unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(last["streamrag"]["documents"][1]["id"], "pierre-curie");
        assert_eq!(last["streamrag"]["answered_by"], "extractive");
    }
}
