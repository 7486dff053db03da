//! Parquet snapshots of the graph: five tables and a manifest, readable by pyarrow, DuckDB or
//! Spark with no glue, and the reader that rebuilds an equal [`GraphState`] from them.
//!
//! A snapshot directory holds `entities.parquet`, `triples.parquet`, `documents.parquet`,
//! `entity_documents.parquet`, `entity_links.parquet` and `manifest.json` (schema version, row
//! counts, the offsets the snapshot reflects, creation time, the graph digest). It is written
//! under a temporary name and renamed into place, so a reader never sees half a snapshot.
//! Periodic snapshots go under a root as `snap-<millis>/` with a `LATEST` file naming the newest.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, Float32Array, ListArray, RecordBatch, StringArray, UInt64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use streamrag_schemas::arrow as tables;

use crate::graph::{DocEntry, DocView, Dirty, GraphState, GraphStats, TripleKey};

/// (subject id, relation, object id).
type StrTriple<'a> = (&'a str, &'a str, &'a str);

/// Rows per record batch written.
const BATCH_ROWS: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot I/O at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("snapshot {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io { path: path.to_path_buf(), source }
}

pub use crate::progress::{NoProgress, Progress};

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `streamrag-snapshot`.
    pub format: String,
    /// Layout of the tables ([`tables::TABLES_VERSION`]).
    pub tables_version: u32,
    /// Wire schema version of the messages the graph was built from.
    pub schema_version: u32,
    /// Milliseconds since the epoch.
    pub created_at_ms: i64,
    /// `"topic/partition"` -> last applied offset of the graph-deltas topic.
    pub offsets: BTreeMap<String, i64>,
    /// Table name -> rows.
    pub rows: BTreeMap<String, u64>,
    /// Table name -> file name.
    pub files: BTreeMap<String, String>,
    /// Counts and content digest of the graph, to check a rebuild against.
    pub stats: GraphStats,
}

/// A stable id for a triple: FNV-1a 64 of (subject id, relation, object id), hex.
pub fn triple_id(t: (&str, &str, &str)) -> String {
    format!("{:016x}", crate::hash::fnv1a(&[t.0, t.1, t.2]))
}

fn write_table(
    path: &Path,
    schema: arrow_schema::Schema,
    rows: usize,
    mut batch_at: impl FnMut(std::ops::Range<usize>) -> Vec<ArrayRef>,
    progress: &mut dyn Progress,
) -> Result<u64, SnapshotError> {
    let schema = Arc::new(schema);
    let file = File::create(path).map_err(io(path))?;
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
    let mut start = 0;
    while start < rows {
        let end = (start + BATCH_ROWS).min(rows);
        let batch = RecordBatch::try_new(schema.clone(), batch_at(start..end))?;
        w.write(&batch)?;
        progress.inc((end - start) as u64);
        start = end;
    }
    w.close()?;
    Ok(rows as u64)
}

fn strings<'a>(it: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(it))
}

/// A list-of-strings column: one list per row.
fn string_lists<R: IntoIterator<Item = S>, S: AsRef<str>>(rows: impl Iterator<Item = R>) -> ArrayRef {
    let mut lists = ListBuilder::new(StringBuilder::new()).with_field(Arc::new(arrow_schema::Field::new("item", arrow_schema::DataType::Utf8, false)));
    for row in rows {
        for x in row {
            lists.values().append_value(x);
        }
        lists.append(true);
    }
    Arc::new(lists.finish())
}

/// Row `i` of the list-of-strings column `name` of a snapshot in `dir`.
fn strings_at(lists: &ListArray, i: usize, name: &str, dir: &Path) -> Result<StringArray, SnapshotError> {
    lists.value(i).as_any().downcast_ref::<StringArray>().cloned().ok_or_else(|| SnapshotError::Invalid { path: dir.into(), reason: format!("{name} is not a list of strings") })
}

