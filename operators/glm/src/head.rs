//! The scoring head (docs/glm.md, "Retrieval", step 4): an entity vector times the projected question vector,
//! element-wise, then a 2-layer MLP gives one logit per entity.

use candle_core::{Module, Result, Tensor};
use candle_nn::{Linear, VarBuilder};

pub struct ScoringHead {
    question_proj: Linear,
    hidden: Linear,
    out: Linear,
}

impl ScoringHead {
    /// Weights under `vb` (names `question_proj`, `mlp.0`, `mlp.2`).
    pub fn new(vb: VarBuilder, question_dim: usize, hidden: usize) -> Result<Self> {
        Ok(ScoringHead {
            question_proj: candle_nn::linear(question_dim, hidden, vb.pp("question_proj"))?,
            hidden: candle_nn::linear(hidden, hidden, vb.pp("mlp.0"))?,
            out: candle_nn::linear(hidden, 1, vb.pp("mlp.2"))?,
        })
    }

    /// `entities` (B, E, H), `question` (B, Q) -> logits (B, E).
    pub fn forward(&self, entities: &Tensor, question: &Tensor) -> Result<Tensor> {
        let q = self.question_proj.forward(question)?.unsqueeze(1)?;
        let z = entities.broadcast_mul(&q)?;
        let h = self.hidden.forward(&z)?.relu()?;
        self.out.forward(&h)?.squeeze(2)
    }
}
