//! `streamrag eval`: a dataset's corpus goes through the real pipeline (embedded transport);
//! its questions go through the query stage; the report gives document recall per question
//! type, with the latency.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use futures::StreamExt;
use serde_json::json;
use streamrag_operators::metrics::quantile;
use streamrag_operators::progress::Progress;
use streamrag_operators::retrieve::{Hybrid, Retriever, RetrieverChoice};
use streamrag_operators::llm::{LlmSettings, LlmSpec};
use streamrag_operators::stages::ResolveConfig;
use streamrag_schemas::{Query, SCHEMA_VERSION};

use super::minilm_dir;
use crate::answer_eval::{score, strip_citations, Fake, Vocabulary};
use crate::dataset::{parse_range, Dataset, Question};
use crate::node::{Node, NodeConfig, Tasks};
use crate::progress::Bar;
use crate::synth::recall_at;

#[derive(Args)]
pub struct EvalArgs {
    /// A dataset directory (HippoRAG / GFM-RAG layout, e.g. ../shared/datasets/2wikimultihopqa).
    #[arg(long)]
    pub dataset: PathBuf,
    /// hybrid, glm, ppr, dense or bm25.
    #[arg(long, default_value = "hybrid")]
    pub retriever: String,
    /// Hybrid weights: KEY=VALUE, repeatable (the fields of HybridParams, e.g. damping=0.5).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Also measure the hybrid with each of its parts switched off in turn.
    #[arg(long)]
    pub ablate: bool,
    /// Also time retrieval with access labels: every other document (by id) labelled
    /// `hidden`, the questions asked by a reader of public documents only, against the same
    /// questions without labels, on the same graph and indexes.
    #[arg(long)]
    pub access: bool,
    /// A checkpoint `streamrag train` wrote (for --retriever glm, or joining the hybrid's fusion).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Question indices A..B (B exclusive); default all.
    #[arg(long, default_value = "0..")]
    pub questions: String,
    /// Write the JSON report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Data directory for the pipeline (default: a temporary one, removed after).
    #[arg(long, value_parser = super::data_dir_arg)]
    pub data: Option<PathBuf>,
    /// The --data directory already holds this corpus (an earlier eval's): send nothing, ask
    /// at once (its passage indexes are read on from their commits).
    #[arg(long, requires = "data")]
    pub indexed: bool,
    /// The sentence encoder (all-MiniLM-L6-v2 directory) of the dense retriever.
    #[arg(long)]
    pub sentence_model: Option<PathBuf>,
    /// Questions in flight at once.
    #[arg(long, value_parser = super::at_least_one, default_value_t = 8)]
    pub concurrency: usize,
    /// Documents asked for per question (at least 5, which Recall@5 reads); the report's
    /// `top5` keeps the first five, `ranked` all of them when more than 5.
    #[arg(long, value_parser = clap::value_parser!(u32).range(5..=1000), default_value_t = 5)]
    pub depth: u32,
    /// GLM graphs per forward pass.
    #[arg(long, value_parser = super::at_least_one, default_value_t = 4)]
    pub glm_batch: usize,
    /// The GLM's subgraph budget at query time (default: the checkpoint's training budget;
    /// the hybrid's GLM takes --set glm_triplets=N).
    #[arg(long, value_parser = super::at_least_one)]
    pub glm_triplets: Option<usize>,
    /// Entity resolution while indexing, with this sentence encoder (all-MiniLM-L6-v2
    /// directory), as `run --resolve-model`; off by default, as in `run`.
    #[arg(long, conflicts_with = "indexed")]
    pub resolve_model: Option<PathBuf>,
    /// Link threshold of entity resolution (cosine).
    #[arg(long, default_value_t = 0.8, requires = "resolve_model")]
    pub resolve_threshold: f32,
    /// Also score the answers' text: exact match and token F1 against the gold answers, the
    /// abstention rate, and the same questions with made-up names (which the corpus cannot
    /// answer) to measure abstention where it is due.
    #[arg(long)]
    pub answers: bool,
    /// With --answers: how many unanswerable questions to make (half with invented words,
    /// half with two real title words that no passage holds together).
    #[arg(long, default_value_t = 100, requires = "answers")]
    pub unanswerable: usize,
    /// The answering LLM (openai:MODEL or local:PATH.gguf); default: the extractive answerer.
    #[arg(long)]
    pub answer_llm: Option<String>,
    /// The OpenAI-compatible endpoint for an openai: answering LLM.
    #[arg(long, env = "STREAMRAG_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
}

