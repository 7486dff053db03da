//! BM25 over passages, with tantivy: title and text, English stemming, stored under the data
//! directory (`DATA/bm25/`). It is a [`DocSink`] of its own docs reader and a persistent one:
//! each batch is committed with the docs-topic position it reached as the commit's payload, so
//! a restart continues from there instead of reading the topic again. Upserts replace the
//! document (delete by id, then add), deletions remove it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use streamrag_schemas::ScoredDocument;
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::error::StageFault;
use crate::passages::DocSink;

use super::Retrieved;

/// The tokenizer tantivy registers for English with stemming.
const TOKENIZER: &str = "en_stem";
/// Indexing memory of the one writer thread.
const WRITER_BYTES: usize = 64 << 20;

pub struct Bm25Index {
    index: Index,
    reader: IndexReader,
    writer: Mutex<IndexWriter>,
    id: Field,
    title: Field,
    text: Field,
}

fn schema() -> (Schema, Field, Field, Field) {
    let mut b = Schema::builder();
    let id = b.add_text_field("id", STRING | STORED);
    let analysed = TextOptions::default()
        .set_indexing_options(TextFieldIndexing::default().set_tokenizer(TOKENIZER).set_index_option(IndexRecordOption::WithFreqsAndPositions));
    let title = b.add_text_field("title", analysed.clone() | STORED);
    let text = b.add_text_field("text", analysed);
    (b.build(), id, title, text)
}

