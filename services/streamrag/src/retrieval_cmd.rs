//! `streamrag eval` and `streamrag train`: a dataset's corpus goes through the real pipeline
//! (embedded transport); `eval` asks its questions through the query stage and reports
//! document recall; `train` fits the GLM retriever on the graph the pipeline built.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use futures::StreamExt;
use serde_json::json;
use streamrag_glm::graph::{Mode, TokenizedGraph};
use streamrag_glm::loss::glm_loss;
use streamrag_glm::model::{BackboneKind, GlmConfig, GlmModel, Training};
use streamrag_glm::optim::AdamW;
use streamrag_operators::glm_retriever::GlmRetriever;
use streamrag_operators::graph::GraphState;
use streamrag_operators::snapshot::Progress;
use streamrag_schemas::Query;

use crate::bench::percentile;
use crate::dataset::{Dataset, Question};
use crate::synth::recall_at;
use crate::node::{Node, NodeConfig, RetrieverChoice, Tasks};
use crate::progress::Bar;

/// Where the all-MiniLM-L6-v2 files are: $STREAMRAG_MINILM_DIR, else .models/ (what
/// scripts/fetch-models.sh fills).
pub fn default_minilm_dir() -> PathBuf {
    std::env::var("STREAMRAG_MINILM_DIR").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(".models/all-MiniLM-L6-v2"))
}

