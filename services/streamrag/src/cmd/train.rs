//! `streamrag train`: a dataset's corpus through the pipeline, then the GLM fitted on its
//! labelled questions over the graph it built ([`streamrag_operators::retrieve::train`]).

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use streamrag_operators::retrieve::train::{train, TrainOptions};
use streamrag_operators::retrieve::RetrieverChoice;

use super::eval::index_corpus;
use super::{check_model_dir, minilm_dir, parse_device};
use crate::dataset::{parse_range, Dataset, Question};
use crate::progress::Bar;

#[derive(Args)]
pub struct TrainArgs {
    #[arg(long)]
    pub dataset: PathBuf,
    /// Training question indices A..B (B exclusive).
    #[arg(long)]
    pub questions: String,
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
    let range = parse_range(&a.questions)?;
    let ds = Dataset::load(&a.dataset)?;
    let questions: Vec<&Question> = ds.select(&range);
    if questions.is_empty() {
        bail!("no training questions with gold passages in {range:?}");
    }
    let (node, tasks, dir, temp, index_s) = index_corpus(&ds, a.data.as_deref(), RetrieverChoice::Ppr, Default::default(), None, !a.indexed).await?;
    let g = node.graph.as_ref().expect("kg-writer runs").current();
    tasks.join(&node).await?;
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!("indexed {} passages in {index_s:.1}s: {} entities, {} triples", ds.corpus.len(), g.entity_count(), g.triple_count());
    let o = TrainOptions {
        dataset: a.dataset.display().to_string(),
        questions: format!("{}..{}", range.start, range.end.min(ds.questions.len())),
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
    let labelled: Vec<(String, HashSet<String>)> = questions.iter().map(|q| (q.text.clone(), q.gold.iter().cloned().collect())).collect();
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
