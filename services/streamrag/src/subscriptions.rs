//! Standing queries over HTTP: `POST /subscriptions` (a question; answers `201` with its id
//! and first answer), `GET /subscriptions/{id}` (the latest answer), `DELETE
//! /subscriptions/{id}`, and `GET /subscriptions/{id}/events` (server-sent events: the latest
//! answer, then each new one). A subscription is a record on the subscriptions topic, so it
//! reaches every query process and survives restarts; this process's standing queries
//! ([`streamrag_operators::standing`]) answer it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::json;
use streamrag_operators::standing::readers::validate;
use streamrag_operators::standing::Standing;
use streamrag_operators::transport::Output;
use streamrag_schemas::{encode, Answer, DocOp, Subscription, SCHEMA_VERSION};

use crate::auth::{reader_of, MaybeCaller};
use crate::http::{error, status_of, ApiState};
use streamrag_operators::access::Reader;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeBody {
    question: String,
    #[serde(default)]
    top_k: Option<u32>,
    /// The subscription's id; a fresh one when absent. Posting an id again changes its question.
    #[serde(default)]
    id: Option<String>,
}

/// A fresh subscription id.
fn new_id() -> String {
    format!("s{}", &crate::http::new_query_id()[1..])
}

#[allow(clippy::result_large_err)] // the error is the HTTP response itself
fn standing(s: &ApiState) -> Result<&Arc<Standing>, Response> {
    s.node.standing.as_ref().ok_or_else(|| error(StatusCode::SERVICE_UNAVAILABLE, "this process runs no query stage, so it holds no standing queries"))
}

async fn publish(s: &ApiState, sub: &Subscription) -> Result<(), Response> {
    let out = Output { topic: s.node.config.topics.subscriptions.clone(), key: sub.subscription_id.clone(), payload: encode(sub) };
    s.node.transport.produce(&[out]).await.map(|_| ()).map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, format!("could not publish the subscription: {e}")))
}