/// Writes a snapshot of `g` to `dir` (which must not exist yet) and returns its manifest.
pub fn write(g: &GraphState, dir: &Path, progress: &mut dyn Progress) -> Result<Manifest, SnapshotError> {
    if dir.exists() {
        return Err(SnapshotError::Invalid { path: dir.into(), reason: "already exists".into() });
    }
    let tmp = dir.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;

    let mut entities: Vec<(&str, &str, u64)> = g.entities().map(|e| (e.id(), e.name(), e.df() as u64)).collect();
    entities.sort_unstable();
    let mut triples: Vec<(StrTriple<'_>, Vec<&str>)> = g
        .triples()
        .map(|t| {
            let mut s: Vec<&str> = t.support().collect();
            s.sort_unstable();
            (t.key(), s)
        })
        .collect();
    triples.sort_unstable();
    let mut docs: Vec<DocView<'_>> = g.docs().collect();
    docs.sort_unstable_by_key(|d| d.id());
    let mentions: Vec<(&str, &str, &str)> = docs.iter().flat_map(|d| d.entities().map(move |(e, n)| (e, d.id(), n))).collect();
    let links: Vec<(&str, &str, &str, f32)> = docs.iter().flat_map(|d| d.links().map(move |(a, b, c)| (a, b, d.id(), c))).collect();
    let total = (entities.len() + triples.len() + docs.len() + mentions.len() + links.len()) as u64;
    progress.start("snapshot", total);

    let name_of = |id: &str| g.entity(id).map(|e| e.name()).unwrap_or("");
    let mut rows = BTreeMap::new();
    let mut files = BTreeMap::new();
    for (table, _) in tables::tables() {
        files.insert(table.to_string(), format!("{table}.parquet"));
    }
    let n = write_table(&tmp.join("entities.parquet"), tables::entities(), entities.len(), |r| {
        let s = &entities[r];
        vec![
            strings(s.iter().map(|e| e.0)),
            strings(s.iter().map(|e| e.1)),
            Arc::new(UInt64Array::from_iter_values(s.iter().map(|e| e.2))),
        ]
    }, progress)?;
    rows.insert("entities".to_string(), n);
    let n = write_table(&tmp.join("triples.parquet"), tables::triples(), triples.len(), |r| {
        let s = &triples[r];
        let ids: Vec<String> = s.iter().map(|(k, _)| triple_id(*k)).collect();
        vec![
            strings(ids.iter().map(String::as_str)),
            strings(s.iter().map(|(k, _)| k.0)),
            strings(s.iter().map(|(k, _)| name_of(k.0))),
            strings(s.iter().map(|(k, _)| k.1)),
            strings(s.iter().map(|(k, _)| k.2)),
            strings(s.iter().map(|(k, _)| name_of(k.2))),
            string_lists(s.iter().map(|(_, docs)| docs)),
        ]
    }, progress)?;
    rows.insert("triples".to_string(), n);
    let n = write_table(&tmp.join("documents.parquet"), tables::documents(), docs.len(), |r| {
        let s = &docs[r];
        vec![
            strings(s.iter().map(|d| d.id())),
            strings(s.iter().map(|d| d.title())),
            Arc::new(UInt64Array::from_iter_values(s.iter().map(|d| d.entities().count() as u64))),
            Arc::new(UInt64Array::from_iter_values(s.iter().map(|d| d.triple_count() as u64))),
            string_lists(s.iter().map(|d| d.access())),
        ]
    }, progress)?;
    rows.insert("documents".to_string(), n);
    let n = write_table(&tmp.join("entity_documents.parquet"), tables::entity_documents(), mentions.len(), |r| {
        let s = &mentions[r];
        vec![strings(s.iter().map(|m| m.0)), strings(s.iter().map(|m| m.1)), strings(s.iter().map(|m| m.2))]
    }, progress)?;
    rows.insert("entity_documents".to_string(), n);
    let n = write_table(&tmp.join("entity_links.parquet"), tables::entity_links(), links.len(), |r| {
        let s = &links[r];
        vec![
            strings(s.iter().map(|l| l.0)),
            strings(s.iter().map(|l| l.1)),
            strings(s.iter().map(|l| l.2)),
            Arc::new(Float32Array::from_iter_values(s.iter().map(|l| l.3))),
        ]
    }, progress)?;
    rows.insert("entity_links".to_string(), n);

    let manifest = Manifest {
        format: "streamrag-snapshot".into(),
        tables_version: tables::TABLES_VERSION,
        schema_version: streamrag_schemas::SCHEMA_VERSION,
        created_at_ms: crate::transport::now_ms(),
        offsets: g.offsets().clone(),
        rows,
        files,
        stats: g.stats(),
    };
    let mpath = tmp.join("manifest.json");
    std::fs::write(&mpath, serde_json::to_vec_pretty(&manifest).expect("serializable")).map_err(io(&mpath))?;
    std::fs::rename(&tmp, dir).map_err(io(dir))?;
    Ok(manifest)
}

/// Writes a periodic snapshot under `root` as `snap-<millis>` and points `LATEST` at it.
pub fn write_periodic(g: &GraphState, root: &Path, progress: &mut dyn Progress) -> Result<(PathBuf, Manifest), SnapshotError> {
    std::fs::create_dir_all(root).map_err(io(root))?;
    let name = format!("snap-{:015}", crate::transport::now_ms());
    let dir = root.join(&name);
    let m = write(g, &dir, progress)?;
    let latest = root.join("LATEST");
    let tmp = root.join("LATEST.tmp");
    std::fs::write(&tmp, &name).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &latest).map_err(io(&latest))?;
    Ok((dir, m))
}

