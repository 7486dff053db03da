//! The training loss (docs/glm.md, "Training"): 0.44 BCE + 0.56 ListCE over entity logits, both taken over
//! the scored entities only (those of the selected subgraph; padding is masked out).

use candle_core::{Result, Tensor, D};

pub const BCE_WEIGHT: f64 = 0.44;
pub const LISTCE_WEIGHT: f64 = 0.56;

/// `logits`, `labels` (1 for an entity of a gold document, else 0) and `mask` (1 where the
/// entity is scored): (B, E) f32. Returns the scalar loss. BCE is the mean over scored
/// entities; ListCE is, per graph with at least one positive, the cross entropy between the
/// positives' uniform distribution and the softmax over the scored entities, averaged.
pub fn glm_loss(logits: &Tensor, labels: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let scored = mask.sum_all()?.to_scalar::<f32>()?.max(1.0) as f64;
    // numerically stable BCE with logits: max(x, 0) - x y + log(1 + exp(-|x|))
    let bce = ((logits.relu()? - (logits * labels)?)? + (logits.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
    let bce = ((bce * mask)?.sum_all()? / scored)?;
    let masked = (logits + ((mask - 1.0)? * 1e9)?)?;
    let log_p = candle_nn::ops::log_softmax(&masked, D::Minus1)?;
    let pos = (labels * mask)?;
    let npos = pos.sum_keepdim(D::Minus1)?; // (B, 1)
    let has = npos.gt(0.0)?.to_dtype(logits.dtype())?;
    let target = pos.broadcast_div(&npos.clamp(1.0, f64::MAX)?)?;
    let per_graph = (target * log_p)?.sum(D::Minus1)?.neg()?; // (B)
    let graphs = has.sum_all()?.to_scalar::<f32>()?.max(1.0) as f64;
    let listce = ((per_graph * has.squeeze(1)?)?.sum_all()? / graphs)?;
    (bce * BCE_WEIGHT)? + (listce * LISTCE_WEIGHT)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn t<const N: usize>(v: &[[f32; 3]; N]) -> Tensor {
        Tensor::new(v, &Device::Cpu).unwrap()
    }

    #[test]
    fn matches_the_formula_by_hand() {
        let logits = t(&[[2.0, -1.0, 0.5], [0.0, 1.0, 3.0]]);
        let labels = t(&[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]);
        let mask = t(&[[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]);
        let got = glm_loss(&logits, &labels, &mask).unwrap().to_scalar::<f32>().unwrap() as f64;
        let bce = |x: f64, y: f64| -(y * (1.0 / (1.0 + (-x).exp())).ln() + (1.0 - y) * (1.0 - 1.0 / (1.0 + (-x).exp())).ln());
        let b = (bce(2.0, 1.0) + bce(-1.0, 0.0) + bce(0.5, 1.0) + bce(0.0, 0.0) + bce(1.0, 0.0)) / 5.0;
        let z: f64 = [2.0f64, -1.0, 0.5].iter().map(|x| x.exp()).sum();
        // graph 2 has no positive: no ListCE term; graph 1's positives are entities 0 and 2
        let l = -0.5 * ((2.0f64.exp() / z).ln() + (0.5f64.exp() / z).ln());
        let want = 0.44 * b + 0.56 * l;
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    }

    #[test]
    fn unscored_entities_do_not_change_the_loss() {
        let a = glm_loss(&t(&[[2.0, -1.0, 0.0]]), &t(&[[1.0, 0.0, 0.0]]), &t(&[[1.0, 1.0, 0.0]])).unwrap();
        let b = glm_loss(&t(&[[2.0, -1.0, 50.0]]), &t(&[[1.0, 0.0, 1.0]]), &t(&[[1.0, 1.0, 0.0]])).unwrap();
        assert_eq!(a.to_scalar::<f32>().unwrap(), b.to_scalar::<f32>().unwrap());
    }
}
