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
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The corpus to index.
    #[arg(long, default_value = "samples/corpus.jsonl")]
    pub corpus: PathBuf,
    /// One question per line.
    #[arg(long, default_value = "samples/questions.txt")]
    pub questions: PathBuf,
}

pub async fn run(a: DemoArgs) -> Result<()> {
    let data = match &a.data {
        Some(d) => d.clone(),
        None => crate::scratch_dir("streamrag-demo")?,
    };
    let docs = client::read_lines(a.corpus.to_str().unwrap_or("-"), false, &Limits::default())?;
    for d in &docs {
        if let Line::Rejected { line, reason } = d {
            bail!("{}:{line}: {reason}", a.corpus.display());
        }
    }
    let questions: Vec<String> = std::fs::read_to_string(&a.questions)
        .with_context(|| format!("reading {}", a.questions.display()))?
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
        let query = streamrag_schemas::Query { schema_version: SCHEMA_VERSION, query_id: http::new_query_id(), question: q.clone(), top_k: Some(3) };
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