/// Removes all but the newest `keep` (at least one) periodic snapshots under `root`.
pub fn prune(root: &Path, keep: usize) -> Result<(), SnapshotError> {
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(io(root))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("snap-") && !n.contains(".tmp")))
        .collect();
    snaps.sort();
    let n = snaps.len().saturating_sub(keep.max(1));
    for old in &snaps[..n] {
        std::fs::remove_dir_all(old).map_err(io(old))?;
    }
    Ok(())
}

/// Writes a snapshot of the live graph under `root` every `every` when it changed, keeping the
/// newest `keep`, until `shutdown` turns true. A graph version is immutable, so the writer is
/// never blocked; a failed snapshot is logged and tried again at the next tick.
///
/// With a bucket, each snapshot written is uploaded too and the bucket pruned to `keep`; a
/// failed upload is logged and tried again at the next tick.
pub async fn periodic(
    g: crate::kg_writer::LiveGraph,
    root: PathBuf,
    every: std::time::Duration,
    keep: usize,
    bucket: Option<std::sync::Arc<crate::bucket::SnapshotBucket>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut last_digest = String::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
        let (version, root2, prev) = (g.current(), root.clone(), last_digest.clone());
        let done = tokio::task::spawn_blocking(move || {
            let digest = version.stats().digest;
            if digest == prev {
                return (digest, Ok(None));
            }
            let res = write_periodic(&version, &root2, &mut NoProgress).and_then(|out| prune(&root2, keep).map(|_| Some(out)));
            (digest, res)
        })
        .await;
        match done {
            Ok((digest, Ok(written))) => {
                let mut uploaded = true;
                if let Some((dir, m)) = written {
                    tracing::info!(dir = %dir.display(), rows = ?m.rows, "snapshot written");
                    if let Some(b) = &bucket {
                        match b.upload(&dir).await {
                            Ok(()) => {
                                tracing::info!(bucket = %b.url(), dir = %dir.display(), "snapshot uploaded");
                                if let Err(e) = b.prune(keep).await {
                                    tracing::warn!(error = %e, "pruning the bucket's snapshots failed; will retry");
                                }
                            }
                            Err(e) => {
                                uploaded = false;
                                tracing::error!(error = %e, "snapshot upload failed; will retry");
                            }
                        }
                    }
                }
                // a version not in the bucket yet is written and uploaded again at the next tick
                if uploaded {
                    last_digest = digest;
                }
            }
            Ok((_, Err(e))) => tracing::error!(error = %e, "snapshot failed; will retry"),
            Err(e) => tracing::error!(error = %e, "snapshot task failed; will retry"),
        }
    }
}

/// A snapshot directory itself, or the newest under a root of periodic snapshots; None when
/// the root holds none yet.
pub fn resolve(path: &Path) -> Result<Option<PathBuf>, SnapshotError> {
    if path.join("manifest.json").exists() {
        return Ok(Some(path.to_path_buf()));
    }
    let latest = path.join("LATEST");
    if latest.exists() {
        let name = std::fs::read_to_string(&latest).map_err(io(&latest))?;
        return Ok(Some(path.join(name.trim())));
    }
    Ok(None)
}

