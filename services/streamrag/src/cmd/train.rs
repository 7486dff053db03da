//! `streamrag train`: a dataset's corpus through the pipeline, then the GLM fitted on its
//! labelled questions over the graph it built ([`streamrag_operators::retrieve::train`]); or,
//! with `--self-made N`, on questions the graph poses itself
//! ([`streamrag_operators::retrieve::selfmade`]), from a node's own data directory with no
//! dataset at all, labelled questions mixed in when a dataset gives them.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use streamrag_operators::retrieve::selfmade::{self_made, Kind, SelfMadeOptions};
use streamrag_operators::retrieve::train::{train, TrainOptions};
use streamrag_operators::retrieve::RetrieverChoice;

use super::eval::index_corpus;
use super::{check_model_dir, minilm_dir, parse_device};
use crate::dataset::{parse_range, Dataset, Question};
use crate::progress::Bar;

#[derive(Args)]
pub struct TrainArgs {
    /// A dataset in the 2Wiki layout: its corpus is ingested (unless --indexed) and its
    /// questions --questions are the labelled ones. Without it: --self-made on the graph of
    /// --data (with --indexed).
    #[arg(long, required_unless_present = "self_made")]
    pub dataset: Option<PathBuf>,
    /// Labelled training question indices A..B (B exclusive) of --dataset.
    #[arg(long, requires = "dataset", required_unless_present = "self_made")]
    pub questions: Option<String>,
    /// Also train on this many questions the graph poses itself (masked facts, two-hop chains,
    /// comparisons, each with the documents stating its facts): no labels needed. The dataset's
    /// questions outside --questions are held out: a self-made question with one's gold is dropped.
    #[arg(long)]
    pub self_made: Option<usize>,
    /// Which facts the self-made questions ask about (the same seed, the same questions).
    #[arg(long, default_value_t = 0)]
    pub self_seed: u64,
    /// Checkpoint directory; when it holds a checkpoint of the same run, training resumes.
    #[arg(long)]
    pub out: PathBuf,
    /// The graph encoder to start from: a Hugging Face BERT or T5 directory (default the
    /// all-MiniLM-L6-v2 that scripts/fetch-models.sh fetches).
    #[arg(long)]
    pub backbone: Option<PathBuf>,
    /// The question encoder (all-MiniLM-L6-v2 directory).
    #[arg(long)]
    pub question_model: Option<PathBuf>,
    #[arg(long, value_parser = super::data_dir_arg)]
    pub data: Option<PathBuf>,
    /// The --data directory already holds this corpus (an earlier eval's or train's): send
    /// nothing, train on the graph it has.
    #[arg(long, requires = "data")]
    pub indexed: bool,
    #[arg(long, value_parser = super::at_least_one, default_value_t = 2)]
    pub epochs: usize,
    #[arg(long, value_parser = super::at_least_one, default_value_t = 2)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 5e-4)]
    pub lr_head: f64,
    #[arg(long, default_value_t = 1e-4)]
    pub lr_encoder: f64,
    /// Subgraph budget in triplets (the paper: 600).
    #[arg(long, value_parser = super::at_least_one, default_value_t = 600)]
    pub max_triplets: usize,
    #[arg(long, default_value_t = 2)]
    pub max_hops: usize,
    /// Save a checkpoint every N steps (and after each epoch).
    #[arg(long, value_parser = super::at_least_one, default_value_t = 50)]
    pub save_every: usize,
    /// cpu or cuda.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Stop after N steps in this run (the checkpoint resumes).
    #[arg(long)]
    pub max_steps: Option<usize>,
}

