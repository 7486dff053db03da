//! `streamrag snapshot`: a stopped node's graph as Parquet tables and a manifest.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use streamrag_operators::snapshot;

use crate::progress::Bar;

#[derive(Args)]
pub struct SnapshotArgs {
    /// Data directory of a stopped node.
    #[arg(long, value_parser = super::data_dir_arg, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    pub data: PathBuf,
    /// Snapshot directory to create.
    #[arg(long)]
    pub out: PathBuf,
}

pub async fn run(a: SnapshotArgs) -> Result<()> {
    let store = super::existing_data(&a.data)?.open_graph()?;
    let t0 = Instant::now();
    let g = tokio::task::spawn_blocking(move || store.load()).await??;
    let load_s = t0.elapsed().as_secs_f64();
    let out = a.out.clone();
    let (m, rows, rate) = tokio::task::spawn_blocking(move || -> Result<_> {
        let mut bar = Bar::new();
        let m = snapshot::write(&g, &out, &mut bar)?;
        let (rows, rate) = bar.finish();
        Ok((m, rows, rate))
    })
    .await??;
    println!("snapshot {}: {} (graph version {:?})", a.out.display(), serde_json::to_string(&m.rows)?, m.offsets);
    println!("  loaded the graph store in {load_s:.2}s; wrote {rows} rows at {rate:.0} rows/s");
    Ok(())
}
