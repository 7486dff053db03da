//! A BERT encoder (all-MiniLM-L6-v2 is the one that exists here) behind the same graph API as
//! the T5 encoder: attention takes the same external bucket tensor through a learned T5-style
//! relative bias table (`encoder.relative_attention_bias.weight`, zeros when the checkpoint
//! has none, so an untrained graph encoder starts as the plain model), and absolute positions
//! are neutralised in graph mode (every token gets position 0: token order means nothing in a
//! graph). In sentence mode it is the plain model: absolute positions, no bias, and
//! [`BertGraphEncoder::sentence_embeddings`] gives sentence-transformers' mean-pooled,
//! normalised vectors.

use std::path::Path;

use candle_core::{DType, Device, Module, Result, Tensor, D};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

use crate::batch::Batch;
use crate::graph::NUM_BUCKETS;
use crate::ops::layer_norm;
use crate::t5::MASK_BIAS;

fn default_eps() -> f64 {
    1e-12
}

/// The part of a Hugging Face BERT `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
}

/// How tokens are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// 0, 1, 2, ...: the plain model on a sentence.
    Sequential,
    /// Every token at the same place, the mean of the position embeddings of 1..128 (position
    /// 0 is [CLS]'s, and puts every token in [CLS]'s role): a graph, whose structure comes from
    /// the relative bias.
    Neutral,
}

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    inter: Linear,
    out: Linear,
    out_norm: LayerNorm,
}

/// The encoder.
pub struct BertGraphEncoder {
    pub config: BertConfig,
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    /// (32 + extra, H); the mask row is appended per forward (see the T5 encoder).
    table: Tensor,
    mask_row: Tensor,
    extra_buckets: usize,
    dtype: DType,
    device: Device,
}

impl BertGraphEncoder {
    pub fn load(dir: &Path, dtype: DType, device: &Device, extra_buckets: usize) -> crate::Result<Self> {
        let cfg: BertConfig = crate::error::read_json(&dir.join("config.json"))?;
        let weights = dir.join("model.safetensors");
        // SAFETY: the file is mapped read-only and not modified while mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, device) }.map_err(crate::Error::format(&weights))?;
        Self::new(vb, cfg, extra_buckets).map_err(crate::Error::format(dir))
    }

