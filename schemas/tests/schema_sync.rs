//! Keeps the JSON Schema files and the Rust wire types in step: every schema example must decode
//! into its Rust type, every Rust value we construct must validate against its schema, and the
//! inputs one side rejects the other rejects too.

use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use streamrag_schemas::*;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("json")
}

fn load(name: &str) -> Value {
    let path = schema_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator(name: &str) -> jsonschema::Validator {
    let defs = load("_defs.schema.json");
    let defs_id = defs["$id"].as_str().unwrap().to_string();
    jsonschema::options()
        .with_resource(defs_id, jsonschema::Resource::from_contents(defs).expect("defs resource"))
        .build(&load(name))
        .unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, name: &str, value: &Value) {
    let errors: Vec<String> = v.iter_errors(value).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{name} rejects {value}: {errors:?}");
}

/// Examples -> Rust -> JSON -> schema; Rust values -> JSON -> schema; bad inputs rejected by both.
fn check<T: DeserializeOwned + Serialize + Versioned + std::fmt::Debug>(
    name: &str,
    values: &[T],
    bad: &[Value],
) {
    let schema = load(name);
    let v = validator(name);
    let examples = schema["examples"].as_array().unwrap_or_else(|| panic!("{name} has no examples"));
    assert!(!examples.is_empty());
    for ex in examples {
        assert_valid(&v, name, ex);
        let typed: T = decode(ex.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{name} example {ex} does not decode: {e}"));
        assert_valid(&v, name, &serde_json::to_value(&typed).unwrap());
    }
    for value in values {
        assert_valid(&v, name, &serde_json::to_value(value).unwrap());
    }
    for b in bad {
        assert!(!v.is_valid(b), "{name} accepts bad input {b}");
        assert!(decode::<T>(b.to_string().as_bytes()).is_err(), "Rust type accepts bad input {b} of {name}");
    }
}

fn source() -> SourceRef {
    SourceRef { topic: "streamrag.docs".into(), partition: 2, offset: 7, timestamp_ms: None }
}

#[test]
fn every_topic_has_a_schema_file() {
    let mut files: Vec<String> = std::fs::read_dir(schema_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "_defs.schema.json",
            "answer.schema.json",
            "dead-letter.schema.json",
            "document.schema.json",
            "extraction.schema.json",
            "graph-change.schema.json",
            "graph-delta.schema.json",
            "query.schema.json",
            "subscription.schema.json"
        ]
    );
}

#[test]
fn document() {
    let mut with_triples = Document::upsert("d", "T", "text");
    with_triples.triples = Some(vec![["a".into(), "r".into(), "b".into()]]);
    with_triples.metadata = Some(json!({"k": [1, 2]}));
    check(
        "document.schema.json",
        &[Document::upsert("d", "T", "x"), Document::delete("d"), with_triples],
        &[
            json!({"title": "no id", "text": "x"}),
            json!({"id": "a", "text": 5}),
            json!({"id": "a", "text": "x", "extra": 1}),
            json!({"id": "a", "text": "x", "schema_version": 2}),
            json!({"id": "a", "text": "x", "op": "merge"}),
            json!({"id": "a", "text": "x", "triples": [["only", "two"]]}),
        ],
    );
}

#[test]
fn extraction() {
    let e = Extraction {
        access: Default::default(),
        schema_version: 1,
        op: DocOp::Upsert,
        doc_id: "d".into(),
        title: "T".into(),
        entities: vec![Mention { name: "A".into(), kind: Some("name".into()) }, Mention { name: "B".into(), kind: None }],
        triples: vec![Triple { subject: "A".into(), relation: "r".into(), object: "B".into() }],
        extractor: "builtin".into(),
        source: source(),
    };
    let del = Extraction { op: DocOp::Delete, entities: vec![], triples: vec![], ..e.clone() };
    check(
        "extraction.schema.json",
        &[e, del],
        &[
            json!({"doc_id": "d", "extractor": "builtin"}),
            json!({"doc_id": "d", "extractor": "b", "source": {"topic": "t", "partition": 0}}),
            json!({"doc_id": "d", "extractor": "b", "source": {"topic": "t", "partition": 0, "offset": 1}, "triples": [{"subject": "a", "relation": "r"}]}),
        ],
    );
}

#[test]
fn graph_delta() {
    let d = GraphDelta {
        access: Default::default(),
        schema_version: 1,
        op: DocOp::Upsert,
        doc_id: "d".into(),
        title: "T".into(),
        entities: vec![EntityRef { id: "a".into(), name: "A".into() }],
        triples: vec![ResolvedTriple {
            subject_id: "a".into(),
            subject: "A".into(),
            relation: "r".into(),
            object_id: "b".into(),
            object: "B".into(),
        }],
        links: vec![EntityLink { id: "a".into(), to_id: "c".into(), confidence: 0.9 }],
        source: source(),
    };
    let del = GraphDelta { op: DocOp::Delete, entities: vec![], triples: vec![], links: vec![], ..d.clone() };
    check(
        "graph-delta.schema.json",
        &[d, del],
        &[
            json!({"doc_id": "d"}),
            json!({"doc_id": "d", "source": {"topic": "t", "partition": 0, "offset": 1}, "entities": [{"id": "a"}]}),
            json!({"doc_id": "d", "source": {"topic": "t", "partition": 0, "offset": 1}, "links": [{"id": "a", "to_id": "b"}]}),
        ],
    );
}

#[test]
fn graph_change() {
    let t = ResolvedTriple {
        subject_id: "a".into(),
        subject: "A".into(),
        relation: "r".into(),
        object_id: "b".into(),
        object: "B".into(),
    };
    let c = GraphChange {
        schema_version: 1,
        op: DocOp::Upsert,
        doc_id: "d".into(),
        asserted: vec![t.clone()],
        retracted: vec![t],
        entities_added: vec![EntityRef { id: "a".into(), name: "A".into() }],
        entities_removed: vec![],
        source: source(),
    };
    let del = GraphChange { op: DocOp::Delete, asserted: vec![], ..c.clone() };
    check(
        "graph-change.schema.json",
        &[c, del],
        &[
            json!({"doc_id": "d", "asserted": [], "retracted": [], "entities_added": [], "source": {"topic": "t", "partition": 0, "offset": 1}}),
            json!({"doc_id": "d", "asserted": [{"subject_id": "a"}], "retracted": [], "entities_added": [], "entities_removed": [], "source": {"topic": "t", "partition": 0, "offset": 1}}),
        ],
    );
}

#[test]
fn query() {
    check(
        "query.schema.json",
        &[
            Query { access: Default::default(), schema_version: 1, query_id: "q".into(), question: "why?".into(), top_k: None },
            Query { access: Default::default(), schema_version: 1, query_id: "q".into(), question: "why?".into(), top_k: Some(3) },
        ],
        &[json!({"query_id": "q"}), json!({"question": "x"}), json!({"query_id": "q", "question": "x", "k": 2})],
    );
}

#[test]
fn subscription() {
    let s = Subscription { access: Default::default(), schema_version: 1, op: DocOp::Upsert, subscription_id: "s".into(), question: "why?".into(), top_k: Some(3) };
    let gone = Subscription { op: DocOp::Delete, question: String::new(), top_k: None, ..s.clone() };
    check(
        "subscription.schema.json",
        &[s, gone],
        &[
            json!({"question": "no id"}),
            json!({"subscription_id": "s", "question": 5}),
            json!({"subscription_id": "s", "question": "x", "k": 2}),
            json!({"subscription_id": "s", "question": "x", "op": "merge"}),
        ],
    );
}

#[test]
fn answer() {
    let a = Answer {
        schema_version: 1,
        query_id: "q".into(),
        question: "why?".into(),
        documents: vec![ScoredDocument { id: "d".into(), title: "T".into(), score: 0.5 }],
        triples: vec![Triple { subject: "A".into(), relation: "r".into(), object: "B".into() }],
        seeds: vec!["A".into()],
        entities: vec![ScoredEntity { name: "A".into(), score: 1.0 }, ScoredEntity { name: "B".into(), score: 0.25 }],
        retriever: "ppr".into(),
        checkpoint: None,
        answer: Some("because [1]".into()),
        abstained: false,
        answered_by: Some("extractive".into()),
        citations: vec![Citation { n: 1, document_id: "d".into(), title: "T".into() }],
        reason: None,
        graph_version: GraphVersion { offsets: [("streamrag.graph-deltas/0".to_string(), 3)].into() },
        latency_ms: 0.25,
    };
    let no_llm = Answer { answer: None, answered_by: None, citations: vec![], documents: vec![], entities: vec![], ..a.clone() };
    let standing = Answer { query_id: "s-1".into(), reason: Some("changed d".into()), ..a.clone() };
    let glm = Answer { retriever: "glm".into(), checkpoint: Some("/ck/glm step 199 #1a2b3c4d".into()), ..a.clone() };
    let abstained = Answer { answer: Some("Nothing retrieved supports an answer.".into()), abstained: true, answered_by: Some("none".into()), citations: vec![], ..a.clone() };
    let base = json!({"query_id": "q", "question": "x", "documents": [], "triples": [], "seeds": [], "retriever": "hybrid", "graph_version": {"offsets": {}}, "latency_ms": 1.0});
    let mut bad_citation = base.clone();
    bad_citation["citations"] = json!([{"n": 1, "document_id": "d"}]);
    let mut bad_abstained = base.clone();
    bad_abstained["abstained"] = json!("yes");
    let mut bad_entity = base.clone();
    bad_entity["entities"] = json!([{"name": "A"}]);
    let mut bad_checkpoint = base.clone();
    bad_checkpoint["checkpoint"] = json!(199);
    check(
        "answer.schema.json",
        &[a, no_llm, abstained, standing, glm],
        &[json!({"query_id": "q", "question": "x", "documents": []}), bad_citation, bad_abstained, bad_entity, bad_checkpoint],
    );
}

#[test]
fn dead_letter() {
    let d = DeadLetter {
        schema_version: 1,
        stage: "openie".into(),
        source: source(),
        reason: "bad".into(),
        error_kind: ErrorKind::User,
        key: Some("k".into()),
        payload_base64: DeadLetter::encode_payload(b"\xff"),
        timestamp_ms: 5,
    };
    let e = DeadLetter { key: None, error_kind: ErrorKind::External, ..d.clone() };
    check(
        "dead-letter.schema.json",
        &[d, e],
        &[json!({"stage": "s", "source": {"topic": "t", "partition": 0, "offset": 0}, "reason": "r", "error_kind": "mine", "payload_base64": "", "timestamp_ms": 0})],
    );
}