pub fn read_manifest(dir: &Path) -> Result<Manifest, SnapshotError> {
    let p = dir.join("manifest.json");
    let bytes = std::fs::read(&p).map_err(io(&p))?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| SnapshotError::Invalid { path: p.clone(), reason: e.to_string() })?;
    if m.format != "streamrag-snapshot" || m.tables_version != tables::TABLES_VERSION {
        return Err(SnapshotError::Invalid {
            path: p,
            reason: format!("format {} version {} is not supported", m.format, m.tables_version),
        });
    }
    Ok(m)
}

fn read_table(dir: &Path, file: &str, mut each: impl FnMut(&RecordBatch) -> Result<(), SnapshotError>, progress: &mut dyn Progress) -> Result<(), SnapshotError> {
    let path = dir.join(file);
    let f = File::open(&path).map_err(io(&path))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)?.with_batch_size(BATCH_ROWS).build()?;
    for batch in reader {
        let batch = batch?;
        each(&batch)?;
        progress.inc(batch.num_rows() as u64);
    }
    Ok(())
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T, SnapshotError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| SnapshotError::Invalid { path: PathBuf::new(), reason: format!("column {name} missing or of the wrong type") })
}

/// Rebuilds the graph a snapshot holds, with the offsets it reflects, and checks it against the
/// manifest's digest.
pub fn read(dir: &Path, progress: &mut dyn Progress) -> Result<(GraphState, Manifest), SnapshotError> {
    let m = read_manifest(dir)?;
    // the entities table is derived (names, frequencies): the other three rebuild the graph
    progress.start("replay", m.rows.iter().filter(|(t, _)| *t != "entities").map(|(_, n)| n).sum());
    let mut docs: HashMap<String, DocEntry> = HashMap::new();
    read_table(dir, &m.files["documents"], |b| {
        let (id, title) = (col::<StringArray>(b, "doc_id")?, col::<StringArray>(b, "title")?);
        // snapshots written before access labels have no such column: all public
        let access = match b.column_by_name("access") {
            Some(_) => Some(col::<ListArray>(b, "access")?),
            None => None,
        };
        for i in 0..b.num_rows() {
            let mut entry = DocEntry { title: title.value(i).to_string(), ..Default::default() };
            if let Some(a) = access {
                let labels = strings_at(a, i, "access", dir)?;
                entry.access = (0..labels.len()).map(|j| labels.value(j).to_string()).collect();
            }
            docs.insert(id.value(i).to_string(), entry);
        }
        Ok(())
    }, progress)?;
    let missing = |d: &str| SnapshotError::Invalid { path: dir.into(), reason: format!("document {d} is referenced but not listed") };
    read_table(dir, &m.files["entity_documents"], |b| {
        let (e, d, n) = (col::<StringArray>(b, "entity_id")?, col::<StringArray>(b, "doc_id")?, col::<StringArray>(b, "name")?);
        for i in 0..b.num_rows() {
            let doc = docs.get_mut(d.value(i)).ok_or_else(|| missing(d.value(i)))?;
            doc.entities.insert(e.value(i).to_string(), n.value(i).to_string());
        }
        Ok(())
    }, progress)?;
    read_table(dir, &m.files["triples"], |b| {
        let (s, r, o) = (col::<StringArray>(b, "subject_id")?, col::<StringArray>(b, "relation")?, col::<StringArray>(b, "object_id")?);
        let support = col::<ListArray>(b, "supporting_documents")?;
        for i in 0..b.num_rows() {
            let key: TripleKey = (s.value(i).to_string(), r.value(i).to_string(), o.value(i).to_string());
            let ds = strings_at(support, i, "supporting_documents", dir)?;
            for j in 0..ds.len() {
                docs.get_mut(ds.value(j)).ok_or_else(|| missing(ds.value(j)))?.triples.insert(key.clone());
            }
        }
        Ok(())
    }, progress)?;
    // Snapshots written before entity links had no such table.
    if let Some(file) = m.files.get("entity_links") {
        read_table(dir, file, |b| {
            let (e, l, d) = (col::<StringArray>(b, "entity_id")?, col::<StringArray>(b, "linked_id")?, col::<StringArray>(b, "doc_id")?);
            let c = col::<Float32Array>(b, "confidence")?;
            for i in 0..b.num_rows() {
                let doc = docs.get_mut(d.value(i)).ok_or_else(|| missing(d.value(i)))?;
                doc.links.insert((e.value(i).to_string(), l.value(i).to_string(), (c.value(i) * 1000.0).round() as u16));
            }
            Ok(())
        }, progress)?;
    }
    let mut g = GraphState::new();
    let mut scratch = Dirty::default();
    let mut ids: Vec<String> = docs.keys().cloned().collect();
    ids.sort_unstable();
    for id in ids {
        let entry = docs.remove(&id).expect("listed");
        g.apply(&id, Some(&entry), &mut scratch);
    }
    for (k, v) in &m.offsets {
        g.restore_offset(k.clone(), *v);
    }
    let got = g.stats();
    if got.digest != m.stats.digest {
        return Err(SnapshotError::Invalid {
            path: dir.into(),
            reason: format!("rebuilt graph digest {} differs from the manifest's {}", got.digest, m.stats.digest),
        });
    }
    Ok((g, m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn entry(title: &str, ts: &[(&str, &str, &str)]) -> DocEntry {
        let mut entities = BTreeMap::new();
        let mut triples = BTreeSet::new();
        for (s, r, o) in ts {
            entities.insert(s.to_string(), format!("{s} ({title})"));
            entities.insert(o.to_string(), o.to_uppercase());
            triples.insert((s.to_string(), r.to_string(), o.to_string()));
        }
        DocEntry { title: title.into(), entities, triples, ..Default::default() }
    }

    #[test]
    fn write_then_read_gives_an_equal_graph() {
        let mut g = GraphState::new();
        let mut d = Dirty::default();
        g.apply("d1", Some(&entry("One", &[("a", "r", "b"), ("b", "r", "c")])), &mut d);
        let mut two = entry("Two", &[("a", "r", "b"), ("a", "s", "a")]);
        two.links.insert(("a".into(), "c".into(), 873));
        g.apply("d2", Some(&two), &mut d);
        g.apply("d3", Some(&entry("Three", &[])), &mut d);
        g.set_offset("deltas", 0, 41, &mut d);
        let dir = tempfile::tempdir().unwrap();
        let snap = dir.path().join("s");
        let m = write(&g, &snap, &mut NoProgress).unwrap();
        assert_eq!(m.rows["documents"], 3);
        assert_eq!(m.rows["triples"], 3);
        assert_eq!(m.rows["entities"], 3);
        assert_eq!(m.rows["entity_links"], 1);
        assert_eq!(m.offsets["deltas/0"], 41);
        assert!(write(&g, &snap, &mut NoProgress).is_err(), "never overwrites");
        let (back, m2) = read(&snap, &mut NoProgress).unwrap();
        assert_eq!(m2, m);
        assert_eq!(back.stats(), g.stats());
        assert_eq!(back.entity("a").unwrap().name(), g.entity("a").unwrap().name());
        assert_eq!(back.doc("d1").unwrap().to_entry(), g.doc("d1").unwrap().to_entry());
        assert_eq!(back.doc("d2").unwrap().to_entry(), g.doc("d2").unwrap().to_entry(), "the link and its confidence come back");
        assert_eq!(back.synonyms("c"), vec![("a", 0.873)]);
    }

    #[test]
    fn periodic_snapshots_resolve_to_the_latest_and_a_corrupt_one_is_refused() {
        let mut g = GraphState::new();
        let mut d = Dirty::default();
        g.apply("d1", Some(&entry("One", &[("a", "r", "b")])), &mut d);
        let root = tempfile::tempdir().unwrap();
        assert!(resolve(root.path()).unwrap().is_none());
        let (first, _) = write_periodic(&g, root.path(), &mut NoProgress).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        g.apply("d2", Some(&entry("Two", &[("c", "r", "b")])), &mut d);
        let (second, _) = write_periodic(&g, root.path(), &mut NoProgress).unwrap();
        assert_ne!(first, second);
        prune(root.path(), 1).unwrap();
        assert!(!first.exists() && second.exists(), "pruning keeps the newest");
        assert_eq!(resolve(root.path()).unwrap().unwrap(), second);
        // tamper with the manifest's digest: the reader refuses
        let mp = second.join("manifest.json");
        let mut m: Manifest = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
        m.stats.digest = "0".repeat(16);
        std::fs::write(&mp, serde_json::to_vec(&m).unwrap()).unwrap();
        assert!(read(&second, &mut NoProgress).unwrap_err().to_string().contains("digest"));
    }
}
