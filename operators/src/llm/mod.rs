//! LLMs: one interface over an OpenAI-compatible endpoint ([`openai`]) and a GGUF model run in
//! this process ([`local`]). Stages hold an [`Llm`] and ask it for chat completions; it counts
//! its calls and tokens ([`LlmStats`]) so a replay that should make no call can be checked.

pub mod local;
pub mod openai;
#[cfg(test)]
pub(crate) mod test_server;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One chat completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Why a completion failed. `retryable` failures (rate limits, timeouts, server errors,
/// unreadable responses) are retried by the client before they surface.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct LlmError {
    pub retryable: bool,
    pub message: String,
}

impl LlmError {
    pub fn retryable(message: impl Into<String>) -> Self {
        LlmError { retryable: true, message: message.into() }
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        LlmError { retryable: false, message: message.into() }
    }
}

/// Counters of one LLM client; every request sent counts as a call, retries included.
#[derive(Debug, Default)]
pub struct LlmStats {
    pub calls: AtomicU64,
    pub failures: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    /// Local model only: microseconds reading prompts (prefill) and generating (decode).
    pub prefill_us: AtomicU64,
    pub decode_us: AtomicU64,
}

impl LlmStats {
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
    pub(crate) fn record(&self, c: &Completion) {
        self.prompt_tokens.fetch_add(c.prompt_tokens, Ordering::Relaxed);
        self.completion_tokens.fetch_add(c.completion_tokens, Ordering::Relaxed);
    }
}

/// Sampling for one request. `temperature == 0` is greedy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub max_tokens: u32,
    pub temperature: f32,
    /// Seeds the local sampler (ignored by endpoints).
    pub seed: u64,
}

impl Sampling {
    pub fn greedy(max_tokens: u32) -> Self {
        Sampling { max_tokens, temperature: 0.0, seed: 0 }
    }
}

/// Which LLM, as written on the command line: `openai:MODEL` or `local:PATH.gguf`.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmSpec {
    OpenAi { model: String },
    Local { gguf: PathBuf },
}

impl LlmSpec {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("openai", m)) if !m.trim().is_empty() => Ok(LlmSpec::OpenAi { model: m.trim().to_string() }),
            Some(("local", p)) if !p.trim().is_empty() => Ok(LlmSpec::Local { gguf: PathBuf::from(p.trim()) }),
            _ => Err(format!("--llm {s:?}: expected openai:MODEL or local:PATH.gguf")),
        }
    }
}

/// The model behind an [`Llm`].
#[derive(Clone)]
pub enum Model {
    OpenAi(Arc<openai::OpenAiLlm>),
    Local(Arc<local::LocalLlm>),
}

/// A chat model and the counters of its users: [`Llm::for_role`] shares the model (a local
/// one loads once) with counters of its own, so extraction and answers are counted apart.
#[derive(Clone)]
pub struct Llm {
    model: Model,
    stats: Arc<LlmStats>,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Llm({})", self.model_id())
    }
}

impl Llm {
    pub fn openai(c: openai::OpenAiLlm) -> Self {
        Llm { model: Model::OpenAi(Arc::new(c)), stats: Arc::default() }
    }

    pub fn local(m: local::LocalLlm) -> Self {
        Llm { model: Model::Local(Arc::new(m)), stats: Arc::default() }
    }

    /// The same model with fresh counters.
    pub fn for_role(&self) -> Self {
        Llm { model: self.model.clone(), stats: Arc::default() }
    }

    /// The model's identity in cache keys and records: `openai:MODEL` or `local:FILE_NAME`.
    pub fn model_id(&self) -> String {
        match &self.model {
            Model::OpenAi(c) => format!("openai:{}", c.model()),
            Model::Local(m) => format!("local:{}", m.name()),
        }
    }

    pub fn stats(&self) -> &LlmStats {
        &self.stats
    }

    /// The counters, shared (for the metrics registry).
    pub fn stats_handle(&self) -> Arc<LlmStats> {
        self.stats.clone()
    }

    /// One completion of a system + user prompt.
    pub async fn chat(&self, system: &str, user: &str, sampling: Sampling) -> Result<Completion, LlmError> {
        match &self.model {
            Model::OpenAi(c) => c.chat(system, user, sampling, &self.stats).await,
            Model::Local(m) => {
                let (m, stats, system, user) = (m.clone(), self.stats.clone(), system.to_string(), user.to_string());
                tokio::task::spawn_blocking(move || m.chat(&system, &user, sampling, &stats))
                    .await
                    .map_err(|e| LlmError::fatal(format!("local model task: {e}")))?
            }
        }
    }
}

/// The first `max` characters of `s` (LLM prompts and error texts are cut by characters).
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Everything needed to open an [`Llm`].
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    pub spec: LlmSpec,
    /// The endpoint of `openai:` models (default the OpenAI API).
    pub base_url: Option<String>,
    pub api_key: openai::ApiKeySource,
    pub concurrency: usize,
    pub timeout: std::time::Duration,
    /// The tokenizer.json of a local model (default: beside the GGUF file).
    pub tokenizer: Option<PathBuf>,
}

impl LlmSettings {
    pub fn new(spec: LlmSpec) -> Self {
        let d = openai::OpenAiSettings::default();
        LlmSettings { spec, base_url: None, api_key: d.api_key, concurrency: d.concurrency, timeout: d.timeout, tokenizer: None }
    }

    /// Opens the model (loading a local one: call from a blocking thread).
    pub fn open(&self, device: &candle_core::Device) -> Result<Llm, LlmError> {
        Ok(match &self.spec {
            LlmSpec::OpenAi { model } => {
                let d = openai::OpenAiSettings::default();
                Llm::openai(openai::OpenAiLlm::new(openai::OpenAiSettings {
                    base_url: self.base_url.clone().unwrap_or(d.base_url),
                    model: model.clone(),
                    api_key: self.api_key.clone(),
                    timeout: self.timeout,
                    concurrency: self.concurrency,
                    ..d
                })?)
            }
            LlmSpec::Local { gguf } => Llm::local(local::LocalLlm::load(gguf, self.tokenizer.as_deref(), device)?),
        })
    }
}
