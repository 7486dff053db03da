//! `streamrag ask`: a question to a running node (HTTP or Kafka), or answered from a stopped
//! node's data directory with the retriever its config names.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use streamrag_operators::retrieve::RetrieverChoice;

use super::{minilm_dir, TargetArgs};
use crate::client;
use crate::config::FileConfig;

#[derive(Args)]
pub struct AskArgs {
    #[command(flatten)]
    pub to: TargetArgs,
    /// Print the answer message as JSON.
    #[arg(long)]
    pub json: bool,
    /// Documents to return.
    #[arg(long)]
    pub top_k: Option<u32>,
    /// With --data: the retriever to answer with (default: the config file's [query], else hybrid).
    #[arg(long, env = "STREAMRAG_RETRIEVER")]
    pub retriever: Option<String>,
    /// With --data and --retriever glm (or hybrid, whose fusion it joins): the checkpoint.
    #[arg(long, env = "STREAMRAG_GLM_CHECKPOINT")]
    pub checkpoint: Option<std::path::PathBuf>,
    /// Seconds to wait for the answer.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), default_value_t = 30)]
    pub timeout_s: u64,
    pub question: String,
}

pub async fn run(a: AskArgs, file: FileConfig) -> Result<()> {
    let t = a.to.target(&file);
    if matches!(t, crate::client::Target::Embedded(_)) {
        super::existing_data(&a.to.data)?;
    }
    let q = &file.query;
    let mut retriever = RetrieverChoice::from_flags(
        a.retriever.as_deref().or(q.retriever.as_deref()),
        a.checkpoint.clone().or_else(|| q.checkpoint.clone()),
        q.glm_batch.unwrap_or(4),
        minilm_dir(q.sentence_model.clone()),
    )?;
    q.apply_hybrid(&mut retriever)?;
    let answer = client::ask(&t, &file.topics, &file.limits, &a.question, a.top_k, Duration::from_secs(a.timeout_s), &retriever).await?;
    print_answer(&answer, a.json);
    Ok(())
}

pub fn print_answer(a: &streamrag_schemas::Answer, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(a).expect("serializable"));
    } else {
        print!("{}", client::render(a));
    }
}
