//! `streamrag bench subscriptions`: standing queries over a 2Wiki-layout corpus while
//! documents stream in. The corpus is indexed except every k-th passage (held back); the
//! standing queries are registered (the dataset's questions, then questions made from the
//! corpus titles with a few generic patterns, up to `--subscriptions`); then the held-back
//! passages stream in at `--rate`. Measured: from a document's acknowledgement to each standing
//! answer it changed being readable on the answers topic (p50 / p99), the evaluations per
//! document, and the baseline in the same run: evaluating every subscription at every change
//! (its count, and its time at the evaluation rate measured while registering).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use streamrag_operators::metrics::global;
use streamrag_operators::transport::Output;
use streamrag_schemas::{decode, encode, Answer, DocOp, Subscription, SCHEMA_VERSION};

use super::isolate_bench_run;
use crate::cmd::{node_config, Conn};
use crate::config::FileConfig;
use crate::dataset::Dataset;
use crate::node::Node;

#[derive(Args)]
pub struct BenchSubscriptionsArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// A dataset in the 2Wiki layout (its passages are the corpus, its questions the first
    /// standing queries).
    #[arg(long, default_value = "../shared/datasets/2wikimultihopqa")]
    pub dataset: PathBuf,
    /// Standing queries registered.
    #[arg(long, default_value_t = 10_000)]
    pub subscriptions: usize,
    /// Documents per second streamed in once the subscriptions stand.
    #[arg(long, default_value_t = 100)]
    pub rate: usize,
    /// One passage in this many is held back from the first indexing and streamed in.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(2..))]
    pub hold_every: u64,
    /// Most documents streamed (of the held-back ones).
    #[arg(long, default_value_t = 1000)]
    pub stream: usize,
    /// Only the first N passages of the corpus (a quick run); default all.
    #[arg(long)]
    pub passages: Option<usize>,
    /// Most graph changes the standing queries read at once (default: the node's).
    #[arg(long, value_parser = crate::cmd::at_least_one)]
    pub standing_batch: Option<usize>,
    /// Prints this many of the answers the dependency index missed (question, documents before
    /// and after).
    #[arg(long, default_value_t = 0)]
    pub show_missed: usize,
}

/// Generic question patterns made into standing queries with the corpus titles.
const PATTERNS: &[&str] = &["Who created {}?", "Where is {} from?", "When did {} begin?", "What is {} known for?"];

fn standing_questions(ds: &Dataset, n: usize) -> Vec<String> {
    let mut out: Vec<String> = ds.questions.iter().map(|q| q.text.clone()).take(n).collect();
    'fill: for p in PATTERNS {
        for d in &ds.corpus {
            if out.len() >= n {
                break 'fill;
            }
            out.push(p.replace("{}", &d.title));
        }
    }
    out
}

