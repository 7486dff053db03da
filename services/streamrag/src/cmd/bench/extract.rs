//! `streamrag bench extract`: the built-in extractor alone, documents/s over a dataset's
//! passages, with the concept layer against the name layer alone (the extractor before
//! concepts) in the same command: what concepts cost, and how many more entities and triples
//! they give.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use streamrag_operators::extract::extract_layers;
use streamrag_operators::hash::fnv1a;

use crate::dataset::Dataset;

#[derive(Args)]
pub struct BenchExtractArgs {
    /// A dataset in the 2Wiki layout (its passages are extracted).
    #[arg(long, default_value = "../shared/datasets/2wikimultihopqa")]
    pub dataset: PathBuf,
    /// Timed passes over the corpus per layer set; the best pass is reported.
    #[arg(long, value_parser = super::super::at_least_one, default_value_t = 5)]
    pub passes: usize,
}

/// One pass over the corpus: seconds, entities and triples found, and a hash of everything found
/// in order (a change meant to leave the output alone shows the same hash).
fn pass(docs: &[(&str, &str)], concepts: bool) -> (f64, usize, usize, u64) {
    let t = Instant::now();
    let mut found = Vec::with_capacity(docs.len());
    for (title, text) in docs {
        found.push(extract_layers(title, text, concepts));
    }
    let s = t.elapsed().as_secs_f64();
    let (mut entities, mut triples, mut h) = (0, 0, 0u64);
    for e in &found {
        entities += e.entities.len();
        triples += e.triples.len();
        for m in &e.entities {
            h = h.rotate_left(5) ^ fnv1a(&[&m.name, m.kind.as_deref().unwrap_or_default()]);
        }
        for x in &e.triples {
            h = h.rotate_left(5) ^ fnv1a(&[&x.subject, &x.relation, &x.object]);
        }
    }
    (s, entities, triples, h)
}

pub fn run(b: BenchExtractArgs) -> Result<()> {
    let ds = Dataset::load(&b.dataset)?;
    let docs: Vec<(&str, &str)> = ds.corpus.iter().map(|d| (d.title.as_str(), d.text.as_deref().unwrap_or_default())).collect();
    if docs.is_empty() {
        bail!("no passages in {}", b.dataset.display());
    }
    let bytes: usize = docs.iter().map(|d| d.1.len()).sum();
    println!("bench extract: {} passages ({:.1} MB of text) from {}, best of {} passes, one thread", docs.len(), bytes as f64 / 1e6, b.dataset.display(), b.passes);
    println!("| layers | documents/s | MB/s | entities | triples | output hash | time against names only |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    // alternated, so a machine that slows down mid-run slows both
    let mut best = [f64::INFINITY; 2];
    let mut found = [(0, 0, 0); 2];
    for _ in 0..b.passes {
        for (i, concepts) in [false, true].into_iter().enumerate() {
            let (s, e, t, h) = pass(&docs, concepts);
            best[i] = best[i].min(s);
            found[i] = (e, t, h);
        }
    }
    for (i, what) in ["names only", "names and concepts"].into_iter().enumerate() {
        let s = best[i];
        println!(
            "| {what} | {:.0} | {:.1} | {} | {} | {:016x} | {:.2}x |",
            docs.len() as f64 / s,
            bytes as f64 / 1e6 / s,
            found[i].0,
            found[i].1,
            found[i].2,
            s / best[0]
        );
    }
    Ok(())
}
