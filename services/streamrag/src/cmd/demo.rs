//! `streamrag demo`: the sample corpus indexed on the embedded transport and the sample
//! questions answered.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use streamrag_operators::Limits;
use streamrag_schemas::{Document, SCHEMA_VERSION};

use crate::client::{self, Line};
use crate::http;
use crate::node::{Node, NodeConfig};

#[derive(Args)]
pub struct DemoArgs {
    /// Data directory (default: a fresh temporary one).
    #[arg(long, value_parser = super::data_dir_arg)]
    pub data: Option<PathBuf>,
    /// The corpus to index (default: the sample corpus built into the binary,
    /// samples/corpus.jsonl).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// One question per line (default: the sample questions built in, samples/questions.txt).
    #[arg(long)]
    pub questions: Option<PathBuf>,
}

/// The samples, shipped inside the binary so the demo runs from any directory, offline.
const SAMPLE_CORPUS: &str = include_str!("../../../../samples/corpus.jsonl");
const SAMPLE_QUESTIONS: &str = include_str!("../../../../samples/questions.txt");

/// The text of `path`, or the built-in sample when none is given; and the name to cite it by.
fn text_of(path: &Option<PathBuf>, sample: &'static str, name: &str) -> Result<(String, String)> {
    match path {
        Some(p) => Ok((std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?, p.display().to_string())),
        None => Ok((sample.to_string(), format!("the built-in {name}"))),
    }
}

pub async fn run(a: DemoArgs) -> Result<()> {
    let data = match &a.data {
        Some(d) => d.clone(),
        None => crate::scratch_dir("streamrag-demo")?,
    };
    let (corpus, corpus_name) = text_of(&a.corpus, SAMPLE_CORPUS, "samples/corpus.jsonl")?;
    let docs = client::parse_lines(corpus.as_bytes(), false, &Limits::default())?;
    for d in &docs {
        if let Line::Rejected { line, reason } = d {
            bail!("{corpus_name}:{line}: {reason}");
        }
    }
    let (questions, _) = text_of(&a.questions, SAMPLE_QUESTIONS, "samples/questions.txt")?;
    let questions: Vec<String> = questions
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let (node, tasks) = Node::start(NodeConfig::embedded(&data)).await?;
    let t0 = Instant::now();
    let n = docs.len();
    let docs: Vec<Document> = docs
        .into_iter()
        .filter_map(|l| match l {
            Line::Doc(d) => Some(d),
            _ => None,
        })
        .collect();
    node.publish_documents(&docs).await?;
    node.wait_drained(Duration::from_secs(120)).await?;
    let stats = node.graph.as_ref().expect("kg-writer runs").current().stats();
    println!(
        "indexed {n} documents in {:.2}s: {} entities, {} triples\n",
        t0.elapsed().as_secs_f64(),
        stats.entities,
        stats.triples
    );
    for q in &questions {
        let query = streamrag_schemas::Query { access: Default::default(), schema_version: SCHEMA_VERSION, query_id: http::new_query_id(), question: q.clone(), top_k: Some(3) };
        let answer = node.ask(&query, Duration::from_secs(30)).await?;
        super::ask::print_answer(&answer, false);
        println!();
    }
    tasks.join(&node).await?;
    if a.data.is_none() {
        drop(node);
        let _ = std::fs::remove_dir_all(&data);
    }
    Ok(())
}
