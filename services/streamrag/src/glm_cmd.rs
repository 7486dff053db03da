//! `streamrag glm inspect` and `streamrag bench glm`.

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde_json::{json, Value};
use streamrag_glm::graph::{self, HfTokenizer, LabelTokenizer, Mode, TokenizedGraph, Triplet, MASKED};
use streamrag_glm::{Batch, BertGraphEncoder, T5Config, T5GraphEncoder};

use crate::bench::{peak_rss_mib, percentile};

/// Extra bias rows every encoder is built with: enough for global mode with the question.
pub const EXTRA_BUCKETS: usize = 3;

/// An encoder of either backbone.
pub enum Encoder {
    T5(T5GraphEncoder),
    Bert(BertGraphEncoder),
}

impl Encoder {
    /// Loads a checkpoint directory (config.json + model.safetensors), T5 or BERT by its
    /// `model_type`.
    pub fn load(dir: &Path, dtype: DType, device: &Device) -> Result<Encoder> {
        let cfg: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).with_context(|| format!("{}/config.json", dir.display()))?)?;
        match cfg["model_type"].as_str() {
            Some("t5") => Ok(Encoder::T5(T5GraphEncoder::load(dir, dtype, device, EXTRA_BUCKETS).map_err(|e| anyhow!(e))?)),
            Some("bert") => Ok(Encoder::Bert(BertGraphEncoder::load(dir, dtype, device, EXTRA_BUCKETS).map_err(|e| anyhow!(e))?)),
            other => bail!("{}: model_type {other:?} is not supported (t5 or bert)", dir.display()),
        }
    }
    pub fn mask_bucket(&self) -> u32 {
        match self {
            Encoder::T5(e) => e.mask_bucket(),
            Encoder::Bert(e) => e.mask_bucket(),
        }
    }
    pub fn dtype(&self) -> DType {
        match self {
            Encoder::T5(e) => e.dtype(),
            Encoder::Bert(e) => e.dtype(),
        }
    }
    pub fn encode(&self, graphs: &[&TokenizedGraph], device: &Device) -> Result<Vec<Tensor>> {
        let b = Batch::new(graphs, self.mask_bucket(), self.dtype(), device)?;
        Ok(match self {
            Encoder::T5(e) => e.encode(&b)?,
            Encoder::Bert(e) => e.encode(&b)?,
        })
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
    let tok = HfTokenizer::from_file(tokenizer).map_err(|e| anyhow!(e))?;
    let triplets = read_triplets(graph_file)?;
    let g = graph::build(&triplets, question, mode, &tok).map_err(|e| anyhow!(e))?;
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
        let enc = Encoder::load(dir, DType::F32, &Device::Cpu)?;
        let vecs = enc.encode(&[&g], &Device::Cpu)?;
        let rows = vecs[0].to_vec2::<f32>()?;
        let ents: serde_json::Map<String, Value> = g.entities().zip(rows).map(|(n, v)| (n.id.clone(), json!(v))).collect();
        out["entities"] = Value::Object(ents);
    }
    Ok(out)
}

/// Word-level stand-in tokenizer for benchmarks: each word a fixed id in the vocabulary.
struct HashWords(u32);
impl LabelTokenizer for HashWords {
    fn label_ids(&self, label: &str) -> std::result::Result<Vec<u32>, String> {
        Ok(label
            .split_whitespace()
            .map(|w| 2 + (w.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3)) % (self.0 as u64 - 2)) as u32)
            .collect())
    }
    fn sentence_ids(&self, text: &str) -> std::result::Result<Vec<u32>, String> {
        let mut v = self.label_ids(text)?;
        v.push(1);
        Ok(v)
    }
}

/// A 2-hop-like subgraph of `n` triplets over ~n/1.5 entities with 3-token names and 2-token
/// relations, and a 16-word question (global mode, text attached: the paper's setting).
pub fn synthetic_graph(n: usize, vocab: u32, seed: usize) -> TokenizedGraph {
    let ents = (n * 2 / 3).max(2);
    let ts: Vec<Triplet> = (0..n)
        .map(|i| {
            let h = (i * 7 + seed) % ents;
            let t = (i * 13 + 5 + seed) % ents;
            Triplet::named(&format!("ent{h} name{h} x{h}"), &format!("rel{} of", i % 50), &format!("ent{t} name{t} x{t}"))
        })
        .collect();
    let q = "which entity is the relation of the other entity and where was it born in the year";
    graph::build(&ts, Some(q), Mode::Global, &HashWords(vocab)).expect("synthetic graph")
}

pub struct BenchGlm<'a> {
    pub models: &'a [String],
    pub triplets: usize,
    pub batches: &'a [usize],
    pub device: Device,
    pub dtype: DType,
    pub iters: usize,
    pub warmup: usize,
    pub dump: Option<&'a Path>,
}

pub fn bench(a: BenchGlm<'_>) -> Result<()> {
    println!(
        "bench glm: {} triplets + question (global mode), random weights, {:?} on {:?}, {} warm-up + {} timed runs",
        a.triplets, a.dtype, a.device, a.warmup, a.iters
    );
    println!("{:>6} {:>6} {:>7} {:>10} {:>10} {:>10} {:>12}", "model", "batch", "tokens", "p50 ms", "p95 ms", "queries/s", "peak RSS MiB");
    for m in a.models {
        let cfg = T5Config::preset(m).ok_or_else(|| anyhow!("unknown model {m:?} (small, base, large)"))?;
        let vm = candle_nn::VarMap::new();
        let vb = VarBuilder::from_varmap(&vm, a.dtype, &a.device);
        let enc = T5GraphEncoder::new(vb, cfg.clone(), EXTRA_BUCKETS)?;
        // small random weights so activations stay finite
        for var in vm.all_vars() {
            let t = var.as_tensor();
            let r = Tensor::randn(0f32, 0.02, t.shape(), &a.device)?.to_dtype(a.dtype)?;
            var.set(&r)?;
        }
        for &b in a.batches {
            // the same graph b times: the PyTorch comparison repeats the dumped batch-1 input
            let graphs: Vec<TokenizedGraph> = (0..b).map(|_| synthetic_graph(a.triplets, cfg.vocab_size as u32, 0)).collect();
            let refs: Vec<&TokenizedGraph> = graphs.iter().collect();
            let batch = Batch::new(&refs, enc.mask_bucket(), a.dtype, &a.device)?;
            if let (Some(path), 1) = (a.dump, b) {
                let tensors = [("input_ids", batch.input_ids.clone()), ("buckets", batch.buckets.clone()), ("token_mask", batch.token_mask.to_dtype(DType::F32)?)];
                candle_core::safetensors::save(&tensors.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), path.join(format!("inputs-{m}.safetensors")))?;
            }
            let mut times = Vec::new();
            for i in 0..a.warmup + a.iters {
                let t = Instant::now();
                let out = enc.encode(&batch)?;
                // wait for the device: read one number back
                let _ = out[0].flatten_all()?.get(0)?.to_dtype(DType::F32)?.to_scalar::<f32>()?;
                if i >= a.warmup {
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            let p50 = percentile(&mut times, 0.5);
            let p95 = percentile(&mut times, 0.95);
            println!("{:>6} {:>6} {:>7} {:>10.2} {:>10.2} {:>10.2} {:>12.0}", m, b, graphs[0].len(), p50, p95, b as f64 * 1e3 / p50, peak_rss_mib());
        }
    }
    Ok(())
}
