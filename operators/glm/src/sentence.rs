//! Sentence embeddings (sentence-transformers' all-MiniLM-L6-v2 recipe: mean of the token
//! vectors, L2-normalised) for the question encoder, the dense baseline and seed linking.

use std::path::Path;

use candle_core::{DType, Device, Tensor};

use crate::batch::Batch;
use crate::bert::BertGraphEncoder;
use crate::graph::{sequence, HfTokenizer, LabelTokenizer};

/// The dot product of two embeddings: their cosine, for the unit vectors made here. Eight
/// running sums, so the compiler can keep them in one SIMD register (a single sum must add in
/// order, one lane at a time): the passages' and facts' cosines are most of a query's dense work.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// A text's token ids with the tokenizer's special tokens, at most `max_tokens`: a longer text
/// keeps its first tokens and its closing one.
pub fn clipped_ids(tok: &HfTokenizer, text: &str, max_tokens: usize) -> crate::Result<Vec<u32>> {
    let mut ids = tok.sentence_ids(text)?;
    if ids.len() > max_tokens {
        let last = *ids.last().expect("non-empty");
        ids.truncate(max_tokens - 1);
        ids.push(last);
    }
    Ok(ids)
}

pub struct SentenceEncoder {
    enc: BertGraphEncoder,
    tok: HfTokenizer,
    /// Longer texts keep their first tokens (sentence-transformers: 256 for MiniLM).
    pub max_tokens: usize,
    /// Texts per forward pass.
    pub batch_size: usize,
}

impl SentenceEncoder {
    /// `dir` holds `config.json`, `model.safetensors` and `tokenizer.json`.
    pub fn load(dir: &Path, device: &Device) -> crate::Result<Self> {
        let enc = BertGraphEncoder::load(dir, DType::F32, device, 0)?;
        let tok = HfTokenizer::from_file(&dir.join("tokenizer.json"))?;
        Ok(SentenceEncoder { enc, tok, max_tokens: 256, batch_size: 16 })
    }

    pub fn dim(&self) -> usize {
        self.enc.config.hidden_size
    }

    pub fn device(&self) -> &Device {
        self.enc.device()
    }

    fn ids(&self, text: &str) -> crate::Result<Vec<u32>> {
        clipped_ids(&self.tok, text, self.max_tokens)
    }

    /// (N, dim) unit vectors, in the order of `texts`.
    pub fn embed(&self, texts: &[&str]) -> crate::Result<Tensor> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.ids(t)).collect::<Result<_, _>>()?;
        // batch texts of similar length together; put the rows back in order afterwards
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut rows: Vec<Option<Tensor>> = vec![None; texts.len()];
        for chunk in order.chunks(self.batch_size.max(1)) {
            let graphs: Vec<_> = chunk.iter().map(|&i| sequence(&ids[i])).collect();
            let refs: Vec<_> = graphs.iter().collect();
            let e = (|| {
                let b = Batch::new(&refs, self.enc.mask_bucket(), DType::F32, self.enc.device())?;
                self.enc.sentence_embeddings(&b)
            })()?;
            for (j, &i) in chunk.iter().enumerate() {
                rows[i] = Some(e.get(j)?);
            }
        }
        if rows.is_empty() {
            return Ok(Tensor::zeros((0, self.dim()), DType::F32, self.enc.device())?);
        }
        let rows: Vec<Tensor> = rows.into_iter().map(|r| r.expect("every row embedded")).collect();
        Ok(Tensor::stack(&rows, 0)?)
    }

    /// Like [`SentenceEncoder::embed`], as plain vectors.
    pub fn embed_vecs(&self, texts: &[&str]) -> crate::Result<Vec<Vec<f32>>> {
        Ok(self.embed(texts)?.to_vec2::<f32>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::dot;

    #[test]
    fn dot_matches_the_plain_sum_at_every_length() {
        for n in [0usize, 1, 7, 8, 9, 384, 389] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((dot(&a, &b) as f64 - plain).abs() < 1e-4, "n {n}: {} against {plain}", dot(&a, &b));
        }
        assert_eq!(dot(&[1.0, 2.0, 3.0], &[4.0, 5.0]), 14.0, "the shorter length");
    }
}
