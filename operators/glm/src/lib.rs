//! The Graph Language Model encoder of streamrag (after Plenz & Frank, "Graph Language
//! Models", and GLM-RAG): a graph of triplets becomes one token sequence whose attention
//! follows the graph.
//!
//! # Layout
//! - [`graph`]: graph -> tokens, relative positions, masks, extra buckets (local and global
//!   modes, with and without the question text).
//! - [`batch`]: padded tensors for a batch of graphs, and entity mean-pooling.
//! - [`t5`]: a T5 encoder taking external buckets; loads Hugging Face T5 checkpoints.
//! - [`backbone`]: either encoder behind one type, told apart by one rule.
//! - [`model`]: the whole retriever model (encoder, scoring head, question encoder) and its
//!   checkpoints; [`head`], [`loss`], [`optim`]: its scoring head, loss and AdamW.
//! - [`sentence`]: sentence embeddings (MiniLM) for questions, passages and names.
//! - [`device`]: the device the models run on; [`error`]: the crate's one error type.
//! - [`bert`]: the same graph API on a BERT encoder (all-MiniLM-L6-v2, whose real weights
//!   exist here): a learned relative bias, neutral absolute positions.
//!
//! Small public surface: build a [`graph::TokenizedGraph`], put graphs in a [`batch::Batch`],
//! call an encoder's `encode`.

pub mod adapt;
pub mod backbone;
pub mod batch;
pub mod bert;
pub mod device;
pub mod error;
pub mod graph;
pub mod head;
pub mod loss;
pub mod model;
pub mod ops;
pub mod optim;
pub mod sentence;
pub mod t5;

pub use backbone::{Backbone, BackboneKind};
pub use batch::Batch;
pub use error::{Error, Result};
pub use graph::{build, HfTokenizer, Mode, TokenizedGraph, Triplet};
pub use bert::{BertConfig, BertGraphEncoder};
pub use t5::{T5Config, T5GraphEncoder};
pub use model::{GlmConfig, GlmModel};
pub use sentence::SentenceEncoder;

/// Keeps freed memory for reuse instead of returning it to the OS. The encoder's attention
/// tensors are (B, heads, L, L): hundreds of MB each, above glibc's mmap threshold, so by
/// default every one is a fresh mapping whose pages the kernel must zero; on CPU that page
/// clearing took more time than the arithmetic (`perf`: 34-45% in clear_page; a training
/// run's first 25 steps at 150 triplets took 156 s instead of 336 s). Call it before any
/// worker thread exists: a thread's arena is fixed at its first allocation. Process-wide;
/// the resident size then stays at its peak. A no-op off glibc.
pub fn retain_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is safe to call at any time.
    unsafe {
        // one arena: worker threads' arenas are small mmap'd heaps that cannot hold these
        // tensors and give pages back on free
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}
