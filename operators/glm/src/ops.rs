//! Ops that have a fast fused kernel for inference and a composed, differentiable form for
//! training: candle's fused softmax and layer norm have no backward pass. The composed form is
//! taken when the input is part of a graph being differentiated (`track_op`).

use candle_core::{DType, Module, Result, Tensor, D};
use candle_nn::LayerNorm;

/// Softmax over the last dimension, in f32, returned in `dtype`.
pub fn softmax_last(scores: &Tensor, dtype: DType) -> Result<Tensor> {
    let s = scores.to_dtype(DType::F32)?;
    let p = candle_nn::ops::softmax_last_dim(&s.detach())?;
    if !s.track_op() {
        return p.to_dtype(dtype);
    }
    // The fused kernel's value with the softmax Jacobian attached: with d = s - sg(s) (zero,
    // gradient one), P (1 + d - sum_j P_j d_j) equals P and has dP_i/ds_k = P_i (δ_ik - P_k).
    // A few element-wise passes instead of the composed softmax's backward (~5x slower on CPU).
    let d = (&s - s.detach())?;
    let dot = (&p * &d)?.sum_keepdim(D::Minus1)?;
    let y = (p.clone() * ((d.broadcast_sub(&dot))? + 1.0)?)?;
    y.to_dtype(dtype)
}

/// The rows of a small table picked by `ids` (any shape, u32): (ids.elem_count(), columns).
/// While the table is being trained on a GPU, as a one-hot matrix times the table: candle's
/// CUDA backward of `index_select` (`index_add`) runs one thread per table column over every
/// id in turn, ~1 s a step for the attention bias of a 150-triplet subgraph on an H200, where
/// the one-hot product's backward is one cuBLAS matmul (memory: ids x rows, one byte and one
/// float each).
pub fn gather_rows(table: &Tensor, ids: &Tensor) -> Result<Tensor> {
    gather_rows_by(table, ids, table.track_op() && table.device().is_cuda())
}

fn gather_rows_by(table: &Tensor, ids: &Tensor, one_hot: bool) -> Result<Tensor> {
    let flat = ids.flatten_all()?;
    if !one_hot {
        return table.index_select(&flat, 0);
    }
    let rows = Tensor::arange(0u32, table.dim(0)? as u32, table.device())?;
    let picks = flat.unsqueeze(1)?.broadcast_eq(&rows.unsqueeze(0)?)?.to_dtype(table.dtype())?;
    picks.matmul(table)
}

/// Layer norm over the last dimension.
pub fn layer_norm(ln: &LayerNorm, x: &Tensor) -> Result<Tensor> {
    if !x.track_op() {
        return ln.forward(x);
    }
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = centred.broadcast_div(&(var + ln.eps())?.sqrt()?)?;
    let y = normed.broadcast_mul(ln.weight())?;
    match ln.bias() {
        Some(b) => y.broadcast_add(b),
        None => Ok(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn composed_forms_match_the_fused_kernels_and_differentiate() {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[1.0f32, -2.0, 0.5, 3.0], [0.0, 0.0, -1e30, 1.0]], &dev).unwrap();
        let fused = softmax_last(&x, DType::F32).unwrap();
        let v = Var::from_tensor(&x).unwrap();
        let composed = softmax_last(v.as_tensor(), DType::F32).unwrap();
        let diff = (fused - &composed).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-6, "{diff}");
        let ln = LayerNorm::new(Tensor::new(&[1.0f32, 2.0, 0.5, 1.0], &dev).unwrap(), Tensor::new(&[0.1f32, 0.0, 0.0, -0.1], &dev).unwrap(), 1e-12);
        let a = layer_norm(&ln, &x.narrow(0, 0, 1).unwrap()).unwrap();
        let vb = Var::from_tensor(&x.narrow(0, 0, 1).unwrap()).unwrap();
        let b = layer_norm(&ln, vb.as_tensor()).unwrap();
        let diff = (a - &b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "{diff}");
        let grads = (composed.sum_all().unwrap() + b.sum_all().unwrap()).unwrap().backward().unwrap();
        assert!(grads.get(v.as_tensor()).is_some() && grads.get(vb.as_tensor()).is_some());
        // the softmax's gradient equals the composed softmax's (weighted, so it is not zero)
        let w = Tensor::new(&[[0.3f32, -1.0, 2.0, 0.5], [1.0, 2.0, 3.0, -4.0]], &dev).unwrap();
        let v2 = Var::from_tensor(&x).unwrap();
        let g1 = (softmax_last(v.as_tensor(), DType::F32).unwrap() * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let g2 = (candle_nn::ops::softmax(v2.as_tensor(), D::Minus1).unwrap() * &w).unwrap().sum_all().unwrap().backward().unwrap();
        let (a, b) = (g1.get(v.as_tensor()).unwrap(), g2.get(v2.as_tensor()).unwrap());
        let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let scale = a.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5 && scale > 0.1, "{diff} {scale}");
    }

    #[test]
    fn rows_gathered_by_one_hot_equal_index_select_in_value_and_gradient() {
        let dev = Device::Cpu;
        let table = Tensor::new(&[[0.5f32, -1.0], [2.0, 0.25], [-3.0, 1.5], [-1e30, -1e30]], &dev).unwrap();
        let ids = Tensor::new(&[[0u32, 2, 2], [1, 3, 0]], &dev).unwrap();
        let w = Tensor::new(&[[1.0f32, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.5, 0.5], [1.0, 1.0], [-0.5, 4.0]], &dev).unwrap();
        let run = |one_hot: bool| {
            let v = Var::from_tensor(&table.narrow(0, 0, 3).unwrap()).unwrap();
            let full = Tensor::cat(&[v.as_tensor(), &table.narrow(0, 3, 1).unwrap()], 0).unwrap();
            let rows = gather_rows_by(&full, &ids, one_hot).unwrap();
            let loss = (rows.clamp(-10f32, 10f32).unwrap() * &w).unwrap().sum_all().unwrap();
            let g = loss.backward().unwrap().get(v.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
            (rows.to_vec2::<f32>().unwrap(), g)
        };
        let (a, ga) = run(false);
        let (b, gb) = run(true);
        assert_eq!(a, b);
        assert_eq!(ga, gb);
        assert_eq!(ga[2], [2.0, -1.5], "row 2, picked twice: the sum of both gradients");
    }
}
