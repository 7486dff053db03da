//! The Graph Language Model encoder of streamrag (after Plenz & Frank, "Graph Language
//! Models", and GLM-RAG): a graph of triplets becomes one token sequence whose attention
//! follows the graph.
//!
//! # Layout
//! - [`graph`]: graph -> tokens, relative positions, masks, extra buckets (local and global
//!   modes, with and without the question text).
//! - [`batch`]: padded tensors for a batch of graphs, and entity mean-pooling.
//! - [`t5`]: a T5 encoder taking external buckets; loads Hugging Face T5 checkpoints.
//! - [`bert`]: the same graph API on a BERT encoder (all-MiniLM-L6-v2, whose real weights
//!   exist here): a learned relative bias, neutral absolute positions.
//!
//! Small public surface: build a [`graph::TokenizedGraph`], put graphs in a [`batch::Batch`],
//! call an encoder's `encode`.

pub mod batch;
pub mod bert;
pub mod graph;
pub mod t5;

pub use batch::Batch;
pub use graph::{build, HfTokenizer, Mode, TokenizedGraph, Triplet};
pub use bert::{BertConfig, BertGraphEncoder};
pub use t5::{T5Config, T5GraphEncoder};
