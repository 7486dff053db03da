//! `streamrag`: parses the command line and calls the command's module in `cmd/`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use streamrag::cmd;
use streamrag::config::FileConfig;

/// mimalloc, not glibc's malloc: the kg-writer allocates a few dozen small blocks per triple
/// (decoded deltas, change messages, sled's values), and at 10M triples glibc spent 44% of the
/// apply in malloc and free (`perf`), walking bins its fragmentation had filled; with mimalloc
/// `bench graph` applies 127k instead of 77k triples/s at 10M, in less memory.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (v3 `mimalloc.h`; the crate's bindings do not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Model work on CPU keeps freed memory for reuse instead of giving it back to the OS: the
/// encoder's attention tensors are hundreds of MB each, and pages given back are zeroed again
/// by the kernel when the next tensor takes them. With mimalloc's default (give back after
/// a second) the first 25 training steps at 150 triplets took 199 s; kept (this function),
/// 142 s (glibc with `retain_large_allocations`: 140 s). The resident size then stays at its peak.
fn retain_freed_memory() {
    // SAFETY: mi_option_set only changes an allocator parameter; safe at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    // what glibc still allocates (C code) keeps its memory too
    streamrag_glm::retain_large_allocations();
}

#[derive(Parser)]
#[command(name = "streamrag", version, about = "Streaming graph RAG: documents on a topic in, answers on a topic out")]
struct Cli {
    /// Log level or filter (e.g. info, debug, streamrag_operators=debug). Default: info for
    /// commands that run a while, warn for demo, ask, ingest and stats.
    #[arg(long, global = true, env = "STREAMRAG_LOG")]
    log_level: Option<String>,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true, env = "STREAMRAG_LOG_JSON")]
    log_json: bool,
    /// A TOML config file ([topics], [limits], [query], [llm], [resolve], [kafka]); flags and
    /// STREAMRAG_* variables win.
    #[arg(long, global = true, env = "STREAMRAG_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the pipeline's stages in this process (embedded transport unless --brokers).
    Run(Box<cmd::run::RunArgs>),
    /// Publish JSON-lines documents (or a deletion) onto the docs topic.
    Ingest(cmd::ingest::IngestArgs),
    /// Ask a question and print its answer.
    Ask(cmd::ask::AskArgs),
    /// Print the graph's counts and digest from a data directory or a running process.
    Stats(cmd::stats::StatsArgs),
    /// Write a Parquet snapshot of a stopped node's graph.
    Snapshot(cmd::snapshot::SnapshotArgs),
    /// Rebuild a graph from a snapshot, then continue from its offsets through the log.
    Replay(cmd::replay::ReplayArgs),
    /// Index the sample corpus shipped in samples/ on the embedded transport and answer the
    /// sample questions.
    Demo(cmd::demo::DemoArgs),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCmd),
    /// The Graph Language Model encoder.
    #[command(subcommand)]
    Glm(cmd::glm::GlmCmd),
    /// Document recall of a retriever on a dataset: its corpus through the pipeline, its
    /// questions through the query stage.
    Eval(cmd::eval::EvalArgs),
    /// Train the GLM retriever on a dataset's questions; writes (and resumes) a checkpoint.
    Train(cmd::train::TrainArgs),
    /// Fine-tune the sentence encoder on a corpus's own graph (questions it poses itself, no
    /// labels); writes a model directory for --sentence-model.
    Adapt(cmd::adapt::AdaptArgs),
    /// A Model Context Protocol server on stdin/stdout whose tools (ask, ingest, delete,
    /// stats) act on a running node through its HTTP API.
    Mcp(cmd::mcp::McpArgs),
    /// A new bearer token for the HTTP API: the token on stderr (once), its [[token]] entry
    /// for the tokens file (hashed) on stdout.
    Token(cmd::token::TokenArgs),
}

impl Cmd {
    /// Commands a person runs for a quick answer log only warnings by default.
    fn quiet(&self) -> bool {
        matches!(self, Cmd::Demo(_) | Cmd::Ask(_) | Cmd::Ingest(_) | Cmd::Stats(_) | Cmd::Mcp(_) | Cmd::Token(_))
    }

    /// Commands that run models on the CPU.
    fn runs_models(&self, file: &FileConfig) -> bool {
        match self {
            Cmd::Train(_) | Cmd::Eval(_) | Cmd::Adapt(_) => true,
            Cmd::Run(a) => file.query.retriever.is_some() || file.query.checkpoint.is_some() || a.checkpoint.is_some() || a.retriever.is_some(),
            _ => false,
        }
    }
}

fn init_logs(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_new(level).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal());
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = if cli.cmd.quiet() { "warn" } else { "info" };
    init_logs(cli.log_level.as_deref().unwrap_or(default_level), cli.log_json);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line (and a hint line where there is one); no backtrace: a user error says
            // what happened and names the fix.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_named() {
        // its default is 1,000 ms (v3 `options.c`); a renumbered enum would read another option
        // SAFETY: reading an allocator option.
        let v = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(v, 1000, "option {} is not mi_option_purge_delay", super::MI_OPTION_PURGE_DELAY);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let file = FileConfig::load(cli.config.as_deref(), std::env::vars())?;
    // model work on CPU: before any thread has its own allocator arena
    if cli.cmd.runs_models(&file) {
        retain_freed_memory();
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Run(a) => cmd::run::run(*a, file).await,
            Cmd::Ingest(a) => cmd::ingest::run(a, file).await,
            Cmd::Ask(a) => cmd::ask::run(a, file).await,
            Cmd::Stats(a) => cmd::stats::run(a).await,
            Cmd::Demo(a) => cmd::demo::run(a).await,
            Cmd::Snapshot(a) => cmd::snapshot::run(a).await,
            Cmd::Replay(a) => cmd::replay::run(a, file).await,
            Cmd::Glm(c) => cmd::glm::run(c),
            Cmd::Bench(c) => cmd::bench::run(c, file).await,
            Cmd::Eval(a) => cmd::eval::run(a).await,
            Cmd::Train(a) => cmd::train::run(a).await,
            Cmd::Adapt(a) => cmd::adapt::run(a).await,
            Cmd::Mcp(a) => cmd::mcp::run(a, file).await,
            Cmd::Token(a) => cmd::token::run(a),
        }
    })
}
