//! Retrieval datasets in the layouts HippoRAG and GFM-RAG use: a corpus of passages
//! ({"title","text"} list, or a {title: text} map) whose titles are the document ids, and
//! questions with their gold passages. A small adapter: it looks for
//! - the corpus in `corpus.json`, `*_corpus.json` or `raw/dataset_corpus.json` (optionally .gz);
//! - the questions in `questions.json`, `raw/test.json` or the other `*.json` (optionally .gz);
//! - gold titles in `gold_titles_derived.json` (by question id), else the question's own
//!   `gold_titles`, `supporting_facts` ([title, sentence] pairs) or `paragraphs` with
//!   `is_supporting`.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use streamrag_schemas::Document;

#[derive(Debug, Clone)]
pub struct Question {
    /// Index in the file (0-based): `--questions A..B` selects by it.
    pub index: usize,
    pub id: String,
    pub text: String,
    pub kind: String,
    pub gold: Vec<String>,
    /// False where the gold could not be fully resolved (2Wiki's derived gold).
    pub fully_resolved: bool,
    /// The gold answer and its aliases (`answer`, `answer_aliases`, `aliases`); empty when
    /// the dataset gives none.
    pub answers: Vec<String>,
}

#[derive(Default)]
pub struct Dataset {
    pub corpus: Vec<Document>,
    pub questions: Vec<Question>,
}

pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let mut bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut out).with_context(|| format!("decompressing {}", path.display()))?;
        bytes = out;
    }
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

/// The first existing of `names` (each also tried with .gz) under `dir`.
pub(crate) fn find(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().flat_map(|n| [dir.join(n), dir.join(format!("{n}.gz"))]).find(|p| p.exists())
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.to_str().is_some_and(|s| s.ends_with(".json") || s.ends_with(".json.gz")));
    v.sort();
    v
}

fn str_of(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| v.get(*k).and_then(|x| x.as_str()).map(str::to_string))
}

fn corpus_of(v: &Value) -> Result<Vec<Document>> {
    let pairs: Vec<(String, String)> = match v {
        Value::Array(items) => items
            .iter()
            .map(|p| Ok((str_of(p, &["title"]).context("a passage without title")?, str_of(p, &["text", "content"]).context("a passage without text")?)))
            .collect::<Result<_>>()?,
        Value::Object(m) => m.iter().map(|(t, x)| (t.clone(), x.as_str().unwrap_or_default().to_string())).collect(),
        _ => bail!("the corpus is neither a list of passages nor a title -> text map"),
    };
    Ok(pairs.into_iter().map(|(title, text)| Document::upsert(title.clone(), title, text)).collect())
}

fn gold_of(q: &Value) -> Vec<String> {
    if let Some(Value::Array(g)) = q.get("gold_titles") {
        return g.iter().filter_map(|x| x.as_str().map(str::to_string)).collect();
    }
    let mut out: Vec<String> = Vec::new();
    if let Some(Value::Array(sf)) = q.get("supporting_facts") {
        for f in sf {
            if let Some(t) = f.get(0).and_then(|x| x.as_str()).or_else(|| f.as_str()) {
                out.push(t.to_string());
            }
        }
    } else if let Some(Value::Array(ps)) = q.get("paragraphs") {
        for p in ps {
            if p.get("is_supporting").and_then(|x| x.as_bool()) == Some(true) {
                if let Some(t) = str_of(p, &["title"]) {
                    out.push(t);
                }
            }
        }
    }
    out.dedup();
    let mut seen = std::collections::HashSet::new();
    out.retain(|t| seen.insert(t.clone()));
    out
}