pub async fn run(a: BenchSubscriptionsArgs, file: FileConfig) -> Result<()> {
    let mut ds = Dataset::load(&a.dataset)?;
    if let Some(n) = a.passages {
        ds.corpus.truncate(n);
    }
    let (mut first, mut held) = (Vec::new(), Vec::new());
    for (i, d) in ds.corpus.iter().enumerate() {
        if (i as u64) % a.hold_every == a.hold_every - 1 && held.len() < a.stream {
            held.push(d.clone());
        } else {
            first.push(d.clone());
        }
    }
    let questions = standing_questions(&ds, a.subscriptions);
    let dir = crate::scratch_dir("streamrag-bench-subscriptions")?;
    let mut cfg = node_config(&a.conn, &dir, &file);
    cfg.query.retriever = file.query.retriever_choice()?;
    isolate_bench_run(&mut cfg);
    cfg.query.standing_batch = a.standing_batch.or(cfg.query.standing_batch);
    let batch = cfg.query.standing_batch.unwrap_or(streamrag_operators::standing::readers::ChangesWatcher::BATCH);
    let topics = cfg.topics.clone();
    let (node, tasks) = Node::start(cfg).await?;
    let standing = node.standing.clone().context("the node runs no query stage")?;

    // 1. The corpus, less the held-back passages, indexed (graph and every index).
    let t = Instant::now();
    for chunk in first.chunks(500) {
        node.publish_documents(chunk).await?;
    }
    let mut applied = node.applied.clone();
    tokio::time::timeout(Duration::from_secs(7200), applied.wait_for(|&c| c >= first.len())).await.context("indexing did not finish")??;
    if node.transport.name() == "embedded" {
        node.wait_drained(Duration::from_secs(7200)).await?;
    }
    eprintln!("indexed {} passages in {:.0} s", first.len(), t.elapsed().as_secs_f64());

    // 2. The standing queries, registered and answered once.
    let evaluations = global().counter("streamrag_standing_evaluations_total", "");
    let e0 = evaluations.load(Relaxed);
    let t = Instant::now();
    let subs: Vec<Output> = questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let s = Subscription { access: Default::default(), schema_version: SCHEMA_VERSION, op: DocOp::Upsert, subscription_id: format!("bench-{i}"), question: q.clone(), top_k: None };
            Output { topic: topics.subscriptions.clone(), key: s.subscription_id.clone(), payload: encode(&s) }
        })
        .collect();
    for chunk in subs.chunks(1000) {
        node.transport.produce(chunk).await?;
    }
    while (evaluations.load(Relaxed) - e0) < questions.len() as i64 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if t.elapsed() > Duration::from_secs(7200) {
            anyhow::bail!("the subscriptions were not all answered within 2 hours");
        }
    }
    let register_s = t.elapsed().as_secs_f64();
    let per_eval_s = register_s / questions.len() as f64;
    eprintln!("{} standing queries registered and answered in {register_s:.0} s", standing.registry.len());

    // 3. The held-back passages stream in; the answers topic is read as they come.
    // wall-clock milliseconds: a document's acknowledgement, an answer record's append time
    let acked: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let refined: Arc<Mutex<Vec<f64>>> = Arc::default();
    let answers_seen: Arc<Mutex<usize>> = Arc::default();
    let group = format!("{}.bench-answers-{}", node.config.group_prefix, streamrag_operators::transport::now_ms());
    let mut sub = node.transport.subscribe(&group, &topics.answers, true).await?;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let reader = {
        let (acked, latencies, refined, seen) = (acked.clone(), latencies.clone(), refined.clone(), answers_seen.clone());
        tokio::spawn(async move {
            while !*stop_rx.borrow() {
                let batch = tokio::select! {
                    b = sub.next_batch(1000, Duration::from_millis(50)) => b,
                    _ = stop_rx.changed() => continue,
                };
                let Ok(batch) = batch else { continue };
                for r in batch {
                    let Ok(a) = decode::<Answer>(&r.payload) else { continue };
                    let reason = a.reason.as_deref().unwrap_or_default();
                    let (doc, into) = match (reason.strip_prefix("changed "), reason.strip_prefix("indexed ")) {
                        (Some(d), _) => (d, &latencies),
                        (_, Some(d)) => (d, &refined),
                        _ => continue,
                    };
                    *seen.lock().unwrap() += 1;
                    if let Some(at) = acked.lock().unwrap().get(doc) {
                        into.lock().unwrap().push((r.timestamp_ms - at) as f64 / 1e3);
                    }
                }
            }
        })
    };
    let changes = global().counter("streamrag_standing_changes_total", "");
    // the graph's own freshness over the same documents: what the standing answers wait for first
    let fresh = global().freshness("writer");
    fresh.keep_samples();
    let (e1, c1) = (evaluations.load(Relaxed), changes.load(Relaxed));
    let per_tick = (a.rate / 10).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let t = Instant::now();
    for chunk in held.chunks(per_tick) {
        tick.tick().await;
        node.publish_documents(chunk).await?;
        let now = streamrag_operators::transport::now_ms();
        acked.lock().unwrap().extend(chunk.iter().map(|d| (d.id.clone(), now)));
    }
    let offered_s = t.elapsed().as_secs_f64();
    let total = first.len() + held.len();
    tokio::time::timeout(Duration::from_secs(3600), applied.wait_for(|&c| c >= total)).await.context("streaming did not finish")??;
    if node.transport.name() == "embedded" {
        node.wait_drained(Duration::from_secs(3600)).await?;
    }
    // the owed answers are made and published by a task of their own
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = Instant::now();
    while !standing.idle() {
        anyhow::ensure!(idle.elapsed() < Duration::from_secs(3600), "the standing answers owed were not all made within an hour");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done_s = t.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop_tx.send(true);
    let _ = reader.await;
    let (evals, seen_changes) = ((evaluations.load(Relaxed) - e1) as f64, (changes.load(Relaxed) - c1) as f64);
    // what the dependency index missed: every subscription answered once more on the final
    // graph; an answer that differs from the one it last published is one no change reached
    let listed = standing.registry.list(None, usize::MAX, &streamrag_operators::access::Reader::All);
    let ids: Vec<String> = listed.iter().map(|l| l.subscription_id.clone()).collect();
    let missed = standing.evaluate(&ids, "checked").await?;
    let stale = missed.len();
    let held_ids: std::collections::HashSet<&str> = held.iter().map(|d| d.id.as_str()).collect();
    for o in missed.iter().take(a.show_missed) {
        let Ok(new) = decode::<Answer>(&o.payload) else { continue };
        let docs = |a: &Answer| a.documents.iter().map(|d| format!("{}{}", d.title, if held_ids.contains(d.id.as_str()) { "*" } else { "" })).collect::<Vec<_>>().join(" | ");
        let old = listed.iter().find(|l| l.subscription_id == o.key).and_then(|l| l.answer.as_ref()).map(docs).unwrap_or_default();
        eprintln!("missed: {}\n  published: {old}\n  now:       {}", new.question, docs(&new));
    }
    tasks.join(&node).await?;
    let _ = std::fs::remove_dir_all(&dir);

    let mut lat = latencies.lock().unwrap().clone();
    let mut lat2 = refined.lock().unwrap().clone();
    let n = questions.len() as f64;
    let docs = held.len() as f64;
    println!(
        "bench subscriptions: transport {}, {} standing queries ({} dataset questions, the rest from title patterns), registered and answered in {register_s:.0} s ({:.1} ms per evaluation, {} retriever)",
        node.transport.name(),
        questions.len(),
        ds.questions.len().min(questions.len()),
        per_eval_s * 1e3,
        node.retriever.as_ref().map(|r| r.name()).unwrap_or("no"),
    );
    println!(
        "  {} documents streamed at {} docs/s offered ({:.0} achieved) into {} indexed; all applied and answered {done_s:.1} s after the first; graph changes read at once: at most {batch}",
        held.len(),
        a.rate,
        docs / offered_s,
        first.len()
    );
    println!("  acknowledgement -> changed standing answer on the answers topic (reason changed), {}", super::latency_line(&mut lat));
    println!("  the same, answered again once the passage and fact indexes had the document (reason indexed), {}", super::latency_line(&mut lat2));
    println!("  for comparison, the same documents' triples queryable in the graph (topic timestamp -> applied), {}", super::latency_line(&mut fresh.samples()));
    println!(
        "  evaluations: {evals:.0} for {seen_changes:.0} graph changes ({:.1} per document, {:.2}% of the subscriptions); answers that changed and went out: {}",
        evals / docs,
        100.0 * evals / (n * seen_changes.max(1.0)),
        *answers_seen.lock().unwrap()
    );
    println!(
        "  missed: every subscription answered once more at the end, on the final graph: {stale} of {} answers differ from the last one published ({:.2}%)",
        ids.len(),
        100.0 * stale as f64 / ids.len().max(1) as f64
    );
    println!(
        "  baseline, every subscription at every change: {:.0} evaluations ({:.0}x), about {:.0} s of evaluation per document at {:.1} ms each, against {:.2} s here",
        n * seen_changes,
        n * seen_changes / evals.max(1.0),
        n * per_eval_s,
        per_eval_s * 1e3,
        evals * per_eval_s / docs
    );
    Ok(())
}
