//! Snapshots in S3-compatible object storage (`--snapshot-url s3://bucket/prefix`), so query
//! replicas on other hosts bootstrap without a shared volume. The kg-writer writes each
//! periodic snapshot locally as before, then uploads it as `<prefix>/snap-<millis>/<table>`,
//! its `manifest.json` last: a snapshot without a manifest is an upload still under way (or
//! one that died), never read. A replica lists the snapshots newest first, downloads one into
//! its data directory and reads it, which checks every table's rows against the manifest's
//! counts and digest; one that does not read (a truncated or altered table) is refused with
//! the reason, and the one before it is tried. Older snapshots beyond `--snapshot-keep` are
//! deleted after each upload.
//!
//! The store is the Apache Arrow project's `object_store`, configured from the environment
//! as the AWS tools are (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`,
//! `AWS_ENDPOINT` for S3-compatible servers such as MinIO, `AWS_ALLOW_HTTP=true` for a plain
//! HTTP endpoint).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, PutPayload};

use crate::graph::GraphState;
use crate::snapshot::{Manifest, SnapshotError};

/// Why the bucket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error("{0:?} is not an s3://bucket[/prefix] URL")]
    Url(String),
    #[error("object storage {url}: {source}")]
    Store { url: String, source: object_store::Error },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("snapshot {name} in {url} has no manifest.json (an upload under way or one that died)")]
    Partial { url: String, name: String },
}

/// The snapshots under one prefix of a bucket.
pub struct SnapshotBucket {
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    url: String,
}

const MANIFEST: &str = "manifest.json";

/// The error of an I/O step on `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BucketError {
    let path = path.to_path_buf();
    move |source| BucketError::Io { path, source }
}

impl SnapshotBucket {
    /// `url`: `s3://bucket` or `s3://bucket/some/prefix`; credentials and endpoint from the
    /// environment.
    pub fn open(url: &str) -> Result<Self, BucketError> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| BucketError::Url(url.to_string()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(BucketError::Url(url.to_string()));
        }
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|source| BucketError::Store { url: url.to_string(), source })?;
        Ok(SnapshotBucket { store: Arc::new(store), prefix: Key::from(prefix.trim_matches('/')), url: url.to_string() })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn err(&self) -> impl Fn(object_store::Error) -> BucketError + '_ {
        |source| BucketError::Store { url: self.url.clone(), source }
    }

    fn key(&self, name: &str, file: &str) -> Key {
        self.prefix.child(name).child(file)
    }

    /// Uploads the snapshot directory `dir` (named `snap-...`), its manifest last.
    pub async fn upload(&self, dir: &Path) -> Result<(), BucketError> {
        let name = dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| BucketError::Url(dir.display().to_string()))?.to_string();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir).map_err(io(dir))?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
        // the manifest last: it is what makes the snapshot whole
        files.sort_by_key(|p| (p.file_name().is_some_and(|n| n == MANIFEST), p.clone()));
        for f in files {
            let bytes = tokio::fs::read(&f).await.map_err(io(&f))?;
            let file = f.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            self.store.put(&self.key(&name, &file), PutPayload::from(bytes)).await.map_err(self.err())?;
        }
        Ok(())
    }

    /// The snapshots in the bucket, oldest first (whole or not).
    pub async fn snapshots(&self) -> Result<Vec<String>, BucketError> {
        let listed = self.store.list_with_delimiter(Some(&self.prefix)).await.map_err(self.err())?;
        let mut names: Vec<String> = listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_string)).filter(|n| n.starts_with("snap-")).collect();
        names.sort();
        Ok(names)
    }

    /// The objects of snapshot `name`.
    async fn objects(&self, name: &str) -> Result<Vec<object_store::ObjectMeta>, BucketError> {
        self.store.list(Some(&self.prefix.child(name))).try_collect().await.map_err(self.err())
    }

    /// Deletes all but the newest `keep` (at least one) snapshots.
    pub async fn prune(&self, keep: usize) -> Result<(), BucketError> {
        let names = self.snapshots().await?;
        let n = names.len().saturating_sub(keep.max(1));
        for name in &names[..n] {
            let objects = self.objects(name).await?;
            // the manifest first, so a half-deleted snapshot is never taken for a whole one
            let mut keys: Vec<Key> = objects.into_iter().map(|o| o.location).collect();
            keys.sort_by_key(|k| k.filename() != Some(MANIFEST));
            for k in keys {
                self.store.delete(&k).await.map_err(self.err())?;
            }
        }
        Ok(())
    }

    /// Downloads snapshot `name` into `into/name` (replacing what was there) and returns that
    /// directory; a snapshot without its manifest is [`BucketError::Partial`].
    pub async fn download(&self, name: &str, into: &Path) -> Result<PathBuf, BucketError> {
        let objects = self.objects(name).await?;
        if !objects.iter().any(|o| o.location.filename() == Some(MANIFEST)) {
            return Err(BucketError::Partial { url: self.url.clone(), name: name.to_string() });
        }
        let dir = into.join(name);
        if dir.exists() {
            tokio::fs::remove_dir_all(&dir).await.map_err(io(&dir))?;
        }
        tokio::fs::create_dir_all(&dir).await.map_err(io(&dir))?;
        for o in objects {
            let file = o.location.filename().unwrap_or_default().to_string();
            let bytes = self.store.get(&o.location).await.map_err(self.err())?.bytes().await.map_err(self.err())?;
            let path = dir.join(&file);
            tokio::fs::write(&path, &bytes).await.map_err(io(&path))?;
        }
        Ok(dir)
    }

    /// The newest snapshot that reads whole, downloaded under `cache`: its graph, its manifest
    /// and its name. Newer ones that do not read are refused (logged with the reason) and the
    /// one before each is tried; None when the bucket holds no usable snapshot. The graph lives
    /// in memory once read: `cache` holds nothing afterwards, from this start or earlier ones.
    pub async fn load_newest(&self, cache: &Path) -> Result<Option<(GraphState, Manifest, String)>, BucketError> {
        let loaded = self.read_newest(cache).await;
        if cache.exists() {
            tokio::fs::remove_dir_all(cache).await.map_err(io(cache))?;
        }
        loaded
    }

    async fn read_newest(&self, cache: &Path) -> Result<Option<(GraphState, Manifest, String)>, BucketError> {
        for name in self.snapshots().await?.into_iter().rev() {
            let dir = match self.download(&name, cache).await {
                Ok(d) => d,
                Err(e @ BucketError::Partial { .. }) => {
                    tracing::warn!(error = %e, "snapshot refused; trying the one before");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let read = tokio::task::spawn_blocking(move || crate::snapshot::read(&dir, &mut crate::progress::NoProgress)).await;
            match read {
                Ok(Ok((g, m))) => return Ok(Some((g, m, name))),
                Ok(Err(e)) => refused(&self.url, &name, &e),
                Err(e) => tracing::warn!(snapshot = %name, error = %e, "reading the snapshot failed; trying the one before"),
            }
        }
        Ok(None)
    }
}

fn refused(url: &str, name: &str, e: &SnapshotError) {
    tracing::warn!(bucket = %url, snapshot = %name, reason = %e, "snapshot refused: it does not read whole; trying the one before");
}