impl Dataset {
    pub fn load(dir: &Path) -> Result<Dataset> {
        let corpus_path = find(dir, &["corpus.json", "raw/dataset_corpus.json"])
            .or_else(|| json_files(dir).into_iter().find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains("_corpus.json"))))
            .with_context(|| format!("no corpus under {} (corpus.json, *_corpus.json, raw/dataset_corpus.json)", dir.display()))?;
        let corpus = corpus_of(&read_json(&corpus_path)?).with_context(|| corpus_path.display().to_string())?;
        let q_path = find(dir, &["questions.json", "raw/test.json"])
            .or_else(|| {
                json_files(dir).into_iter().find(|p| {
                    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    !n.contains("corpus") && !n.contains("gold_titles")
                })
            })
            .with_context(|| format!("no questions under {} (questions.json, raw/test.json, NAME.json)", dir.display()))?;
        let Value::Array(qs) = read_json(&q_path)? else { bail!("{}: not a list of questions", q_path.display()) };
        let derived: HashMap<String, (Vec<String>, bool)> = match find(dir, &["gold_titles_derived.json"]) {
            Some(p) => match read_json(&p)? {
                Value::Array(items) => items
                    .iter()
                    .filter_map(|g| {
                        let id = str_of(g, &["id", "_id"])?;
                        Some((id, (gold_of(g), g.get("fully_resolved").and_then(|x| x.as_bool()).unwrap_or(true))))
                    })
                    .collect(),
                _ => bail!("{}: not a list", p.display()),
            },
            None => HashMap::new(),
        };
        let mut questions = Vec::with_capacity(qs.len());
        for (index, q) in qs.iter().enumerate() {
            let id = str_of(q, &["id", "_id"]).unwrap_or_else(|| index.to_string());
            let text = str_of(q, &["question"]).with_context(|| format!("{}: question {index} has no text", q_path.display()))?;
            let kind = str_of(q, &["question_type", "type"]).unwrap_or_else(|| "all".into());
            let (gold, fully_resolved) = derived.get(&id).cloned().unwrap_or_else(|| (gold_of(q), true));
            let mut answers: Vec<String> = str_of(q, &["answer"]).into_iter().collect();
            for key in ["answer_aliases", "aliases"] {
                if let Some(Value::Array(xs)) = q.get(key) {
                    answers.extend(xs.iter().filter_map(|x| x.as_str().map(str::to_string)));
                }
            }
            questions.push(Question { index, id, text, kind, gold, fully_resolved, answers });
        }
        Ok(Dataset { corpus, questions })
    }

    /// Questions with index in `range` (A..B, half open) that have gold passages.
    pub fn select(&self, range: &std::ops::Range<usize>) -> Vec<&Question> {
        self.questions.iter().filter(|q| range.contains(&q.index) && !q.gold.is_empty()).collect()
    }
}

/// Parses `A..B` (B exclusive); `..B` and `A..` too.
pub fn parse_range(s: &str) -> Result<std::ops::Range<usize>> {
    let (a, b) = s.split_once("..").with_context(|| format!("expected A..B, got {s:?}"))?;
    let a = if a.is_empty() { 0 } else { a.parse().with_context(|| format!("bad start in {s:?}"))? };
    let b = if b.is_empty() { usize::MAX } else { b.parse().with_context(|| format!("bad end in {s:?}"))? };
    if b < a {
        bail!("empty range {s:?}");
    }
    Ok(a..b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_load() {
        let dir = tempfile::tempdir().unwrap();
        // HippoRAG-like: NAME_corpus.json list + NAME.json with supporting_facts
        std::fs::write(dir.path().join("x_corpus.json"), r#"[{"title":"A","text":"a"},{"title":"B","text":"b"}]"#).unwrap();
        std::fs::write(dir.path().join("x.json"), r#"[{"_id":"q1","question":"?","answer":"a","answer_aliases":["the a"],"type":"bridge","supporting_facts":[["A",0],["B",1],["A",2]]}]"#).unwrap();
        let d = Dataset::load(dir.path()).unwrap();
        assert_eq!(d.corpus.len(), 2);
        assert_eq!(d.questions[0].gold, vec!["A", "B"]);
        assert_eq!(d.questions[0].kind, "bridge");
        assert_eq!(d.questions[0].answers, vec!["a", "the a"]);
        // GFM-RAG-like: raw/dataset_corpus.json map + raw/test.json
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("raw")).unwrap();
        std::fs::write(dir.path().join("raw/dataset_corpus.json"), r#"{"A":"a","B":"b","C":"c"}"#).unwrap();
        std::fs::write(dir.path().join("raw/test.json"), r#"[{"id":"q","question":"?","supporting_facts":[["C",0]]},{"id":"n","question":"none"}]"#).unwrap();
        let d = Dataset::load(dir.path()).unwrap();
        assert_eq!(d.corpus.len(), 3);
        assert_eq!(d.select(&(0..10)).len(), 1, "questions without gold are not evaluated");
    }

    #[test]
    fn ranges_and_recall() {
        use crate::synth::recall_at;
        assert_eq!(parse_range("0..500").unwrap(), 0..500);
        assert_eq!(parse_range("500..").unwrap(), 500..usize::MAX);
        assert!(parse_range("5..2").is_err() && parse_range("7").is_err());
        let r: Vec<String> = ["a", "x", "b"].iter().map(|s| s.to_string()).collect();
        let g: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        assert_eq!(recall_at(&r, &g, 2), 0.5);
        assert_eq!(recall_at(&r, &g, 5), 1.0);
    }
}