/// Starts an embedded node under `data` (a fresh temporary directory when None) and sends the
/// corpus through it; returns when every stage has caught up.
async fn index_corpus(ds: &Dataset, data: Option<&Path>, retriever: RetrieverChoice) -> Result<(Arc<Node>, Tasks, PathBuf, bool, f64)> {
    let (dir, temp) = match data {
        Some(d) => (d.to_path_buf(), false),
        None => (crate::scratch_dir("streamrag-eval")?, true),
    };
    let mut cfg = NodeConfig::embedded(&dir);
    cfg.retriever = retriever;
    let (node, tasks) = Node::start(cfg).await?;
    let t0 = Instant::now();
    let mut bar = Bar::counting("docs");
    bar.start("ingest", ds.corpus.len() as u64);
    for chunk in ds.corpus.chunks(500) {
        node.publish_documents(chunk).await?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish();
    node.wait_drained(Duration::from_secs(4 * 3600)).await?;
    Ok((node, tasks, dir, temp, t0.elapsed().as_secs_f64()))
}

pub struct EvalOptions {
    pub dataset: PathBuf,
    pub retriever: String,
    pub checkpoint: Option<PathBuf>,
    pub questions: Range<usize>,
    pub report: Option<PathBuf>,
    pub data: Option<PathBuf>,
    pub sentence_model: PathBuf,
    /// Questions in flight at once (the GLM batches them).
    pub concurrency: usize,
    pub glm_batch: usize,
}

#[derive(Default, Clone, Copy)]
struct Acc {
    n: usize,
    r2: f64,
    r5: f64,
}

impl Acc {
    fn add(&mut self, r2: f64, r5: f64) {
        self.n += 1;
        self.r2 += r2;
        self.r5 += r5;
    }
    fn json(&self) -> serde_json::Value {
        let d = self.n.max(1) as f64;
        json!({"n": self.n, "recall@2": round1(100.0 * self.r2 / d), "recall@5": round1(100.0 * self.r5 / d)})
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub async fn eval(o: EvalOptions) -> Result<serde_json::Value> {
    let ds = Dataset::load(&o.dataset)?;
    let questions: Vec<&Question> = ds.select(&o.questions);
    if questions.is_empty() {
        bail!("no questions with gold passages in {:?}", o.questions);
    }
    // a checkpoint matters only to the GLM (eval ignores it for the baselines)
    let checkpoint = o.checkpoint.clone().filter(|_| o.retriever == "glm");
    let choice = RetrieverChoice::from_flags(Some(&o.retriever), checkpoint, o.glm_batch, Some(o.sentence_model.clone()))?;
    let (node, tasks, dir, temp, index_s) = index_corpus(&ds, o.data.as_deref(), choice).await?;
    let stats = node.graph.as_ref().expect("kg-writer runs").current().stats();
    eprintln!("indexed {} passages in {index_s:.1}s: {} entities, {} triples", ds.corpus.len(), stats.entities, stats.triples);
    let t0 = Instant::now();
    let mut bar = Bar::counting("questions");
    bar.start(&o.retriever, questions.len() as u64);
    let node2 = node.clone();
    let mut answers: Vec<(usize, streamrag_schemas::Answer)> = futures::stream::iter(questions.iter().enumerate())
        .map(|(i, q)| {
            let node = node2.clone();
            let query = Query { schema_version: 1, query_id: format!("eval-{}-{}", q.index, q.id), question: q.text.clone(), top_k: Some(5) };
            async move { node.ask(&query, Duration::from_secs(3600)).await.map(|a| (i, a)) }
        })
        .buffer_unordered(o.concurrency.max(1))
        .inspect(|_| bar.inc(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    bar.finish();
    let ask_s = t0.elapsed().as_secs_f64();
    tasks.join(&node).await?;
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    answers.sort_by_key(|(i, _)| *i);
    let (mut all, mut resolved) = (Acc::default(), Acc::default());
    let mut by_type: BTreeMap<String, Acc> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut per_question = Vec::new();
    for (i, a) in &answers {
        let q = questions[*i];
        let ranked: Vec<String> = a.documents.iter().map(|d| d.id.clone()).collect();
        let (r2, r5) = (recall_at(&ranked, &q.gold, 2), recall_at(&ranked, &q.gold, 5));
        all.add(r2, r5);
        if q.fully_resolved {
            resolved.add(r2, r5);
        }
        by_type.entry(q.kind.clone()).or_default().add(r2, r5);
        latencies.push(a.latency_ms);
        per_question.push(json!({"index": q.index, "id": q.id, "type": q.kind, "recall@2": r2, "recall@5": r5, "seeds": a.seeds, "top5": ranked}));
    }
    let report = json!({
        "dataset": o.dataset.display().to_string(),
        "retriever": o.retriever,
        "checkpoint": o.checkpoint.as_ref().map(|c| c.display().to_string()),
        "questions": format!("{}..{}", o.questions.start, o.questions.end.min(ds.questions.len())),
        "unit": "percent",
        "n": all.n,
        "recall@2": all.json()["recall@2"],
        "recall@5": all.json()["recall@5"],
        "fully_resolved": resolved.json(),
        "by_type": by_type.iter().map(|(k, v)| (k.clone(), v.json())).collect::<serde_json::Map<_, _>>(),
        "graph": {"documents": stats.documents, "entities": stats.entities, "triples": stats.triples},
        "index_seconds": round1(index_s),
        "ask_seconds": round1(ask_s),
        "latency_ms": {"p50": round1(percentile(&mut latencies.clone(), 0.5)), "p95": round1(percentile(&mut latencies, 0.95))},
        "per_question": per_question,
    });
    println!("eval {} on {} ({} questions, {}):", o.retriever, o.dataset.display(), all.n, report["questions"].as_str().unwrap_or(""));
    println!("  {:<22} {:>5} {:>9} {:>9}", "", "n", "Recall@2", "Recall@5");
    let row = |name: &str, a: &Acc| {
        let j = a.json();
        println!("  {:<22} {:>5} {:>9.1} {:>9.1}", name, a.n, j["recall@2"].as_f64().unwrap_or(0.0), j["recall@5"].as_f64().unwrap_or(0.0));
    };
    row("all", &all);
    row("fully resolved gold", &resolved);
    for (k, v) in &by_type {
        row(k, v);
    }
    println!("  query latency p50 {} ms, p95 {} ms; {ask_s:.1}s for all questions", report["latency_ms"]["p50"], report["latency_ms"]["p95"]);
    if let Some(p) = &o.report {
        std::fs::write(p, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", p.display()))?;
        println!("  report: {}", p.display());
    }
    Ok(report)
}

pub struct TrainOptions {
    pub dataset: PathBuf,
    pub questions: Range<usize>,
    pub out: PathBuf,
    pub backbone: PathBuf,
    pub question_model: PathBuf,
    pub data: Option<PathBuf>,
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

/// One training question, ready to be turned into a graph.
struct Example {
    question: String,
    qvec: Vec<f32>,
    gold: HashSet<String>,
}

fn hardware(device: &Device) -> String {
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
fn labels(g: &GraphState, graph: &TokenizedGraph, gold: &HashSet<String>) -> Vec<f32> {
    graph
        .entities()
        .map(|n| f32::from(g.entity(&n.id).is_some_and(|e| e.docs().any(|d| gold.contains(d)))))
        .collect()
}

/// A deterministic permutation of 0..n for epoch `epoch`.
fn epoch_order(n: usize, epoch: usize) -> Vec<usize> {
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

pub async fn train(o: TrainOptions) -> Result<()> {
    let ds = Dataset::load(&o.dataset)?;
    let questions: Vec<&Question> = ds.select(&o.questions);
    if questions.is_empty() {
        bail!("no training questions with gold passages in {:?}", o.questions);
    }
    let (node, tasks, dir, temp, index_s) = index_corpus(&ds, o.data.as_deref(), RetrieverChoice::Ppr).await?;
    let g = node.graph.as_ref().expect("kg-writer runs").current();
    tasks.join(&node).await?;
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!("indexed {} passages in {index_s:.1}s: {} entities, {} triples", ds.corpus.len(), g.entity_count(), g.triple_count());
    let dataset = o.dataset.display().to_string();
    let range = format!("{}..{}", o.questions.start, o.questions.end.min(ds.questions.len()));
    let questions: Vec<(String, HashSet<String>)> = questions.iter().map(|q| (q.text.clone(), q.gold.iter().cloned().collect())).collect();
    tokio::task::spawn_blocking(move || train_on(&g, &questions, &o, dataset, range)).await?
}

fn train_on(g: &GraphState, questions: &[(String, HashSet<String>)], o: &TrainOptions, dataset: String, range: String) -> Result<()> {
    let resume = o.out.join("glm.json").exists();
    let model = if resume {
        let m = GlmModel::load(&o.out, &o.device).map_err(anyhow::Error::msg)?;
        if m.config.training.dataset != dataset || m.config.training.questions != range {
            bail!(
                "{} holds training on {} questions {}; this run asks for {dataset} {range} (use another --out)",
                o.out.display(),
                m.config.training.dataset,
                m.config.training.questions
            );
        }
        eprintln!("resuming {}: epoch {}, {} examples in, step {}", o.out.display(), m.config.training.epochs_done, m.config.training.next, m.config.training.steps);
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
        GlmModel::init(&o.backbone, &o.question_model, cfg, &o.device).map_err(anyhow::Error::msg)?
    };
    let mut r = GlmRetriever::new(model);
    let t = r.model.config.training.clone();
    let mut opt = AdamW::new(r.model.param_groups(t.lr_head, t.lr_encoder), 0.01, Some(1.0));
    if resume && o.out.join("optimizer.safetensors").exists() {
        opt.load(&o.out.join("optimizer.safetensors"), &o.device)?;
    }
    // the examples: questions whose subgraph holds at least one entity of a gold passage
    let texts: Vec<&str> = questions.iter().map(|q| q.0.as_str()).collect();
    let qvecs = r.model.question.embed_vecs(&texts).map_err(anyhow::Error::msg)?;
    let mut examples = Vec::new();
    let (mut no_graph, mut no_positive) = (0, 0);
    let prep_t0 = Instant::now();
    let mut bar = Bar::counting("questions");
    bar.start("prepare", questions.len() as u64);
    for ((q, gold), qvec) in questions.iter().zip(qvecs) {
        let p = r.prepare(g, q, &qvec).map_err(anyhow::Error::msg)?;
        bar.inc(1);
        let Some(graph) = p.graph else {
            no_graph += 1;
            continue;
        };
        if labels(g, &graph, gold).iter().all(|&x| x == 0.0) {
            no_positive += 1;
            continue;
        }
        examples.push(Example { question: q.clone(), qvec, gold: gold.clone() });
    }
    bar.finish();
    eprintln!(
        "{} training examples of {} questions ({no_graph} link to nothing, {no_positive} have no gold entity in their subgraph)",
        examples.len(),
        questions.len()
    );
    if examples.is_empty() {
        bail!("no usable training examples");
    }
    r.model.config.training.examples = examples.len();
    let bs = t.batch_size.max(1);
    eprintln!("prepared in {:.1}s", prep_t0.elapsed().as_secs_f64());
    let t0 = Instant::now();
    let seconds_before = t.seconds;
    let mut steps_this_run = 0;
    let mut ema: Option<f64> = None;
    let save = |r: &GlmRetriever, opt: &AdamW| -> Result<()> {
        std::fs::create_dir_all(&o.out)?;
        opt.save(&o.out.join("optimizer.safetensors.tmp"))?;
        std::fs::rename(o.out.join("optimizer.safetensors.tmp"), o.out.join("optimizer.safetensors"))?;
        r.model.save(&o.out).map_err(anyhow::Error::msg)
    };
    while r.model.config.training.epochs_done < t.epochs {
        let epoch = r.model.config.training.epochs_done;
        let order = epoch_order(examples.len(), epoch);
        let mut bar = Bar::counting("examples");
        bar.start(&format!("epoch {}", epoch + 1), examples.len() as u64);
        bar.inc(r.model.config.training.next.min(examples.len()) as u64);
        while r.model.config.training.next < examples.len() {
            if o.max_steps.is_some_and(|m| steps_this_run >= m) {
                bar.finish();
                r.model.config.training.seconds = seconds_before + t0.elapsed().as_secs_f64();
                save(&r, &opt)?;
                eprintln!("stopped after {steps_this_run} steps in {:.1}s (--max-steps); run again to resume", t0.elapsed().as_secs_f64());
                return Ok(());
            }
            let start = r.model.config.training.next;
            let idx = &order[start..(start + bs).min(examples.len())];
            let mut graphs = Vec::with_capacity(idx.len());
            let mut golds = Vec::with_capacity(idx.len());
            let mut qv = Vec::new();
            for &i in idx {
                let e = &examples[i];
                let p = r.prepare(g, &e.question, &e.qvec).map_err(anyhow::Error::msg)?;
                graphs.push(p.graph.expect("usable examples have a graph"));
                golds.push(&e.gold);
                qv.extend_from_slice(&e.qvec);
            }
            let refs: Vec<&TokenizedGraph> = graphs.iter().collect();
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
            opt.step(&loss.backward()?)?;
            ema = Some(ema.map_or(lv, |e| 0.95 * e + 0.05 * lv));
            let tr = &mut r.model.config.training;
            tr.next += idx.len();
            tr.steps += 1;
            tr.last_loss = ema.unwrap_or(lv);
            steps_this_run += 1;
            bar.inc(idx.len() as u64);
            bar.say(format!("loss {:.3}", tr.last_loss));
            if o.save_every > 0 && tr.steps.is_multiple_of(o.save_every) {
                tr.seconds = seconds_before + t0.elapsed().as_secs_f64();
                tracing::info!(epoch = epoch + 1, step = tr.steps, examples = tr.next, loss = tr.last_loss, seconds = tr.seconds as u64, "checkpoint saved");
                save(&r, &opt)?;
            }
        }
        bar.finish();
        let tr = &mut r.model.config.training;
        tr.epochs_done += 1;
        tr.next = 0;
        tr.seconds = seconds_before + t0.elapsed().as_secs_f64();
        eprintln!("epoch {} done: loss (moving average) {:.4}, {:.0}s so far", tr.epochs_done, tr.last_loss, tr.seconds);
        save(&r, &opt)?;
    }
    let tr = &r.model.config.training;
    println!(
        "trained {} on {} examples, {} epochs, {} steps in {:.0}s ({}); checkpoint {}",
        tr.questions,
        tr.examples,
        tr.epochs_done,
        tr.steps,
        tr.seconds,
        tr.hardware,
        o.out.display()
    );
    Ok(())
}
