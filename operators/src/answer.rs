//! LLM-written answers: the question and the top-k retrieved passages go to the LLM in the
//! paper's prompt shape (a system prompt, passages as "Title\ncontent", then "Question: ...\n
//! Thought: "); the answer is what follows "Answer: ". The passages' text comes from a
//! [`Passages`] store that the docs reader ([`crate::passages::DocsReader`]) fills from the
//! docs topic (the graph keeps no text).

use std::sync::Arc;

use streamrag_schemas::ScoredDocument;

use crate::llm::{Llm, LlmError, Sampling};
use crate::passages::Passages;

const SYSTEM: &str = "As an advanced reading comprehension assistant, you answer questions from the passages you are given. Think step by step in one short paragraph after \"Thought: \", then give the answer after \"Answer: \": a short phrase (a name, a date, yes or no), not a sentence. If the passages do not contain the answer, answer from what you know.";

/// Writes answers with an LLM over the passages of the retrieved documents.
pub struct Answerer {
    pub llm: Llm,
    pub passages: Arc<Passages>,
    /// Passages given to the LLM (the best first).
    pub top_k: usize,
    pub max_tokens: u32,
    /// Characters of one passage given to the LLM.
    pub max_passage_chars: usize,
}

impl Answerer {
    pub fn new(llm: Llm, passages: Arc<Passages>) -> Self {
        Answerer { llm, passages, top_k: 5, max_tokens: 256, max_passage_chars: 2000 }
    }

    /// The user prompt: the passages, then the question.
    pub fn prompt(&self, question: &str, documents: &[ScoredDocument]) -> String {
        let mut p = String::new();
        for d in documents.iter().take(self.top_k) {
            let (title, text) = self.passages.get(&d.id).unwrap_or_else(|| (d.title.clone(), String::new()));
            let title = if title.is_empty() { d.id.clone() } else { title };
            p.push_str(&title);
            p.push('\n');
            p.push_str(crate::llm::truncate(&text, self.max_passage_chars));
            p.push_str("\n\n");
        }
        p.push_str(&format!("Question: {}\nThought: ", question.trim()));
        p
    }

    pub async fn answer(&self, question: &str, documents: &[ScoredDocument]) -> Result<String, LlmError> {
        let c = self.llm.chat(SYSTEM, &self.prompt(question, documents), Sampling::greedy(self.max_tokens)).await?;
        Ok(final_answer(&c.text))
    }
}

/// The text after the last "Answer:" (the whole response when there is none), trimmed.
pub fn final_answer(response: &str) -> String {
    let tail = match response.rfind("Answer:") {
        Some(i) => &response[i + "Answer:".len()..],
        None => response,
    };
    tail.trim().trim_end_matches('.').trim().to_string()
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
    }

    #[tokio::test]
    async fn passages_reach_the_llm_in_rank_order() {
        let (url, seen) = serve(Arc::new(|_, _: &str| Reply::ok("Thought: the passage says so.\nAnswer: 1815."))).await;
        let settings = OpenAiSettings { base_url: url, api_key: ApiKeySource::Env("NONE_SET".into()), ..OpenAiSettings::default() };
        let llm = Llm::openai(OpenAiLlm::new(settings).unwrap());
        let passages = Arc::new(Passages::default());
        let keeper = crate::passages::DocsReader::new(crate::Topics::default(), vec![passages.clone()]);
        let rec = |o: i64, p: &str| Record { topic: "docs".into(), partition: 0, offset: o, key: None, payload: p.as_bytes().to_vec(), timestamp_ms: 0 };
        keeper
            .apply(&[
                rec(0, r#"{"id":"a","title":"Ada Lovelace","text":"Ada Lovelace was born in 1815."}"#),
                rec(1, r#"{"id":"b","title":"London","text":"London is a city."}"#),
                rec(2, "garbage"),
                rec(3, r#"{"id":"c","title":"Gone","text":"x"}"#),
                rec(4, r#"{"op":"delete","id":"c"}"#),
            ])
            .unwrap();
        assert_eq!(passages.len(), 2);
        let docs = vec![
            ScoredDocument { id: "b".into(), title: "London".into(), score: 2.0 },
            ScoredDocument { id: "a".into(), title: "Ada Lovelace".into(), score: 1.0 },
        ];
        let a = Answerer::new(llm, passages);
        assert_eq!(a.answer("When was Ada Lovelace born?", &docs).await.unwrap(), "1815");
        let req = seen.lock().unwrap()[0].clone();
        let (i, j) = (req.find("London is a city.").unwrap(), req.find("Ada Lovelace was born in 1815.").unwrap());
        assert!(i < j, "rank order");
        assert!(req.contains("Question: When was Ada Lovelace born?\\nThought: "), "{req}");
    }
}
