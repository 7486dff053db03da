//! `streamrag adapt`: the sentence encoder (all-MiniLM-L6-v2) fine-tuned on a corpus's own
//! graph, with no labels: the questions the graph poses itself
//! ([`streamrag_operators::retrieve::selfmade`]) paired with the passages that state their facts
//! ([`streamrag_glm::adapt`]). The result is a model directory for `--sentence-model`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use streamrag_glm::adapt::{adapt, AdaptOptions};
use streamrag_operators::retrieve::dense::passage_text;
use streamrag_operators::retrieve::selfmade::{self_made, SelfMadeOptions};
use streamrag_operators::retrieve::RetrieverChoice;

use super::eval::index_corpus;
use super::{check_model_dir, minilm_dir};
use crate::dataset::Dataset;

#[derive(Args)]
pub struct AdaptArgs {
    /// A node's data directory holding the corpus (with --indexed), or where --dataset's corpus
    /// is ingested first.
    #[arg(long, value_parser = super::data_dir_arg)]
    pub data: PathBuf,
    /// The directory already holds the corpus: send nothing.
    #[arg(long)]
    pub indexed: bool,
    /// A dataset whose corpus is ingested into --data first (its questions are not used).
    #[arg(long, required_unless_present = "indexed")]
    pub dataset: Option<PathBuf>,
    /// Questions the graph poses itself, each paired with the passages that state its facts.
    #[arg(long, default_value_t = 2000)]
    pub self_made: usize,
    #[arg(long, default_value_t = 0)]
    pub self_seed: u64,
    /// The encoder to start from (default the all-MiniLM-L6-v2 of scripts/fetch-models.sh).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Where the adapted encoder is written (config.json, model.safetensors, tokenizer.json).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, value_parser = super::at_least_one, default_value_t = 1)]
    pub epochs: usize,
    #[arg(long, default_value_t = 16)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 2e-5)]
    pub lr: f64,
}

pub async fn run(a: AdaptArgs) -> Result<()> {
    let model = minilm_dir(a.model.clone());
    check_model_dir(&model, "--model")?;
    if a.batch_size < 2 {
        bail!("--batch-size must be 2 or more: a question's negatives are the other passages of its batch");
    }
    let ds = match &a.dataset {
        Some(d) => Dataset::load(d)?,
        None => Dataset::default(),
    };
    let (node, tasks, _, _, index_s) = index_corpus(&ds, Some(&a.data), RetrieverChoice::Ppr, Default::default(), None, !a.indexed).await?;
    let g = node.graph.as_ref().expect("kg-writer runs").current();
    let passages = node.passages.clone();
    tasks.join(&node).await?;
    let Some(passages) = passages else { bail!("the node keeps no passage texts (no query stage)") };
    eprintln!("graph: {} documents, {} entities, {} triples ({index_s:.1} s)", g.document_count(), g.entity_count(), g.triple_count());
    let made = self_made(&g, &SelfMadeOptions { count: a.self_made, seed: a.self_seed, ..SelfMadeOptions::default() }, &[]);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for q in &made {
        for d in &q.gold {
            if let Some((title, text)) = passages.get(d) {
                pairs.push((q.question.clone(), passage_text(&title, &text)));
            }
        }
    }
    if pairs.len() < 2 {
        bail!("the graph poses too few questions to adapt on ({} pairs): it needs facts between entities that are not hubs", pairs.len());
    }
    eprintln!("{} self-made questions, {} (question, passage) pairs", made.len(), pairs.len());
    let o = AdaptOptions { epochs: a.epochs, batch_size: a.batch_size, lr: a.lr, ..AdaptOptions::default() };
    let (out, shown) = (a.out.clone(), model.display().to_string());
    let t0 = std::time::Instant::now();
    let done = tokio::task::spawn_blocking(move || {
        let (mut sum, mut n) = (0.0, 0);
        adapt(&model, &pairs, &o, &out, &candle_core::Device::Cpu, &mut |step, total, loss| {
            (sum, n) = (sum + loss, n + 1);
            if step % 20 == 0 || step == total {
                eprintln!("step {step} of {total}: loss {:.3} over the last {n}", sum / n as f64);
                (sum, n) = (0.0, 0);
            }
        })
    })
    .await??;
    println!(
        "adapted {} on {} pairs: {} steps in {:.0} s, loss {:.3} -> {:.3} (first and last tenth); --sentence-model {}",
        shown,
        done.pairs,
        done.steps,
        t0.elapsed().as_secs_f64(),
        done.first_loss,
        done.last_loss,
        a.out.display()
    );
    Ok(())
}
