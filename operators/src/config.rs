//! Topic names and limits shared by every stage.

use serde::{Deserialize, Serialize};

fn default_docs() -> String { "streamrag.docs".into() }
fn default_triples() -> String { "streamrag.triples".into() }
fn default_graph_deltas() -> String { "streamrag.graph-deltas".into() }
fn default_graph_changes() -> String { "streamrag.graph-changes".into() }
fn default_queries() -> String { "streamrag.queries".into() }
fn default_answers() -> String { "streamrag.answers".into() }
fn default_subscriptions() -> String { "streamrag.subscriptions".into() }
fn default_dead_letters() -> String { "streamrag.dead-letters".into() }

/// The topics the pipeline reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topics {
    /// Documents to index (and deletions), keyed by document id.
    #[serde(default = "default_docs")]
    pub docs: String,
    /// Extracted entities and triples, keyed by document id.
    #[serde(default = "default_triples")]
    pub triples: String,
    /// Resolved per-document graph deltas, keyed by document id.
    #[serde(default = "default_graph_deltas")]
    pub graph_deltas: String,
    /// What the kg-writer changed in the graph, keyed by document id.
    #[serde(default = "default_graph_changes")]
    pub graph_changes: String,
    /// Questions, keyed by query id.
    #[serde(default = "default_queries")]
    pub queries: String,
    /// Answers, keyed by query id (a standing query's by its subscription id).
    #[serde(default = "default_answers")]
    pub answers: String,
    /// Standing queries, keyed by subscription id; compacted on Kafka (the last record of an
    /// id is its state).
    #[serde(default = "default_subscriptions")]
    pub subscriptions: String,
    /// Records any stage could not process.
    #[serde(default = "default_dead_letters")]
    pub dead_letters: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            docs: default_docs(),
            triples: default_triples(),
            graph_deltas: default_graph_deltas(),
            graph_changes: default_graph_changes(),
            queries: default_queries(),
            answers: default_answers(),
            subscriptions: default_subscriptions(),
            dead_letters: default_dead_letters(),
        }
    }
}

impl Topics {
    pub fn all(&self) -> [&str; 8] {
        [&self.docs, &self.triples, &self.graph_deltas, &self.graph_changes, &self.queries, &self.answers, &self.subscriptions, &self.dead_letters]
    }

    /// The topics whose retention is by key (compaction), not by time.
    pub fn compacted(&self) -> [&str; 1] {
        [&self.subscriptions]
    }

    pub fn all_mut(&mut self) -> [&mut String; 8] {
        [
            &mut self.docs,
            &mut self.triples,
            &mut self.graph_deltas,
            &mut self.graph_changes,
            &mut self.queries,
            &mut self.answers,
            &mut self.subscriptions,
            &mut self.dead_letters,
        ]
    }
}

fn default_max_text_bytes() -> usize { 1 << 20 }
fn default_max_batch() -> usize { 256 }
fn default_max_id_bytes() -> usize { 512 }
fn default_max_title_bytes() -> usize { 1024 }
fn default_max_question_bytes() -> usize { 4096 }
fn default_max_top_k() -> u32 { 100 }

/// Bounds on input and on work per step. Every door (HTTP, the docs and queries topics,
/// `ingest`) checks records against the same bounds, through [`crate::openie::validate`] and
/// [`crate::query::validate`], which use the checks below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest document text accepted, in bytes; larger ones are dead-lettered (default 1 MiB).
    #[serde(default = "default_max_text_bytes")]
    pub max_text_bytes: usize,
    /// Most records a stage takes in one step.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// Longest document or query id, in bytes (default 512).
    #[serde(default = "default_max_id_bytes")]
    pub max_id_bytes: usize,
    /// Longest document title, in bytes (default 1 KiB).
    #[serde(default = "default_max_title_bytes")]
    pub max_title_bytes: usize,
    /// Longest question, in bytes (default 4 KiB).
    #[serde(default = "default_max_question_bytes")]
    pub max_question_bytes: usize,
    /// Most documents a query may ask for (top_k runs from 1 to this; default 100).
    #[serde(default = "default_max_top_k")]
    pub max_top_k: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_text_bytes: default_max_text_bytes(),
            max_batch: default_max_batch(),
            max_id_bytes: default_max_id_bytes(),
            max_title_bytes: default_max_title_bytes(),
            max_question_bytes: default_max_question_bytes(),
            max_top_k: default_max_top_k(),
        }
    }
}

/// The first control character in `s` (C0, DEL or C1), with its byte offset.
fn control_char(s: &str) -> Option<(usize, char)> {
    s.char_indices().find(|(_, c)| c.is_control())
}

/// Shows a field's value in an error without echoing all of a huge or hostile one.
fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(40).flat_map(char::escape_debug).collect();
    if s.chars().count() > 40 {
        out.push_str("...");
    }
    out
}

/// `field` is at most `max` bytes (`key`: the [limits] setting that says so).
fn within(field: &str, s: &str, max: usize, key: &str) -> Result<(), String> {
    if s.len() > max {
        return Err(format!("{field} is {} bytes, over the limit of {max} bytes (limits.{key})", s.len()));
    }
    Ok(())
}

