//! Answers people can trust: grounded, cited, and silent when the graph knows nothing.
//!
//! For each query the [`Answerer`] reads the top-k retrieved passages (their text comes from a
//! [`Passages`] store that the docs reader fills from the docs topic; the graph keeps no text):
//! 1. When nothing retrieved supports the question ([`support::question_supported`]: a thing
//!    the question names is in no passage), it abstains: no LLM is called, and the answer says
//!    so without naming anything.
//! 2. With an answering LLM, the passages go to it numbered, and it replies with a short phrase
//!    and the numbers it drew on. An answer the passages do not support
//!    ([`support::answer_supported`]), or "unknown", is withheld: the answer abstains.
//! 3. Without one, the answer is extractive ([`extractive`]): a span or sentence of the top
//!    passages.
//!
//! Either way the text cites its passages as `[n]` (n = the document's rank, from 1) and the
//! answer lists which document each number is.

pub mod extractive;
pub mod support;
pub mod text;

use std::collections::HashSet;
use std::sync::Arc;

use streamrag_schemas::{Citation, ScoredDocument};

use crate::llm::{Llm, LlmError, Sampling};
use crate::passages::Passages;

const SYSTEM: &str = "You answer questions from the numbered passages you are given. Reply with one line: \"Answer: \" followed by a short phrase (a name, a place, a date, a number, yes or no; never a sentence, never the question's words) and the numbers of the passages it comes from in brackets. Examples: \"Answer: Paris [2]\", \"Answer: 12 May 1820 [1][3]\", \"Answer: no [1][2]\". If the passages do not contain the answer, reply \"Answer: unknown\".";

/// What an answer says when nothing retrieved supports the question.
pub const NO_SUPPORT: &str = "No retrieved passage supports an answer to this question, so none is given.";
/// What an answer says when the LLM's answer was withheld.
pub const WITHHELD: &str = "The passages retrieved do not support an answer to this question, so none is given.";

/// An answer's text and how it came to be.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub text: String,
    pub abstained: bool,
    /// `extractive`, `llm:<model>`, or `none`.
    pub answered_by: String,
    pub citations: Vec<Citation>,
}

impl Written {
    fn abstain(text: &str) -> Self {
        Written { text: text.into(), abstained: true, answered_by: "none".into(), citations: vec![] }
    }
}

/// Writes answers over the passages of the retrieved documents: with an LLM when one is
/// configured, extractive otherwise.
pub struct Answerer {
    pub llm: Option<Llm>,
    pub passages: Arc<Passages>,
    /// Passages read (the best first).
    pub top_k: usize,
    pub max_tokens: u32,
    /// Characters of one passage given to the LLM.
    pub max_passage_chars: usize,
}

impl Answerer {
    /// The extractive answerer (no LLM).
    pub fn new(passages: Arc<Passages>) -> Self {
        Answerer { llm: None, passages, top_k: 5, max_tokens: 48, max_passage_chars: 1200 }
    }

    pub fn with_llm(mut self, llm: Llm) -> Self {
        self.llm = Some(llm);
        self
    }

    /// The top passages: (title, text) of each document, the title alone when its text is not
    /// (yet) kept.
    fn read(&self, documents: &[ScoredDocument]) -> Vec<(String, String)> {
        documents
            .iter()
            .take(self.top_k)
            .map(|d| {
                let (title, text) = self.passages.get(&d.id).unwrap_or_else(|| (d.title.clone(), String::new()));
                (if title.is_empty() { d.id.clone() } else { title }, text)
            })
            .collect()
    }

    /// The user prompt: the numbered passages, then the question.
    pub fn prompt(&self, question: &str, documents: &[ScoredDocument]) -> String {
        let mut p = String::new();
        for (i, (title, text)) in self.read(documents).iter().enumerate() {
            p.push_str(&format!("[{}] {title}\n{}\n\n", i + 1, crate::llm::truncate(text, self.max_passage_chars)));
        }
        p.push_str(&format!("Question: {}\n", question.trim()));
        p
    }

    /// The answer to `question` over `documents` (best first).
    pub async fn write(&self, question: &str, documents: &[ScoredDocument]) -> Written {
        let read = self.read(documents);
        let words: Vec<HashSet<String>> = read.iter().map(|(t, x)| support::passage_words(t, x)).collect();
        let known = |w: &str| self.passages.frequency(w) > 0 || self.passages.is_empty();
        if support::question_supported(question, &words, &known).is_err() {
            return Written::abstain(NO_SUPPORT);
        }
        if let Some(llm) = &self.llm {
            match self.ask_llm(llm, question, documents, &words).await {
                Ok(w) => return w,
                Err(e) => tracing::warn!(error = %e.message, "the answering LLM failed; the answer is extractive"),
            }
        }
        let passages: Vec<extractive::Passage> = read.iter().map(|(t, x)| extractive::Passage { title: t, text: x }).collect();
        match extractive::extract(question, &passages) {
            Some(x) => {
                let mut cites = x.cites.clone();
                cites.sort_unstable();
                cites.dedup();
                Written { text: cite(&x.text, &cites), abstained: false, answered_by: "extractive".into(), citations: citations(documents, &cites) }
            }
            None => Written::abstain(NO_SUPPORT),
        }
    }

