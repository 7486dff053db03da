//! A T5 encoder whose attention takes an external bucket tensor: the relative-position bias is
//! gathered per token pair from bucket ids computed from the graph (see [`crate::graph`]), the
//! masks ride in the same gather (a bias row of large negative value), and the bias lives in
//! the first block and is shared by every layer, as in T5. Weight names mirror Hugging Face's
//! `T5EncoderModel`; the bias table is extended with the graph's extra buckets, initialised
//! from row 31 when the checkpoint has none.

use std::path::Path;

use candle_core::{DType, Device, Module, Result, Tensor, D};
use candle_nn::{Embedding, Linear, VarBuilder};
use serde::Deserialize;

use crate::batch::Batch;

fn default_eps() -> f64 {
    1e-6
}
fn default_ff() -> String {
    "relu".into()
}
fn default_buckets() -> usize {
    32
}
fn default_max_distance() -> usize {
    128
}

/// The part of a Hugging Face T5 `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct T5Config {
    pub vocab_size: usize,
    pub d_model: usize,
    pub d_kv: usize,
    pub d_ff: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    #[serde(default = "default_buckets")]
    pub relative_attention_num_buckets: usize,
    #[serde(default = "default_max_distance")]
    pub relative_attention_max_distance: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_epsilon: f64,
    /// `relu` or `gated-gelu` (T5 v1.1, Flan-T5).
    #[serde(default = "default_ff")]
    pub feed_forward_proj: String,
}

impl T5Config {
    pub fn from_file(path: &Path) -> crate::Result<Self> {
        crate::error::read_json(path)
    }

    fn gated(&self) -> bool {
        self.feed_forward_proj.starts_with("gated")
    }

    /// T5-small, -base and -large dimensions (for benchmarks with random weights).
    pub fn preset(name: &str) -> Option<T5Config> {
        let (d_model, d_ff, num_layers, num_heads) = match name {
            "small" => (512, 2048, 6, 8),
            "base" => (768, 3072, 12, 12),
            "large" => (1024, 4096, 24, 16),
            _ => return None,
        };
        Some(T5Config {
            vocab_size: 32128,
            d_model,
            d_kv: 64,
            d_ff,
            num_layers,
            num_heads,
            relative_attention_num_buckets: 32,
            relative_attention_max_distance: 128,
            layer_norm_epsilon: 1e-6,
            feed_forward_proj: "relu".into(),
        })
    }
}

/// T5's layer norm: no mean, no bias; variance in f32.
struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    fn load(vb: VarBuilder, d: usize, eps: f64) -> Result<Self> {
        Ok(RmsNorm { weight: vb.get(d, "weight")?, eps })
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dtype = x.dtype();
        let xf = x.to_dtype(DType::F32)?;
        let var = xf.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = xf.broadcast_div(&(var + self.eps)?.sqrt()?)?.to_dtype(dtype)?;
        normed.broadcast_mul(&self.weight)
    }
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    heads: usize,
    d_kv: usize,
}

impl Attention {
    fn load(vb: VarBuilder, c: &T5Config) -> Result<Self> {
        let inner = c.num_heads * c.d_kv;
        Ok(Attention {
            q: candle_nn::linear_no_bias(c.d_model, inner, vb.pp("q"))?,
            k: candle_nn::linear_no_bias(c.d_model, inner, vb.pp("k"))?,
            v: candle_nn::linear_no_bias(c.d_model, inner, vb.pp("v"))?,
            o: candle_nn::linear_no_bias(inner, c.d_model, vb.pp("o"))?,
            heads: c.num_heads,
            d_kv: c.d_kv,
        })
    }

