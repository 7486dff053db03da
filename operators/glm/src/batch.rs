//! A batch of tokenized graphs as tensors: padded token ids, bucket ids (with the masked id
//! mapped to the bias table's mask row), the token mask, and a pooling matrix that averages
//! each entity's tokens.

use candle_core::{DType, Device, Result, Tensor};

use crate::graph::{TokenizedGraph, MASKED};

/// Tensors for one forward pass.
pub struct Batch {
    /// (B, L) u32, padded with 0.
    pub input_ids: Tensor,
    /// (B, L, L) u32 bucket ids; masked pairs and padding use `mask_bucket`.
    pub buckets: Tensor,
    /// (B, L) in the model dtype: 1 for tokens, 0 for padding.
    pub token_mask: Tensor,
    /// (B, E, L) in the model dtype: row e averages entity e's tokens (E = most entities in
    /// a graph of the batch; missing rows are zero).
    pub pooling: Tensor,
    /// Entities per graph, in order (ids).
    pub entities: Vec<Vec<String>>,
}

impl Batch {
    /// `mask_bucket`: the bias-table row that masks (the table's last row).
    pub fn new(graphs: &[&TokenizedGraph], mask_bucket: u32, dtype: DType, device: &Device) -> Result<Batch> {
        let b = graphs.len();
        let l = graphs.iter().map(|g| g.len()).max().unwrap_or(0).max(1);
        let e = graphs.iter().map(|g| g.entities().count()).max().unwrap_or(0).max(1);
        let mut ids = vec![0u32; b * l];
        let mut buckets = vec![mask_bucket; b * l * l];
        let mut tmask = vec![0f32; b * l];
        let mut pool = vec![0f32; b * e * l];
        let mut entities = Vec::with_capacity(b);
        for (gi, g) in graphs.iter().enumerate() {
            let n = g.len();
            ids[gi * l..gi * l + n].copy_from_slice(&g.tokens);
            tmask[gi * l..gi * l + n].iter_mut().for_each(|x| *x = 1.0);
            let base = gi * l * l;
            for q in 0..n {
                let row = base + q * l;
                for k in 0..n {
                    let bk = g.bucket(q, k);
                    buckets[row + k] = if bk == MASKED { mask_bucket } else { bk as u32 };
                }
            }
            let mut names = Vec::new();
            for (ei, node) in g.entities().enumerate() {
                let w = 1.0 / (node.end - node.start).max(1) as f32;
                for t in node.start..node.end {
                    pool[(gi * e + ei) * l + t] = w;
                }
                names.push(node.id.clone());
            }
            entities.push(names);
        }
        Ok(Batch {
            input_ids: Tensor::from_vec(ids, (b, l), device)?,
            buckets: Tensor::from_vec(buckets, (b, l, l), device)?,
            token_mask: Tensor::from_vec(tmask, (b, l), device)?.to_dtype(dtype)?,
            pooling: Tensor::from_vec(pool, (b, e, l), device)?.to_dtype(dtype)?,
            entities,
        })
    }

    /// Mean of each entity's token vectors: (B, L, D) -> one (entities, D) tensor per graph.
    pub fn pool(&self, hidden: &Tensor) -> Result<Vec<Tensor>> {
        let pooled = self.pooling.matmul(hidden)?; // (B, E, D)
        self.entities.iter().enumerate().map(|(i, names)| pooled.get(i)?.narrow(0, 0, names.len())).collect()
    }
}
