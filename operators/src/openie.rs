//! The openie stage: document -> entities + triples on the triples topic. Documents that carry
//! triples pass them through; others go to the [`Extractor`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use streamrag_schemas::{decode, encode, DocOp, Document, ErrorKind, Extraction, Mention, SourceRef, Triple, SCHEMA_VERSION};

use crate::config::{Limits, Topics};
use crate::error::StageError;
use crate::extract;
use crate::llm_extract::LlmExtractor;
use crate::runtime::{Operator, Outcome};
use crate::stages::{BuildError, OpenIeConfig, Shared};
use crate::transport::{Output, Record};

/// Where triples come from when a document carries none.
#[derive(Clone, Default)]
pub enum Extractor {
    /// Deterministic, offline: see [`crate::extract`].
    #[default]
    Builtin,
    /// An LLM (endpoint or local model), with its response cache: see [`crate::llm_extract`].
    Llm(Arc<LlmExtractor>),
}

impl std::fmt::Debug for Extractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// How long the openie stage keeps retrying a document while its LLM endpoint fails (rate
/// limits, outages) before the document is dead-lettered as an external failure.
const LLM_OUTAGE_WAIT: Duration = Duration::from_secs(300);

impl Extractor {
    pub fn name(&self) -> String {
        match self {
            Extractor::Builtin => "builtin".into(),
            Extractor::Llm(x) => x.name(),
        }
    }

    pub async fn extract(&self, title: &str, text: &str) -> Result<extract::Extracted, StageError> {
        match self {
            Extractor::Builtin => Ok(extract::extract(title, text)),
            Extractor::Llm(x) => {
                // The client already retried each request; an error that still says
                // "external" means the endpoint is down or rate-limited for longer: wait for
                // it rather than dead-letter a good document.
                let started = Instant::now();
                let mut wait = Duration::from_secs(2);
                loop {
                    match x.extract(title, text).await {
                        Err(e) if e.kind == ErrorKind::External && started.elapsed() + wait < LLM_OUTAGE_WAIT => {
                            tracing::warn!(error = %e.message, wait_s = wait.as_secs(), "LLM unavailable; the document waits");
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(Duration::from_secs(60));
                        }
                        other => return other,
                    }
                }
            }
        }
    }
}

/// What a docs-topic record means to a stage that keeps per-document state from that topic
/// (the dense index, the passages for answers): an upsert with text, a deletion, or nothing
/// (malformed, or an id openie refuses: the openie stage dead-letters those).
pub enum DocChange {
    Upsert { id: String, title: String, text: String, access: Vec<String> },
    Delete { id: String },
}

pub fn doc_change(payload: &[u8], limits: &Limits) -> Option<DocChange> {
    match decode::<Document>(payload) {
        Ok(d) if validate(&d, limits).is_err() => None,
        Ok(d) if d.op == DocOp::Delete => Some(DocChange::Delete { id: d.id }),
        Ok(Document { id, title, text: Some(text), access, .. }) => Some(DocChange::Upsert { id, title, text, access }),
        _ => None,
    }
}

/// Checks a document against the rules the schema cannot express.
pub fn validate(doc: &Document, limits: &Limits) -> Result<(), StageError> {
    limits.check_id("document id", &doc.id).map_err(StageError::user)?;
    limits.check_access(&format!("document {}", doc.id), &doc.access).map_err(StageError::user)?;
    if doc.op == DocOp::Upsert {
        limits.check_title(&format!("document {}", doc.id), &doc.title).map_err(StageError::user)?;
        let Some(text) = &doc.text else {
            return Err(StageError::user(format!("document {} has no text", doc.id)));
        };
        if text.len() > limits.max_text_bytes {
            return Err(StageError::over_limit(format!(
                "document {} text is {} bytes, over the limit of {} bytes",
                doc.id,
                text.len(),
                limits.max_text_bytes
            )));
        }
        if let Some(ts) = &doc.triples {
            for (i, t) in ts.iter().enumerate() {
                if t.iter().any(|x| x.trim().is_empty()) {
                    return Err(StageError::user(format!("document {} triple {i} has an empty element", doc.id)));
                }
            }
        }
    }
    Ok(())
}

pub struct OpenIe {
    pub topics: Topics,
    pub limits: Limits,
    pub extractor: Extractor,
}

impl OpenIe {
    /// Builds the stage from its section: the built-in extractor, or the extraction LLM with its
    /// response cache under the data directory.
    pub async fn build(cfg: &OpenIeConfig, shared: &mut Shared) -> Result<Self, BuildError> {
        let extractor = match &cfg.extract_llm {
            None => Extractor::Builtin,
            Some(settings) => {
                let llm = shared.llms.open("extract", settings).await?;
                let x = Arc::new(LlmExtractor::new(llm, Some(shared.data.open_llm_cache()?)));
                crate::metrics::global().register_extractor(x.stats.clone());
                Extractor::Llm(x)
            }
        };
        Ok(OpenIe { topics: shared.topics.clone(), limits: shared.limits.clone(), extractor })
    }
}

