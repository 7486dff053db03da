//! Topic messages. Field names are the JSON names; every struct rejects unknown fields so a
//! misspelt field is an error at the edge, never silently dropped.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::SCHEMA_VERSION;

fn default_version() -> u32 {
    SCHEMA_VERSION
}

/// Where a record came from: its topic, partition and offset (and, on records derived from a
/// document, the document record's topic timestamp: the start of its freshness clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_ms: Option<i64>,
}

/// Whether a document message asserts a (new version of a) document or withdraws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DocOp {
    #[default]
    Upsert,
    Delete,
}

impl DocOp {
    fn is_upsert(&self) -> bool {
        *self == DocOp::Upsert
    }
}

/// A (subject, relation, object) triple as written by users: `["Paris", "capital of", "France"]`.
pub type RawTriple = [String; 3];

/// `streamrag.docs`: one document, keyed by its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "DocOp::is_upsert")]
    pub op: DocOp,
    pub id: String,
    #[serde(default)]
    pub title: String,
    /// Required for an upsert, absent for a delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Pre-extracted triples: when present, the openie stage passes them through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triples: Option<Vec<RawTriple>>,
    /// Free-form user metadata, carried along untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// Who may read it: a query sees this document (its passage, and the facts and names only
    /// it supports) when it may read one of these labels. Empty: public.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<String>,
}

impl Document {
    pub fn upsert(id: impl Into<String>, title: impl Into<String>, text: impl Into<String>) -> Self {
        Document {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: DocOp::Upsert,
            id: id.into(),
            title: title.into(),
            text: Some(text.into()),
            triples: None,
            metadata: None,
        }
    }

    pub fn delete(id: impl Into<String>) -> Self {
        Document {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: DocOp::Delete,
            id: id.into(),
            title: String::new(),
            text: None,
            triples: None,
            metadata: None,
        }
    }
}

/// A named entity mention found in a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mention {
    pub name: String,
    /// A coarse type: `title`, `name`, `date`, `number` or whatever an extractor reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A triple over surface names, before resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Triple {
    pub subject: String,
    pub relation: String,
    pub object: String,
}

/// `streamrag.triples`: what the openie stage extracted from one document version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extraction {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "DocOp::is_upsert")]
    pub op: DocOp,
    pub doc_id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub entities: Vec<Mention>,
    #[serde(default)]
    pub triples: Vec<Triple>,
    /// Which extractor produced the triples: `passthrough`, `builtin`, `llm:<model>`.
    pub extractor: String,
    pub source: SourceRef,
    /// The document's access labels, carried along (empty: public).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<String>,
}

/// A canonical entity: a stable id and the display name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityRef {
    pub id: String,
    pub name: String,
}

/// A triple over canonical entity ids, with the names kept for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolvedTriple {
    pub subject_id: String,
    pub subject: String,
    pub relation: String,
    pub object_id: String,
    pub object: String,
}

/// A synonym link the resolve stage made: the entity `id`, which this document names, probably
/// also names the entity `to_id` (how sure: `confidence`, 0 to 1). The graph keeps it while a
/// document that names `id` carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityLink {
    pub id: String,
    pub to_id: String,
    pub confidence: f32,
}

/// `streamrag.graph-deltas`: the resolved content of one document version (or its deletion),
/// which the kg-writer applies to the graph idempotently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphDelta {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "DocOp::is_upsert")]
    pub op: DocOp,
    pub doc_id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub entities: Vec<EntityRef>,
    #[serde(default)]
    pub triples: Vec<ResolvedTriple>,
    /// Synonym links from the entities this document names (entity resolution).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<EntityLink>,
    /// The docs-topic record this delta derives from.
    pub source: SourceRef,
    /// The document's access labels, carried along (empty: public).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<String>,
}

