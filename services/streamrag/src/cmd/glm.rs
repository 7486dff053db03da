//! `streamrag glm inspect`: how a graph becomes the GLM encoder's input.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_core::{DType, Device};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use streamrag_glm::graph::{self, HfTokenizer, Mode, TokenizedGraph, Triplet, MASKED};
use streamrag_glm::{Backbone, Batch};

/// Extra bias rows every encoder is built with: enough for global mode with the question.
pub const EXTRA_BUCKETS: usize = 3;

#[derive(Subcommand)]
pub enum GlmCmd {
    /// Print, as JSON, how a graph becomes the encoder's input: tokens (with their node),
    /// relative positions, mask, bucket ids; with --checkpoint, each entity's pooled vector.
    Inspect(GlmInspectArgs),
}

#[derive(Args)]
pub struct GlmInspectArgs {
    /// A Hugging Face tokenizer.json.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// A JSON list of [subject, relation, object] triplets.
    #[arg(long)]
    pub graph: PathBuf,
    /// The question text, attached to the graph.
    #[arg(long)]
    pub question: Option<String>,
    /// local: pairs that share no triplet are masked; global: they attend through the G2G bucket.
    #[arg(long, default_value = "global")]
    pub mode: streamrag_glm::Mode,
    /// A checkpoint directory (config.json + model.safetensors; T5 or BERT).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
}

pub fn run(cmd: GlmCmd) -> Result<()> {
    match cmd {
        GlmCmd::Inspect(a) => {
            let v = inspect(&a.tokenizer, &a.graph, a.question.as_deref(), a.mode, a.checkpoint.as_deref())?;
            println!("{}", serde_json::to_string(&v)?);
            Ok(())
        }
    }
}

/// Reads `[[s, r, o], ...]`.
pub fn read_triplets(path: &Path) -> Result<Vec<Triplet>> {
    let v: Vec<[String; 3]> = serde_json::from_str(&std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?)
        .with_context(|| format!("{}: expected a JSON list of [subject, relation, object]", path.display()))?;
    Ok(v.iter().map(|t| Triplet::named(&t[0], &t[1], &t[2])).collect())
}

fn matrix<T: Copy>(g: &TokenizedGraph, f: impl Fn(usize, usize) -> T) -> Vec<Vec<T>> {
    (0..g.len()).map(|q| (0..g.len()).map(|k| f(q, k)).collect()).collect()
}

pub fn inspect(tokenizer: &Path, graph_file: &Path, question: Option<&str>, mode: Mode, checkpoint: Option<&Path>) -> Result<Value> {
    let tok = HfTokenizer::from_file(tokenizer)?;
    let triplets = read_triplets(graph_file)?;
    let g = graph::build(&triplets, question, mode, &tok)?;
    let tokens: Vec<Value> = g
        .tokens
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let n = &g.nodes[g.token_node[i]];
            json!({"index": i, "id": id, "token": tok.0.id_to_token(*id), "node": {"kind": n.kind, "id": n.id, "label": n.label}})
        })
        .collect();
    let mut out = json!({
        "mode": g.mode,
        "tokens": tokens,
        "nodes": g.nodes,
        "relative_position": matrix(&g, |q, k| g.position[q * g.len() + k]),
        "mask": matrix(&g, |q, k| u8::from(g.mask[q * g.len() + k])),
        "buckets": matrix(&g, |q, k| { let b = g.bucket(q, k); (b != MASKED).then_some(b) }),
        "num_extra_buckets": g.num_extra_buckets,
    });
    if let Some(dir) = checkpoint {
        let enc = Backbone::load(dir, DType::F32, &Device::Cpu, EXTRA_BUCKETS)?;
        let vecs = enc.encode(&Batch::new(&[&g], enc.mask_bucket(), enc.dtype(), &Device::Cpu)?)?;
        let rows = vecs[0].to_vec2::<f32>()?;
        let ents: serde_json::Map<String, Value> = g.entities().zip(rows).map(|(n, v)| (n.id.clone(), json!(v))).collect();
        out["entities"] = Value::Object(ents);
    }
    Ok(out)
}
