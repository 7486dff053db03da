//! `streamrag bench resolve`: entity resolution measured on names from 2WikiMultihopQA.
//!
//! Throughput: the resolver is filled to each size with real entity names (the corpus titles
//! and the names the built-in extractor finds in the passages; past those, names recombined
//! from their words), then a probe of names it has never seen is resolved: embedding, then
//! the decision (HNSW search, insert). The same probe is decided again with an exact search
//! over every entity, in the same process: the baseline whose cost grows linearly.
//!
//! Quality: a labelled alias set. The 6,119 corpus titles are distinct entities (titles are
//! unique). A title "Base (qualifier)" whose base is no other title's base and no title itself
//! gives an alias: the bare "Base" names that title's entity. Titles are resolved first (any
//! merge between two titles is a false merge), then each alias alone against them: joining its
//! title is a true merge, joining another entity a false one, staying new a miss.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Result};
use clap::Args;
use streamrag_glm::SentenceEncoder;
use streamrag_operators::normalize::normalize;
use streamrag_operators::normalize::is_alias_relation;
use streamrag_operators::resolve::{open_store, EntityResolver, NewName, Resolution};

use crate::dataset::Dataset;
use crate::synth::Lcg;

#[derive(Args)]
pub struct BenchResolveArgs {
    /// A dataset in the 2Wiki layout (the titles and passages supply the names).
    #[arg(long, default_value = "../shared/datasets/2wikimultihopqa")]
    pub dataset: PathBuf,
    /// Sentence encoder directory (all-MiniLM-L6-v2).
    #[arg(long, env = "STREAMRAG_MINILM_DIR")]
    pub model: Option<PathBuf>,
    /// Entity counts at which to measure.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    pub sizes: Vec<usize>,
    /// New names resolved at each size.
    #[arg(long, default_value_t = 2000)]
    pub probe: usize,
    /// Merge threshold (cosine).
    #[arg(long, default_value_t = 0.8)]
    pub threshold: f32,
    /// Other thresholds at which to report alias precision / recall too.
    #[arg(long, value_delimiter = ',')]
    pub also_thresholds: Vec<f32>,
}


/// Distinct names (by normalised form): titles, then extracted names, then recombinations.
fn names(ds: &Dataset, want: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut push = |n: &str, out: &mut Vec<String>| {
        let k = normalize(n);
        if !k.is_empty() && seen.insert(k) {
            out.push(n.trim().to_string());
        }
    };
    for p in &ds.corpus {
        push(&p.title, &mut out);
    }
    for p in &ds.corpus {
        for m in streamrag_operators::extract::extract(&p.title, p.text.as_deref().unwrap_or_default()).entities {
            push(&m.name, &mut out);
        }
    }
    let words: Vec<String> = out.iter().flat_map(|n| n.split_whitespace().map(str::to_string).collect::<Vec<_>>()).filter(|w| w.chars().all(char::is_alphabetic) && w.len() > 2).collect();
    let mut rng = Lcg::new(17);
    let mut tries = 0usize;
    while out.len() < want && tries < want * 20 {
        tries += 1;
        let k = 2 + (rng.next_u64() % 2) as usize;
        let n: Vec<&str> = (0..k).map(|_| words[(rng.next_u64() % words.len() as u64) as usize].as_str()).collect();
        push(&n.join(" "), &mut out);
    }
    out
}

