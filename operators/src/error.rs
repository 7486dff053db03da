//! Errors that say whose fault they are and whether a retry can help.

use streamrag_schemas::{DecodeError, ErrorKind};

/// A failure to process one record. User errors go to the dead-letter topic; external errors
/// may be retried by the stage before they are dead-lettered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StageError {
    pub kind: ErrorKind,
    pub message: String,
}

impl StageError {
    pub fn user(message: impl Into<String>) -> Self {
        StageError { kind: ErrorKind::User, message: message.into() }
    }
    pub fn external(message: impl Into<String>) -> Self {
        StageError { kind: ErrorKind::External, message: message.into() }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        StageError { kind: ErrorKind::Internal, message: message.into() }
    }
}

impl From<DecodeError> for StageError {
    fn from(e: DecodeError) -> Self {
        StageError::user(e.to_string())
    }
}

/// Failures of a transport or a store: these stop a stage (it restarts from its last commit).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error("embedded log: {0}")]
    Sled(#[from] sled::Error),
    #[error("{0}")]
    Other(String),
}
