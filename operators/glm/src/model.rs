//! The whole GLM retriever model: a graph encoder (MiniLM or T5), the scoring head, and the
//! frozen sentence encoder for questions; loaded from a backbone to start training, or from a
//! checkpoint directory that `streamrag train` wrote:
//!
//! ```text
//! CKPT/glm.json             GlmConfig: architecture, subgraph budget, training progress
//! CKPT/model.safetensors    encoder + bias table + head (trainable variables)
//! CKPT/optimizer.safetensors  AdamW moments and step (training only)
//! CKPT/backbone/            config.json, tokenizer.json of the graph encoder
//! CKPT/question/            config.json, model.safetensors, tokenizer.json of the question encoder
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use serde::{Deserialize, Serialize};

pub use crate::backbone::BackboneKind;
use crate::backbone::Backbone;
use crate::batch::Batch;
use crate::bert::BertConfig;
use crate::error::{read_json, Error, Result};
use crate::graph::{build, HfTokenizer, Mode, TokenizedGraph, Triplet, NUM_BUCKETS};
use crate::head::ScoringHead;
use crate::optim::ParamGroup;
use crate::sentence::SentenceEncoder;

/// Where training stands (checkpoints carry it, so `train` resumes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Training {
    pub dataset: String,
    pub questions: String,
    pub epochs: usize,
    pub epochs_done: usize,
    /// Examples of the current epoch already trained on.
    pub next: usize,
    pub steps: usize,
    pub batch_size: usize,
    pub examples: usize,
    pub lr_head: f64,
    pub lr_encoder: f64,
    pub seconds: f64,
    pub hardware: String,
    pub last_loss: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GlmConfig {
    pub backbone: BackboneKind,
    pub mode: Mode,
    /// The question's tokens join the graph (the paper's default).
    pub question_text: bool,
    pub max_hops: usize,
    pub max_triplets: usize,
    /// Entities handed to the document ranker.
    pub top_entities: usize,
    pub hidden: usize,
    pub question_dim: usize,
    #[serde(default)]
    pub training: Training,
}

impl GlmConfig {
    pub fn extra_buckets(&self) -> usize {
        usize::from(self.mode == Mode::Global) + if self.question_text { 2 } else { 0 }
    }
}

pub struct GlmModel {
    pub config: GlmConfig,
    backbone: Backbone,
    head: ScoringHead,
    tokenizer: HfTokenizer,
    pub question: SentenceEncoder,
    varmap: VarMap,
    device: Device,
    backbone_dir: PathBuf,
    question_dir: PathBuf,
}

const T5_BIAS: &str = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
const BERT_BIAS: &str = "encoder.relative_attention_bias.weight";

/// Copies `names` from `src` to `dst` unless they are the same directory.
fn copy_files(src: &Path, dst: &Path, names: &[&str]) -> Result<()> {
    std::fs::create_dir_all(dst).map_err(Error::io(dst))?;
    if src.canonicalize().ok() == dst.canonicalize().ok() {
        return Ok(());
    }
    for n in names {
        std::fs::copy(src.join(n), dst.join(n)).map_err(Error::io(&src.join(n)))?;
    }
    Ok(())
}

impl GlmModel {
    /// A model to train: the backbone's pretrained weights (a Hugging Face BERT or T5
    /// directory), a new bias table and head, and the question encoder in `question_dir`.
    /// `config.backbone`, `hidden` and `question_dim` are filled in from the directories.
    pub fn init(backbone_dir: &Path, question_dir: &Path, mut config: GlmConfig, device: &Device) -> Result<Self> {
        config.backbone = BackboneKind::of_config(&backbone_dir.join("config.json"))?;
        let weights = backbone_dir.join("model.safetensors");
        let mut tensors = candle_core::safetensors::load(&weights, device).map_err(Error::format(&weights))?;
        tensors.retain(|name, t| {
            t.dtype().is_float()
                && match config.backbone {
                    BackboneKind::T5 => name.starts_with("encoder.") || name == "shared.weight",
                    BackboneKind::Bert => name.starts_with("encoder.") || name.starts_with("embeddings."),
                }
        });
        Self::assemble(config, tensors, backbone_dir, question_dir, device)
    }