/// Recall of the node's hybrid with each part switched off in turn, on the same graph and
/// indexes (retrieval called in process, eight questions per batch).
fn ablate(node: &Node, h: &Hybrid, questions: &[&Question]) -> Result<Vec<(&'static str, Acc)>> {
    let g = node.graph.as_ref().expect("kg-writer runs").current();
    let mut out = Vec::new();
    for (name, params) in h.params.ablations() {
        let r = Retriever::Hybrid(Arc::new(Hybrid { params, ..h.clone() }));
        let mut acc = Acc::default();
        for chunk in questions.chunks(8) {
            let asks: Vec<(&str, usize)> = chunk.iter().map(|q| (q.text.as_str(), 5)).collect();
            for (q, got) in chunk.iter().zip(r.retrieve_batch(&g, &asks)?) {
                let ranked: Vec<String> = got.documents.into_iter().map(|d| d.id).collect();
                acc.add(recall_at(&ranked, &q.gold, 2), recall_at(&ranked, &q.gold, 5));
            }
        }
        out.push((name, acc));
    }
    Ok(out)
}

/// Retrieval latency on the same graph and indexes with and without access labels: every
/// other document (sorted by id) labelled `hidden`, a reader of the public documents only
/// (its view built once, timed apart), each question alone, the two runs alternating. Checks
/// that no hidden document comes back.
fn access_bench(node: &Node, r: &Retriever, questions: &[&Question]) -> Result<serde_json::Value> {
    use streamrag_operators::access::Reader;
    use streamrag_operators::graph::{view_of, Dirty};
    let g = node.graph.as_ref().expect("kg-writer runs").current();
    let mut labelled = (*g).clone();
    let mut ids: Vec<String> = g.docs().map(|d| d.id().to_string()).collect();
    ids.sort();
    let hidden: std::collections::HashSet<&String> = ids.iter().skip(1).step_by(2).collect();
    for id in &hidden {
        let mut e = g.doc(id).expect("listed").to_entry();
        e.access.insert("hidden".into());
        labelled.apply(id, Some(&e), &mut Dirty::default());
    }
    let t = Instant::now();
    let view = view_of(&labelled, &Reader::Labels(Default::default()));
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let (mut plain, mut restricted, mut leaked, mut found) = (Vec::new(), Vec::new(), 0usize, 0usize);
    for q in questions {
        let t = Instant::now();
        r.retrieve(&g, &q.text, 5)?;
        plain.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let got = r.retrieve(&view, &q.text, 5)?;
        restricted.push(t.elapsed().as_secs_f64() * 1e3);
        leaked += got.documents.iter().filter(|d| hidden.contains(&d.id)).count();
        found += got.documents.len();
    }
    if leaked > 0 {
        bail!("{leaked} hidden documents came back to a reader of public documents");
    }
    let (p50, p95) = (quantile(&mut plain, 0.5), quantile(&mut plain, 0.95));
    let (l50, l95) = (quantile(&mut restricted, 0.5), quantile(&mut restricted, 0.95));
    Ok(json!({
        "documents": ids.len(), "hidden": hidden.len(), "view_build_ms": round1(build_ms),
        "view": {"documents": view.document_count(), "entities": view.entity_count(), "triples": view.triple_count()},
        "no_labels_ms": {"p50": round1(p50), "p95": round1(p95)},
        "half_hidden_ms": {"p50": round1(l50), "p95": round1(l95)},
        "ratio": {"p50": (l50 / p50.max(1e-9) * 100.0).round() / 100.0, "p95": (l95 / p95.max(1e-9) * 100.0).round() / 100.0},
        "documents_returned_per_question": (found as f64 / questions.len().max(1) as f64 * 10.0).round() / 10.0,
    }))
}