pub fn run(b: BenchResolveArgs) -> Result<()> {
    let model = crate::cmd::minilm_dir(b.model.clone());
    crate::cmd::check_model_dir(&model, "--model")?;
    let ds = Dataset::load(&b.dataset)?;
    let enc = || SentenceEncoder::load(&model, &candle_core::Device::Cpu).map_err(|e| anyhow!("loading {}: {e}", model.display()));
    aliases(&ds, enc()?, b.threshold)?;
    for &t in &b.also_thresholds {
        aliases(&ds, enc()?, t)?;
    }

    let largest = b.sizes.iter().copied().max().unwrap_or(0);
    let all = names(&ds, largest + b.probe);
    if all.len() < largest + b.probe {
        return Err(anyhow!("only {} distinct names for {} + {} wanted", all.len(), largest, b.probe));
    }
    let (pool, probe) = all.split_at(largest);
    let probe = &probe[..b.probe];
    // Embed everything once (timed: the embedding share of the cost).
    let e = enc()?;
    let t = Instant::now();
    let refs: Vec<&str> = pool.iter().map(String::as_str).collect();
    let mut pool_vecs = Vec::with_capacity(pool.len());
    for chunk in refs.chunks(4096) {
        pool_vecs.extend(e.embed_vecs(chunk)?);
        eprint!("\rembedding names: {}/{}", pool_vecs.len(), pool.len());
    }
    eprintln!();
    let pool_embed_s = t.elapsed().as_secs_f64();
    println!("bench resolve: {} names embedded in {:.1} s ({:.0} names/s, all-MiniLM-L6-v2, CPU)", pool.len(), pool_embed_s, pool.len() as f64 / pool_embed_s);
    println!("| names resolved (entities) | probe | embed ms/name | decide ms/name (HNSW) | decide ms/name (exact) | exact/HNSW | same decision | merged or linked | names/s end to end |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    // Stored as the resolve stage stores it, so the restart below reads a real store.
    let store_dir = crate::scratch_dir("streamrag-bench-resolve")?;
    let mut r = EntityResolver::open(e, b.threshold, Some(open_store(&store_dir)?))?;
    let mut filled = 0;
    let mut sizes = b.sizes.clone();
    sizes.sort_unstable();
    for size in sizes {
        let items: Vec<NewName> = pool[filled..size].iter().zip(&pool_vecs[filled..size]).map(|(n, v)| NewName::new(n, v.clone())).collect();
        let t = Instant::now();
        r.resolve_embedded(&items)?;
        eprintln!("filled to {size} names ({} entities) in {:.1} s", r.entities(), t.elapsed().as_secs_f64());
        filled = size;
        // The probe: embed, then decide, as the resolve stage does for names never seen.
        let t = Instant::now();
        let refs: Vec<&str> = probe.iter().map(String::as_str).collect();
        let vecs = r.encoder().embed_vecs(&refs)?;
        let embed_s = t.elapsed().as_secs_f64();
        let norms: Vec<String> = probe.iter().map(|n| normalize(n)).collect();
        let t = Instant::now();
        let decide = |exact: bool| -> Vec<Vec<String>> {
            norms
                .iter()
                .zip(&vecs)
                .map(|(n, v)| match r.same_name(n) {
                    Some(c) => vec![c.to_string()],
                    None => r.nearest(n, v, 5, exact).into_iter().map(|c| c.0).collect(),
                })
                .collect()
        };
        let ann = decide(false);
        let ann_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let exact = decide(true);
        let exact_s = t.elapsed().as_secs_f64();
        let same = ann.iter().zip(&exact).filter(|(a, b)| a == b).count();
        let joined = ann.iter().filter(|a| !a.is_empty()).count();
        let p = probe.len() as f64;
        println!(
            "| {size} ({}) | {} | {:.3} | {:.3} | {:.3} | {:.1}x | {:.1}% | {joined} | {:.0} |",
            r.entities(),
            probe.len(),
            embed_s * 1e3 / p,
            ann_s * 1e3 / p,
            exact_s * 1e3 / p,
            exact_s / ann_s,
            100.0 * same as f64 / p,
            p / (embed_s + ann_s)
        );
    }
    // Restart: the resolver reopened from its store, against rebuilding its index from the
    // stored vectors (what a start cost before the index was kept).
    let entities = r.entities();
    drop(r);
    let t = Instant::now();
    let r = EntityResolver::open(enc()?, b.threshold, Some(open_store(&store_dir)?))?;
    let open_s = t.elapsed().as_secs_f64();
    anyhow::ensure!(r.entities() == entities, "reopened with {} entities, not {entities}", r.entities());
    let t = Instant::now();
    let mut rebuilt = streamrag_operators::ann::Hnsw::new(r.encoder().dim(), Default::default());
    for (name, v) in pool[..filled].iter().zip(&pool_vecs[..filled]) {
        let norm = normalize(name);
        // the entities (names that joined another are not in the index)
        if r.canonical(&norm) == Some(norm.as_str()) {
            rebuilt.insert(v);
        }
    }
    anyhow::ensure!(rebuilt.len() == entities, "rebuilt {} of {entities} entities", rebuilt.len());
    let rebuild_s = t.elapsed().as_secs_f64();
    println!(
        "restart with {entities} entities resolved: ready in {open_s:.1} s (store read back, index included); rebuilding the index instead: {rebuild_s:.1} s ({:.0}x)",
        rebuild_s / open_s.max(1e-9)
    );
    drop(r);
    let _ = std::fs::remove_dir_all(&store_dir);
    Ok(())
}

/// Two alias sets from the corpus, each a list of (alias, the title it names), an alias
/// naming one title only and being no title itself: the bare base of a qualified title
/// ("David Bradley" for "David Bradley (director)", when no other title shares the base), and
/// the names a page gives its own subject ("also known as Frederick Barbarossa" on "Frederick
/// I, Holy Roman Emperor", read by the built-in extractor).
fn alias_sets(ds: &Dataset) -> Vec<(&'static str, Vec<(String, String)>)> {
    let titles: Vec<&str> = ds.corpus.iter().map(|p| p.title.as_str()).collect();
    let title_norms: HashSet<String> = titles.iter().map(|t| normalize(t)).collect();
    let unique = |pairs: Vec<(String, String)>| -> Vec<(String, String)> {
        let mut count: HashMap<String, HashSet<String>> = HashMap::new();
        for (a, t) in &pairs {
            count.entry(normalize(a)).or_default().insert(t.clone());
        }
        let mut seen = HashSet::new();
        pairs
            .into_iter()
            .filter(|(a, _)| {
                let k = normalize(a);
                !k.is_empty() && count[&k].len() == 1 && !title_norms.contains(&k) && seen.insert(k)
            })
            .collect()
    };
    let qualified = unique(titles.iter().filter_map(|t| streamrag_operators::normalize::unqualified(t).map(|b| (b.to_string(), t.to_string()))).collect());
    let mut given = Vec::new();
    for p in &ds.corpus {
        let key = normalize(&p.title);
        for t in streamrag_operators::extract::extract(&p.title, p.text.as_deref().unwrap_or_default()).triples {
            if normalize(&t.subject) == key && is_alias_relation(&t.relation) && normalize(&t.object) != key {
                given.push((t.object.clone(), p.title.clone()));
            }
        }
    }
    vec![("bare names of qualified titles", qualified), ("names a page gives its subject (\"also known as\")", unique(given))]
}

/// Merge and link precision, and aliases resolved, on the alias sets (see the module doc).
fn aliases(ds: &Dataset, enc: SentenceEncoder, threshold: f32) -> Result<()> {
    let titles: Vec<&str> = ds.corpus.iter().map(|p| p.title.as_str()).collect();
    let mut r = EntityResolver::open(enc, threshold, None)?;
    let t = Instant::now();
    let got = r.resolve_names(&titles)?;
    // Titles are distinct entities: any merge or link between two is wrong.
    let title_merges = got.iter().filter(|g| g.1 == Resolution::Merged).count();
    let title_links: usize = got.iter().filter(|g| g.1 == Resolution::Linked).map(|g| r.links(&g.0).len()).sum();
    println!(
        "bench resolve: {} 2Wiki titles, threshold {threshold}: {title_merges} merged into another title, {title_links} links between titles (all wrong: titles are distinct); {:.1} s",
        titles.len(),
        t.elapsed().as_secs_f64()
    );
    println!("| alias set | aliases | merged right | merged wrong | linked right | wrong links | resolved (merged or linked right) | merge precision (with title-title) | link precision (with title-title) |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut examples = Vec::new();
    for (what, pairs) in alias_sets(ds) {
        let names: Vec<&str> = pairs.iter().map(|p| p.0.as_str()).collect();
        let vecs = r.encoder().embed_vecs(&names)?;
        let (mut merged_right, mut merged_wrong, mut linked_right, mut wrong_links, mut links) = (0usize, 0usize, 0usize, 0usize, 0usize);
        for ((alias, title), v) in pairs.iter().zip(vecs) {
            let want = r.canonical(&normalize(title)).unwrap_or_default().to_string();
            let name = NewName::new(alias, v);
            if let Some(c) = r.same_name(&name.norm) {
                if c == want {
                    merged_right += 1;
                } else {
                    merged_wrong += 1;
                    if examples.len() < 8 {
                        examples.push(format!("wrong merge: {alias:?} -> {c:?} (want {title:?})"));
                    }
                }
                continue;
            }
            let found = r.link_candidates(&name);
            links += found.len();
            let right = found.iter().filter(|l| l.to == want).count();
            linked_right += right.min(1);
            wrong_links += found.len() - right;
            if right == 0 && !found.is_empty() && examples.len() < 8 {
                examples.push(format!("wrong link: {alias:?} -> {:?} {:.2} (want {title:?})", found[0].to, found[0].confidence));
            }
        }
        let n = pairs.len().max(1) as f64;
        let merges = merged_right + merged_wrong + title_merges;
        println!(
            "| {what} | {} | {merged_right} | {merged_wrong} | {linked_right} | {wrong_links} | {:.1}% | {:.1}% ({merges} merges) | {:.1}% ({} links) |",
            pairs.len(),
            100.0 * (merged_right + linked_right) as f64 / n,
            100.0 * merged_right as f64 / merges.max(1) as f64,
            100.0 * (links - wrong_links) as f64 / (links + title_links).max(1) as f64,
            links + title_links
        );
    }
    for e in examples {
        println!("  {e}");
    }
    let merged: Vec<String> = got.iter().zip(&titles).filter(|(g, _)| g.1 == Resolution::Merged).take(5).map(|(g, t)| format!("{t:?} -> {:?}", g.0)).collect();
    for w in merged {
        println!("  title merged: {w}");
    }
    Ok(())
}