    /// A checkpoint written by [`GlmModel::save`].
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let config: GlmConfig = read_json(&dir.join("glm.json"))?;
        let weights = dir.join("model.safetensors");
        let tensors = candle_core::safetensors::load(&weights, device).map_err(Error::format(&weights))?;
        Self::assemble(config, tensors, &dir.join("backbone"), &dir.join("question"), device)
    }

    fn assemble(mut config: GlmConfig, mut tensors: HashMap<String, Tensor>, backbone_dir: &Path, question_dir: &Path, device: &Device) -> Result<Self> {
        let rows = NUM_BUCKETS as usize + config.extra_buckets();
        let cfg_path = backbone_dir.join("config.json");
        // the relative bias table with the extra buckets, before the encoder reads it
        match config.backbone {
            BackboneKind::Bert => {
                let c: BertConfig = read_json(&cfg_path)?;
                if !tensors.contains_key(BERT_BIAS) {
                    tensors.insert(BERT_BIAS.into(), Tensor::zeros((rows, c.num_attention_heads), DType::F32, device)?);
                }
            }
            BackboneKind::T5 => {
                let t = tensors
                    .get(T5_BIAS)
                    .ok_or_else(|| Error::Format { path: backbone_dir.to_path_buf(), message: format!("no {T5_BIAS}") })?
                    .clone();
                let have = t.dim(0)?;
                if have < rows {
                    let r31 = t.narrow(0, NUM_BUCKETS as usize - 1, 1)?;
                    let mut parts = vec![t];
                    parts.extend(std::iter::repeat_n(r31, rows - have));
                    tensors.insert(T5_BIAS.into(), Tensor::cat(&parts, 0)?);
                }
            }
        }
        let varmap = VarMap::new();
        {
            let mut data = varmap.data().lock().expect("varmap lock");
            for (name, t) in tensors {
                data.insert(name, Var::from_tensor(&t.to_dtype(DType::F32)?)?);
            }
        }
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let (backbone, hidden) = Backbone::build(config.backbone, vb.clone(), &cfg_path, config.extra_buckets())?;
        let question = SentenceEncoder::load(question_dir, device)?;
        config.hidden = hidden;
        config.question_dim = question.dim();
        let head = ScoringHead::new(vb.pp("head"), config.question_dim, hidden)?;
        let tokenizer = HfTokenizer::from_file(&backbone_dir.join("tokenizer.json"))?;
        Ok(GlmModel {
            config,
            backbone,
            head,
            tokenizer,
            question,
            varmap,
            device: device.clone(),
            backbone_dir: backbone_dir.to_path_buf(),
            question_dir: question_dir.to_path_buf(),
        })
    }

    /// Writes the checkpoint (weights and config by write-then-rename).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        copy_files(&self.backbone_dir, &dir.join("backbone"), &["config.json", "tokenizer.json"])?;
        copy_files(&self.question_dir, &dir.join("question"), &["config.json", "model.safetensors", "tokenizer.json"])?;
        let tmp = dir.join("model.safetensors.tmp");
        self.varmap.save(&tmp).map_err(Error::format(&tmp))?;
        std::fs::rename(&tmp, dir.join("model.safetensors")).map_err(Error::io(dir))?;
        let tmp = dir.join("glm.json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(&self.config).expect("config serialises")).map_err(Error::io(&tmp))?;
        std::fs::rename(&tmp, dir.join("glm.json")).map_err(Error::io(dir))
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The trainable variables in two groups: the head at `lr_head`, the encoder at
    /// `lr_encoder` (sorted by name, so the order is stable across runs).
    pub fn param_groups(&self, lr_head: f64, lr_encoder: f64) -> Vec<ParamGroup> {
        let data = self.varmap.data().lock().expect("varmap lock");
        let mut all: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        // token embeddings are frozen (the encoders detach them)
        all.retain(|(k, _)| !(k.ends_with("word_embeddings.weight") || k == "shared.weight"));
        let (head, enc): (Vec<_>, Vec<_>) = all.into_iter().partition(|(k, _)| k.starts_with("head."));
        vec![ParamGroup { lr: lr_head, vars: head }, ParamGroup { lr: lr_encoder, vars: enc }]
    }

    /// The graph the encoder reads for `triplets` and `question`.
    pub fn graph(&self, triplets: &[Triplet], question: &str) -> Result<TokenizedGraph> {
        build(triplets, self.config.question_text.then_some(question), self.config.mode, &self.tokenizer)
    }

    /// Entity logits (B, E) for a batch of graphs and their questions' embeddings (B, Q);
    /// with the batch (its `entities` name the columns; padding columns are garbage).
    pub fn logits(&self, graphs: &[&TokenizedGraph], questions: &Tensor) -> candle_core::Result<(Tensor, Batch)> {
        let batch = Batch::new(graphs, self.backbone.mask_bucket(), DType::F32, &self.device)?;
        let h = self.backbone.forward(&batch)?;
        let entities = batch.pooling.matmul(&h)?;
        Ok((self.head.forward(&entities, questions)?, batch))
    }

    /// Inference: each graph's entities with their logits, best first.
    pub fn score(&self, graphs: &[&TokenizedGraph], questions: &[&str]) -> Result<Vec<Vec<(String, f32)>>> {
        if graphs.is_empty() {
            return Ok(vec![]);
        }
        self.score_with(graphs, &self.question.embed(questions)?)
    }

    /// Like [`GlmModel::score`], with the questions already embedded (B, Q).
    pub fn score_with(&self, graphs: &[&TokenizedGraph], questions: &Tensor) -> Result<Vec<Vec<(String, f32)>>> {
        let (logits, batch) = self.logits(graphs, questions)?;
        let rows = logits.to_vec2::<f32>()?;
        Ok(batch
            .entities
            .iter()
            .zip(rows)
            .map(|(names, row)| {
                let mut v: Vec<(String, f32)> = names.iter().cloned().zip(row).collect();
                v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                v
            })
            .collect())
    }
}