    async fn ask_llm(&self, llm: &Llm, question: &str, documents: &[ScoredDocument], words: &[HashSet<String>]) -> Result<Written, LlmError> {
        let c = llm.chat(SYSTEM, &self.prompt(question, documents), Sampling::greedy(self.max_tokens)).await?;
        let (answer, mut cites) = split_citations(&final_answer(&c.text), words.len());
        let want = text::want(question);
        let n = crate::normalize::normalize(&answer);
        if n.is_empty() || n == "unknown" || !support::answer_supported(&answer, question, &want, words) {
            return Ok(Written::abstain(WITHHELD));
        }
        cites.sort_unstable();
        if cites.is_empty() {
            // the passages that hold the answer's words
            let aw = text::content_words(&answer);
            cites = (0..words.len()).filter(|&i| !aw.is_empty() && aw.iter().all(|w| words[i].contains(w))).take(2).collect();
        }
        Ok(Written { text: cite(&answer, &cites), abstained: false, answered_by: format!("llm:{}", llm.model_id()), citations: citations(documents, &cites) })
    }
}

/// `text` with its citation marks: "Paris [1][3]".
fn cite(text: &str, cites: &[usize]) -> String {
    let mut out = text.trim().to_string();
    if !cites.is_empty() {
        out.push(' ');
        for c in cites {
            out.push_str(&format!("[{}]", c + 1));
        }
    }
    out
}

fn citations(documents: &[ScoredDocument], cites: &[usize]) -> Vec<Citation> {
    let mut seen = HashSet::new();
    cites
        .iter()
        .filter(|c| seen.insert(**c))
        .filter_map(|&c| documents.get(c).map(|d| Citation { n: c as u32 + 1, document_id: d.id.clone(), title: d.title.clone() }))
        .collect()
}

/// An LLM's answer without its "[n]" marks, and the valid passage indices they name.
pub fn split_citations(answer: &str, passages: usize) -> (String, Vec<usize>) {
    let mut text = String::new();
    let mut cites = Vec::new();
    let mut rest = answer;
    while let Some(i) = rest.find('[') {
        text.push_str(&rest[..i]);
        match rest[i..].find(']') {
            Some(j) => {
                for n in rest[i + 1..i + j].split(',').filter_map(|x| x.trim().parse::<usize>().ok()) {
                    if (1..=passages).contains(&n) && !cites.contains(&(n - 1)) {
                        cites.push(n - 1);
                    }
                }
                rest = &rest[i + j + 1..];
            }
            None => {
                rest = &rest[i + 1..];
            }
        }
    }
    text.push_str(rest);
    (text.trim().trim_end_matches('.').trim().to_string(), cites)
}