/// What the openie stage makes of a valid document: a deletion passes through, carried
/// triples pass through (entities: the title and every subject and object), otherwise the
/// extractor runs.
pub async fn extraction_of(doc: &Document, source: SourceRef, extractor: &Extractor) -> Result<Extraction, StageError> {
    Ok(match (doc.op, &doc.triples) {
        (DocOp::Delete, _) => Extraction {
            access: Vec::new(),
            schema_version: SCHEMA_VERSION,
            op: DocOp::Delete,
            doc_id: doc.id.clone(),
            title: String::new(),
            entities: vec![],
            triples: vec![],
            extractor: "passthrough".into(),
            source,
        },
        (DocOp::Upsert, Some(ts)) => {
            let mut entities = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let title = doc.title.trim();
            for name in std::iter::once(title).chain(ts.iter().flat_map(|t| [t[0].trim(), t[2].trim()])) {
                if !name.is_empty() && seen.insert(crate::normalize::normalize(name)) {
                    entities.push(Mention { name: name.to_string(), kind: None });
                }
            }
            Extraction {
                access: doc.access.clone(),
                schema_version: SCHEMA_VERSION,
                op: DocOp::Upsert,
                doc_id: doc.id.clone(),
                title: doc.title.clone(),
                entities,
                triples: ts
                    .iter()
                    .map(|t| Triple { subject: t[0].trim().into(), relation: t[1].trim().into(), object: t[2].trim().into() })
                    .collect(),
                extractor: "passthrough".into(),
                source,
            }
        }
        (DocOp::Upsert, None) => {
            let got = extractor.extract(&doc.title, doc.text.as_deref().unwrap_or_default()).await?;
            Extraction {
                access: doc.access.clone(),
                schema_version: SCHEMA_VERSION,
                op: DocOp::Upsert,
                doc_id: doc.id.clone(),
                title: doc.title.clone(),
                entities: got.entities,
                triples: got.triples,
                extractor: extractor.name(),
                source,
            }
        }
    })
}

impl OpenIe {
    async fn process(&self, r: &Record) -> Outcome {
        let doc: Document = decode(&r.payload)?;
        validate(&doc, &self.limits)?;
        let source = SourceRef { topic: r.topic.clone(), partition: r.partition, offset: r.offset, timestamp_ms: Some(r.timestamp_ms) };
        let ex = extraction_of(&doc, source, &self.extractor).await?;
        Ok(vec![Output { topic: self.topics.triples.clone(), key: doc.id, payload: encode(&ex) }])
    }
}

impl Operator for OpenIe {
    fn name(&self) -> &'static str {
        "openie"
    }
    fn input(&self) -> String {
        self.topics.docs.clone()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, crate::error::StageFault> {
        // Concurrently: an LLM endpoint serves many requests at once (the client bounds how
        // many); outcomes keep the batch's order.
        Ok(futures::future::join_all(batch.iter().map(|r| {
            let span = tracing::debug_span!("record", stage = "openie", partition = r.partition, offset = r.offset);
            tracing::Instrument::instrument(self.process(r), span)
        }))
        .await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(payload: &[u8]) -> Record {
        Record { topic: "docs".into(), partition: 0, offset: 4, key: None, payload: payload.to_vec(), timestamp_ms: 0 }
    }

    fn op() -> OpenIe {
        OpenIe { topics: Topics::default(), limits: Limits { max_text_bytes: 64, max_batch: 10, ..Limits::default() }, extractor: Extractor::Builtin }
    }

    #[tokio::test]
    async fn each_bad_record_fails_alone() {
        let mut op = op();
        let batch = vec![
            rec(br#"{"id":"a","title":"A","text":"Alice met Bob."}"#),
            rec(b"not json"),
            rec(br#"{"title":"no id","text":"x"}"#),
            rec(br#"{"id":"b"}"#),
            rec(b"{\"id\":\"c\",\"text\":\"\xff\"}"),
            rec(format!(r#"{{"id":"d","text":"{}"}}"#, "x".repeat(65)).as_bytes()),
            rec(br#"{"id":" ","text":"x"}"#),
            rec(br#"{"id":"e","text":"x","triples":[["a","","b"]]}"#),
            rec(br#"{"id":"f","text":"x","triples":[["P","r","Q"]]}"#),
            rec(br#"{"op":"delete","id":"a"}"#),
        ];
        let out = op.process_batch(&batch).await.unwrap();
        let ok: Vec<bool> = out.iter().map(|o| o.is_ok()).collect();
        assert_eq!(ok, vec![true, false, false, false, false, false, false, false, true, true]);
        let reasons: Vec<String> = out.iter().filter_map(|o| o.as_ref().err().map(|e| e.message.clone())).collect();
        assert!(reasons[3].contains("UTF-8"), "{reasons:?}");
        assert!(reasons[4].contains("over the limit"), "{reasons:?}");
        let ex: Extraction = decode(&out[8].as_ref().unwrap()[0].payload).unwrap();
        assert_eq!(ex.extractor, "passthrough");
        assert_eq!(ex.triples, vec![Triple { subject: "P".into(), relation: "r".into(), object: "Q".into() }]);
        assert_eq!(ex.source.offset, 4);
        let ex: Extraction = decode(&out[0].as_ref().unwrap()[0].payload).unwrap();
        assert_eq!(ex.extractor, "builtin");
        assert!(ex.triples.iter().any(|t| t.subject == "Alice" && t.object == "Bob"));
    }
}