impl Bm25Index {
    /// Opens the index under `dir` (creating it if missing).
    pub fn open(dir: &Path) -> tantivy::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let (schema, id, title, text) = schema();
        let index = Index::open_or_create(MmapDirectory::open(dir)?, schema)?;
        Self::with(index, id, title, text)
    }

    /// An index in memory (tests, benchmarks).
    pub fn in_memory() -> tantivy::Result<Self> {
        let (schema, id, title, text) = schema();
        Self::with(Index::create_in_ram(schema), id, title, text)
    }

    fn with(index: Index, id: Field, title: Field, text: Field) -> tantivy::Result<Self> {
        let writer = index.writer_with_num_threads(1, WRITER_BYTES)?;
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        Ok(Bm25Index { index, reader, writer: Mutex::new(writer), id, title, text })
    }

    /// Live passages.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The docs-topic position the last commit reached (partition -> next offset).
    pub fn position(&self) -> tantivy::Result<BTreeMap<i32, i64>> {
        let payload = self.index.load_metas()?.payload;
        Ok(payload.and_then(|p| serde_json::from_str::<BTreeMap<i32, i64>>(&p).ok()).unwrap_or_default())
    }

    /// Makes what was written since the last commit durable and searchable, recording `next`
    /// as the position it reflects.
    pub fn commit(&self, next: &BTreeMap<i32, i64>) -> tantivy::Result<()> {
        let mut w = self.writer.lock().expect("bm25 writer");
        let mut prepared = w.prepare_commit()?;
        prepared.set_payload(&serde_json::to_string(next).expect("offsets serialise"));
        prepared.commit()?;
        drop(w);
        self.reader.reload()
    }

    fn write_upserts(&self, docs: &[(String, String, String)]) -> tantivy::Result<()> {
        let w = self.writer.lock().expect("bm25 writer");
        for (id, title, text) in docs {
            w.delete_term(Term::from_field_text(self.id, id));
            let mut d = TantivyDocument::default();
            d.add_text(self.id, id);
            d.add_text(self.title, title);
            d.add_text(self.text, text);
            w.add_document(d)?;
        }
        Ok(())
    }

    /// The terms of `text` as the index analyses them (lower case, stemmed), each once, in
    /// order of first occurrence.
    pub fn terms(&self, text: &str) -> tantivy::Result<Vec<String>> {
        let mut analyzer = self.index.tokenizer_for_field(self.text)?;
        let mut stream = analyzer.token_stream(text);
        let mut out: Vec<String> = Vec::new();
        while stream.advance() {
            let t = &stream.token().text;
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
        Ok(out)
    }

    /// A consistent view of the index for one batch of questions.
    pub fn searcher(&self) -> tantivy::Searcher {
        self.reader.searcher()
    }

    /// BM25's inverse document frequency of each analysed term over the passages' text,
    /// ln(1 + (N - df + 0.5) / (df + 0.5)): near 0 for a word most passages hold.
    pub fn idf(&self, searcher: &tantivy::Searcher, terms: &[String]) -> tantivy::Result<Vec<f64>> {
        let n = searcher.num_docs() as f64;
        terms
            .iter()
            .map(|t| {
                let df = searcher.doc_freq(&Term::from_field_text(self.text, t))? as f64;
                Ok((1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .collect()
    }

    /// The `k` passages that score best for `question` (a disjunction of its terms over title
    /// and text, BM25), best first; ties by id.
    pub fn search(&self, searcher: &tantivy::Searcher, question: &str, k: usize) -> tantivy::Result<Vec<ScoredDocument>> {
        let clauses: Vec<(Occur, Box<dyn Query>)> = self
            .terms(question)?
            .iter()
            .flat_map(|t| [self.title, self.text].map(|f| Term::from_field_text(f, t)))
            .map(|term| (Occur::Should, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)) as Box<dyn Query>))
            .collect();
        let mut documents = Vec::new();
        if !clauses.is_empty() && k > 0 {
            for (score, addr) in searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(k).order_by_score())? {
                let d: TantivyDocument = searcher.doc(addr)?;
                let text = |f: Field| d.get_first(f).and_then(|v| v.as_str()).unwrap_or_default().to_string();
                documents.push(ScoredDocument { id: text(self.id), title: text(self.title), score: score as f64 });
            }
        }
        documents.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        Ok(documents)
    }

    /// The `top_k` passages that score best for each question.
    pub fn retrieve_batch(&self, qs: &[(&str, usize)]) -> tantivy::Result<Vec<Retrieved>> {
        let searcher = self.searcher();
        qs.iter().map(|(q, k)| Ok(Retrieved { seeds: vec![], documents: self.search(&searcher, q, *k)?, triples: vec![], entities: vec![], checkpoint: None })).collect()
    }
}

impl DocSink for Bm25Index {
    fn upsert(&self, docs: &[(String, String, String)]) -> Result<(), StageFault> {
        Ok(self.write_upserts(docs)?)
    }
    fn remove(&self, id: &str) -> Result<(), StageFault> {
        self.writer.lock().expect("bm25 writer").delete_term(Term::from_field_text(self.id, id));
        Ok(())
    }
    fn position(&self) -> Option<BTreeMap<i32, i64>> {
        // an unreadable meta file starts the reader from the beginning: re-adding is harmless
        Some(Bm25Index::position(self).unwrap_or_default())
    }
    fn commit(&self, next: &BTreeMap<i32, i64>) -> Result<(), StageFault> {
        Ok(Bm25Index::commit(self, next)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, title: &str, text: &str) -> (String, String, String) {
        (id.into(), title.into(), text.into())
    }

    fn ids(r: &Retrieved) -> Vec<&str> {
        r.documents.iter().map(|d| d.id.as_str()).collect()
    }

    #[test]
    fn ranks_by_bm25_follows_updates_and_deletes_and_keeps_its_position_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let ix = Bm25Index::open(dir.path()).unwrap();
            ix.upsert(&[
                doc("a", "Insulin", "Insulin lowers blood glucose; patients with type 1 diabetes inject insulin."),
                doc("b", "Metformin", "Metformin is a first-line medication for type 2 diabetes."),
                doc("c", "Warsaw", "Warsaw is the capital of Poland, on the Vistula."),
            ])
            .unwrap();
            DocSink::commit(&ix, &[(0, 3)].into()).unwrap();
            let r = &ix.retrieve_batch(&[("which drugs treat diabetes?", 5), ("river through the capital of poland", 2)]).unwrap();
            assert_eq!(ids(&r[0]), vec!["b", "a"], "stemmed 'drugs'/'diabetes'; the shorter, denser passage first: {:?}", r[0]);
            assert_eq!(ids(&r[1]), vec!["c"]);
            assert!(r[0].documents[0].score > r[0].documents[1].score);
            // an update replaces the passage, a deletion removes it
            ix.upsert(&[doc("c", "Kraków", "Kraków lies on the Vistula in southern Poland.")]).unwrap();
            ix.remove("b").unwrap();
            DocSink::commit(&ix, &[(0, 5)].into()).unwrap();
            assert_eq!(ix.len(), 2);
            let r = &ix.retrieve_batch(&[("metformin", 5), ("Warsaw capital", 5), ("Kraków", 5)]).unwrap();
            assert!(r[0].documents.is_empty() && r[1].documents.is_empty(), "{r:?}");
            assert_eq!(r[2].documents[0].title, "Kraków");
            // written but not committed: lost with the process, and the position says so
            ix.upsert(&[doc("d", "Lost", "never committed")]).unwrap();
        }
        let ix = Bm25Index::open(dir.path()).unwrap();
        assert_eq!(DocSink::position(&ix), Some([(0, 5)].into()));
        assert_eq!(ix.len(), 2);
        assert_eq!(ids(&ix.retrieve_batch(&[("vistula", 5)]).unwrap()[0]), vec!["c"]);
        assert!(ix.retrieve_batch(&[("?! xyzzy", 5), ("", 5)]).unwrap().iter().all(|r| r.documents.is_empty()));
    }
}
