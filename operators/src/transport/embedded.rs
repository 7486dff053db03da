//! The embedded transport: a durable, single-partition log per topic in a sled database under
//! `--data DIR`, shared by every stage of one process. A produce returns after sled flushed it
//! to disk, so an acknowledged record survives a crash; consumer-group positions are stored in
//! the same database and move only on commit.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::{last_offsets, now_ms, Output, Position, Record};
use crate::error::TransportError;

const LOG_PREFIX: &str = "log/";
const GROUPS_TREE: &str = "groups";

/// A handle on the embedded log; cheap to clone.
#[derive(Clone)]
pub struct EmbeddedLog {
    inner: Arc<Inner>,
}

struct Inner {
    db: sled::Db,
    groups: sled::Tree,
    /// One lock per topic keeps offsets dense and in append order.
    append: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// Woken whenever any topic grows.
    grown: Notify,
    /// Flushes one at a time: concurrent `flush_async` calls deadlock in sled 0.34
    /// (spacejam/sled#1308; seen here with 8 concurrent questions: every sled IO thread parked
    /// in `make_stable_inner`).
    flushing: tokio::sync::Mutex<()>,
    /// Unit tests of the code above the log: produces to this topic fail.
    #[cfg(test)]
    fail_produce_to: Mutex<Option<String>>,
}

fn encode_record(timestamp_ms: i64, key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + key.len() + payload.len());
    v.extend_from_slice(&timestamp_ms.to_be_bytes());
    v.extend_from_slice(&(key.len() as u32).to_be_bytes());
    v.extend_from_slice(key);
    v.extend_from_slice(payload);
    v
}

fn decode_record(topic: &str, offset: u64, v: &[u8]) -> Result<Record, TransportError> {
    let corrupt = || TransportError::Other(format!("embedded log: corrupt record {topic}@{offset}"));
    if v.len() < 12 {
        return Err(corrupt());
    }
    let ts = i64::from_be_bytes(v[0..8].try_into().unwrap());
    let klen = u32::from_be_bytes(v[8..12].try_into().unwrap()) as usize;
    if v.len() < 12 + klen {
        return Err(corrupt());
    }
    let key = &v[12..12 + klen];
    Ok(Record {
        topic: topic.to_string(),
        partition: 0,
        offset: offset as i64,
        key: if klen == 0 { None } else { Some(key.to_vec()) },
        payload: v[12 + klen..].to_vec(),
        timestamp_ms: ts,
    })
}

impl EmbeddedLog {
    /// Opens (or creates) the log under `dir`. sled holds a lock: one process per directory.
    pub fn open(dir: &Path) -> Result<Self, TransportError> {
        let db = sled::Config::new().path(dir).flush_every_ms(Some(200)).open().map_err(|e| {
            TransportError::Other(format!(
                "cannot open the embedded log at {} ({e}); is another streamrag process using this --data directory?",
                dir.display()
            ))
        })?;
        let groups = db.open_tree(GROUPS_TREE)?;
        Ok(EmbeddedLog {
            inner: Arc::new(Inner {
                db,
                groups,
                append: Mutex::new(HashMap::new()),
                grown: Notify::new(),
                flushing: tokio::sync::Mutex::new(()),
                #[cfg(test)]
                fail_produce_to: Mutex::new(None),
            }),
        })
    }

    fn tree(&self, topic: &str) -> Result<sled::Tree, TransportError> {
        Ok(self.inner.db.open_tree(format!("{LOG_PREFIX}{topic}"))?)
    }

    fn append_lock(&self, topic: &str) -> Arc<Mutex<()>> {
        self.inner.append.lock().unwrap().entry(topic.to_string()).or_default().clone()
    }

