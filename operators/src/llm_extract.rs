//! OpenIE with an LLM, in the HippoRAG / GFM-RAG shape: named entities first, then triples
//! conditioned on them. Responses are parsed strictly (a JSON object of the expected shape;
//! three non-empty strings per triple) and validated against the document (entities and
//! triple ends must occur in it). Unreadable responses are retried, sampling instead of
//! greedy, then the document is dead-lettered with the raw response.
//!
//! Every readable response is cached in sled under (hash of the document text, model, prompt
//! version, step): replaying a topic or re-ingesting the same text makes no LLM call.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use sha2::{Digest, Sha256};
use streamrag_schemas::{Mention, Triple};

use crate::error::StageError;
use crate::extract::Extracted;
use crate::hash::hex;
use crate::llm::{Llm, Sampling};
use crate::normalize::normalize;

/// Bump when a prompt changes: old cache entries then stop matching.
pub const PROMPT_VERSION: &str = "openie-v1";

const NER_SYSTEM: &str = r#"You find the named entities in a passage. Reply with one JSON object and nothing else: {"named_entities": ["...", "..."]}. List people, organisations, places, works, events, dates and numbers, each written exactly as it appears in the passage.

Example passage:
Grace Hopper
Grace Hopper was a computer scientist born in New York City in 1906. She joined the United States Navy in 1943 and worked on the Harvard Mark I with Howard Aiken.

Example reply:
{"named_entities": ["Grace Hopper", "New York City", "1906", "United States Navy", "1943", "Harvard Mark I", "Howard Aiken"]}"#;

const TRIPLES_SYSTEM: &str = r#"You turn a passage into knowledge-graph triples. You get the passage and its named entities. Reply with one JSON object and nothing else: {"triples": [["subject", "relation", "object"], ...]}. Each triple should contain at least one, preferably two, of the named entities. Replace pronouns with the names they stand for. Keep relations short.

Example passage:
Grace Hopper
Grace Hopper was a computer scientist born in New York City in 1906. She joined the United States Navy in 1943 and worked on the Harvard Mark I with Howard Aiken.

Example named entities: ["Grace Hopper", "New York City", "1906", "United States Navy", "1943", "Harvard Mark I", "Howard Aiken"]

Example reply:
{"triples": [["Grace Hopper", "occupation", "computer scientist"], ["Grace Hopper", "born in", "New York City"], ["Grace Hopper", "born in year", "1906"], ["Grace Hopper", "joined", "United States Navy"], ["Grace Hopper", "joined in year", "1943"], ["Grace Hopper", "worked on", "Harvard Mark I"], ["Grace Hopper", "worked with", "Howard Aiken"]]}"#;

/// Counters of the extractor (the LLM's own are on [`Llm::stats`]).
#[derive(Debug, Default)]
pub struct ExtractStats {
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Responses that did not parse (each one retried or dead-lettered).
    pub unreadable: AtomicU64,
    /// Entities or triples dropped by validation.
    pub dropped_entities: AtomicU64,
    pub dropped_triples: AtomicU64,
}

pub struct LlmExtractor {
    pub llm: Llm,
    cache: Option<sled::Tree>,
    /// Further attempts after an unreadable response.
    pub retries: u32,
    pub max_tokens: u32,
    pub stats: std::sync::Arc<ExtractStats>,
}

impl LlmExtractor {
    /// `cache`: a sled tree of its own (see [`open_cache`]); `None` caches nothing.
    pub fn new(llm: Llm, cache: Option<sled::Tree>) -> Self {
        LlmExtractor { llm, cache, retries: 2, max_tokens: 768, stats: Default::default() }
    }

    pub fn name(&self) -> String {
        format!("llm:{}", self.llm.model_id())
    }