pub async fn run(a: TrainArgs) -> Result<()> {
    let minilm = minilm_dir(None);
    let backbone = a.backbone.unwrap_or_else(|| minilm.clone());
    let question_model = a.question_model.unwrap_or(minilm);
    check_model_dir(&question_model, "--question-model")?;
    if !backbone.join("config.json").is_file() {
        bail!("no backbone at {} (config.json, model.safetensors, tokenizer.json): run scripts/fetch-models.sh or pass --backbone DIR", backbone.display());
    }
    let ds = match &a.dataset {
        Some(d) => Dataset::load(d)?,
        None if a.data.is_some() && a.indexed => Dataset::default(),
        None => bail!("--self-made without --dataset trains on a node's own graph: give its directory with --data DIR --indexed"),
    };
    let range = a.questions.as_deref().map(parse_range).transpose()?;
    let questions: Vec<&Question> = range.as_ref().map(|r| ds.select(r)).unwrap_or_default();
    if let (Some(r), true) = (&range, questions.is_empty()) {
        bail!("no training questions with gold passages in {r:?}");
    }
    let (node, tasks, dir, temp, index_s) = index_corpus(&ds, a.data.as_deref(), RetrieverChoice::Ppr, Default::default(), None, !a.indexed).await?;
    let g = node.graph.as_ref().expect("kg-writer runs").current();
    tasks.join(&node).await?;
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!("indexed {} passages in {index_s:.1}s: {} entities, {} triples", g.document_count(), g.entity_count(), g.triple_count());
    let mut labelled: Vec<(String, HashSet<String>)> = questions.iter().map(|q| (q.text.clone(), q.gold.iter().cloned().collect())).collect();
    // what the checkpoint records as its training questions (a resumed run must ask the same)
    let mut asked: Vec<String> = range.iter().map(|r| format!("{}..{}", r.start, r.end.min(ds.questions.len()))).collect();
    if let Some(n) = a.self_made {
        // every dataset question not trained on is an evaluation question: its gold is held out
        let held: Vec<BTreeSet<String>> = ds.questions.iter().enumerate().filter(|(i, _)| !range.as_ref().is_some_and(|r| r.contains(i))).map(|(_, q)| q.gold.iter().cloned().collect()).collect();
        let made = self_made(&g, &SelfMadeOptions { count: n, seed: a.self_seed, ..SelfMadeOptions::default() }, &held);
        let count = |k: Kind| made.iter().filter(|q| q.kind == k).count();
        eprintln!("{} self-made questions: {} facts, {} two-hop, {} comparisons ({} dataset questions held out)", made.len(), count(Kind::Fact), count(Kind::TwoHop), count(Kind::Comparison), held.len());
        for q in made.iter().take(6) {
            eprintln!("  {}: {} -> {}", q.kind.name(), q.question, q.gold.join(", "));
        }
        if made.is_empty() {
            bail!("the graph poses no question: it has no fact that few documents state between two entities that are not hubs");
        }
        labelled.extend(made.into_iter().map(|q| (q.question, q.gold.into_iter().collect())));
        asked.push(format!("self-made {n} (seed {})", a.self_seed));
    }
    let source = a.dataset.as_ref().unwrap_or(&dir).display().to_string();
    let o = TrainOptions {
        dataset: source,
        questions: asked.join(" + "),
        out: a.out,
        backbone,
        question_model,
        epochs: a.epochs,
        batch_size: a.batch_size,
        lr_head: a.lr_head,
        lr_encoder: a.lr_encoder,
        max_triplets: a.max_triplets,
        max_hops: a.max_hops,
        save_every: a.save_every,
        device: parse_device(&a.device)?,
        max_steps: a.max_steps,
    };
    let t = tokio::task::spawn_blocking(move || train(&g, &labelled, &o, &mut Bar::counting("items")).map(|t| (t, o.out))).await??;
    let (t, out) = t;
    if !t.stopped_early {
        let tr = &t.training;
        println!(
            "trained {} on {} examples, {} epochs, {} steps in {:.0}s ({}); checkpoint {}",
            tr.questions,
            tr.examples,
            tr.epochs_done,
            tr.steps,
            tr.seconds,
            tr.hardware,
            out.display()
        );
    }
    Ok(())
}
