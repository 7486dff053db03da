//! The two graph encoders behind one type, and the one rule that tells them apart: a
//! checkpoint's `config.json` names its `model_type` (`t5` or `bert`); a T5 config without one
//! still has `d_model`.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::{Deserialize, Serialize};

use crate::batch::Batch;
use crate::bert::{BertConfig, BertGraphEncoder, Positions};
use crate::error::{read_json, Error, Result};
use crate::t5::{T5Config, T5GraphEncoder};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackboneKind {
    Bert,
    T5,
}

impl BackboneKind {
    /// The kind of the Hugging Face checkpoint whose config is `config_json`.
    pub fn of_config(config_json: &Path) -> Result<Self> {
        let v: serde_json::Value = read_json(config_json)?;
        match v.get("model_type").and_then(|m| m.as_str()) {
            Some("t5") => Ok(BackboneKind::T5),
            Some("bert") => Ok(BackboneKind::Bert),
            Some(other) => Err(Error::Format { path: config_json.into(), message: format!("model_type {other:?} is not supported (t5 or bert)") }),
            None if v.get("d_model").is_some() => Ok(BackboneKind::T5),
            None => Ok(BackboneKind::Bert),
        }
    }
}

/// A graph encoder of either kind.
pub enum Backbone {
    Bert(BertGraphEncoder),
    T5(T5GraphEncoder),
}

impl Backbone {
    /// Loads `config.json` + `model.safetensors` from `dir`, T5 or BERT by [`BackboneKind::of_config`].
    pub fn load(dir: &Path, dtype: DType, device: &Device, extra_buckets: usize) -> Result<Self> {
        Ok(match BackboneKind::of_config(&dir.join("config.json"))? {
            BackboneKind::T5 => Backbone::T5(T5GraphEncoder::load(dir, dtype, device, extra_buckets)?),
            BackboneKind::Bert => Backbone::Bert(BertGraphEncoder::load(dir, dtype, device, extra_buckets)?),
        })
    }

    /// Builds an encoder of `kind` from `vb` and the config at `config_json`; with its hidden size.
    pub fn build(kind: BackboneKind, vb: VarBuilder, config_json: &Path, extra_buckets: usize) -> Result<(Self, usize)> {
        Ok(match kind {
            BackboneKind::Bert => {
                let c: BertConfig = read_json(config_json)?;
                let h = c.hidden_size;
                (Backbone::Bert(BertGraphEncoder::new(vb, c, extra_buckets)?), h)
            }
            BackboneKind::T5 => {
                let c = T5Config::from_file(config_json)?;
                let h = c.d_model;
                (Backbone::T5(T5GraphEncoder::new(vb, c, extra_buckets)?), h)
            }
        })
    }

    pub fn kind(&self) -> BackboneKind {
        match self {
            Backbone::Bert(_) => BackboneKind::Bert,
            Backbone::T5(_) => BackboneKind::T5,
        }
    }

    pub fn mask_bucket(&self) -> u32 {
        match self {
            Backbone::Bert(e) => e.mask_bucket(),
            Backbone::T5(e) => e.mask_bucket(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Backbone::Bert(e) => e.dtype(),
            Backbone::T5(e) => e.dtype(),
        }
    }

    /// Token states (B, L, H) of a batch (BERT with neutral absolute positions: the graph's
    /// relative buckets carry the order).
    pub fn forward(&self, b: &Batch) -> candle_core::Result<Tensor> {
        match self {
            Backbone::Bert(e) => e.forward(&b.input_ids, &b.buckets, &b.token_mask, Positions::Neutral),
            Backbone::T5(e) => e.forward(&b.input_ids, &b.buckets, &b.token_mask),
        }
    }

    /// Each graph's token states, unpadded.
    pub fn encode(&self, b: &Batch) -> candle_core::Result<Vec<Tensor>> {
        match self {
            Backbone::Bert(e) => e.encode(b),
            Backbone::T5(e) => e.encode(b),
        }
    }
}
