//! `streamrag replay`: a graph store rebuilt from a snapshot and the log after it
//! ([`streamrag_operators::replay`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use streamrag_operators::replay::{parse_until, replay, ReplayOptions};
use streamrag_operators::transport::{connect, Transport};
use streamrag_operators::DataDir;

use super::Conn;
use crate::config::FileConfig;
use crate::progress::Bar;

#[derive(Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// A snapshot directory, or a root of periodic snapshots (the newest is used).
    #[arg(long)]
    pub snapshot: PathBuf,
    /// Data directory whose graph store to (re)build; its embedded log (if any) is the log to
    /// continue from when there is no --brokers.
    #[arg(long, value_parser = super::data_dir_arg, env = "STREAMRAG_DATA", default_value = "streamrag-data")]
    pub data: PathBuf,
    /// Stop at these graph-deltas positions (PARTITION=LAST_OFFSET,...): the graph as of a past
    /// point in the log. Default: the end of the log when the replay starts.
    #[arg(long)]
    pub until: Option<String>,
    /// Only rebuild from the snapshot; do not read the log.
    #[arg(long)]
    pub no_log: bool,
    /// Replace a graph store that is not empty.
    #[arg(long)]
    pub force: bool,
}

pub async fn run(a: ReplayArgs, file: FileConfig) -> Result<()> {
    let data = DataDir::new(&a.data);
    // The log to continue from: Kafka, or the embedded log of the data directory.
    let log = if a.no_log {
        None
    } else if a.conn.brokers.is_some() {
        Some(connect(&a.conn.transport(&file), &file.topics, &data).await?)
    } else if data.has_log() {
        Some(Transport::Embedded(data.open_log()?))
    } else {
        None
    };
    let has_log = log.is_some();
    let until = a.until.as_deref().map(parse_until).transpose().map_err(|e| anyhow::anyhow!("--until: {e}"))?;
    let opts = ReplayOptions { snapshot: a.snapshot, data: data.clone(), log, topic: file.topics.graph_deltas.clone(), until, force: a.force };
    let mut bar = Bar::new();
    let r = replay(opts, &mut bar).await?;
    println!(
        "read snapshot: {} rows in {:.2}s ({:.0} rows/s), {} triples; offsets {:?}",
        r.snapshot_rows,
        r.read_s,
        r.snapshot_rows as f64 / r.read_s.max(1e-9),
        r.snapshot_triples,
        r.manifest.offsets
    );
    match &r.log {
        Some((c, secs)) => println!(
            "continued through the log: {} records ({} applied, {} not deltas) in {secs:.2}s; now at {:?}",
            c.records, c.applied, c.skipped_bad, r.offsets
        ),
        None if has_log => {}
        None => println!("no log to continue from (--no-log, or no --brokers and no embedded log under {})", data.root().display()),
    }
    let st = &r.stats;
    println!(
        "persisted to {} in {:.2}s: {} documents, {} entities, {} triples, digest {}",
        data.root().display(),
        r.persist_s,
        st.documents,
        st.entities,
        st.triples,
        st.digest
    );
    println!("replay total {:.2}s", r.total_s);
    Ok(())
}