/// `streamrag.graph-changes`: what applying one graph delta changed in the graph as a whole,
/// published by the kg-writer for downstream consumers (keyed by doc_id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphChange {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "DocOp::is_upsert")]
    pub op: DocOp,
    pub doc_id: String,
    /// Triples that became live (first supporting document).
    pub asserted: Vec<ResolvedTriple>,
    /// Triples that lost their last supporting document.
    pub retracted: Vec<ResolvedTriple>,
    pub entities_added: Vec<EntityRef>,
    pub entities_removed: Vec<EntityRef>,
    /// The graph-deltas record whose application made the change.
    pub source: SourceRef,
}

/// `streamrag.queries`: a question, keyed by query id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    pub query_id: String,
    pub question: String,
    /// How many documents to return (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// The access labels the asker may read: the answer is made only from documents that are
    /// public or carry one of them. Absent: every document (a trusted producer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<String>>,
}

/// `streamrag.subscriptions`: a standing query, keyed by its id. The topic is compacted: the
/// last record of an id is its state, and `op: "delete"` ends the subscription. While it stands,
/// its answer is computed again whenever the graph changes near it and published to
/// `streamrag.answers` (key = the subscription id, with a `reason`) when it changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subscription {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "DocOp::is_upsert")]
    pub op: DocOp,
    pub subscription_id: String,
    /// Required to subscribe, absent from a delete.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub question: String,
    /// How many documents each answer carries (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// The access labels of whoever registered it: its answers are made only from what they
    /// may read (as [`Query::access`]). Absent: every document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<String>>,
}

/// A retrieved document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoredDocument {
    pub id: String,
    pub title: String,
    pub score: f64,
}

/// An entity of the retrieved subgraph with the retriever's score for it (its share of the
/// graph walk, the best entity 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoredEntity {
    pub name: String,
    pub score: f64,
}

/// One `[n]` mark of an answer's text: the document it cites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Citation {
    /// The number in the mark, from 1.
    pub n: u32,
    pub document_id: String,
    pub title: String,
}

/// The offsets of the graph-deltas topic the graph had applied when an answer was computed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphVersion {
    /// `"<topic>/<partition>"` -> the last applied offset.
    pub offsets: BTreeMap<String, i64>,
}

/// `streamrag.answers`: the answer to one query, keyed by query id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    pub query_id: String,
    pub question: String,
    /// Best first.
    pub documents: Vec<ScoredDocument>,
    /// Triples among the top entities that the returned documents support.
    pub triples: Vec<Triple>,
    /// The entities the question was linked to.
    pub seeds: Vec<String>,
    /// The seeds' and the supporting facts' entities with the retriever's score for each,
    /// best first (from retrievers that walk the graph; empty from the others).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<ScoredEntity>,
    /// The retriever that ranked the documents: `hybrid`, `ppr`, `glm`, `dense`, `bm25`.
    pub retriever: String,
    /// The GLM checkpoint that scored the question, when a GLM did: its directory, training
    /// step and a digest of its weights (`/ck/glm step 199 #1a2b3c4d`). A running node follows
    /// its checkpoint directory, so answers of one node may name several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The answer text, citing its passages as `[n]` (see `citations`): written by the
    /// answering LLM when one is configured, else extractive (a span or sentence of the top
    /// passages); when `abstained`, a sentence saying why no answer is given, naming nothing.
    /// Absent only from answers computed retrieval-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// True when the node declined to answer: retrieval found nothing that supports the
    /// question, or the LLM's answer was not supported by the passages it was given.
    #[serde(default)]
    pub abstained: bool,
    /// What wrote `answer`: `extractive`, `llm` (the model's id after a colon, e.g.
    /// `llm:qwen2.5-coder-0.5b-instruct-q4_k_m`) or `none` (abstained).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// The documents the `[n]` marks in `answer` refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<Citation>,
    /// Only on a standing query's answer (`query_id` is then the subscription id): why it was
    /// computed again: `subscribed`, `changed <doc id>` or `deleted <doc id>` (the graph change
    /// that reached it), or `indexed <doc id>` (answered again once the passage and fact
    /// indexes had that change, when they were behind the graph the first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub graph_version: GraphVersion,
    pub latency_ms: f64,
}

