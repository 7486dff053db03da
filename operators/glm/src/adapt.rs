//! A sentence encoder (all-MiniLM-L6-v2) adapted to a corpus: fine-tuned on (question, passage)
//! pairs with the other passages of its batch as negatives (sentence-transformers'
//! MultipleNegativesRankingLoss: cross-entropy over the scaled cosines, the pair's own passage
//! the target). The questions come from the corpus's own graph (`retrieve::selfmade`), so no
//! label is needed. The result is a plain sentence-transformers directory (config,
//! weights, tokenizer) that [`crate::sentence::SentenceEncoder::load`] reads like the original.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};

use crate::batch::Batch;
use crate::bert::{BertConfig, BertGraphEncoder};
use crate::error::{read_json, Error};
use crate::graph::{sequence, HfTokenizer};
use crate::optim::{epoch_order, AdamW, ParamGroup};
use crate::sentence::clipped_ids;

/// The relative-bias table the graph encoder adds; a sentence model has none (all zeros), so
/// it is neither trained nor saved.
const BIAS: &str = "encoder.relative_attention_bias.weight";

/// How the encoder is adapted.
#[derive(Debug, Clone)]
pub struct AdaptOptions {
    pub epochs: usize,
    /// Pairs per step: each question's negatives are the other passages of its batch.
    pub batch_size: usize,
    pub lr: f64,
    /// Cosines are multiplied by this before the softmax (sentence-transformers: 20).
    pub scale: f64,
    /// Longer passages keep their first tokens (MiniLM was trained at 256).
    pub max_tokens: usize,
}

impl Default for AdaptOptions {
    fn default() -> Self {
        AdaptOptions { epochs: 1, batch_size: 16, lr: 2e-5, scale: 20.0, max_tokens: 256 }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Adapted {
    pub steps: usize,
    pub pairs: usize,
    /// Mean loss over the first and the last tenth of the steps.
    pub first_loss: f64,
    pub last_loss: f64,
}

/// Fine-tunes the sentence encoder in `model_dir` on `pairs` (question, passage text) and
/// writes the adapted model to `out` (config.json, model.safetensors, tokenizer.json).
/// `progress` is told each step and its loss.
pub fn adapt(model_dir: &Path, pairs: &[(String, String)], o: &AdaptOptions, out: &Path, device: &Device, progress: &mut dyn FnMut(usize, usize, f64)) -> crate::Result<Adapted> {
    let cfg: BertConfig = read_json(&model_dir.join("config.json"))?;
    let weights = model_dir.join("model.safetensors");
    let tensors = candle_core::safetensors::load(&weights, device).map_err(Error::format(&weights))?;
    let varmap = VarMap::new();
    {
        let mut data = varmap.data().lock().expect("varmap lock");
        for (name, t) in tensors {
            if t.dtype().is_float() {
                data.insert(name, Var::from_tensor(&t.to_dtype(DType::F32)?)?);
            }
        }
    }
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let enc = BertGraphEncoder::new(vb, cfg, 0).map_err(Error::format(model_dir))?;
    let tok = HfTokenizer::from_file(&model_dir.join("tokenizer.json"))?;
    let vars: Vec<(String, Var)> = {
        let data = varmap.data().lock().expect("varmap lock");
        let mut v: Vec<(String, Var)> = data.iter().filter(|(k, _)| *k != BIAS && !k.ends_with("word_embeddings.weight")).map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let mut opt = AdamW::new(vec![ParamGroup { lr: o.lr, vars }], 0.01, Some(1.0));
    let bs = o.batch_size.max(2);
    let embed = |texts: &[&[u32]]| -> candle_core::Result<Tensor> {
        let graphs: Vec<_> = texts.iter().map(|t| sequence(t)).collect();
        let refs: Vec<_> = graphs.iter().collect();
        let b = Batch::new(&refs, enc.mask_bucket(), DType::F32, device)?;
        enc.sentence_embeddings(&b)
    };
    let tokenized: Vec<(Vec<u32>, Vec<u32>)> = pairs.iter().map(|(q, p)| Ok((clipped_ids(&tok, q, o.max_tokens)?, clipped_ids(&tok, p, o.max_tokens)?))).collect::<crate::Result<_>>()?;
    let total = o.epochs * tokenized.len().div_ceil(bs);
    let mut losses = Vec::with_capacity(total);
    for epoch in 0..o.epochs {
        let order = epoch_order(tokenized.len(), epoch);
        // a batch never holds one passage twice: its second question would have its own
        // passage among the negatives
        let mut batches: Vec<Vec<usize>> = Vec::new();
        let mut open: Vec<(Vec<usize>, std::collections::HashSet<&[u32]>)> = Vec::new();
        for i in order {
            let p = tokenized[i].1.as_slice();
            match open.iter_mut().find(|(_, seen)| !seen.contains(p)) {
                Some((b, seen)) => {
                    b.push(i);
                    seen.insert(p);
                }
                None => open.push((vec![i], [p].into_iter().collect())),
            }
            if let Some(full) = open.iter().position(|(b, _)| b.len() == bs) {
                batches.push(open.swap_remove(full).0);
            }
        }
        batches.extend(open.into_iter().map(|(b, _)| b).filter(|b| b.len() >= 2));
        for b in batches {
            let qs: Vec<&[u32]> = b.iter().map(|&i| tokenized[i].0.as_slice()).collect();
            let ps: Vec<&[u32]> = b.iter().map(|&i| tokenized[i].1.as_slice()).collect();
            let q = embed(&qs)?;
            let p = embed(&ps)?;
            let logits = (q.matmul(&p.t()?)? * o.scale)?;
            let target = Tensor::arange(0u32, b.len() as u32, device)?;
            let loss = candle_nn::loss::cross_entropy(&logits, &target)?;
            let grads = loss.backward()?;
            opt.step(&grads)?;
            let l = loss.to_scalar::<f32>()? as f64;
            losses.push(l);
            progress(losses.len(), total, l);
        }
    }
    save(&varmap, model_dir, out)?;
    let tenth = (losses.len() / 10).max(1);
    let mean = |s: &[f64]| if s.is_empty() { f64::NAN } else { s.iter().sum::<f64>() / s.len() as f64 };
    Ok(Adapted { steps: losses.len(), pairs: pairs.len(), first_loss: mean(&losses[..tenth.min(losses.len())]), last_loss: mean(&losses[losses.len().saturating_sub(tenth)..]) })
}

/// The adapted weights under their original names (without the bias table), with the
/// original's config and tokenizer, written then renamed into place.
fn save(varmap: &VarMap, model_dir: &Path, out: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(out).map_err(Error::io(out))?;
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(model_dir.join(f), out.join(f)).map_err(Error::io(&model_dir.join(f)))?;
    }
    let data = varmap.data().lock().expect("varmap lock");
    let tensors: HashMap<String, Tensor> = data.iter().filter(|(k, _)| *k != BIAS).map(|(k, v)| (k.clone(), v.as_tensor().clone())).collect();
    let tmp = out.join("model.safetensors.tmp");
    candle_core::safetensors::save(&tensors, &tmp).map_err(Error::format(&tmp))?;
    std::fs::rename(&tmp, out.join("model.safetensors")).map_err(Error::io(out))
}
