//! Errors that say whose fault they are and whether a retry can help.

use streamrag_schemas::{DecodeError, ErrorKind};

/// A failure to process one record. User errors go to the dead-letter topic; external errors
/// may be retried by the stage before they are dead-lettered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StageError {
    pub kind: ErrorKind,
    pub message: String,
    /// A user error that is about size: the input is over a configured limit (HTTP 413).
    pub over_limit: bool,
}

impl StageError {
    pub fn user(message: impl Into<String>) -> Self {
        StageError { kind: ErrorKind::User, message: message.into(), over_limit: false }
    }
    /// A user error: the input is larger than a limit allows.
    pub fn over_limit(message: impl Into<String>) -> Self {
        StageError { over_limit: true, ..StageError::user(message) }
    }
    pub fn external(message: impl Into<String>) -> Self {
        StageError { kind: ErrorKind::External, message: message.into(), over_limit: false }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        StageError { kind: ErrorKind::Internal, message: message.into(), over_limit: false }
    }
}

impl From<DecodeError> for StageError {
    fn from(e: DecodeError) -> Self {
        StageError::user(e.to_string())
    }
}

/// Failures of a transport (the broker or the embedded log).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error("embedded log: {0}")]
    Sled(#[from] sled::Error),
    #[error("{0}")]
    Other(String),
}

/// What stops a stage (it restarts from its last commit), by what failed. A bad record is never
/// one of these: it is a [`StageError`] and goes to the dead-letter topic.
#[derive(Debug, thiserror::Error)]
pub enum StageFault {
    /// The broker or the embedded log.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The graph store (sled) of the kg-writer.
    #[error(transparent)]
    Store(#[from] crate::graph::StoreError),
    /// A model (the GLM, a sentence encoder) failed to run.
    #[error("model: {0}")]
    Model(#[from] streamrag_glm::Error),
    /// The entity resolver's decisions could not be read or stored.
    #[error(transparent)]
    Resolver(#[from] crate::resolve::ResolverError),
    /// The BM25 index could not be written.
    #[error("BM25 index: {0}")]
    Search(#[from] tantivy::TantivyError),
    /// The passage vectors could not be stored.
    #[error(transparent)]
    Vectors(#[from] crate::retrieve::dense::VectorStoreError),
    /// A component's own store, named, with its own error (the way new stores report, so
    /// this enum need not learn each one).
    #[error("{what}: {source}")]
    Own { what: &'static str, source: Box<dyn std::error::Error + Send + Sync> },
}