pub async fn subscribe(State(s): State<Arc<ApiState>>, caller: MaybeCaller, body: axum::body::Bytes) -> Response {
    let standing = match standing(&s) {
        Ok(st) => st.clone(),
        Err(r) => return r,
    };
    let b: SubscribeBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("expected {{\"question\": ...}}: {e}")),
    };
    let reader = reader_of(&caller);
    let id = b.id.unwrap_or_else(new_id);
    // posting an id again changes its question: only for whoever may see its answers
    if standing.registry.reader(&id).is_some_and(|r| !reader.covers(&r)) {
        return error(StatusCode::FORBIDDEN, format!("subscription {id:?} was registered by a caller who may read more than this token"));
    }
    // its answers are made from what its registrar may read
    let sub = Subscription { schema_version: SCHEMA_VERSION, op: DocOp::Upsert, subscription_id: id, question: b.question, top_k: b.top_k, access: reader.to_field() };
    if let Err(e) = validate(&sub, &s.node.config.limits) {
        return error(status_of(&e), e.message);
    }
    if let Err(r) = publish(&s, &sub).await {
        return r;
    }
    // the subscription is answered when the reader reaches its record: wait for that answer
    let deadline = tokio::time::Instant::now() + s.answer_timeout;
    let first = loop {
        match standing.registry.latest(&sub.subscription_id) {
            Some(Some(a)) if a.question == sub.question => break Some(a),
            _ if tokio::time::Instant::now() >= deadline => break None,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    (StatusCode::CREATED, Json(json!({ "subscription_id": sub.subscription_id, "answer": first }))).into_response()
}

/// Whether `caller` may see the answers of subscription `id` (it exists and `caller` may read
/// all that its registrar may). One it may not see is as absent as one that does not exist.
fn visible(standing: &Standing, caller: &MaybeCaller, id: &str) -> bool {
    standing.registry.reader(id).is_some_and(|r| reader_of(caller).covers(&r))
}

pub async fn latest(State(s): State<Arc<ApiState>>, caller: MaybeCaller, Path(id): Path<String>) -> Response {
    let standing = match standing(&s) {
        Ok(st) => st,
        Err(r) => return r,
    };
    if !visible(standing, &caller, &id) {
        return error(StatusCode::NOT_FOUND, format!("no subscription {id:?}"));
    }
    match standing.registry.latest(&id) {
        None => error(StatusCode::NOT_FOUND, format!("no subscription {id:?}")),
        Some(None) => (StatusCode::ACCEPTED, Json(json!({ "subscription_id": id, "answer": null }))).into_response(),
        Some(Some(a)) => Json(a).into_response(),
    }
}

pub async fn unsubscribe(State(s): State<Arc<ApiState>>, caller: MaybeCaller, Path(id): Path<String>) -> Response {
    let standing = match standing(&s) {
        Ok(st) => st,
        Err(r) => return r,
    };
    if !visible(standing, &caller, &id) {
        return error(StatusCode::NOT_FOUND, format!("no subscription {id:?}"));
    }
    let sub = Subscription { access: Default::default(), schema_version: SCHEMA_VERSION, op: DocOp::Delete, subscription_id: id.clone(), question: String::new(), top_k: None };
    match publish(&s, &sub).await {
        Ok(()) => Json(json!({ "subscription_id": id, "deleted": true })).into_response(),
        Err(r) => r,
    }
}

fn event(a: &Answer) -> Result<Event, Infallible> {
    Ok(Event::default().event("answer").data(serde_json::to_string(a).expect("answers serialise")))
}

/// The latest answer, then every new one, as server-sent events named `answer`.
pub async fn events(State(s): State<Arc<ApiState>>, caller: MaybeCaller, Path(id): Path<String>) -> Response {
    let standing = match standing(&s) {
        Ok(st) => st,
        Err(r) => return r,
    };
    if !visible(standing, &caller, &id) {
        return error(StatusCode::NOT_FOUND, format!("no subscription {id:?}"));
    }
    // subscribe to the stream before reading the latest, so nothing falls between the two
    let rx = standing.registry.events();
    let Some(latest) = standing.registry.latest(&id) else {
        return error(StatusCode::NOT_FOUND, format!("no subscription {id:?}"));
    };
    answers_stream(latest, rx, Filter::One(id))
}

/// Every standing answer this process publishes from now on, whatever its subscription, as
/// server-sent events named `answer` (`query_id` is the subscription's id): one connection
/// for a page that shows them all.
/// Only those of the subscriptions the caller may see.
pub async fn all_events(State(s): State<Arc<ApiState>>, caller: MaybeCaller) -> Response {
    match standing(&s) {
        Ok(st) => answers_stream(None, st.registry.events(), Filter::Visible(st.clone(), reader_of(&caller))),
        Err(r) => r,
    }
}

/// Which answers an event stream carries.
#[derive(Clone)]
enum Filter {
    One(String),
    /// Those of the subscriptions this reader may see.
    Visible(Arc<Standing>, Reader),
}

impl Filter {
    fn passes(&self, a: &Answer) -> bool {
        match self {
            Filter::One(id) => a.query_id == *id,
            Filter::Visible(st, reader) => st.registry.reader(&a.query_id).is_some_and(|r| reader.covers(&r)),
        }
    }
}

fn answers_stream(first: Option<Answer>, rx: tokio::sync::broadcast::Receiver<Answer>, only: Filter) -> Response {
    let first = stream::iter(first.as_ref().map(event));
    let next = stream::unfold(rx, move |mut rx| {
        let only = only.clone();
        async move {
            loop {
                match rx.recv().await {
                    Ok(a) if only.passes(&a) => return Some((event(&a), rx)),
                    Ok(_) => continue,
                    // too slow a reader missed some: the next one it gets is the newest anyway
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    let all: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> = Box::pin(first.chain(next));
    Sse::new(all).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Subscriptions whose id sorts after this one (the previous page's `next`).
    #[serde(default)]
    after: Option<String>,
    /// At most this many (default 100, at most 1,000).
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /subscriptions`: the subscriptions sorted by id, a page at a time, each with its
/// question and latest answer; `next` is the `after` of the next page (null on the last).
pub async fn list(State(s): State<Arc<ApiState>>, caller: MaybeCaller, q: Result<axum::extract::Query<ListParams>, axum::extract::rejection::QueryRejection>) -> Response {
    let standing = match standing(&s) {
        Ok(st) => st,
        Err(r) => return r,
    };
    let q = match q {
        Ok(q) => q.0,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("expected ?after=<id>&limit=<1..1000>: {e}")),
    };
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return error(StatusCode::BAD_REQUEST, format!("limit must be 1 to 1000, not {limit}"));
    }
    let reader = reader_of(&caller);
    let page = standing.registry.list(q.after.as_deref(), limit + 1, &reader);
    let next = (page.len() > limit).then(|| page[limit - 1].subscription_id.clone());
    let page = &page[..page.len().min(limit)];
    Json(json!({ "subscriptions": page, "total": standing.registry.len_for(&reader), "next": next })).into_response()
}