    pub fn new(vb: VarBuilder, cfg: BertConfig, extra_buckets: usize) -> Result<Self> {
        let h = cfg.hidden_size;
        let e = vb.pp("embeddings");
        let emb = |n: usize, name: &str| -> Result<Embedding> { Ok(Embedding::new(e.pp(name).get((n, h), "weight")?, h)) };
        let norm = |vb: VarBuilder| candle_nn::layer_norm(h, cfg.layer_norm_eps, vb);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            layers.push(Layer {
                q: candle_nn::linear(h, h, a.pp("self.query"))?,
                k: candle_nn::linear(h, h, a.pp("self.key"))?,
                v: candle_nn::linear(h, h, a.pp("self.value"))?,
                attn_out: candle_nn::linear(h, h, a.pp("output.dense"))?,
                attn_norm: norm(a.pp("output.LayerNorm"))?,
                inter: candle_nn::linear(h, cfg.intermediate_size, l.pp("intermediate.dense"))?,
                out: candle_nn::linear(cfg.intermediate_size, h, l.pp("output.dense"))?,
                out_norm: norm(l.pp("output.LayerNorm"))?,
            });
        }
        let rows = NUM_BUCKETS as usize + extra_buckets;
        let name = "encoder.relative_attention_bias.weight";
        // A trainable VarBuilder creates the table (zeros); a plain checkpoint has none.
        let table = match vb.get_with_hints((rows, cfg.num_attention_heads), name, candle_nn::Init::Const(0.0)) {
            Ok(t) => t,
            Err(_) if !vb.contains_tensor(name) => Tensor::zeros((rows, cfg.num_attention_heads), vb.dtype(), vb.device())?,
            Err(e) => return Err(e),
        };
        let mask_row = Tensor::full(MASK_BIAS, (1, cfg.num_attention_heads), vb.device())?.to_dtype(vb.dtype())?;
        Ok(BertGraphEncoder {
            // token embeddings stay frozen in training (detached: no gradient, no optimizer
            // state for 30k x H weights that a few thousand questions cannot move usefully)
            word: Embedding::new(e.pp("word_embeddings").get((cfg.vocab_size, h), "weight")?.detach(), h),
            position: emb(cfg.max_position_embeddings, "position_embeddings")?,
            token_type: emb(cfg.type_vocab_size, "token_type_embeddings")?,
            emb_norm: norm(e.pp("LayerNorm"))?,
            layers,
            table,
            mask_row,
            extra_buckets,
            dtype: vb.dtype(),
            device: vb.device().clone(),
            config: cfg,
        })
    }

    pub fn mask_bucket(&self) -> u32 {
        (NUM_BUCKETS as usize + self.extra_buckets) as u32
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// (B, L) ids, (B, L, L) buckets, (B, L) token mask -> (B, L, H); padding rows are zeros.
    pub fn forward(&self, input_ids: &Tensor, buckets: &Tensor, token_mask: &Tensor, positions: Positions) -> Result<Tensor> {
        let (b, l) = input_ids.dims2()?;
        let heads = self.config.num_attention_heads;
        let dh = self.config.hidden_size / heads;
        let pos = match positions {
            Positions::Sequential => self.position.forward(&Tensor::arange(0u32, l as u32, &self.device)?)?,
            Positions::Neutral => {
                let n = self.config.max_position_embeddings.min(128) as u32;
                let all = self.position.forward(&Tensor::arange(1u32, n, &self.device)?)?;
                all.mean_keepdim(0)?.broadcast_as((l, self.config.hidden_size))?.contiguous()?
            }
        };
        let x = self.word.forward(input_ids)?;
        let x = x.broadcast_add(&pos.unsqueeze(0)?)?;
        let x = x.broadcast_add(&self.token_type.forward(&Tensor::zeros(1, DType::U32, &self.device)?)?.unsqueeze(0)?)?;
        let mut x = layer_norm(&self.emb_norm, &x)?;
        let bias = crate::ops::gather_rows(&Tensor::cat(&[&self.table, &self.mask_row], 0)?, buckets)?.reshape((b, l, l, heads))?.permute((0, 3, 1, 2))?.contiguous()?;
        let scale = 1.0 / (dh as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| -> Result<Tensor> { t.reshape((b, l, heads, dh))?.transpose(1, 2)?.contiguous() };
            let q = split(layer.q.forward(&x)?)?;
            let k = split(layer.k.forward(&x)?)?;
            let v = split(layer.v.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = crate::ops::softmax_last(&scores, v.dtype())?;
            let a = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, l, heads * dh))?;
            x = layer_norm(&layer.attn_norm, &(layer.attn_out.forward(&a)? + &x)?)?;
            let f = layer.out.forward(&layer.inter.forward(&x)?.gelu_erf()?)?;
            x = layer_norm(&layer.out_norm, &(f + &x)?)?;
        }
        x.broadcast_mul(&token_mask.unsqueeze(2)?)
    }

    /// Graph mode: neutral positions, graph buckets; mean-pooled entity vectors per graph.
    pub fn encode(&self, batch: &Batch) -> Result<Vec<Tensor>> {
        let h = self.forward(&batch.input_ids, &batch.buckets, &batch.token_mask, Positions::Neutral)?;
        batch.pool(&h)
    }

    /// Sentence mode: the plain model; mean of the token vectors, L2-normalised: (B, H).
    pub fn sentence_embeddings(&self, batch: &Batch) -> Result<Tensor> {
        let h = self.forward(&batch.input_ids, &batch.buckets, &batch.token_mask, Positions::Sequential)?;
        let summed = h.sum(1)?;
        let counts = batch.token_mask.sum_keepdim(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?;
        mean.broadcast_div(&norm)
    }
}