    /// Appends `outputs` in order and returns once they are on disk.
    pub async fn produce(&self, outputs: &[Output]) -> Result<Vec<Position>, TransportError> {
        #[cfg(test)]
        if let Some(t) = self.inner.fail_produce_to.lock().unwrap().as_ref() {
            if outputs.iter().any(|o| &o.topic == t) {
                return Err(TransportError::Other(format!("injected produce failure on {t}")));
            }
        }
        let mut positions = Vec::with_capacity(outputs.len());
        let ts = now_ms();
        for out in outputs {
            let tree = self.tree(&out.topic)?;
            let lock = self.append_lock(&out.topic);
            let _g = lock.lock().unwrap();
            let next = match tree.last()? {
                Some((k, _)) => u64::from_be_bytes(k.as_ref().try_into().unwrap()) + 1,
                None => 0,
            };
            tree.insert(next.to_be_bytes(), encode_record(ts, out.key.as_bytes(), &out.payload))?;
            positions.push(Position { partition: 0, offset: next as i64 });
        }
        if !outputs.is_empty() {
            // one flush at a time, off the async threads; a flush covers every write before it,
            // so producers that queued meanwhile find little left to write
            let _one = self.inner.flushing.lock().await;
            let db = self.inner.db.clone();
            tokio::task::spawn_blocking(move || db.flush())
                .await
                .map_err(|e| TransportError::Other(format!("embedded log flush: {e}")))??;
            self.inner.grown.notify_waiters();
        }
        Ok(positions)
    }

    /// The offset the next record of `topic` will get.
    pub fn end_offset(&self, topic: &str) -> Result<i64, TransportError> {
        Ok(match self.tree(topic)?.last()? {
            Some((k, _)) => u64::from_be_bytes(k.as_ref().try_into().unwrap()) as i64 + 1,
            None => 0,
        })
    }

    /// Reads `topic` from `from` (inclusive), at most `max` records.
    pub fn read(&self, topic: &str, from: i64, max: usize) -> Result<Vec<Record>, TransportError> {
        let tree = self.tree(topic)?;
        let mut out = Vec::new();
        for item in tree.range((from.max(0) as u64).to_be_bytes()..).take(max) {
            let (k, v) = item?;
            let off = u64::from_be_bytes(k.as_ref().try_into().unwrap());
            out.push(decode_record(topic, off, &v)?);
        }
        Ok(out)
    }

    fn group_key(group: &str, topic: &str) -> Vec<u8> {
        let mut k = group.as_bytes().to_vec();
        k.push(0);
        k.extend_from_slice(topic.as_bytes());
        k
    }

    /// The committed position of a group (the next offset it will read), if any.
    pub fn committed(&self, group: &str, topic: &str) -> Result<Option<i64>, TransportError> {
        Ok(self
            .inner
            .groups
            .get(Self::group_key(group, topic))?
            .map(|v| i64::from_be_bytes(v.as_ref().try_into().unwrap())))
    }

    pub fn subscribe(&self, group: &str, topic: &str, from_end: bool) -> Result<EmbeddedSubscription, TransportError> {
        let next = match self.committed(group, topic)? {
            Some(n) => n,
            None if from_end => self.end_offset(topic)?,
            None => 0,
        };
        Ok(EmbeddedSubscription { log: self.clone(), group: Some(group.into()), topic: topic.into(), next })
    }

    /// A reader from an explicit position (partition 0 only), outside any group.
    pub fn assign(&self, topic: &str, from: &std::collections::BTreeMap<i32, i64>) -> EmbeddedSubscription {
        let next = from.get(&0).copied().unwrap_or(0);
        EmbeddedSubscription { log: self.clone(), group: None, topic: topic.into(), next }
    }

    /// Flushes everything to disk.
    pub fn flush(&self) -> Result<(), TransportError> {
        self.inner.db.flush()?;
        Ok(())
    }
}

#[cfg(test)]
impl EmbeddedLog {
    /// Makes every produce that includes `topic` fail (None: none fails).
    pub(crate) fn fail_produce_to(&self, topic: Option<&str>) {
        *self.inner.fail_produce_to.lock().unwrap() = topic.map(str::to_string);
    }
}

/// One consumer of one topic in the embedded log.
pub struct EmbeddedSubscription {
    pub(crate) log: EmbeddedLog,
    /// None: an assigned reader whose commits are no-ops.
    group: Option<String>,
    pub(crate) topic: String,
    next: i64,
}