/// Starts an embedded node under `data` (a fresh temporary directory when None) and sends the
/// corpus through it; returns when every stage has caught up.
pub async fn index_corpus(ds: &Dataset, data: Option<&Path>, retriever: RetrieverChoice, resolve: ResolveConfig, answer_llm: Option<LlmSettings>, send: bool) -> Result<(Arc<Node>, Tasks, PathBuf, bool, f64)> {
    let (dir, temp) = match data {
        Some(d) => (d.to_path_buf(), false),
        None => (crate::scratch_dir("streamrag-eval")?, true),
    };
    let mut cfg = NodeConfig::embedded(&dir);
    cfg.query.retriever = retriever;
    cfg.resolve = resolve;
    cfg.query.answer_llm = answer_llm;
    let (node, tasks) = Node::start(cfg).await?;
    let t0 = Instant::now();
    if send {
        let mut bar = Bar::counting("docs");
        bar.start("ingest", ds.corpus.len() as u64);
        for chunk in ds.corpus.chunks(500) {
            node.publish_documents(chunk).await?;
            bar.inc(chunk.len() as u64);
        }
        bar.finish();
    }
    node.wait_drained(Duration::from_secs(4 * 3600)).await?;
    Ok((node, tasks, dir, temp, t0.elapsed().as_secs_f64()))
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

/// Answer-text scores over questions.
#[derive(Default, Clone, Copy)]
struct AnswerAcc {
    n: usize,
    em: f64,
    f1: f64,
    abstained: usize,
    gold_retrieved: usize,
    abstained_gold_retrieved: usize,
}

impl AnswerAcc {
    fn add(&mut self, em: f64, f1: f64, abstained: bool, gold_retrieved: bool) {
        self.n += 1;
        self.em += em;
        self.f1 += f1;
        self.abstained += usize::from(abstained);
        self.gold_retrieved += usize::from(gold_retrieved);
        self.abstained_gold_retrieved += usize::from(abstained && gold_retrieved);
    }
    fn json(&self) -> serde_json::Value {
        let d = self.n.max(1) as f64;
        json!({
            "n": self.n,
            "em": round1(100.0 * self.em / d),
            "f1": round1(100.0 * self.f1 / d),
            "abstained_percent": round1(100.0 * self.abstained as f64 / d),
            "gold_retrieved": self.gold_retrieved,
            "abstained_when_gold_retrieved_percent": round1(100.0 * self.abstained_gold_retrieved as f64 / self.gold_retrieved.max(1) as f64),
        })
    }
}

/// Asks `n` questions the corpus cannot answer: the evaluated questions' own patterns with
/// their names replaced by made-up ones (see [`crate::answer_eval`]); returns each question
/// with its answer.
async fn ask_unanswerable(node: &Arc<Node>, ds: &Dataset, questions: &[&Question], n: usize, concurrency: usize) -> Result<Vec<(String, streamrag_schemas::Answer)>> {
    let vocab = Vocabulary::new(&ds.corpus);
    let mut made = Vec::new();
    for (k, q) in questions.iter().cycle().take(n * 4).enumerate() {
        if made.len() >= n {
            break;
        }
        let kind = if made.len() % 2 == 0 { Fake::Invented } else { Fake::Recombined };
        if let Some(fake) = vocab.unanswerable(&q.text, kind, (q.index * 31 + k) as u64) {
            made.push(fake);
        }
    }
    let mut bar = Bar::counting("questions");
    bar.start("unanswerable", made.len() as u64);
    let out = futures::stream::iter(made.into_iter().enumerate())
        .map(|(i, text)| {
            let node = node.clone();
            let query = Query { access: Default::default(), schema_version: SCHEMA_VERSION, query_id: format!("unanswerable-{i}"), question: text.clone(), top_k: Some(5) };
            async move { node.ask(&query, Duration::from_secs(3600)).await.map(|a| (text, a)) }
        })
        .buffered(concurrency.max(1))
        .inspect(|_| bar.inc(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    bar.finish();
    Ok(out)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub async fn run(o: EvalArgs) -> Result<()> {
    let range = parse_range(&o.questions)?;
    let ds = Dataset::load(&o.dataset)?;
    let questions: Vec<&Question> = ds.select(&range);
    if questions.is_empty() {
        bail!("no questions with gold passages in {range:?}");
    }
    // a checkpoint matters only to the GLM and the hybrid it joins (eval ignores it for the baselines)
    let checkpoint = o.checkpoint.clone().filter(|_| o.retriever == "glm" || o.retriever == "hybrid");
    let mut choice = RetrieverChoice::from_flags(Some(&o.retriever), checkpoint, o.glm_batch, minilm_dir(o.sentence_model.clone()))?;
    choice.set_glm_triplets(o.glm_triplets);
    match &mut choice {
        RetrieverChoice::Dense { model } => super::check_model_dir(model, "--sentence-model")?,
        RetrieverChoice::Hybrid { params, .. } => {
            for kv in &o.set {
                let (k, v) = kv.split_once('=').with_context(|| format!("--set {kv}: KEY=VALUE"))?;
                params.set(k.trim(), v.trim()).map_err(|e| anyhow::anyhow!("--set {kv}: {e}"))?;
            }
        }
        _ if !o.set.is_empty() || o.ablate => bail!("--set and --ablate are for --retriever hybrid"),
        _ => {}
    }
    if let Some(model) = &o.resolve_model {
        super::check_model_dir(model, "--resolve-model")?;
    }
    let resolve = ResolveConfig { model: o.resolve_model.clone(), threshold: o.resolve_threshold };
    let answer_llm = match &o.answer_llm {
        None => None,
        Some(spec) => {
            let mut s = LlmSettings::new(LlmSpec::parse(spec).map_err(anyhow::Error::msg)?);
            s.base_url = o.llm_base_url.clone();
            Some(s)
        }
    };
    let (node, tasks, dir, temp, index_s) = index_corpus(&ds, o.data.as_deref(), choice, resolve, answer_llm, !o.indexed).await?;
    let stats = node.graph.as_ref().expect("kg-writer runs").current().stats();
    eprintln!("indexed {} passages in {index_s:.1}s: {} entities, {} triples", ds.corpus.len(), stats.entities, stats.triples);
    let t0 = Instant::now();
    let mut bar = Bar::counting("questions");
    bar.start(&o.retriever, questions.len() as u64);
    let node2 = node.clone();
    let mut answers: Vec<(usize, streamrag_schemas::Answer)> = futures::stream::iter(questions.iter().enumerate())
        .map(|(i, q)| {
            let node = node2.clone();
            let query = Query { access: Default::default(), schema_version: SCHEMA_VERSION, query_id: format!("eval-{}-{}", q.index, q.id), question: q.text.clone(), top_k: Some(o.depth) };
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
    let unanswerable = if o.answers && o.unanswerable > 0 { ask_unanswerable(&node, &ds, &questions, o.unanswerable, o.concurrency).await? } else { vec![] };
    let ablation = match (&node.retriever, o.ablate) {
        (Some(Retriever::Hybrid(h)), true) => ablate(&node, h, &questions)?,
        _ => vec![],
    };
    let access = match (&node.retriever, o.access) {
        (Some(r), true) => Some(access_bench(&node, r, &questions)?),
        _ => None,
    };
    tasks.join(&node).await?;
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    answers.sort_by_key(|(i, _)| *i);
    let (mut all, mut resolved) = (Acc::default(), Acc::default());
    let mut by_type: BTreeMap<String, Acc> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut per_question = Vec::new();
    let mut text = AnswerAcc::default();
    let mut text_by_type: BTreeMap<String, AnswerAcc> = BTreeMap::new();
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
        let mut row = json!({"index": q.index, "id": q.id, "type": q.kind, "recall@2": r2, "recall@5": r5, "seeds": a.seeds, "top5": ranked.iter().take(5).collect::<Vec<_>>(), "triples": a.triples.iter().map(|t| format!("({}; {}; {})", t.subject, t.relation, t.object)).collect::<Vec<_>>()});
        if ranked.len() > 5 {
            row["ranked"] = json!(ranked);
        }
        if o.answers && !q.answers.is_empty() {
            let predicted = if a.abstained { String::new() } else { strip_citations(a.answer.as_deref().unwrap_or("")) };
            let (em, f1) = score(&predicted, &q.answers);
            text.add(em, f1, a.abstained, r5 >= 1.0);
            text_by_type.entry(q.kind.clone()).or_default().add(em, f1, a.abstained, r5 >= 1.0);
            row["answer"] = json!(a.answer);
            row["gold_answers"] = json!(q.answers);
            row["abstained"] = json!(a.abstained);
            row["em"] = json!(em);
            row["f1"] = json!(f1);
        }
        per_question.push(row);
    }
    let report = json!({
        "dataset": o.dataset.display().to_string(),
        "retriever": o.retriever,
        "checkpoint": o.checkpoint.as_ref().map(|c| c.display().to_string()),
        "glm_triplets": o.glm_triplets,
        "questions": format!("{}..{}", range.start, range.end.min(ds.questions.len())),
        "unit": "percent",
        "n": all.n,
        "recall@2": all.json()["recall@2"],
        "recall@5": all.json()["recall@5"],
        "fully_resolved": resolved.json(),
        "by_type": by_type.iter().map(|(k, v)| (k.clone(), v.json())).collect::<serde_json::Map<_, _>>(),
        "graph": {"documents": stats.documents, "entities": stats.entities, "triples": stats.triples},
        "index_seconds": round1(index_s),
        "ask_seconds": round1(ask_s),
        "latency_ms": {"p50": round1(quantile(&mut latencies, 0.5)), "p95": round1(quantile(&mut latencies, 0.95))},
        "ablation": ablation.iter().map(|(name, a)| json!({"without": name, "all": a.json()})).collect::<Vec<_>>(),
        "per_question": per_question,
    });
    let mut report = report;
    if let Some(a) = &access {
        report["access"] = a.clone();
    }
    if o.answers {
        let answered_by = answers.iter().find_map(|(_, a)| a.answered_by.clone().filter(|b| b != "none")).unwrap_or_else(|| "extractive".into());
        let abstained = unanswerable.iter().filter(|(_, a)| a.abstained).count();
        report["answers"] = json!({
            "answered_by": answered_by,
            "all": text.json(),
            "by_type": text_by_type.iter().map(|(k, v)| (k.clone(), v.json())).collect::<serde_json::Map<_, _>>(),
            "seconds_per_question": (ask_s / answers.len().max(1) as f64 * 1000.0).round() / 1000.0,
            "unanswerable": {
                "n": unanswerable.len(),
                "abstained_percent": round1(100.0 * abstained as f64 / unanswerable.len().max(1) as f64),
                "answered": unanswerable.iter().filter(|(_, a)| !a.abstained).take(20).map(|(q, a)| json!({"question": q, "answer": a.answer})).collect::<Vec<_>>(),
            },
        });
    }
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
    if let Some(a) = &access {
        println!(
            "  access labels ({} of {} documents hidden; view built in {} ms): retrieval p50 {} -> {} ms ({}x), p95 {} -> {} ms ({}x), no hidden document returned",
            a["hidden"], a["documents"], a["view_build_ms"], a["no_labels_ms"]["p50"], a["half_hidden_ms"]["p50"], a["ratio"]["p50"], a["no_labels_ms"]["p95"], a["half_hidden_ms"]["p95"], a["ratio"]["p95"]
        );
    }
    if !ablation.is_empty() {
        println!("  ablation (each part switched off in turn):");
        for (name, a) in &ablation {
            row(name, a);
        }
    }
    if o.answers {
        let a = &report["answers"];
        println!("  answers by {} ({} s per question):", a["answered_by"].as_str().unwrap_or(""), a["seconds_per_question"]);
        println!("  {:<22} {:>5} {:>6} {:>6} {:>10} {:>18}", "", "n", "EM", "F1", "abstained", "abstained | gold@5");
        let row = |name: &str, x: &AnswerAcc| {
            let j = x.json();
            println!("  {:<22} {:>5} {:>6.1} {:>6.1} {:>9.1}% {:>17.1}%", name, x.n, j["em"].as_f64().unwrap_or(0.0), j["f1"].as_f64().unwrap_or(0.0), j["abstained_percent"].as_f64().unwrap_or(0.0), j["abstained_when_gold_retrieved_percent"].as_f64().unwrap_or(0.0));
        };
        row("all", &text);
        for (k, v) in &text_by_type {
            row(k, v);
        }
        println!("  unanswerable (made-up names): {} questions, {}% abstained", a["unanswerable"]["n"], a["unanswerable"]["abstained_percent"]);
    }
    if let Some(p) = &o.report {
        std::fs::write(p, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", p.display()))?;
        println!("  report: {}", p.display());
    }
    Ok(())
}