/// `field` holds no control character.
fn no_control(field: &str, s: &str) -> Result<(), String> {
    match control_char(s) {
        Some((at, c)) => Err(format!("{field} \"{}\" holds the control character U+{:04X} at byte {at}", shown(s), c as u32)),
        None => Ok(()),
    }
}

impl Limits {
    /// Checks an id-like field (`what`: "document id", "query_id"): not blank, at most
    /// `max_id_bytes`, no control characters.
    pub fn check_id(&self, what: &str, id: &str) -> Result<(), String> {
        if id.trim().is_empty() {
            return Err(format!("{what} is empty"));
        }
        within(what, id, self.max_id_bytes, "max_id_bytes")?;
        no_control(what, id)
    }

    /// Checks a document title: at most `max_title_bytes`, no control characters.
    pub fn check_title(&self, what: &str, title: &str) -> Result<(), String> {
        let field = format!("{what} title");
        within(&field, title, self.max_title_bytes, "max_title_bytes")?;
        no_control(&field, title)
    }

    /// Checks a question: not blank, at most `max_question_bytes`.
    pub fn check_question(&self, what: &str, question: &str) -> Result<(), String> {
        if question.trim().is_empty() {
            return Err(format!("{what} has an empty question"));
        }
        within(&format!("{what} question"), question, self.max_question_bytes, "max_question_bytes")
    }

    /// Checks a requested number of documents: 1 to `max_top_k`.
    pub fn check_top_k(&self, what: &str, top_k: u32) -> Result<(), String> {
        if top_k == 0 || top_k > self.max_top_k {
            return Err(format!("{what} top_k is {top_k}: it runs from 1 to {} (limits.max_top_k)", self.max_top_k));
        }
        Ok(())
    }

    /// Checks access labels (a document's, or those a reader may read): at most 64, each not
    /// blank, at most 128 bytes, without control characters or surrounding spaces.
    pub fn check_access(&self, what: &str, labels: &[String]) -> Result<(), String> {
        if labels.len() > 64 {
            return Err(format!("{what} has {} access labels, over the limit of 64", labels.len()));
        }
        for l in labels {
            let field = format!("{what} access label");
            if l.trim().is_empty() {
                return Err(format!("{field} is empty"));
            }
            if l.trim() != l {
                return Err(format!("{field} \"{}\" has surrounding spaces", shown(l)));
            }
            if l.len() > 128 {
                return Err(format!("{field} is {} bytes, over the limit of 128 bytes", l.len()));
            }
            no_control(&field, l)?;
        }
        Ok(())
    }

    /// Checks the limits themselves (a zero bound would refuse everything).
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("max_text_bytes", self.max_text_bytes),
            ("max_batch", self.max_batch),
            ("max_id_bytes", self.max_id_bytes),
            ("max_title_bytes", self.max_title_bytes),
            ("max_question_bytes", self.max_question_bytes),
            ("max_top_k", self.max_top_k as usize),
        ] {
            if v == 0 {
                return Err(format!("limits.{name} is 0: it must be at least 1"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bounded_and_free_of_control_characters() {
        let l = Limits::default();
        assert!(l.check_id("document id", &"a".repeat(512)).is_ok());
        let long = l.check_id("document id", &"a".repeat(513)).unwrap_err();
        assert!(long.contains("513 bytes") && long.contains("512"), "{long}");
        // a multi-byte character counts its bytes
        assert!(l.check_id("document id", &"é".repeat(257)).is_err());
        for c in (0u32..0x20).chain([0x7f]).chain(0x80..0xa0) {
            let id = format!("a{}b", char::from_u32(c).unwrap());
            let e = l.check_id("document id", &id).unwrap_err();
            assert!(e.contains(&format!("U+{c:04X}")) && e.contains("byte 1"), "{e}");
            assert!(l.check_title("document a", &id).is_err());
        }
        assert!(l.check_id("query_id", "  ").unwrap_err().contains("empty"));
        assert!(l.check_id("document id", "Ängström (1957 film) – ok").is_ok());
        // a huge hostile id is not echoed whole
        assert!(l.check_id("document id", &format!("{}\u{0}", "x".repeat(400))).unwrap_err().len() < 200);
    }

    #[test]
    fn titles_questions_and_top_k_have_bounds() {
        let l = Limits::default();
        assert!(l.check_title("document a", &"t".repeat(1024)).is_ok());
        assert!(l.check_title("document a", &"t".repeat(1025)).unwrap_err().contains("max_title_bytes"));
        assert!(l.check_title("document a", "").is_ok());
        assert!(l.check_question("query q", &"w ".repeat(2048)).is_ok());
        assert!(l.check_question("query q", &"w".repeat(4097)).unwrap_err().contains("4096"));
        assert!(l.check_question("query q", " \n").unwrap_err().contains("empty"));
        assert!(l.check_top_k("query q", 1).is_ok() && l.check_top_k("query q", 100).is_ok());
        assert!(l.check_top_k("query q", 0).unwrap_err().contains("1 to 100"));
        assert!(l.check_top_k("query q", 1_000_000_000).is_err());
        let custom = Limits { max_top_k: 1000, ..Limits::default() };
        assert!(custom.check_top_k("query q", 1000).is_ok());
        assert!(Limits { max_id_bytes: 0, ..Limits::default() }.check().unwrap_err().contains("max_id_bytes"));
        assert!(Limits::default().check().is_ok());
    }
}