/// The text after the last "Answer:" (the first line of it; the whole response when there is
/// none), trimmed.
pub fn final_answer(response: &str) -> String {
    let tail = match response.rfind("Answer:") {
        Some(i) => &response[i + "Answer:".len()..],
        None => response,
    };
    let line = tail.trim().lines().next().unwrap_or("");
    line.trim().trim_end_matches('.').trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::openai::{ApiKeySource, OpenAiLlm, OpenAiSettings};
    use crate::llm::test_server::{serve, Reply};
    use crate::transport::Record;

    #[test]
    fn the_answer_follows_the_last_answer_marker() {
        assert_eq!(final_answer("Thought: X was born in Y.\nAnswer: Y."), "Y");
        assert_eq!(final_answer("Answer: no\nAnswer: yes"), "yes");
        assert_eq!(final_answer("  Paris "), "Paris");
        assert_eq!(final_answer("Answer: Paris [2]\nExplanation: passage 2 says so"), "Paris [2]");
    }

    #[test]
    fn citation_marks_are_read_and_checked() {
        assert_eq!(split_citations("Paris [2][1]", 3), ("Paris".to_string(), vec![1, 0]));
        assert_eq!(split_citations("Paris [2, 3].", 3), ("Paris".to_string(), vec![1, 2]));
        assert_eq!(split_citations("Paris [9]", 3), ("Paris".to_string(), vec![]));
        assert_eq!(split_citations("Paris [", 3), ("Paris".to_string(), vec![]));
    }

    fn store() -> Arc<Passages> {
        let passages = Arc::new(Passages::default());
        let keeper = crate::passages::DocsReader::new(crate::Topics::default(), vec![passages.clone()]);
        let rec = |o: i64, p: &str| Record { topic: "docs".into(), partition: 0, offset: o, key: None, payload: p.as_bytes().to_vec(), timestamp_ms: 0 };
        keeper
            .apply(&[
                rec(0, r#"{"id":"a","title":"Ada Lovelace","text":"Ada Lovelace was born in 1815. She was the daughter of Lord Byron."}"#),
                rec(1, r#"{"id":"b","title":"London","text":"London is a city."}"#),
                rec(2, "garbage"),
                rec(3, r#"{"id":"c","title":"Gone","text":"x"}"#),
                rec(4, r#"{"op":"delete","id":"c"}"#),
            ])
            .unwrap();
        assert_eq!(passages.len(), 2);
        passages
    }

    fn docs() -> Vec<ScoredDocument> {
        vec![ScoredDocument { id: "b".into(), title: "London".into(), score: 2.0 }, ScoredDocument { id: "a".into(), title: "Ada Lovelace".into(), score: 1.0 }]
    }

    #[tokio::test]
    async fn numbered_passages_reach_the_llm_in_rank_order_and_its_answer_is_cited() {
        let (url, seen) = serve(Arc::new(|_, _: &str| Reply::ok("Answer: 1815 [2]"))).await;
        let settings = OpenAiSettings { base_url: url, api_key: ApiKeySource::Env("NONE_SET".into()), ..OpenAiSettings::default() };
        let a = Answerer::new(store()).with_llm(Llm::openai(OpenAiLlm::new(settings).unwrap()));
        let w = a.write("When was Ada Lovelace born?", &docs()).await;
        assert_eq!(w.text, "1815 [2]");
        assert!(!w.abstained);
        assert!(w.answered_by.starts_with("llm:"), "{}", w.answered_by);
        assert_eq!(w.citations, vec![Citation { n: 2, document_id: "a".into(), title: "Ada Lovelace".into() }]);
        let req = seen.lock().unwrap()[0].clone();
        let (i, j) = (req.find("[1] London").unwrap(), req.find("[2] Ada Lovelace").unwrap());
        assert!(i < j, "rank order");
        assert!(req.contains("Question: When was Ada Lovelace born?"), "{req}");
    }

    #[tokio::test]
    async fn an_llm_answer_the_passages_do_not_hold_is_withheld() {
        for reply in ["Answer: Michael Phelps", "Answer: unknown", "Answer: "] {
            let (url, _) = serve(Arc::new(move |_, _: &str| Reply::ok(reply))).await;
            let settings = OpenAiSettings { base_url: url, api_key: ApiKeySource::Env("NONE_SET".into()), ..OpenAiSettings::default() };
            let a = Answerer::new(store()).with_llm(Llm::openai(OpenAiLlm::new(settings).unwrap()));
            let w = a.write("Who was the father of Ada Lovelace?", &docs()).await;
            assert!(w.abstained, "{reply}: {w:?}");
            assert_eq!(w.text, WITHHELD);
            assert!(w.citations.is_empty());
        }
    }

    #[tokio::test]
    async fn nothing_retrieved_that_names_what_is_asked_means_no_llm_call_and_no_answer() {
        let (url, seen) = serve(Arc::new(|_, _: &str| Reply::ok("Answer: Michael Phelps [1]"))).await;
        let settings = OpenAiSettings { base_url: url, api_key: ApiKeySource::Env("NONE_SET".into()), ..OpenAiSettings::default() };
        let a = Answerer::new(store()).with_llm(Llm::openai(OpenAiLlm::new(settings).unwrap()));
        for q in ["Who won the 2031 Mars chess championship?", "Where was Zorvath Quillen born?"] {
            let w = a.write(q, &docs()).await;
            assert!(w.abstained && w.text == NO_SUPPORT && w.answered_by == "none", "{q}: {w:?}");
        }
        let w = a.write("Who was the father of Ada Lovelace?", &[]).await;
        assert!(w.abstained);
        assert!(seen.lock().unwrap().is_empty(), "the LLM was called");
    }

    #[tokio::test]
    async fn without_an_llm_the_answer_is_an_extractive_span_with_its_citation() {
        let a = Answerer::new(store());
        let w = a.write("When was Ada Lovelace born?", &docs()).await;
        assert_eq!(w, Written { text: "1815 [2]".into(), abstained: false, answered_by: "extractive".into(), citations: vec![Citation { n: 2, document_id: "a".into(), title: "Ada Lovelace".into() }] });
        let w = a.write("Who was the father of Ada Lovelace?", &docs()).await;
        assert_eq!(w.text, "Lord Byron [2]");
    }
}
