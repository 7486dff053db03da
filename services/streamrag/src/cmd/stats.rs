//! `streamrag stats`: the graph's counts and digest, from a running node or a data directory.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

#[derive(Args)]
pub struct StatsArgs {
    /// A running process's HTTP API.
    #[arg(long)]
    pub http: Option<String>,
    /// Data directory of a stopped node.
    #[arg(long, value_parser = super::data_dir_arg, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    pub data: PathBuf,
}

pub async fn run(a: StatsArgs) -> Result<()> {
    let stats = match &a.http {
        Some(h) => crate::client::get_json(h, "/stats").await?,
        None => {
            let store = super::existing_data(&a.data)?.open_graph()?;
            serde_json::to_value(tokio::task::spawn_blocking(move || store.load()).await??.stats())?
        }
    };
    println!("{}", serde_json::to_string_pretty(&stats)?);
    Ok(())
}