    pub async fn extract(&self, title: &str, text: &str) -> Result<Extracted, StageError> {
        let doc_hash = hex(&Sha256::new().chain_update(title.as_bytes()).chain_update([0u8]).chain_update(text.as_bytes()).finalize());
        let passage = if title.trim().is_empty() { text.to_string() } else { format!("{}\n{text}", title.trim()) };
        let haystack = format!(" {} ", normalize(&passage));

        let ner_user = format!("Passage:\n{passage}");
        let names = self.step(&doc_hash, "ner", NER_SYSTEM, &ner_user, parse_entities).await?;
        let mut entities: Vec<Mention> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let title_key = normalize(title);
        if !title_key.is_empty() {
            seen.insert(title_key);
            entities.push(Mention { name: title.trim().to_string(), kind: None });
        }
        for n in names {
            let key = normalize(&n);
            if !occurs(&haystack, &key) {
                self.stats.dropped_entities.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if seen.insert(key) {
                entities.push(Mention { name: n.trim().to_string(), kind: None });
            }
        }

        let listed: Vec<&str> = entities.iter().map(|m| m.name.as_str()).collect();
        let triples_user = format!("Passage:\n{passage}\n\nNamed entities: {}", serde_json::to_string(&listed).expect("strings"));
        let raw_triples = self.step(&doc_hash, "triples", TRIPLES_SYSTEM, &triples_user, parse_triples).await?;
        let mut triples = Vec::new();
        let mut seen_t = std::collections::HashSet::new();
        for t in raw_triples {
            let Some([s, r, o]) = t else {
                self.stats.dropped_triples.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let (sk, ok) = (normalize(&s), normalize(&o));
            if !occurs(&haystack, &sk) || !occurs(&haystack, &ok) || normalize(&r).is_empty() {
                self.stats.dropped_triples.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if seen_t.insert((sk, normalize(&r), ok)) {
                triples.push(Triple { subject: s, relation: r, object: o });
            }
        }
        Ok(Extracted { entities, triples })
    }

    /// One prompt step: the cached response when there is one, else the LLM (retried with
    /// sampling while the response does not parse). Only readable responses are cached.
    async fn step<T>(
        &self,
        doc_hash: &str,
        step: &str,
        system: &str,
        user: &str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<T, StageError> {
        let key = format!("{doc_hash}\0{}\0{PROMPT_VERSION}\0{step}", self.llm.model_id());
        if let Some(tree) = &self.cache {
            if let Some(v) = tree.get(key.as_bytes()).map_err(|e| StageError::internal(format!("LLM cache: {e}")))? {
                let raw = String::from_utf8_lossy(&v);
                if let Ok(t) = parse(&raw) {
                    self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(t);
                }
            }
        }
        self.stats.cache_misses.fetch_add(1, Ordering::Relaxed);
        let mut last = String::new();
        let mut why = String::new();
        for attempt in 0..=self.retries {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(100 << attempt.min(6))).await;
            }
            let sampling = if attempt == 0 {
                Sampling::greedy(self.max_tokens)
            } else {
                Sampling { max_tokens: self.max_tokens, temperature: 0.7, seed: attempt as u64 }
            };
            let c = self.llm.chat(system, user, sampling).await.map_err(|e| {
                StageError::external(format!("LLM {} ({step}): {}", self.llm.model_id(), e.message))
            })?;
            match parse(&c.text) {
                Ok(t) => {
                    if let Some(tree) = &self.cache {
                        tree.insert(key.as_bytes(), c.text.as_bytes())
                            .map_err(|e| StageError::internal(format!("LLM cache: {e}")))?;
                    }
                    return Ok(t);
                }
                Err(e) => {
                    self.stats.unreadable.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(step, attempt, error = %e, "unreadable LLM response");
                    why = e;
                    last = c.text;
                }
            }
        }
        Err(StageError::user(format!(
            "LLM {} gave no readable {step} response in {} attempts ({why}); last raw response: {}",
            self.llm.model_id(),
            self.retries + 1,
            crate::llm::truncate(&last, 2000)
        )))
    }
}

/// Opens (or creates) the response cache under `dir`.
pub fn open_cache(dir: &std::path::Path) -> Result<sled::Tree, sled::Error> {
    let db = sled::Config::new().path(dir).mode(sled::Mode::HighThroughput).open()?;
    db.open_tree("llm-responses")
}

/// Whether a normalised name occurs as whole words in a normalised, space-padded text.
fn occurs(haystack: &str, key: &str) -> bool {
    !key.is_empty() && haystack.contains(&format!(" {key} "))
}

/// The JSON object in a response: the whole response, or the span from its first `{` to its
/// last `}` (models like to wrap JSON in code fences or a sentence).
fn json_object(raw: &str) -> Result<serde_json::Map<String, Value>, String> {
    let t = raw.trim();
    let v: Value = match serde_json::from_str(t) {
        Ok(v) => v,
        Err(first) => {
            let (Some(a), Some(b)) = (t.find('{'), t.rfind('}')) else {
                return Err(format!("not JSON: {first}"));
            };
            if b < a {
                return Err(format!("not JSON: {first}"));
            }
            serde_json::from_str(&t[a..=b]).map_err(|e| format!("not JSON: {e}"))?
        }
    };
    match v {
        Value::Object(m) => Ok(m),
        other => Err(format!("expected a JSON object, got {}", kind(&other))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `{"named_entities": [string, ...]}`; non-string or empty items are an error of the response.
pub fn parse_entities(raw: &str) -> Result<Vec<String>, String> {
    let m = json_object(raw)?;
    let Some(Value::Array(items)) = m.get("named_entities") else {
        return Err("no \"named_entities\" array".into());
    };
    items
        .iter()
        .map(|v| match v {
            Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            other => Err(format!("a named entity is {}", kind(other))),
        })
        .collect()
}

/// `{"triples": [[s, r, o], ...]}`. The response must have that shape; an item that is not
/// three non-empty strings comes back as `None` (dropped and counted by the caller).
pub fn parse_triples(raw: &str) -> Result<Vec<Option<[String; 3]>>, String> {
    let m = json_object(raw)?;
    let Some(Value::Array(items)) = m.get("triples") else {
        return Err("no \"triples\" array".into());
    };
    Ok(items
        .iter()
        .map(|t| match t {
            Value::Array(xs) if xs.len() == 3 => {
                let v: Vec<String> = xs.iter().filter_map(|x| x.as_str().map(|s| s.trim().to_string())).collect();
                (v.len() == 3 && v.iter().all(|s| !s.is_empty())).then(|| [v[0].clone(), v[1].clone(), v[2].clone()])
            }
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_responses_parse_strictly() {
        assert_eq!(parse_entities(r#"{"named_entities": ["Ada", " Bob "]}"#).unwrap(), vec!["Ada", "Bob"]);
        assert_eq!(parse_entities("```json\n{\"named_entities\": [\"Ada\"]}\n```").unwrap(), vec!["Ada"]);
        assert!(parse_entities(r#"["Ada"]"#).unwrap_err().contains("expected a JSON object"));
        assert!(parse_entities(r#"{"entities": ["Ada"]}"#).unwrap_err().contains("named_entities"));
        assert!(parse_entities(r#"{"named_entities": ["Ada", 3]}"#).unwrap_err().contains("a number"));
        assert!(parse_entities(r#"{"named_entities": ["Ada", ""]}"#).is_err());
        assert!(parse_entities("Sure! Here are the entities: Ada, Bob").unwrap_err().contains("not JSON"));
        assert!(parse_entities(r#"{"named_entities": ["Ada""#).is_err());
    }

    #[test]
    fn triple_items_that_are_not_three_strings_are_marked() {
        let got = parse_triples(r#"{"triples": [["A","r","B"], ["A","r"], ["A","","B"], ["A","r",3], "x", ["C"," s ","D"]]}"#).unwrap();
        let ok: Vec<_> = got.iter().map(|t| t.is_some()).collect();
        assert_eq!(ok, vec![true, false, false, false, false, true]);
        assert_eq!(got[5].as_ref().unwrap()[1], "s");
        assert!(parse_triples(r#"{"triples": {"a": 1}}"#).is_err());
        assert!(parse_triples("").is_err());
    }

    use crate::llm::openai::{ApiKeySource, OpenAiLlm, OpenAiSettings};
    use crate::llm::test_server::{serve, Reply};
    use std::sync::Arc;

    fn endpoint(url: String) -> Llm {
        Llm::openai(
            OpenAiLlm::new(OpenAiSettings {
                base_url: url,
                model: "m".into(),
                api_key: ApiKeySource::Env("STREAMRAG_NO_SUCH_KEY".into()),
                backoff: std::time::Duration::from_millis(5),
                ..OpenAiSettings::default()
            })
            .unwrap(),
        )
    }

    const TEXT: &str = "Ada Lovelace worked with Charles Babbage in London.";

    #[tokio::test]
    async fn extracts_validates_and_caches() {
        let (url, seen) = serve(Arc::new(|_, body: &str| {
            if body.contains("find the named entities") {
                Reply::ok(r#"{"named_entities": ["Ada Lovelace", "Charles Babbage", "London", "Paris"]}"#)
            } else {
                assert!(body.contains("Named entities:"), "{body}");
                Reply::ok(r#"{"triples": [["Ada Lovelace", "worked with", "Charles Babbage"], ["Ada Lovelace", "worked in", "London"], ["Ada Lovelace", "born in", "Paris"], ["Ada Lovelace", "knew"]]}"#)
            }
        }))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let x = LlmExtractor::new(endpoint(url.clone()), Some(open_cache(dir.path()).unwrap()));
        let got = x.extract("Ada Lovelace", TEXT).await.unwrap();
        let names: Vec<&str> = got.entities.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, vec!["Ada Lovelace", "Charles Babbage", "London"]);
        assert_eq!(got.triples.len(), 2, "{:?}", got.triples);
        assert_eq!(got.triples[0], Triple { subject: "Ada Lovelace".into(), relation: "worked with".into(), object: "Charles Babbage".into() });
        assert_eq!(x.stats.dropped_entities.load(Ordering::Relaxed), 1);
        assert_eq!(x.stats.dropped_triples.load(Ordering::Relaxed), 2);
        assert_eq!(x.llm.stats().calls(), 2);
        // Again, and again from a new extractor on the same cache (a restart): no call.
        assert_eq!(x.extract("Ada Lovelace", TEXT).await.unwrap(), got);
        drop(x);
        let y = LlmExtractor::new(endpoint(url), Some(open_cache(dir.path()).unwrap()));
        assert_eq!(y.extract("Ada Lovelace", TEXT).await.unwrap(), got);
        assert_eq!(y.llm.stats().calls(), 0);
        assert_eq!(y.stats.cache_hits.load(Ordering::Relaxed), 2);
        assert_eq!(seen.lock().unwrap().len(), 2);
        // Other text: calls again.
        y.extract("Ada Lovelace", "Ada Lovelace lived in London.").await.unwrap();
        assert_eq!(y.llm.stats().calls(), 2);
    }

    #[tokio::test]
    async fn unreadable_responses_are_retried_then_dead_lettered_with_the_raw_text() {
        let (url, seen) = serve(Arc::new(|n, _: &str| match n {
            0 => Reply::ok("I think the entities are Ada and London."),
            1 => Reply::ok(r#"{"named_entities": ["Ada Lovelace"]}"#),
            _ => Reply::ok("Sorry, I cannot help with triples."),
        }))
        .await;
        let x = LlmExtractor::new(endpoint(url), None);
        let e = x.extract("", TEXT).await.unwrap_err();
        assert_eq!(e.kind, streamrag_schemas::ErrorKind::User);
        assert!(e.message.contains("no readable triples response in 3 attempts"), "{e}");
        assert!(e.message.contains("Sorry, I cannot help with triples."), "{e}");
        assert_eq!(seen.lock().unwrap().len(), 5);
        assert_eq!(x.stats.unreadable.load(Ordering::Relaxed), 4);
        // The retries sample; the first attempt is greedy.
        let reqs = seen.lock().unwrap().clone();
        assert!(reqs[0].contains("\"temperature\":0.0"), "{}", reqs[0]);
        assert!(reqs[1].contains("\"temperature\":0.7"), "{}", reqs[1]);
    }

    #[tokio::test]
    async fn an_endpoint_failure_is_an_external_error() {
        let (url, _) = serve(Arc::new(|_, _: &str| Reply::Status(400, r#"{"error":{"message":"model not found","type":"x","param":null,"code":null}}"#))).await;
        let x = LlmExtractor::new(endpoint(url), None);
        let e = x.extract("", TEXT).await.unwrap_err();
        assert_eq!(e.kind, streamrag_schemas::ErrorKind::External);
        assert!(e.message.contains("model not found"), "{e}");
    }

    #[test]
    fn occurrence_is_by_whole_normalised_words() {
        let h = format!(" {} ", normalize("Marie Curie was born in Warsaw, Poland."));
        assert!(occurs(&h, &normalize("marie CURIE")));
        assert!(occurs(&h, &normalize("Warsaw")));
        assert!(!occurs(&h, &normalize("Curie was born in Wars")));
        assert!(!occurs(&h, &normalize("Paris")));
        assert!(!occurs(&h, ""));
    }
}
