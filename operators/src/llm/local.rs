//! An instruct model run in this process: a quantized Qwen2 GGUF (Qwen2.5 / Qwen2.5-Coder
//! Instruct) on candle, with the Hugging Face tokenizer.json beside it. One request at a time
//! (the model holds one KV cache); callers queue on its lock.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling as Sampler};
use candle_transformers::models::quantized_qwen2::ModelWeights;
use tokenizers::Tokenizer;

use super::{Completion, LlmError, LlmStats, Sampling};

/// Longest prompt + completion, in tokens (the 0.5B model handles 32k; this bounds memory and
/// keeps one document's extraction from monopolising the model).
const MAX_CONTEXT: usize = 4096;
/// Prompt tokens fed per forward pass.
const PREFILL_CHUNK: usize = 512;

fn slow_on_cpu(t: GgmlDType) -> bool {
    matches!(t, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// The same GGUF with every tensor of a type in [`slow_on_cpu`] converted to Q8_0, in memory.
fn requantize(
    content: gguf_file::Content,
    file: &mut std::fs::File,
) -> candle_core::Result<(gguf_file::Content, std::io::Cursor<Vec<u8>>)> {
    let mut tensors = Vec::with_capacity(content.tensor_infos.len());
    for (name, info) in &content.tensor_infos {
        let t = content.tensor(file, name, &Device::Cpu)?;
        let t = if slow_on_cpu(info.ggml_dtype) { QTensor::quantize(&t.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)? } else { t };
        tensors.push((name.clone(), t));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut cursor = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut cursor, &metadata, &refs)?;
    cursor.set_position(0);
    let content = gguf_file::Content::read(&mut cursor)?;
    Ok((content, cursor))
}

pub struct LocalLlm {
    name: String,
    model: Mutex<ModelWeights>,
    tokenizer: Tokenizer,
    stop: Vec<u32>,
    device: Device,
}

impl LocalLlm {
    /// Loads `PATH.gguf` and the `tokenizer.json` beside it (or `tokenizer` when given).
    pub fn load(gguf: &Path, tokenizer: Option<&Path>, device: &Device) -> Result<Self, LlmError> {
        let tok_path: PathBuf = match tokenizer {
            Some(p) => p.to_path_buf(),
            None => gguf.parent().unwrap_or(Path::new(".")).join("tokenizer.json"),
        };
        let tokenizer = Tokenizer::from_file(&tok_path)
            .map_err(|e| LlmError::fatal(format!("loading the tokenizer {}: {e}", tok_path.display())))?;
        let mut file =
            std::fs::File::open(gguf).map_err(|e| LlmError::fatal(format!("opening {}: {e}", gguf.display())))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| LlmError::fatal(format!("{} is not a readable GGUF file: {e}", gguf.display())))?;
        let arch = content.metadata.get("general.architecture").and_then(|v| v.to_string().ok()).cloned();
        if arch.as_deref() != Some("qwen2") {
            return Err(LlmError::fatal(format!(
                "{}: architecture {:?}; the local LLM runs Qwen2 GGUF models",
                gguf.display(),
                arch.unwrap_or_default()
            )));
        }
        let model = if content.tensor_infos.values().any(|t| slow_on_cpu(t.ggml_dtype)) && device.is_cpu() {
            // candle has SIMD kernels for Q4_0, Q8_0 and the K-quants but not for Q4_1 / Q5_0 /
            // Q5_1, which llama.cpp uses in "Q4_K_M" files whose dimensions are not multiples
            // of 256 (all of Qwen2.5-0.5B's). Those tensors are re-quantized to Q8_0 in memory:
            // 5x faster generation here for ~60 MB more.
            let (content, mut cursor) = requantize(content, &mut file)
                .map_err(|e| LlmError::fatal(format!("re-quantizing {}: {e}", gguf.display())))?;
            ModelWeights::from_gguf(content, &mut cursor, device)
        } else {
            ModelWeights::from_gguf(content, &mut file, device)
        }
        .map_err(|e| LlmError::fatal(format!("loading {}: {e}", gguf.display())))?;
        let stop: Vec<u32> = ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        if stop.is_empty() {
            return Err(LlmError::fatal(format!("{} has no <|im_end|> token: not a Qwen tokenizer", tok_path.display())));
        }
        Ok(LocalLlm {
            name: gguf.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            model: Mutex::new(model),
            tokenizer,
            stop,
            device: device.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Qwen chat template for one system and one user turn, opened for the assistant.
    pub fn prompt(system: &str, user: &str) -> String {
        format!("<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
    }

    /// Generates until an end-of-turn token or `max_tokens`. Blocking: call from a blocking thread.
    pub fn chat(&self, system: &str, user: &str, sampling: Sampling, stats: &LlmStats) -> Result<Completion, LlmError> {
        let prompt = Self::prompt(system, user);
        let ids = self
            .tokenizer
            .encode(prompt.as_str(), false)
            .map_err(|e| LlmError::fatal(format!("tokenizing the prompt: {e}")))?
            .get_ids()
            .to_vec();
        let budget = (sampling.max_tokens as usize).min(MAX_CONTEXT.saturating_sub(ids.len()));
        if budget == 0 {
            return Err(LlmError::fatal(format!("the prompt is {} tokens, over the {MAX_CONTEXT}-token context", ids.len())));
        }
        stats.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut model = self.model.lock().unwrap_or_else(|p| p.into_inner());
        let out = self.generate(&mut model, &ids, budget, sampling, stats);
        model.clear_kv_cache();
        drop(model);
        let out = out.map_err(|e| {
            stats.failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            LlmError::fatal(format!("local generation: {e}"))
        })?;
        let text = self.tokenizer.decode(&out, true).map_err(|e| LlmError::fatal(format!("decoding: {e}")))?;
        let c = Completion { text, prompt_tokens: ids.len() as u64, completion_tokens: out.len() as u64 };
        stats.record(&c);
        Ok(c)
    }

    fn generate(&self, model: &mut ModelWeights, ids: &[u32], budget: usize, s: Sampling, stats: &LlmStats) -> candle_core::Result<Vec<u32>> {
        let sampler = if s.temperature <= 0.0 { Sampler::ArgMax } else { Sampler::All { temperature: s.temperature as f64 } };
        let mut lp = LogitsProcessor::from_sampling(s.seed, sampler);
        let started = Instant::now();
        let mut logits = None;
        for (i, chunk) in ids.chunks(PREFILL_CHUNK).enumerate() {
            let x = Tensor::new(chunk, &self.device)?.unsqueeze(0)?;
            logits = Some(model.forward(&x, i * PREFILL_CHUNK)?);
        }
        let mut logits = logits.expect("the prompt has tokens").squeeze(0)?;
        let prefilled = Instant::now();
        stats.prefill_us.fetch_add(started.elapsed().as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
        let mut out = Vec::new();
        loop {
            let next = lp.sample(&logits)?;
            if self.stop.contains(&next) {
                break;
            }
            out.push(next);
            if out.len() >= budget {
                break;
            }
            let x = Tensor::new(&[next], &self.device)?.unsqueeze(0)?;
            logits = model.forward(&x, ids.len() + out.len() - 1)?.squeeze(0)?;
        }
        stats.decode_us.fetch_add(prefilled.elapsed().as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(out)
    }
}
