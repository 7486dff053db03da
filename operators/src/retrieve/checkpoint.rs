//! The GLM checkpoint a running node follows: the model loaded from a directory `streamrag
//! train` writes, and loaded again, then swapped in between two batches, when the directory's
//! weights or config change (a training run saving into it, or another checkpoint renamed into
//! its place). A batch holds the model it started with to its end, so no query sees half of a
//! swap and none fails for one; each answer names the checkpoint that scored it
//! ([`Loaded::id`]).
//!
//! A change is loaded once it has held still for one poll (a copy still being written is not
//! read), and a load that fails (a broken or half-copied directory) is logged and leaves the
//! current model answering until the directory changes again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use candle_core::Device;
use streamrag_glm::Result;

use super::glm::GlmRetriever;

/// How often the directory is looked at (two file metadata reads).
pub const CHECKPOINT_POLL: Duration = Duration::from_secs(1);

/// A model and the name answers give it.
pub struct Loaded {
    pub glm: GlmRetriever,
    /// The directory, the training step and a digest of the weights, e.g.
    /// `/ck/glm step 199 #1a2b3c4d`.
    pub id: String,
}

/// What the poll compares: size and modification time of the weights and the config.
type Signature = Vec<Option<(u64, SystemTime)>>;

fn signature(dir: &Path) -> Signature {
    ["model.safetensors", "glm.json"].iter().map(|f| std::fs::metadata(dir.join(f)).ok().map(|m| (m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)))).collect()
}

/// FNV-1a over a file's bytes, folded to 32 bits (a name, not a check).
fn digest(path: &Path) -> std::io::Result<u32> {
    let h = crate::hash::fnv1a_bytes(std::fs::read(path)?);
    Ok((h ^ (h >> 32)) as u32)
}

/// The checkpoint in `dir` and the model loaded from it.
pub struct GlmSlot {
    dir: PathBuf,
    device: Device,
    batch: usize,
    triplets: Option<usize>,
    current: RwLock<Arc<Loaded>>,
    /// (the signature loaded or last tried, the one seen at the last poll)
    seen: Mutex<(Signature, Signature)>,
}

impl GlmSlot {
    /// Loads the checkpoint in `dir`; `batch`: graphs per forward pass; `triplets`: the
    /// subgraph budget (None: the one the checkpoint was trained with).
    pub fn load(dir: &Path, device: &Device, batch: usize, triplets: Option<usize>) -> Result<Self> {
        let sig = signature(dir);
        let loaded = Self::read(dir, device, batch, triplets)?;
        Ok(GlmSlot { dir: dir.to_path_buf(), device: device.clone(), batch, triplets, current: RwLock::new(Arc::new(loaded)), seen: Mutex::new((sig.clone(), sig)) })
    }

    fn read(dir: &Path, device: &Device, batch: usize, triplets: Option<usize>) -> Result<Loaded> {
        let weights = dir.join("model.safetensors");
        let digest = digest(&weights).map_err(streamrag_glm::Error::io(&weights))?;
        let mut glm = GlmRetriever::load(dir, device)?;
        glm.batch_size = batch.max(1);
        glm.max_triplets = triplets;
        let id = format!("{} step {} #{digest:08x}", dir.display(), glm.model.config.training.steps);
        Ok(Loaded { glm, id })
    }

    /// The model queries use now; hold it for a whole batch.
    pub fn current(&self) -> Arc<Loaded> {
        self.current.read().expect("checkpoint lock").clone()
    }

    /// Looks at the directory once: when it changed since the model was loaded and has not
    /// changed since the last look, loads it and swaps it in. True when it swapped.
    pub fn refresh(&self) -> bool {
        let now = signature(&self.dir);
        {
            let mut seen = self.seen.lock().expect("checkpoint lock");
            let (loaded, last) = &mut *seen;
            let settled = now == *last;
            *last = now.clone();
            if now == *loaded || !settled || now.iter().any(Option::is_none) {
                return false;
            }
            // tried once, whatever comes of it: a broken directory is tried again when it changes
            *loaded = now.clone();
        }
        match Self::read(&self.dir, &self.device, self.batch, self.triplets) {
            // a save that landed while reading is read at the next look
            Ok(next) if signature(&self.dir) == now => {
                tracing::info!(checkpoint = %next.id, previous = %self.current().id, "the query stage swapped to a new GLM checkpoint");
                crate::metrics::global().counter("streamrag_glm_checkpoint_swaps_total", "GLM checkpoints loaded by a running query stage after the first").fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                *self.current.write().expect("checkpoint lock") = Arc::new(next);
                true
            }
            Ok(_) => {
                self.seen.lock().expect("checkpoint lock").0 = Signature::new();
                false
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "a new GLM checkpoint did not load; the current one goes on answering");
                false
            }
        }
    }

    /// Looks at the directory every `every` on a thread of its own, for as long as the slot is
    /// held anywhere.
    pub fn watch(self: &Arc<Self>, every: Duration) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let spawned = std::thread::Builder::new().name("glm-checkpoint".into()).spawn(move || loop {
            std::thread::sleep(every);
            match weak.upgrade() {
                Some(slot) => {
                    slot.refresh();
                }
                None => return,
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no thread to follow the GLM checkpoint: it stays as loaded");
        }
    }
}