    /// `bias`: (B, H, L, L) position bias plus mask.
    fn forward(&self, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (b, l, _) = x.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> { t.reshape((b, l, self.heads, self.d_kv))?.transpose(1, 2)?.contiguous() };
        let q = split(self.q.forward(x)?)?;
        let k = split(self.k.forward(x)?)?;
        let v = split(self.v.forward(x)?)?;
        // T5: no 1/sqrt(d) scaling
        let scores = q.matmul(&k.t()?)?.broadcast_add(bias)?;
        let probs = crate::ops::softmax_last(&scores, v.dtype())?;
        let out = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, l, self.heads * self.d_kv))?;
        self.o.forward(&out)
    }
}

enum FeedForward {
    Relu { wi: Linear, wo: Linear },
    GatedGelu { wi_0: Linear, wi_1: Linear, wo: Linear },
}

impl FeedForward {
    fn load(vb: VarBuilder, c: &T5Config) -> Result<Self> {
        Ok(if c.gated() {
            FeedForward::GatedGelu {
                wi_0: candle_nn::linear_no_bias(c.d_model, c.d_ff, vb.pp("wi_0"))?,
                wi_1: candle_nn::linear_no_bias(c.d_model, c.d_ff, vb.pp("wi_1"))?,
                wo: candle_nn::linear_no_bias(c.d_ff, c.d_model, vb.pp("wo"))?,
            }
        } else {
            FeedForward::Relu {
                wi: candle_nn::linear_no_bias(c.d_model, c.d_ff, vb.pp("wi"))?,
                wo: candle_nn::linear_no_bias(c.d_ff, c.d_model, vb.pp("wo"))?,
            }
        })
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            FeedForward::Relu { wi, wo } => wo.forward(&wi.forward(x)?.relu()?),
            // gelu_new is the tanh approximation, candle's gelu
            FeedForward::GatedGelu { wi_0, wi_1, wo } => wo.forward(&(wi_0.forward(x)?.gelu()? * wi_1.forward(x)?)?),
        }
    }
}

struct Block {
    attn_norm: RmsNorm,
    attn: Attention,
    ff_norm: RmsNorm,
    ff: FeedForward,
}

/// The encoder.
pub struct T5GraphEncoder {
    pub config: T5Config,
    embed: Embedding,
    blocks: Vec<Block>,
    final_norm: RmsNorm,
    /// (buckets + extra + 1, H): the last row masks.
    /// (buckets + extra, heads): trainable rows; the mask row is appended per forward, so an
    /// optimizer's in-place update of the table is seen.
    table: Tensor,
    mask_row: Tensor,
    extra_buckets: usize,
    dtype: DType,
    device: Device,
}

/// The bias added where attention is masked: large, finite (a fully masked row softmaxes to a
/// uniform row instead of NaN; padding rows are zeroed after the last layer).
pub const MASK_BIAS: f32 = -1e30;

impl T5GraphEncoder {
    /// Loads `config.json` and `model.safetensors` from `dir` in `dtype` (f32, bf16, f16),
    /// with `extra_buckets` extra rows in the bias table.
    pub fn load(dir: &Path, dtype: DType, device: &Device, extra_buckets: usize) -> crate::Result<Self> {
        let cfg = T5Config::from_file(&dir.join("config.json"))?;
        let weights = dir.join("model.safetensors");
        // SAFETY: the file is mapped read-only and not modified while mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, device) }.map_err(crate::Error::format(&weights))?;
        Self::new(vb, cfg, extra_buckets).map_err(crate::Error::format(dir))
    }