impl EmbeddedSubscription {
    pub async fn next_batch(&mut self, max: usize, wait: Duration) -> Result<Vec<Record>, TransportError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Register interest before reading so an append between the read and the wait
            // is not missed.
            let notified = self.log.inner.grown.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let batch = self.log.read(&self.topic, self.next, max)?;
            if let Some(last) = batch.last() {
                self.next = last.offset + 1;
                return Ok(batch);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    pub fn commit(&mut self, batch: &[Record]) -> Result<(), TransportError> {
        let Some(group) = &self.group else { return Ok(()) };
        if let Some((_, off)) = last_offsets(batch).into_iter().find(|((t, _), _)| *t == self.topic) {
            self.log.inner.groups.insert(EmbeddedLog::group_key(group, &self.topic), &(off + 1).to_be_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(topic: &str, key: &str, payload: &str) -> Output {
        Output { topic: topic.into(), key: key.into(), payload: payload.as_bytes().to_vec() }
    }

    #[tokio::test]
    async fn produce_consume_commit_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = EmbeddedLog::open(dir.path()).unwrap();
            let pos = log.produce(&[out("t", "a", "1"), out("t", "b", "2"), out("u", "c", "3")]).await.unwrap();
            assert_eq!(pos.iter().map(|p| p.offset).collect::<Vec<_>>(), vec![0, 1, 0]);
            let mut s = log.subscribe("g", "t", false).unwrap();
            let b = s.next_batch(1, Duration::from_millis(10)).await.unwrap();
            assert_eq!(b.len(), 1);
            assert_eq!(b[0].payload, b"1");
            assert_eq!(b[0].key_str().as_deref(), Some("a"));
            s.commit(&b).unwrap();
            // Uncommitted record 1 is read but not committed: it must come again after reopen.
            let b2 = s.next_batch(10, Duration::from_millis(10)).await.unwrap();
            assert_eq!(b2.len(), 1);
            log.flush().unwrap();
        }
        let log = EmbeddedLog::open(dir.path()).unwrap();
        let mut s = log.subscribe("g", "t", false).unwrap();
        let b = s.next_batch(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(b.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![1]);
        // A new group from the end sees only new records; from the start sees all.
        let mut late = log.subscribe("late", "t", true).unwrap();
        assert!(late.next_batch(10, Duration::from_millis(10)).await.unwrap().is_empty());
        let mut all = log.subscribe("all", "t", false).unwrap();
        assert_eq!(all.next_batch(10, Duration::from_millis(10)).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn an_assigned_reader_starts_where_told_and_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(dir.path()).unwrap();
        log.produce(&[out("t", "a", "0"), out("t", "b", "1"), out("t", "c", "2")]).await.unwrap();
        let mut s = log.assign("t", &[(0, 1)].into());
        let b = s.next_batch(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(b.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![1, 2]);
        s.commit(&b).unwrap();
        assert_eq!(log.assign("t", &Default::default()).next_batch(10, Duration::from_millis(10)).await.unwrap().len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_producers_all_complete() {
        // concurrent sled flushes used to deadlock the produce path (sled#1308)
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(dir.path()).unwrap();
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let log = log.clone();
                tokio::spawn(async move {
                    for j in 0..5 {
                        log.produce(&[out(if i % 2 == 0 { "a" } else { "b" }, "k", &format!("{i}-{j}"))]).await.unwrap();
                    }
                })
            })
            .collect();
        let all = futures::future::join_all(tasks);
        tokio::time::timeout(std::time::Duration::from_secs(60), all).await.expect("producers finished");
        assert_eq!(log.end_offset("a").unwrap() + log.end_offset("b").unwrap(), 320);
    }

    #[tokio::test]
    async fn a_waiting_consumer_wakes_on_produce() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(dir.path()).unwrap();
        let mut s = log.subscribe("g", "t", false).unwrap();
        let l2 = log.clone();
        let h = tokio::spawn(async move { s.next_batch(10, Duration::from_secs(10)).await.unwrap() });
        tokio::time::sleep(Duration::from_millis(50)).await;
        l2.produce(&[out("t", "k", "x")]).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), h).await.unwrap().unwrap();
        assert_eq!(got.len(), 1);
    }
}
