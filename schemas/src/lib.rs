//! Wire types of streamrag: one Rust type per topic message, each mirrored by a JSON Schema
//! file under `schemas/json/` (the test in `tests/schema_sync.rs` keeps the two in step), and
//! the Arrow schemas of the Parquet snapshot tables.
//!
//! # Layout
//! - [`wire`]: the topic messages (document, extraction, graph delta, query, answer, dead letter)
//!   and [`decode`], the one place a payload becomes a typed message.
//! - [`arrow`]: Arrow schemas of the snapshot tables.
//!
//! Every message carries `schema_version`; absent means [`SCHEMA_VERSION`], anything else is
//! rejected by [`decode`] so that a producer on a newer schema is dead-lettered, not misread.

pub mod arrow;
pub mod wire;

pub use wire::*;

/// The schema version this build writes and accepts.
pub const SCHEMA_VERSION: u32 = 1;
