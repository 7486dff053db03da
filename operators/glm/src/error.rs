//! The one error type of the GLM crate: what failed (a file, its format, a tensor operation,
//! the tokenizer, the device) with the path it concerns where there is one.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tensor operation failed (shapes, dtypes, the device ran out of memory).
    #[error("{0}")]
    Tensor(#[from] candle_core::Error),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A file was read but is not what it should be (config JSON, weights, tokenizer).
    #[error("{}: {message}", path.display())]
    Format { path: PathBuf, message: String },
    /// The tokenizer refused a text.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// No usable device of the kind asked for.
    #[error("{0}")]
    Device(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O failure on `path`.
    pub fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
        move |source| Error::Io { path: path.to_path_buf(), source }
    }
    /// A format problem with `path`.
    pub fn format<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> Error + '_ {
        move |e| Error::Format { path: path.to_path_buf(), message: e.to_string() }
    }
}

/// Reads and parses a JSON file.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
    serde_json::from_str(&text).map_err(Error::format(path))
}
