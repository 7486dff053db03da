//! `streamrag bench glm`: GLM encoder latency and throughput on a synthetic subgraph with T5
//! dimensions (random weights), on the CPU or the GPU; `--dump-inputs` writes the inputs the
//! PyTorch comparison (scripts/device) reads.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use candle_core::{DType, Tensor};
use candle_nn::VarBuilder;
use clap::Args;
use streamrag_glm::graph::{self, LabelTokenizer, Mode, TokenizedGraph, Triplet};
use streamrag_glm::{Batch, T5Config, T5GraphEncoder};
use streamrag_operators::metrics::quantile;

use super::peak_rss_mib;
use crate::cmd::glm::EXTRA_BUCKETS;
use crate::cmd::parse_device;

#[derive(Args)]
pub struct BenchGlmArgs {
    /// T5 sizes: small, base, large.
    #[arg(long, value_delimiter = ',', default_value = "small,base")]
    pub models: Vec<String>,
    /// Triplets in the subgraph.
    #[arg(long, value_parser = super::super::at_least_one, default_value_t = 600)]
    pub triplets: usize,
    /// Batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub batch: Vec<usize>,
    /// cpu, or cuda (needs a build with --features cuda).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Timed runs per configuration.
    #[arg(long, value_parser = super::super::at_least_one, default_value_t = 5)]
    pub iters: usize,
    /// Untimed runs first (the first CUDA call compiles kernels).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Write each model's batch-1 inputs here (for the PyTorch comparison).
    #[arg(long)]
    pub dump_inputs: Option<PathBuf>,
    /// Before timing, encode the same batch-1 subgraph with the same weights (f32) on the CPU
    /// and on --device, and print the largest difference of the entity vectors: a GPU's
    /// correctness check.
    #[arg(long)]
    pub compare_cpu: bool,
}

/// Word-level stand-in tokenizer for benchmarks: each word a fixed id in the vocabulary.
struct HashWords(u32);
impl LabelTokenizer for HashWords {
    fn label_ids(&self, label: &str) -> streamrag_glm::Result<Vec<u32>> {
        Ok(label
            .split_whitespace()
            .map(|w| 2 + (w.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3)) % (self.0 as u64 - 2)) as u32)
            .collect())
    }
    fn sentence_ids(&self, text: &str) -> streamrag_glm::Result<Vec<u32>> {
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

pub fn run(a: BenchGlmArgs) -> Result<()> {
    let device = parse_device(&a.device)?;
    let dtype = match a.dtype.as_str() {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        d => bail!("--dtype {d}: f32, bf16 or f16"),
    };
    let iters = a.iters.max(1);
    println!(
        "bench glm: {} triplets + question (global mode), random weights, {dtype:?} on {device:?}, {} warm-up + {iters} timed runs",
        a.triplets, a.warmup
    );
    println!("{:>6} {:>6} {:>7} {:>10} {:>10} {:>10} {:>12}", "model", "batch", "tokens", "p50 ms", "p95 ms", "queries/s", "peak RSS MiB");
    for m in &a.models {
        let cfg = T5Config::preset(m).ok_or_else(|| anyhow!("unknown model {m:?} (small, base, large)"))?;
        if a.compare_cpu {
            let (diff, scale) = compare_with_cpu(&cfg, a.triplets, &device)?;
            println!("{m}: max |cpu - {device:?}| = {diff:.3e} over entity vectors of max |x| = {scale:.3e} (relative {:.3e})", diff / scale.max(f32::MIN_POSITIVE));
        }
        let vm = candle_nn::VarMap::new();
        let vb = VarBuilder::from_varmap(&vm, dtype, &device);
        let enc = T5GraphEncoder::new(vb, cfg.clone(), EXTRA_BUCKETS)?;
        // small random weights so activations stay finite
        for var in vm.all_vars() {
            let t = var.as_tensor();
            let r = Tensor::randn(0f32, 0.02, t.shape(), &device)?.to_dtype(dtype)?;
            var.set(&r)?;
        }
        for &b in &a.batch {
            // the same graph b times: the PyTorch comparison repeats the dumped batch-1 input
            let graphs: Vec<TokenizedGraph> = (0..b).map(|_| synthetic_graph(a.triplets, cfg.vocab_size as u32, 0)).collect();
            let refs: Vec<&TokenizedGraph> = graphs.iter().collect();
            let batch = Batch::new(&refs, enc.mask_bucket(), dtype, &device)?;
            if let (Some(path), 1) = (a.dump_inputs.as_deref(), b) {
                let tensors = [("input_ids", batch.input_ids.clone()), ("buckets", batch.buckets.clone()), ("token_mask", batch.token_mask.to_dtype(DType::F32)?)];
                candle_core::safetensors::save(&tensors.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), path.join(format!("inputs-{m}.safetensors")))?;
            }
            let mut times = Vec::new();
            for i in 0..a.warmup + iters {
                let t = Instant::now();
                let out = enc.encode(&batch)?;
                // wait for the device: read one number back
                let _ = out[0].flatten_all()?.get(0)?.to_dtype(DType::F32)?.to_scalar::<f32>()?;
                if i >= a.warmup {
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            let p50 = quantile(&mut times, 0.5);
            let p95 = quantile(&mut times, 0.95);
            println!("{:>6} {:>6} {:>7} {:>10.2} {:>10.2} {:>10.2} {:>12.0}", m, b, graphs[0].len(), p50, p95, b as f64 * 1e3 / p50, peak_rss_mib());
        }
    }
    Ok(())
}

/// The largest absolute difference between the entity vectors the encoder gives on the CPU and
/// on `device` for one synthetic subgraph, with the same random weights (made on the CPU and
/// copied) in f32, and the largest absolute value of the CPU's.
fn compare_with_cpu(cfg: &T5Config, triplets: usize, device: &candle_core::Device) -> Result<(f32, f32)> {
    let cpu = candle_core::Device::Cpu;
    // the weights' names and shapes from a first build, then both encoders from the same
    // random values (built after them: the bias table's extra rows are copied at build time)
    let vm = candle_nn::VarMap::new();
    T5GraphEncoder::new(VarBuilder::from_varmap(&vm, DType::F32, &cpu), cfg.clone(), EXTRA_BUCKETS)?;
    let mut weights = std::collections::HashMap::new();
    for (name, var) in vm.data().lock().map_err(|_| anyhow!("weights lock poisoned"))?.iter() {
        weights.insert(name.clone(), Tensor::randn(0f32, 0.02, var.as_tensor().shape(), &cpu)?);
    }
    let on_device = weights.iter().map(|(k, v)| Ok((k.clone(), v.to_device(device)?))).collect::<Result<std::collections::HashMap<_, _>>>()?;
    let enc_cpu = T5GraphEncoder::new(VarBuilder::from_tensors(weights, DType::F32, &cpu), cfg.clone(), EXTRA_BUCKETS)?;
    let enc_dev = T5GraphEncoder::new(VarBuilder::from_tensors(on_device, DType::F32, device), cfg.clone(), EXTRA_BUCKETS)?;
    let g = synthetic_graph(triplets, cfg.vocab_size as u32, 0);
    let on = |enc: &T5GraphEncoder, dev: &candle_core::Device| -> Result<Tensor> {
        let batch = Batch::new(&[&g], enc.mask_bucket(), DType::F32, dev)?;
        Ok(enc.encode(&batch)?[0].to_device(&cpu)?)
    };
    let (x, y) = (on(&enc_cpu, &cpu)?, on(&enc_dev, device)?);
    let diff = (&x - &y)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    let scale = x.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    Ok((diff, scale))
}