    /// Builds the encoder from any VarBuilder (a checkpoint, or random weights for benchmarks).
    pub fn new(vb: VarBuilder, cfg: T5Config, extra_buckets: usize) -> Result<Self> {
        let embed_w = if vb.contains_tensor("shared.weight") {
            vb.get((cfg.vocab_size, cfg.d_model), "shared.weight")?
        } else {
            vb.get((cfg.vocab_size, cfg.d_model), "encoder.embed_tokens.weight")?
        };
        let embed = Embedding::new(embed_w.detach(), cfg.d_model); // frozen in training, as in the BERT encoder
        let enc = vb.pp("encoder");
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let b = enc.pp(format!("block.{i}")).pp("layer");
            blocks.push(Block {
                attn_norm: RmsNorm::load(b.pp("0").pp("layer_norm"), cfg.d_model, cfg.layer_norm_epsilon)?,
                attn: Attention::load(b.pp("0").pp("SelfAttention"), &cfg)?,
                ff_norm: RmsNorm::load(b.pp("1").pp("layer_norm"), cfg.d_model, cfg.layer_norm_epsilon)?,
                ff: FeedForward::load(b.pp("1").pp("DenseReluDense"), &cfg)?,
            });
        }
        let nb = cfg.relative_attention_num_buckets;
        let bias_name = "block.0.layer.0.SelfAttention.relative_attention_bias.weight";
        let rows = if enc.contains_tensor(bias_name) { enc.get_unchecked(bias_name)?.dim(0)? } else { nb };
        let table = enc.get((rows, cfg.num_heads), bias_name)?;
        let table = if rows >= nb + extra_buckets {
            table.narrow(0, 0, nb + extra_buckets)?
        } else {
            // a plain T5 checkpoint: the extra rows start from row 31 ("far positive")
            let src = table.narrow(0, nb - 1, 1)?;
            let mut parts = vec![table.clone()];
            for _ in rows..nb + extra_buckets {
                parts.push(src.clone());
            }
            Tensor::cat(&parts, 0)?
        };
        let mask_row = Tensor::full(MASK_BIAS, (1, cfg.num_heads), table.device())?.to_dtype(table.dtype())?;
        let final_norm = RmsNorm::load(enc.pp("final_layer_norm"), cfg.d_model, cfg.layer_norm_epsilon)?;
        Ok(T5GraphEncoder {
            dtype: table.dtype(),
            device: table.device().clone(),
            config: cfg,
            embed,
            blocks,
            final_norm,
            table,
            mask_row,
            extra_buckets,
        })
    }

    /// The bucket id that masks.
    pub fn mask_bucket(&self) -> u32 {
        (self.config.relative_attention_num_buckets + self.extra_buckets) as u32
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// The bias table, (buckets + extra + 1, heads); the last row masks.
    pub fn bias_table(&self) -> Result<Tensor> {
        Tensor::cat(&[&self.table, &self.mask_row], 0)
    }
    /// Rows of the bias table, mask row excluded.
    pub fn bias_rows(&self) -> usize {
        self.config.relative_attention_num_buckets + self.extra_buckets
    }

    /// (B, L) ids, (B, L, L) buckets, (B, L) token mask -> (B, L, D) hidden states; padding
    /// positions come out as zeros.
    pub fn forward(&self, input_ids: &Tensor, buckets: &Tensor, token_mask: &Tensor) -> Result<Tensor> {
        let (b, l) = input_ids.dims2()?;
        let heads = self.config.num_heads;
        let bias = crate::ops::gather_rows(&self.bias_table()?, buckets)?.reshape((b, l, l, heads))?.permute((0, 3, 1, 2))?.contiguous()?;
        let mut x = self.embed.forward(input_ids)?;
        for blk in &self.blocks {
            let h = blk.attn.forward(&blk.attn_norm.forward(&x)?, &bias)?;
            x = (x + h)?;
            let h = blk.ff.forward(&blk.ff_norm.forward(&x)?)?;
            x = (x + h)?;
        }
        let x = self.final_norm.forward(&x)?;
        x.broadcast_mul(&token_mask.unsqueeze(2)?)
    }

    /// Encodes a batch and mean-pools each entity's tokens: one (entities, D) tensor per graph.
    pub fn encode(&self, batch: &Batch) -> Result<Vec<Tensor>> {
        let h = self.forward(&batch.input_ids, &batch.buckets, &batch.token_mask)?;
        batch.pool(&h)
    }
}