/// Whose fault a failure is, and so whether retrying can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The record is bad: retrying will not help.
    User,
    /// A dependency failed (LLM endpoint, broker): a retry may help.
    External,
    /// A bug in streamrag.
    Internal,
}

/// `streamrag.dead-letters`: a record a stage could not process, with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetter {
    #[serde(default = "default_version")]
    pub schema_version: u32,
    pub stage: String,
    pub source: SourceRef,
    pub reason: String,
    pub error_kind: ErrorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The raw payload, base64 (standard alphabet), so invalid UTF-8 survives.
    pub payload_base64: String,
    pub timestamp_ms: i64,
}

impl DeadLetter {
    pub fn payload(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(&self.payload_base64).ok()
    }

    pub fn encode_payload(raw: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(raw)
    }
}

/// Why a payload could not become a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    InvalidUtf8 { valid_up_to: usize },
    Json(String),
    UnsupportedVersion(u32),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::InvalidUtf8 { valid_up_to } => {
                write!(f, "payload is not valid UTF-8 (valid up to byte {valid_up_to})")
            }
            DecodeError::Json(e) => write!(f, "payload does not match the schema: {e}"),
            DecodeError::UnsupportedVersion(v) => write!(
                f,
                "schema_version {v} is not supported (this build reads version {SCHEMA_VERSION})"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Messages that carry a schema version.
pub trait Versioned {
    fn schema_version(&self) -> u32;
}

macro_rules! versioned {
    ($($t:ty),*) => {$(
        impl Versioned for $t {
            fn schema_version(&self) -> u32 { self.schema_version }
        }
    )*};
}
versioned!(Document, Extraction, GraphDelta, GraphChange, Query, Subscription, Answer, DeadLetter);

/// Decodes a topic payload: UTF-8, then JSON into `T`, then the version check.
pub fn decode<T: DeserializeOwned + Versioned>(payload: &[u8]) -> Result<T, DecodeError> {
    let text = std::str::from_utf8(payload).map_err(|e| DecodeError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    let value: T = serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    if value.schema_version() != SCHEMA_VERSION {
        return Err(DecodeError::UnsupportedVersion(value.schema_version()));
    }
    Ok(value)
}

/// Encodes a message as JSON bytes.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("wire types always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_version_means_current_and_other_versions_are_rejected() {
        let d: Document = decode(br#"{"id":"a","text":"x"}"#).unwrap();
        assert_eq!(d.schema_version, SCHEMA_VERSION);
        assert_eq!(d.op, DocOp::Upsert);
        let e = decode::<Document>(br#"{"schema_version":2,"id":"a","text":"x"}"#).unwrap_err();
        assert_eq!(e, DecodeError::UnsupportedVersion(2));
    }

    #[test]
    fn invalid_utf8_and_unknown_fields_are_errors() {
        let e = decode::<Document>(b"{\"id\":\"\xff\"}").unwrap_err();
        assert!(matches!(e, DecodeError::InvalidUtf8 { .. }));
        let e = decode::<Document>(br#"{"id":"a","text":"x","txet":"y"}"#).unwrap_err();
        assert!(e.to_string().contains("txet"), "{e}");
    }

    #[test]
    fn dead_letter_keeps_raw_bytes() {
        let raw = b"\xff\x00not json";
        let dl = DeadLetter {
            schema_version: SCHEMA_VERSION,
            stage: "openie".into(),
            source: SourceRef { topic: "t".into(), partition: 0, offset: 3, timestamp_ms: None },
            reason: "r".into(),
            error_kind: ErrorKind::User,
            key: None,
            payload_base64: DeadLetter::encode_payload(raw),
            timestamp_ms: 0,
        };
        let back: DeadLetter = decode(&encode(&dl)).unwrap();
        assert_eq!(back.payload().unwrap(), raw);
    }
}
