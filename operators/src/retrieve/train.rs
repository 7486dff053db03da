//! Fitting the GLM retriever on labelled questions over a graph (docs/glm.md, "Training"):
//! each question's seeds and subgraph are prepared exactly as at query time
//! ([`GlmRetriever::prepare`]); an entity is a positive when a gold document mentions it; the
//! loss is the paper's BCE + ListCE mix, AdamW updates the head and the encoder at their own
//! rates. Checkpoints are written every `save_every` steps and after each epoch, and a run
//! resumes from the one in `out`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use streamrag_glm::graph::{Mode, TokenizedGraph};
use streamrag_glm::loss::glm_loss;
use streamrag_glm::model::{BackboneKind, GlmConfig, GlmModel, Training};
use streamrag_glm::optim::AdamW;
pub use streamrag_glm::optim::epoch_order;
use streamrag_glm::Error;

use crate::graph::GraphState;
use crate::progress::Progress;

use super::glm::GlmRetriever;

/// Why training could not go on.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Model(#[from] Error),
    #[error("{0}")]
    Tensor(#[from] candle_core::Error),
    /// The checkpoint directory holds another run's training.
    #[error("{out} holds training on {had}; this run asks for {asked} (use another --out)")]
    OtherRun { out: String, had: String, asked: String },
    #[error("no usable training examples: {0}")]
    NoExamples(String),
}

