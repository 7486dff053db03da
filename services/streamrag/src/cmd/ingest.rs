//! `streamrag ingest`: JSON-lines documents, or a deletion, onto the docs topic.

use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use streamrag_schemas::Document;

use super::TargetArgs;
use crate::client::{self, Line};
use crate::config::FileConfig;

#[derive(Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub to: TargetArgs,
    /// Publish a deletion of this document id instead of reading a file.
    #[arg(long)]
    pub delete: Option<String>,
    /// Publish each line as-is, unchecked (to replay captured records or test dead-lettering).
    #[arg(long)]
    pub raw: bool,
    /// JSON lines {"id","title","text"[,"triples"]}, or - for stdin.
    pub file: Option<String>,
}

pub async fn run(a: IngestArgs, file: FileConfig) -> Result<()> {
    let t = a.to.target(&file);
    let items = match (&a.delete, &a.file) {
        (Some(id), None) => {
            file.limits.check_id("--delete", id).map_err(anyhow::Error::msg)?;
            vec![Line::Doc(Document::delete(id.clone()))]
        }
        (None, Some(path)) => client::read_lines(path, a.raw, &file.limits)?,
        (Some(_), Some(_)) => bail!("give either --delete ID or a FILE, not both"),
        (None, None) => bail!("give a FILE of JSON lines (or - for stdin), or --delete ID"),
    };
    // one bad line and nothing is published: fix the file and send it again whole
    let mut rejected = 0;
    for item in &items {
        if let Line::Rejected { line, reason } = item {
            eprintln!("line {line}: rejected: {reason}");
            rejected += 1;
        }
    }
    if rejected > 0 {
        bail!("{rejected} line(s) rejected; nothing was published");
    }
    let t0 = Instant::now();
    let sent = client::ingest(&t, &file.topics, items).await?;
    eprintln!("ingested {sent} record(s) in {:.2}s", t0.elapsed().as_secs_f64());
    Ok(())
}
