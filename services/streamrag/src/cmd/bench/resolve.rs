//! `streamrag bench resolve`: entity resolution measured on names from 2WikiMultihopQA.
//!
//! Throughput: the resolver is filled to each size with real entity names (the corpus titles
//! and the names the built-in extractor finds in the passages; past those, names recombined
//! from their words), then a probe of names it has never seen is resolved: embedding, then
//! the decision (HNSW search, insert). The same probe is decided again with an exact search
//! over every entity, in the same process: the baseline whose cost grows linearly.
//!
//! Quality: labelled alias sets (see `alias_sets`). The 6,119 corpus titles are distinct entities (titles are
//! unique). A title "Base (qualifier)" whose base is no other title's base and no title itself
//! gives an alias: the bare "Base" names that title's entity. Titles are resolved first (any
//! merge between two titles is a false merge), then each alias alone against them: joining its
//! title is a true merge, joining another entity a false one, staying new a miss. The sets are
//! judged again against the resolver filled to each size.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Result};
use clap::Args;
use streamrag_glm::SentenceEncoder;
use streamrag_operators::normalize::normalize;
use streamrag_operators::normalize::is_alias_relation;
use streamrag_operators::resolve::{open_store, EntityResolver, NewName};

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
    /// Print up to this many unresolved aliases of each set (none of a held-out set).
    #[arg(long, default_value_t = 0)]
    pub misses: usize,
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
    // made once: each size and threshold judges the same sets
    let sets = alias_sets(&ds, &b.dataset)?;
    aliases(&ds, &sets, enc()?, b.threshold, b.misses)?;
    for &t in &b.also_thresholds {
        aliases(&ds, &sets, enc()?, t, 0)?;
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
    // the alias sets again at each size, printed after the throughput table
    let mut aliases_at: Vec<(usize, usize, String)> = Vec::new();
    let mut sizes = b.sizes.clone();
    sizes.sort_unstable();
    for size in sizes {
        let items: Vec<NewName> = pool[filled..size].iter().zip(&pool_vecs[filled..size]).map(|(n, v)| NewName::new(n, v.clone())).collect();
        let t = Instant::now();
        r.resolve_embedded(&items)?;
        eprintln!("filled to {size} names ({} entities) in {:.1} s", r.entities(), t.elapsed().as_secs_f64());
        filled = size;
        // the rows hold only once every title is in (the pool starts with them)
        if size >= ds.corpus.len() {
            aliases_at.push((size, r.entities(), alias_rows(&ds, &sets, &r, 0)?));
        }
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
    if b.sizes.iter().any(|&n| n < ds.corpus.len()) {
        println!("aliases are judged only at sizes that hold all {} titles", ds.corpus.len());
    }
    for (size, entities, rows) in &aliases_at {
        println!("aliases against the resolver filled to {size} names ({entities} entities; titles first, then the names the extractor finds, then recombined words):");
        print!("{rows}");
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
    #[cfg(feature = "ann-compare")]
    {
        // The entities in the order they entered the index, and how many there were at each size.
        let mut vecs: Vec<&[f32]> = Vec::new();
        let mut marks = Vec::new();
        for (i, (name, v)) in pool[..filled].iter().zip(&pool_vecs[..filled]).enumerate() {
            let norm = normalize(name);
            if r.canonical(&norm) == Some(norm.as_str()) {
                vecs.push(v);
            }
            if b.sizes.contains(&(i + 1)) {
                marks.push(vecs.len());
            }
        }
        let refs: Vec<&str> = probe.iter().map(String::as_str).collect();
        let probe_vecs = r.encoder().embed_vecs(&refs)?;
        compare_ann::run(&vecs, &marks, &probe_vecs)?;
    }
    drop(r);
    let _ = std::fs::remove_dir_all(&store_dir);
    Ok(())
}

/// A named alias set: (alias, the title it names) pairs.
type AliasSet = (&'static str, Vec<(String, String)>);

/// The alias sets, each a list of (alias, the title it names), an alias
/// naming one title only and being no title itself: the bare base of a qualified title
/// ("David Bradley" for "David Bradley (director)", when no other title shares the base), and
/// the names a page gives its own subject ("also known as Frederick Barbarossa" on "Frederick
/// I, Holy Roman Emperor", read by the built-in extractor); then the two halves of the sets
/// whose labels come from the questions' evidence ([`evidence_aliases`]).
fn alias_sets(ds: &Dataset, dir: &std::path::Path) -> Result<Vec<AliasSet>> {
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
    let (tuning, held_out) = evidence_aliases(dir, &title_norms)?;
    Ok(vec![
        ("bare names of qualified titles", qualified),
        ("names a page gives its subject (\"also known as\")", unique(given)),
        ("names the questions' evidence gives a page, questions 0-499", unique(tuning)),
        ("names the questions' evidence gives a page, questions 500-999 (held out)", unique(held_out)),
    ])
}

/// (name, title) pairs whose labels owe nothing to the extractor: 2Wiki's question evidence
/// names its entities by their Wikidata labels, and `gold_titles_derived.json` matched each
/// to the corpus page that is about it; where the label is not the page's title ("Frederick
/// Barbarossa" for "Frederick I, Holy Roman Emperor", "Maurice of Nassau" for "Maurice, Prince
/// of Orange"), the label is an alias of the page's entity. Split by the question's half: the
/// resolver may be tuned on the first, never on the second. None without the file.
fn evidence_aliases(dir: &std::path::Path, title_norms: &HashSet<String>) -> Result<(Vec<(String, String)>, Vec<(String, String)>)> {
    let Some(path) = crate::dataset::find(dir, &["gold_titles_derived.json"]) else { return Ok((vec![], vec![])) };
    let serde_json::Value::Array(items) = crate::dataset::read_json(&path)? else { return Err(anyhow!("{}: not a list", path.display())) };
    let (mut tuning, mut held_out) = (Vec::new(), Vec::new());
    for (i, q) in items.iter().enumerate() {
        for m in q.get("matching").and_then(|m| m.as_array()).into_iter().flatten() {
            let (Some(name), Some(method)) = (m.get("subject").and_then(|x| x.as_str()), m.get("method").and_then(|x| x.as_str())) else { continue };
            let titles: Vec<&str> = m.get("titles").and_then(|t| t.as_array()).into_iter().flatten().filter_map(|t| t.as_str()).collect();
            // a label matched to one page by a rule other than its exact title
            let name = name.trim_matches(|c: char| c == '"' || c.is_whitespace());
            if method == "exact-title" || titles.len() != 1 || normalize(name) == normalize(titles[0]) || title_norms.contains(&normalize(name)) {
                continue;
            }
            let pair = (name.to_string(), titles[0].to_string());
            if i < 500 { tuning.push(pair) } else { held_out.push(pair) }
        }
    }
    // a name the first half has is not held out
    let seen: HashSet<String> = tuning.iter().map(|(n, _)| normalize(n)).collect();
    held_out.retain(|(n, _)| !seen.contains(&normalize(n)));
    Ok((tuning, held_out))
}

/// The synonym links the corpus's pages state ([`streamrag_operators::resolve::stated_links`],
/// as the resolve stage makes them from the built-in extractor's facts), both ways round, over
/// the resolver's ids.
fn stated_links(ds: &Dataset, r: &EntityResolver) -> HashMap<String, HashSet<String>> {
    let mut out: HashMap<String, HashSet<String>> = HashMap::new();
    for p in &ds.corpus {
        let got = streamrag_operators::extract::extract(&p.title, p.text.as_deref().unwrap_or_default());
        let ex = streamrag_schemas::Extraction {
            access: Vec::new(),
            schema_version: streamrag_schemas::SCHEMA_VERSION,
            op: streamrag_schemas::DocOp::Upsert,
            doc_id: p.id.clone(),
            title: p.title.clone(),
            entities: got.entities,
            triples: got.triples,
            extractor: "builtin".into(),
            source: streamrag_schemas::SourceRef { topic: "corpus".into(), partition: 0, offset: 0, timestamp_ms: None },
        };
        for l in streamrag_operators::resolve::resolve_with(&ex, &|n: &str| r.canonical(n).unwrap_or(n).to_string()).links {
            out.entry(l.id.clone()).or_default().insert(l.to_id.clone());
            out.entry(l.to_id).or_default().insert(l.id);
        }
    }
    out
}

/// Merge and link precision, and aliases resolved, on the alias sets (see the module doc).
fn aliases(ds: &Dataset, sets: &[AliasSet], enc: SentenceEncoder, threshold: f32, show_misses: usize) -> Result<()> {
    let titles: Vec<&str> = ds.corpus.iter().map(|p| p.title.as_str()).collect();
    let mut r = EntityResolver::open(enc, threshold, None)?;
    let t = Instant::now();
    r.resolve_names(&titles)?;
    let (title_merges, title_links) = between_titles(ds, &r);
    println!(
        "bench resolve: {} 2Wiki titles, threshold {threshold}: {title_merges} merged into another title, {title_links} links between titles (all wrong: titles are distinct); {:.1} s",
        titles.len(),
        t.elapsed().as_secs_f64()
    );
    print!("{}", alias_rows(ds, sets, &r, show_misses)?);
    Ok(())
}

/// Merges and links between two titles (all wrong: titles are distinct), in a resolver that
/// resolved the titles before any other name.
fn between_titles(ds: &Dataset, r: &EntityResolver) -> (usize, usize) {
    let (mut merges, mut links) = (0, 0);
    for p in &ds.corpus {
        let norm = normalize(&p.title);
        match r.canonical(&norm) {
            Some(c) if c != norm => merges += 1,
            Some(_) => links += r.links(&norm).len(),
            None => {}
        }
    }
    (merges, links)
}

/// The alias sets' rows against a resolver that holds every title (and perhaps other names):
/// an alias it already knows is judged by what was decided for it then, a new one by what would
/// be decided now.
fn alias_rows(ds: &Dataset, sets: &[AliasSet], r: &EntityResolver, show_misses: usize) -> Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    let (title_merges, title_links) = between_titles(ds, r);
    let stated = stated_links(ds, r);
    writeln!(out, "| alias set | aliases | merged right | merged wrong | linked right | wrong links | resolved (merged or linked right) | merge precision (with title-title) | link precision (with title-title) | resolved, with the links pages state |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")?;
    let mut examples = Vec::new();
    let mut misses = Vec::new();
    for (what, pairs) in sets {
        let shown = misses.len();
        let names: Vec<&str> = pairs.iter().map(|p| p.0.as_str()).collect();
        let vecs = r.encoder().embed_vecs(&names)?;
        let (mut merged_right, mut merged_wrong, mut linked_right, mut wrong_links, mut links) = (0usize, 0usize, 0usize, 0usize, 0usize);
        let mut with_stated = 0usize;
        for ((alias, title), v) in pairs.iter().zip(vecs) {
            let want = r.canonical(&normalize(title)).unwrap_or_default().to_string();
            let name = NewName::new(alias, v);
            let canonical = r.canonical(&name.norm);
            let said = stated.get(canonical.unwrap_or(&name.norm)).is_some_and(|to| to.contains(&want));
            // known already (a name of the corpus the resolver was filled with): its own entity
            // is judged by its links, a merge by where it went
            let known = canonical.filter(|c| *c == name.norm).map(|c| r.links(c).to_vec());
            let merged_into = match canonical {
                Some(c) if c != name.norm => Some(c),
                Some(_) => None,
                None => r.same_name(&name.norm),
            };
            if let Some(c) = merged_into {
                if c == want {
                    merged_right += 1;
                    with_stated += 1;
                } else {
                    with_stated += usize::from(said);
                    merged_wrong += 1;
                    if examples.len() < 8 {
                        examples.push(format!("wrong merge: {alias:?} -> {c:?} (want {title:?})"));
                    }
                }
                continue;
            }
            let found = known.unwrap_or_else(|| r.link_candidates(&name));
            links += found.len();
            let right = found.iter().filter(|l| l.to == want).count();
            with_stated += usize::from(right > 0 || said);
            if right == 0 && misses.len() - shown < show_misses && !what.contains("held out") {
                misses.push(format!("missed ({what}): {alias:?} -> {title:?}; linked to {:?}", found.iter().map(|l| format!("{} {:.2}", l.to, l.confidence)).collect::<Vec<_>>()));
            }
            linked_right += right.min(1);
            wrong_links += found.len() - right;
            if right == 0 && !found.is_empty() && examples.len() < 8 {
                examples.push(format!("wrong link: {alias:?} -> {:?} {:.2} (want {title:?})", found[0].to, found[0].confidence));
            }
        }
        let n = pairs.len().max(1) as f64;
        let merges = merged_right + merged_wrong + title_merges;
        // No merge made: no precision to state (none was wrong, none was right).
        let merge_precision = if merges == 0 { "n/a".to_string() } else { format!("{:.1}%", 100.0 * merged_right as f64 / merges as f64) };
        // the "also known as" set is made of what pages state: with those links it is its own answer
        let stated_col = if what.contains("also known as") { "(the set's own source)".to_string() } else { format!("{:.1}%", 100.0 * with_stated as f64 / n) };
        writeln!(
            out,
            "| {what} | {} | {merged_right} | {merged_wrong} | {linked_right} | {wrong_links} | {:.1}% | {merge_precision} ({merges} merges) | {:.1}% ({} links) | {stated_col} |",
            pairs.len(),
            100.0 * (merged_right + linked_right) as f64 / n,
            100.0 * (links - wrong_links) as f64 / (links + title_links).max(1) as f64,
            links + title_links
        )?;
    }
    for e in examples.iter().chain(&misses) {
        writeln!(out, "  {e}")?;
    }
    Ok(out)
}

/// Our HNSW against a maintained library's (hnsw_rs, the same M 16, ef 100 / 64) on the same
/// entity vectors, inserted one by one as the resolve stage does. The vectors are unit length,
/// so hnsw_rs's L2 distance ranks as cosine does (its DistDot asserts that no dot product
/// exceeds 1, which rounding breaks). Measured: insert time, search time and recall of the 5
/// nearest against an exact search, and a restart (ours: the index rebuilt from its serialised
/// nodes, as the resolver reads them from its store; hnsw_rs: a dump to files and a reload).
/// Built only with `--features ann-compare`.
#[cfg(feature = "ann-compare")]
mod compare_ann {
    use std::time::Instant;

    use anyhow::Result;
    use hnsw_rs::prelude::{AnnT, DistL2, Hnsw as Lib, HnswIo};
    use streamrag_operators::ann::{Hnsw, HnswParams};

    pub fn run(vecs: &[&[f32]], marks: &[usize], probe: &[Vec<f32>]) -> Result<()> {
        const K: usize = 5;
        let p = HnswParams::default();
        let dim = probe.first().map_or(0, Vec::len);
        let mut ours = Hnsw::new(dim, p);
        let lib: Lib<f32, DistL2> = Lib::new(p.m, vecs.len(), 16, p.ef_construction, DistL2 {});
        println!("ANN comparison (same vectors, inserted one by one; {} probe names; recall of the {K} nearest against exact search)", probe.len());
        println!("| entities | index | insert us/name | search us/name | recall@{K} |");
        println!("| --- | --- | --- | --- | --- |");
        let (mut done, mut ours_ins, mut lib_ins) = (0usize, 0.0f64, 0.0f64);
        for &mark in marks {
            let t = Instant::now();
            for v in &vecs[done..mark] {
                ours.insert(v);
            }
            ours_ins += t.elapsed().as_secs_f64();
            let t = Instant::now();
            for (i, v) in vecs[done..mark].iter().enumerate() {
                lib.insert_slice((*v, done + i));
            }
            lib_ins += t.elapsed().as_secs_f64();
            done = mark;
            let exact: Vec<Vec<u32>> = probe.iter().map(|q| ours.search_exact(q, K).into_iter().map(|h| h.0).collect()).collect();
            let recall = |got: &[Vec<u32>]| 100.0 * got.iter().zip(&exact).map(|(g, e)| g.iter().filter(|x| e.contains(x)).count()).sum::<usize>() as f64 / (K * probe.len()) as f64;
            let t = Instant::now();
            let a: Vec<Vec<u32>> = probe.iter().map(|q| ours.search(q, K).into_iter().map(|h| h.0).collect()).collect();
            let a_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let l: Vec<Vec<u32>> = probe.iter().map(|q| lib.search(q, K, p.ef_search).into_iter().map(|n| n.d_id as u32).collect()).collect();
            let l_s = t.elapsed().as_secs_f64();
            let us = |s: f64, n: usize| s * 1e6 / n.max(1) as f64;
            println!("| {mark} | ours (operators/src/ann.rs) | {:.0} | {:.0} | {:.1}% |", us(ours_ins, mark), us(a_s, probe.len()), recall(&a));
            println!("| {mark} | hnsw_rs 0.3 | {:.0} | {:.0} | {:.1}% |", us(lib_ins, mark), us(l_s, probe.len()), recall(&l));
        }
        // Restart: ours from its serialised nodes and state (what the resolver's store holds).
        let nodes: Vec<Vec<u8>> = (0..ours.len() as u32).map(|i| ours.node_bytes(i)).collect();
        let node_refs: Vec<&[u8]> = nodes.iter().map(Vec::as_slice).collect();
        let state = ours.state_bytes();
        let flat: Vec<f32> = vecs[..done].concat();
        let t = Instant::now();
        let back = Hnsw::restore(dim, p, flat, &node_refs, &state).map_err(|e| anyhow::anyhow!(e))?;
        let ours_restore = t.elapsed().as_secs_f64();
        anyhow::ensure!(back.len() == ours.len(), "restored {} of {}", back.len(), ours.len());
        let dir = crate::scratch_dir("streamrag-bench-ann")?;
        let t = Instant::now();
        let base = lib.file_dump(&dir, "names")?;
        let dump_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut io = HnswIo::new(&dir, &base);
        let reloaded: Lib<f32, DistL2> = io.load_hnsw()?;
        let reload_s = t.elapsed().as_secs_f64();
        anyhow::ensure!(reloaded.get_nb_point() == done, "reloaded {} of {done}", reloaded.get_nb_point());
        println!(
            "restart at {done} entities: ours {ours_restore:.2} s from its serialised nodes (written a node at a time, in the resolver's sled batches); hnsw_rs reload {reload_s:.2} s after a whole-index dump of {dump_s:.2} s"
        );
        drop(reloaded);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
