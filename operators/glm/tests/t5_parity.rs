//! Parity with transformers' own T5EncoderModel: small random T5 checkpoints in the Hugging
//! Face format and their outputs, made by fixtures/make_t5_fixture.py. Each sequence, given
//! as one chain (sequential positions, full attention), must come out of our encoder within
//! 1e-4 (f32); batched with padding it must give the same rows, zeros for padding, no NaN.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, IndexOp, Tensor};
use streamrag_glm::graph::{self, TokenizedGraph};
use streamrag_glm::{Batch, T5GraphEncoder};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

fn cases(dir: &Path) -> Vec<(TokenizedGraph, Tensor)> {
    let t = candle_core::safetensors::load(dir.join("expected.safetensors"), &Device::Cpu).unwrap();
    let n = t.keys().filter(|k| k.starts_with("ids_")).count();
    assert!(n >= 4);
    (0..n)
        .map(|i| {
            let ids: Vec<u32> = t[&format!("ids_{i}")].to_vec1::<i64>().unwrap().into_iter().map(|x| x as u32).collect();
            (graph::sequence(&ids), t[&format!("hidden_{i}")].clone())
        })
        .collect()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap()
}

fn run(enc: &T5GraphEncoder, graphs: &[&TokenizedGraph]) -> Tensor {
    let b = Batch::new(graphs, enc.mask_bucket(), enc.dtype(), enc.device()).unwrap();
    enc.forward(&b.input_ids, &b.buckets, &b.token_mask).unwrap()
}

#[test]
fn matches_transformers_one_by_one_and_batched() {
    for variant in ["t5-relu", "t5-gated"] {
        let dir = fixture(variant);
        let enc = T5GraphEncoder::load(&dir, DType::F32, &Device::Cpu, 0).unwrap();
        let cases = cases(&dir);
        for (g, want) in &cases {
            let got = run(&enc, &[g]).i(0).unwrap();
            let d = max_abs_diff(&got, want);
            eprintln!("{variant} length {}: max abs diff {d:e}", g.len());
            assert!(d < 1e-4, "{variant}, length {}: max abs diff {d}", g.len());
        }
        let graphs: Vec<&TokenizedGraph> = cases.iter().map(|c| &c.0).collect();
        let out = run(&enc, &graphs);
        let l = out.dim(1).unwrap();
        for (i, (g, want)) in cases.iter().enumerate() {
            let row = out.i(i).unwrap();
            let d = max_abs_diff(&row.narrow(0, 0, g.len()).unwrap(), want);
            assert!(d < 1e-4, "{variant}, batched, length {}: max abs diff {d}", g.len());
            if g.len() < l {
                let pad = row.narrow(0, g.len(), l - g.len()).unwrap();
                assert_eq!(pad.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap(), 0.0, "padding is zero");
            }
        }
        assert!(out.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().all(|x| x.is_finite()));
    }
}

#[test]
fn loads_in_bf16_close_to_f32() {
    let dir = fixture("t5-relu");
    let enc = T5GraphEncoder::load(&dir, DType::BF16, &Device::Cpu, 0).unwrap();
    for (g, want) in cases(&dir) {
        let got = run(&enc, &[&g]).i(0).unwrap().to_dtype(DType::F32).unwrap();
        let d = max_abs_diff(&got, &want);
        let scale = want.abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
        assert!(d < 0.05 * scale.max(1.0), "bf16 length {}: diff {d} (scale {scale})", g.len());
    }
}

#[test]
fn extra_buckets_start_from_row_31() {
    let enc = T5GraphEncoder::load(&fixture("t5-gated"), DType::F32, &Device::Cpu, 3).unwrap();
    let t = enc.bias_table().unwrap();
    assert_eq!(t.dim(0).unwrap(), 32 + 3 + 1);
    let r31 = t.i(31).unwrap().to_vec1::<f32>().unwrap();
    for r in 32..35 {
        assert_eq!(t.i(r).unwrap().to_vec1::<f32>().unwrap(), r31);
    }
    assert_ne!(t.i(30).unwrap().to_vec1::<f32>().unwrap(), r31, "a real table, not a constant");
    assert!(t.i(35).unwrap().to_vec1::<f32>().unwrap().iter().all(|&x| x < -1e29), "the mask row");
}