pub struct TrainOptions {
    /// Where the training questions come from (a dataset path), and which of them: the
    /// checkpoint records both, and a resumed run must match.
    pub dataset: String,
    pub questions: String,
    pub out: PathBuf,
    pub backbone: PathBuf,
    pub question_model: PathBuf,
    pub epochs: usize,
    pub batch_size: usize,
    pub lr_head: f64,
    pub lr_encoder: f64,
    pub max_triplets: usize,
    pub max_hops: usize,
    pub save_every: usize,
    pub device: Device,
    /// Stop after this many steps in this run (tests, smoke runs); the checkpoint resumes.
    pub max_steps: Option<usize>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Trained {
    pub training: Training,
    /// Stopped by `max_steps` before the last epoch ended.
    pub stopped_early: bool,
    pub steps_this_run: usize,
}

/// One training question, ready to be turned into a graph.
struct Example {
    question: String,
    qvec: Vec<f32>,
    gold: HashSet<String>,
}

/// The hardware a run trains on, as the checkpoint records it.
pub fn hardware(device: &Device) -> String {
    if device.is_cuda() {
        return "cuda:0".into();
    }
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    format!("CPU: {} x {model}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// Entities of `graph` that a gold passage mentions.
pub fn labels(g: &GraphState, graph: &TokenizedGraph, gold: &HashSet<String>) -> Vec<f32> {
    graph
        .entities()
        .map(|n| f32::from(g.entity(&n.id).is_some_and(|e| e.docs().any(|d| gold.contains(d)))))
        .collect()
}

/// Trains on `questions` (text, gold document ids) over `g`, writing checkpoints to `o.out`.
pub fn train(g: &GraphState, questions: &[(String, HashSet<String>)], o: &TrainOptions, progress: &mut dyn Progress) -> Result<Trained, TrainError> {
    let (dataset, range) = (o.dataset.clone(), o.questions.clone());
    let resume = o.out.join("glm.json").exists();
    let model = if resume {
        let m = GlmModel::load(&o.out, &o.device)?;
        if m.config.training.dataset != dataset || m.config.training.questions != range {
            return Err(TrainError::OtherRun {
                out: o.out.display().to_string(),
                had: format!("{} questions {}", m.config.training.dataset, m.config.training.questions),
                asked: format!("{dataset} {range}"),
            });
        }
        progress.note(format!("resuming {}: epoch {}, {} examples in, step {}", o.out.display(), m.config.training.epochs_done, m.config.training.next, m.config.training.steps));
        m
    } else {
        let cfg = GlmConfig {
            backbone: BackboneKind::Bert,
            mode: Mode::Global,
            question_text: true,
            max_hops: o.max_hops,
            max_triplets: o.max_triplets,
            top_entities: 20,
            hidden: 0,
            question_dim: 0,
            training: Training {
                dataset,
                questions: range,
                epochs: o.epochs,
                batch_size: o.batch_size.max(1),
                lr_head: o.lr_head,
                lr_encoder: o.lr_encoder,
                hardware: hardware(&o.device),
                ..Training::default()
            },
        };
        GlmModel::init(&o.backbone, &o.question_model, cfg, &o.device)?
    };
    let mut r = GlmRetriever::new(model);
    let t = r.model.config.training.clone();
    let mut opt = AdamW::new(r.model.param_groups(t.lr_head, t.lr_encoder), 0.01, Some(1.0));
    if resume && o.out.join("optimizer.safetensors").exists() {
        opt.load(&o.out.join("optimizer.safetensors"), &o.device)?;
    }
    // the examples: questions whose subgraph holds at least one entity of a gold passage
    let texts: Vec<&str> = questions.iter().map(|q| q.0.as_str()).collect();
    let qvecs = r.model.question.embed_vecs(&texts)?;
    let mut examples = Vec::new();
    let (mut no_graph, mut no_positive) = (0, 0);
    let mut tokens: Vec<usize> = Vec::new();
    let prep_t0 = Instant::now();
    progress.start("prepare", questions.len() as u64);
    for ((q, gold), qvec) in questions.iter().zip(qvecs) {
        let p = r.prepare(g, q, &qvec)?;
        progress.inc(1);
        let Some(graph) = p.graph else {
            no_graph += 1;
            continue;
        };
        if labels(g, &graph, gold).iter().all(|&x| x == 0.0) {
            no_positive += 1;
            continue;
        }
        tokens.push(graph.len());
        examples.push(Example { question: q.clone(), qvec, gold: gold.clone() });
    }
    progress.finish();
    // attention memory grows with the square of these: what decides the batch a device holds
    tokens.sort_unstable();
    if let Some(max) = tokens.last() {
        progress.note(format!("tokens per subgraph: p50 {}, p90 {}, max {max}", tokens[tokens.len() / 2], tokens[tokens.len() * 9 / 10]));
    }
    let found = format!(
        "{} training examples of {} questions ({no_graph} link to nothing, {no_positive} have no gold entity in their subgraph)",
        examples.len(),
        questions.len()
    );
    if examples.is_empty() {
        return Err(TrainError::NoExamples(found));
    }
    progress.note(found);
    r.model.config.training.examples = examples.len();
    let bs = t.batch_size.max(1);
    progress.note(format!("prepared in {:.1}s", prep_t0.elapsed().as_secs_f64()));
    let t0 = Instant::now();
    let seconds_before = t.seconds;
    let mut steps_this_run = 0;
    let mut ema: Option<f64> = None;
    let mut phases = Phases::default();
    let save = |r: &GlmRetriever, opt: &AdamW| -> Result<(), TrainError> {
        std::fs::create_dir_all(&o.out).map_err(Error::io(&o.out))?;
        let tmp = o.out.join("optimizer.safetensors.tmp");
        opt.save(&tmp)?;
        std::fs::rename(&tmp, o.out.join("optimizer.safetensors")).map_err(Error::io(&tmp))?;
        Ok(r.model.save(&o.out)?)
    };
    while r.model.config.training.epochs_done < t.epochs {
        let epoch = r.model.config.training.epochs_done;
        let order = epoch_order(examples.len(), epoch);
        progress.start(&format!("epoch {}", epoch + 1), examples.len() as u64);
        progress.inc(r.model.config.training.next.min(examples.len()) as u64);
        while r.model.config.training.next < examples.len() {
            if o.max_steps.is_some_and(|m| steps_this_run >= m) {
                progress.finish();
                r.model.config.training.seconds = seconds_before + t0.elapsed().as_secs_f64();
                save(&r, &opt)?;
                progress.note(format!("stopped after {steps_this_run} steps in {:.1}s (--max-steps); run again to resume; per step {phases}", t0.elapsed().as_secs_f64()));
                return Ok(Trained { training: r.model.config.training.clone(), stopped_early: true, steps_this_run });
            }
            let phase_t0 = Instant::now();
            let start = r.model.config.training.next;
            let idx = &order[start..(start + bs).min(examples.len())];
            let mut graphs = Vec::with_capacity(idx.len());
            let mut golds = Vec::with_capacity(idx.len());
            let mut qv = Vec::new();
            for &i in idx {
                let e = &examples[i];
                let p = r.prepare(g, &e.question, &e.qvec)?;
                graphs.push(p.graph.expect("usable examples have a graph"));
                golds.push(&e.gold);
                qv.extend_from_slice(&e.qvec);
            }
            let refs: Vec<&TokenizedGraph> = graphs.iter().collect();
            phases.add(0, &phase_t0);
            let phase_t0 = Instant::now();
            let q = Tensor::from_vec(qv, (idx.len(), r.model.config.question_dim), &o.device)?;
            let (logits, batch) = r.model.logits(&refs, &q)?;
            let e_max = logits.dim(1)?;
            let mut lab = vec![0f32; idx.len() * e_max];
            let mut mask = vec![0f32; idx.len() * e_max];
            for (b, graph) in graphs.iter().enumerate() {
                for (j, y) in labels(g, graph, golds[b]).into_iter().enumerate() {
                    lab[b * e_max + j] = y;
                    mask[b * e_max + j] = 1.0;
                }
                debug_assert_eq!(batch.entities[b].len(), graph.entities().count());
            }
            let lab = Tensor::from_vec(lab, (idx.len(), e_max), &o.device)?;
            let mask = Tensor::from_vec(mask, (idx.len(), e_max), &o.device)?.to_dtype(DType::F32)?;
            let loss = glm_loss(&logits, &lab, &mask)?;
            let lv = loss.to_scalar::<f32>()? as f64;
            phases.add(1, &phase_t0);
            // each phase waits for the device, so that its time is its own
            let phase_t0 = Instant::now();
            let grads = loss.backward()?;
            o.device.synchronize()?;
            phases.add(2, &phase_t0);
            let phase_t0 = Instant::now();
            opt.step(&grads)?;
            o.device.synchronize()?;
            phases.add(3, &phase_t0);
            ema = Some(ema.map_or(lv, |e| 0.95 * e + 0.05 * lv));
            let tr = &mut r.model.config.training;
            tr.next += idx.len();
            tr.steps += 1;
            tr.last_loss = ema.unwrap_or(lv);
            steps_this_run += 1;
            progress.inc(idx.len() as u64);
            progress.say(format!("loss {:.3}", tr.last_loss));
            if o.save_every > 0 && tr.steps.is_multiple_of(o.save_every) {
                tr.seconds = seconds_before + t0.elapsed().as_secs_f64();
                tracing::info!(epoch = epoch + 1, step = tr.steps, examples = tr.next, loss = tr.last_loss, seconds = tr.seconds as u64, per_step = %phases, "checkpoint saved");
                save(&r, &opt)?;
            }
        }
        progress.finish();
        let tr = &mut r.model.config.training;
        tr.epochs_done += 1;
        tr.next = 0;
        tr.seconds = seconds_before + t0.elapsed().as_secs_f64();
        progress.note(format!("epoch {} done: loss (moving average) {:.4}, {:.0}s so far; per step {phases}", tr.epochs_done, tr.last_loss, tr.seconds));
        save(&r, &opt)?;
    }
    Ok(Trained { training: r.model.config.training.clone(), stopped_early: false, steps_this_run })
}

/// Where a training step's time goes: building the subgraphs (CPU), the forward pass and
/// loss, the backward pass, the optimizer; what to profile first on a new device.
#[derive(Default)]
struct Phases {
    ms: [f64; 4],
    steps: usize,
}

impl Phases {
    fn add(&mut self, phase: usize, since: &Instant) {
        self.ms[phase] += since.elapsed().as_secs_f64() * 1e3;
        if phase == 3 {
            self.steps += 1;
        }
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.steps.max(1) as f64;
        let [p, fw, bw, opt] = self.ms.map(|x| x / n);
        write!(f, "subgraphs {p:.0} ms, forward {fw:.0} ms, backward {bw:.0} ms, optimizer {opt:.0} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_orders_are_permutations_that_differ_by_epoch_and_repeat_by_epoch() {
        let a = epoch_order(50, 0);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_eq!(a, epoch_order(50, 0), "a resumed run sees the same order");
        assert_ne!(a, epoch_order(50, 1));
        assert!(epoch_order(0, 3).is_empty());
    }
}
