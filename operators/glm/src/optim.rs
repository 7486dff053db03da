//! AdamW with parameter groups (the head and the encoder train at different rates), gradient
//! clipping, and a state that is saved beside the weights so training resumes exactly.

use std::collections::HashMap;
use std::path::Path;

use candle_core::backprop::GradStore;
use candle_core::{Device, Result, Tensor, Var};

/// A deterministic permutation of 0..n for epoch `epoch`: the order training visits its
/// examples in (the GLM's and the sentence encoder's), the same on a resumed run.
pub fn epoch_order(n: usize, epoch: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut s = 0x9e3779b97f4a7c15u64 ^ (epoch as u64).wrapping_mul(0xbf58476d1ce4e5b9);
    for i in (1..n).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

/// Variables trained at one learning rate.
pub struct ParamGroup {
    pub lr: f64,
    pub vars: Vec<(String, Var)>,
}

pub struct AdamW {
    pub groups: Vec<ParamGroup>,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Largest global gradient norm; larger gradients are scaled down (None: no clipping).
    pub max_grad_norm: Option<f64>,
    /// Steps taken (bias correction).
    pub step: usize,
    m: HashMap<String, Tensor>,
    v: HashMap<String, Tensor>,
}

impl AdamW {
    pub fn new(groups: Vec<ParamGroup>, weight_decay: f64, max_grad_norm: Option<f64>) -> Self {
        AdamW { groups, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay, max_grad_norm, step: 0, m: HashMap::new(), v: HashMap::new() }
    }

    /// The global L2 norm of the gradients of the trained variables.
    pub fn grad_norm(&self, grads: &GradStore) -> Result<f64> {
        let mut sq = 0f64;
        for g in &self.groups {
            for (_, var) in &g.vars {
                if let Some(gr) = grads.get(var.as_tensor()) {
                    sq += gr.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
                }
            }
        }
        Ok(sq.sqrt())
    }

    /// One update from `grads`; returns the gradient norm before clipping.
    pub fn step(&mut self, grads: &GradStore) -> Result<f64> {
        let norm = self.grad_norm(grads)?;
        let scale = match self.max_grad_norm {
            Some(max) if norm > max => max / norm,
            _ => 1.0,
        };
        self.step += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let c1 = 1.0 - b1.powi(self.step as i32);
        let c2 = 1.0 - b2.powi(self.step as i32);
        for g in &self.groups {
            for (name, var) in &g.vars {
                let Some(grad) = grads.get(var.as_tensor()) else { continue };
                let grad = (grad * scale)?;
                let m = match self.m.get(name) {
                    Some(m) => ((m * b1)? + (&grad * (1.0 - b1))?)?,
                    None => (&grad * (1.0 - b1))?,
                };
                let v = match self.v.get(name) {
                    Some(v) => ((v * b2)? + (grad.sqr()? * (1.0 - b2))?)?,
                    None => (grad.sqr()? * (1.0 - b2))?,
                };
                let theta = var.as_tensor();
                let update = ((&m / c1)? / ((&v / c2)?.sqrt()? + self.eps)?)?;
                let update = (update + (theta * self.weight_decay)?)?;
                var.set(&(theta - (update * g.lr)?)?)?;
                self.m.insert(name.clone(), m);
                self.v.insert(name.clone(), v);
            }
        }
        Ok(norm)
    }

    /// Writes the moments and the step count as safetensors.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut all: HashMap<String, Tensor> = HashMap::new();
        for (k, t) in &self.m {
            all.insert(format!("m.{k}"), t.clone());
        }
        for (k, t) in &self.v {
            all.insert(format!("v.{k}"), t.clone());
        }
        all.insert("step".into(), Tensor::new(&[self.step as u32], &Device::Cpu)?);
        candle_core::safetensors::save(&all, path)
    }

    /// Restores what [`AdamW::save`] wrote, on `device`.
    pub fn load(&mut self, path: &Path, device: &Device) -> Result<()> {
        let all = candle_core::safetensors::load(path, device)?;
        for (k, t) in all {
            if let Some(name) = k.strip_prefix("m.") {
                self.m.insert(name.to_string(), t);
            } else if let Some(name) = k.strip_prefix("v.") {
                self.v.insert(name.to_string(), t);
            } else if k == "step" {
                self.step = t.to_vec1::<u32>()?[0] as usize;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_step_matches_the_formula_and_state_round_trips() {
        let dev = Device::Cpu;
        let w = Var::new(&[1.0f32, -2.0], &dev).unwrap();
        let mk = |w: &Var| AdamW::new(vec![ParamGroup { lr: 0.1, vars: vec![("w".into(), w.clone())] }], 0.01, None);
        let mut opt = mk(&w);
        // loss = sum(w^2) -> grad 2w; first Adam step moves each weight by lr * sign(grad) (+ decay)
        let loss = w.as_tensor().sqr().unwrap().sum_all().unwrap();
        opt.step(&loss.backward().unwrap()).unwrap();
        let got = w.as_tensor().to_vec1::<f32>().unwrap();
        let want = [1.0 - 0.1 * (1.0 + 0.01 * 1.0), -2.0 - 0.1 * (-1.0 + 0.01 * -2.0)];
        for (g, w) in got.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-5, "{got:?} vs {want:?}");
        }
        // a saved and reloaded optimizer takes the same next step as the original
        let dir = tempfile::tempdir().unwrap();
        opt.save(&dir.path().join("o.safetensors")).unwrap();
        let w2 = Var::from_tensor(w.as_tensor()).unwrap();
        let mut opt2 = mk(&w2);
        opt2.load(&dir.path().join("o.safetensors"), &dev).unwrap();
        assert_eq!(opt2.step, 1);
        for (o, v) in [(&mut opt, &w), (&mut opt2, &w2)] {
            let loss = v.as_tensor().sqr().unwrap().sum_all().unwrap();
            o.step(&loss.backward().unwrap()).unwrap();
        }
        assert_eq!(w.as_tensor().to_vec1::<f32>().unwrap(), w2.as_tensor().to_vec1::<f32>().unwrap());
    }

    #[test]
    fn clipping_bounds_the_step() {
        let dev = Device::Cpu;
        let w = Var::new(&[3.0f32, 4.0], &dev).unwrap();
        let opt = AdamW::new(vec![ParamGroup { lr: 0.1, vars: vec![("w".into(), w.clone())] }], 0.0, Some(1.0));
        let loss = w.as_tensor().sqr().unwrap().sum_all().unwrap();
        let n = opt.grad_norm(&loss.backward().unwrap()).unwrap();
        assert!((n - 10.0).abs() < 1e-5, "{n}");
    }
}
