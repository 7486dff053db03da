//! A client for any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server),
//! on async-openai. Adds what a pipeline stage needs: a concurrency limit, a per-request
//! timeout, retries with exponential backoff for rate limits / server errors / timeouts /
//! unreadable responses, and token counts. The API key comes from the environment or a file
//! and is never printed (not even by `Debug`).

use std::path::PathBuf;
use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage, CreateChatCompletionRequestArgs,
};
use tokio::sync::Semaphore;

use super::{truncate, Completion, LlmError, LlmStats, Sampling};

/// Where the API key comes from. Never the command line or the config file: both end up in
/// shell histories and process lists.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiKeySource {
    /// The named environment variable (default `OPENAI_API_KEY`); unset means no key (local
    /// servers such as vLLM and Ollama need none).
    Env(String),
    /// The first line of a file (a mounted Kubernetes Secret, say).
    File(PathBuf),
}

impl Default for ApiKeySource {
    fn default() -> Self {
        ApiKeySource::Env("OPENAI_API_KEY".into())
    }
}

impl ApiKeySource {
    fn read(&self) -> Result<String, LlmError> {
        match self {
            ApiKeySource::Env(var) => Ok(std::env::var(var).unwrap_or_default()),
            ApiKeySource::File(p) => std::fs::read_to_string(p)
                .map(|s| s.lines().next().unwrap_or_default().trim().to_string())
                .map_err(|e| LlmError::fatal(format!("reading the API key file {}: {e}", p.display()))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// e.g. `https://api.openai.com/v1`, `http://localhost:8000/v1` (vLLM), `http://localhost:11434/v1` (Ollama).
    pub base_url: String,
    pub model: String,
    pub api_key: ApiKeySource,
    /// Per request, including reading the response.
    pub timeout: Duration,
    /// Retries after the first attempt for retryable failures.
    pub max_retries: u32,
    /// First backoff; doubles per retry (with jitter), capped at 30 s. A `Retry-After` the
    /// server sends is not visible through async-openai, so the backoff is ours alone.
    pub backoff: Duration,
    /// Requests in flight at once, across every stage of the process.
    pub concurrency: usize,
}

impl Default for OpenAiSettings {
    fn default() -> Self {
        OpenAiSettings {
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key: ApiKeySource::default(),
            timeout: Duration::from_secs(60),
            max_retries: 4,
            backoff: Duration::from_millis(500),
            concurrency: 8,
        }
    }
}

pub struct OpenAiLlm {
    client: async_openai::Client<OpenAIConfig>,
    settings: OpenAiSettings,
    permits: Semaphore,
}

impl OpenAiLlm {
    pub fn new(settings: OpenAiSettings) -> Result<Self, LlmError> {
        let key = settings.api_key.read()?;
        let config = OpenAIConfig::new().with_api_base(settings.base_url.trim_end_matches('/')).with_api_key(key);
        // async-openai's default transport retries 429 and 5xx on its own; this client owns
        // the retry policy (and counts every request), so it gets the plain transport.
        let http = async_openai::middleware::ReqwestService::new(reqwest_openai::Client::new());
        Ok(OpenAiLlm {
            client: async_openai::Client::with_config(config).with_http_service(http),
            permits: Semaphore::new(settings.concurrency.max(1)),
            settings,
        })
    }

    pub fn model(&self) -> &str {
        &self.settings.model
    }

    /// One completion, retried as [`OpenAiSettings`] says; every request counts in `stats`.
    pub async fn chat(&self, system: &str, user: &str, sampling: Sampling, stats: &LlmStats) -> Result<Completion, LlmError> {
        let _permit = self.permits.acquire().await.map_err(|_| LlmError::fatal("LLM client closed"))?;
        let mut attempt = 0u32;
        loop {
            stats.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let result = match tokio::time::timeout(self.settings.timeout, self.once(system, user, sampling)).await {
                Ok(r) => r,
                Err(_) => Err(LlmError::retryable(format!(
                    "no response from {} within {:?}",
                    self.settings.base_url, self.settings.timeout
                ))),
            };
            match result {
                Ok(c) => {
                    stats.record(&c);
                    return Ok(c);
                }
                Err(e) => {
                    stats.failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if !e.retryable || attempt >= self.settings.max_retries {
                        let tries = attempt + 1;
                        return Err(LlmError { message: format!("{} (after {tries} attempt(s))", e.message), ..e });
                    }
                    let wait = backoff(self.settings.backoff, attempt);
                    tracing::warn!(model = %self.settings.model, attempt, error = %e.message, wait_ms = wait.as_millis() as u64, "LLM request failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn once(&self, system: &str, user: &str, sampling: Sampling) -> Result<Completion, LlmError> {
        let request = CreateChatCompletionRequestArgs::default()
            .model(self.settings.model.clone())
            .messages([ChatCompletionRequestSystemMessage::from(system).into(), ChatCompletionRequestUserMessage::from(user).into()])
            .max_tokens(sampling.max_tokens)
            .temperature(sampling.temperature)
            .build()
            .map_err(|e| LlmError::fatal(format!("building the request: {e}")))?;
        let response = self.client.chat().create(request).await.map_err(classify)?;
        let choice = response.choices.into_iter().next().ok_or_else(|| LlmError::retryable("the response has no choices"))?;
        let text = choice.message.content.ok_or_else(|| LlmError::retryable("the response message has no content"))?;
        let usage = response.usage;
        Ok(Completion {
            text,
            prompt_tokens: usage.as_ref().map_or(0, |u| u.prompt_tokens as u64),
            completion_tokens: usage.as_ref().map_or(0, |u| u.completion_tokens as u64),
        })
    }
}

/// Rate limits (429), server errors (5xx), transport failures and unreadable bodies can pass;
/// other API errors (401, 404, 400) will not.
fn classify(e: OpenAIError) -> LlmError {
    match e {
        OpenAIError::ApiError(api) => {
            let status = api.status_code.as_u16();
            let message = format!("HTTP {status}: {}", truncate(&api.api_error.message, 300));
            if status == 429 || status == 408 || status >= 500 {
                LlmError::retryable(message)
            } else {
                LlmError::fatal(message)
            }
        }
        OpenAIError::JSONDeserialize(err, body) => {
            LlmError::retryable(format!("unreadable response ({err}): {}", truncate(&body, 300)))
        }
        OpenAIError::Reqwest(err) => LlmError::retryable(format!("HTTP transport: {err}")),
        OpenAIError::InvalidArgument(m) => LlmError::fatal(m),
        other => LlmError::retryable(other.to_string()),
    }
}

/// `base * 2^attempt`, capped at 30 s, with up to 25% jitter so retrying clients spread out.
fn backoff(base: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(16)).min(Duration::from_secs(30));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    exp + exp.mul_f64((nanos % 1000) as f64 / 4000.0)
}


#[cfg(test)]
mod tests {
    //! Against a real HTTP server on 127.0.0.1 that answers each request from a script.
    use super::*;

    use crate::llm::test_server::{scripted as server, Reply};
    use std::sync::Arc;
    use std::time::Instant;

    fn client(url: String, retries: u32) -> OpenAiLlm {
        std::env::set_var("STREAMRAG_TEST_LLM_KEY", "sk-test-secret-123");
        OpenAiLlm::new(OpenAiSettings {
            base_url: url,
            model: "test-model".into(),
            api_key: ApiKeySource::Env("STREAMRAG_TEST_LLM_KEY".into()),
            timeout: Duration::from_millis(400),
            max_retries: retries,
            backoff: Duration::from_millis(10),
            concurrency: 2,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn success_returns_text_and_counts_tokens() {
        let (url, seen) = server(vec![Reply::ok("hello there")]).await;
        let c = client(url, 2);
        let stats = LlmStats::default();
        let got = c.chat("sys", "user text", Sampling::greedy(32), &stats).await.unwrap();
        assert_eq!(got, Completion { text: "hello there".into(), prompt_tokens: 11, completion_tokens: 7 });
        assert_eq!((stats.calls(), stats.prompt_tokens.load(std::sync::atomic::Ordering::Relaxed)), (1, 11));
        let req = seen.lock().unwrap()[0].clone();
        assert!(req.starts_with("POST /v1/chat/completions"), "{req}");
        assert!(req.contains("authorization: Bearer sk-test-secret-123") || req.contains("Authorization: Bearer sk-test-secret-123"), "{req}");
        assert!(req.contains("\"model\":\"test-model\"") && req.contains("user text") && req.contains("\"max_tokens\":32"), "{req}");
    }

    #[tokio::test]
    async fn malformed_json_is_retried_then_reported() {
        let (url, seen) = server(vec![Reply::Garbage, Reply::ok("fine")]).await;
        let c = client(url.clone(), 2);
        assert_eq!(c.chat("s", "u", Sampling::greedy(8), &LlmStats::default()).await.unwrap().text, "fine");
        assert_eq!(seen.lock().unwrap().len(), 2);
        let (url, _) = server(vec![Reply::Garbage]).await;
        let c = client(url, 2);
        let stats = LlmStats::default();
        let e = c.chat("s", "u", Sampling::greedy(8), &stats).await.unwrap_err();
        assert!(e.retryable && e.message.contains("unreadable response") && e.message.contains("after 3 attempt"), "{e}");
        assert_eq!((stats.calls(), stats.failures.load(std::sync::atomic::Ordering::Relaxed)), (3, 3));
    }

    #[tokio::test]
    async fn rate_limits_back_off_and_retry() {
        let limited = Reply::Status(429, r#"{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":null}}"#);
        let (url, seen) = server(vec![limited.clone(), limited.clone(), Reply::ok("after the limit")]).await;
        let c = client(url, 4);
        let t = Instant::now();
        assert_eq!(c.chat("s", "u", Sampling::greedy(8), &LlmStats::default()).await.unwrap().text, "after the limit");
        assert_eq!(seen.lock().unwrap().len(), 3);
        // two backoffs: 10 ms then 20 ms (plus jitter)
        assert!(t.elapsed() >= Duration::from_millis(30), "{:?}", t.elapsed());
        let (url, _) = server(vec![limited]).await;
        let e = client(url, 1).chat("s", "u", Sampling::greedy(8), &LlmStats::default()).await.unwrap_err();
        assert!(e.message.contains("HTTP 429") && e.message.contains("slow down"), "{e}");
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        let (url, seen) = server(vec![Reply::Status(
            401,
            r#"{"error":{"message":"bad key","type":"invalid_request_error","param":null,"code":null}}"#,
        )])
        .await;
        let c = client(url, 4);
        let e = c.chat("s", "u", Sampling::greedy(8), &LlmStats::default()).await.unwrap_err();
        assert!(!e.retryable && e.message.contains("HTTP 401"), "{e}");
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert!(!e.message.contains("sk-test-secret"));
    }

    #[tokio::test]
    async fn timeouts_are_retried_then_reported() {
        let (url, seen) = server(vec![Reply::Hang, Reply::ok("second try")]).await;
        let c = client(url, 2);
        let t = Instant::now();
        assert_eq!(c.chat("s", "u", Sampling::greedy(8), &LlmStats::default()).await.unwrap().text, "second try");
        assert!(t.elapsed() >= Duration::from_millis(400) && t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(seen.lock().unwrap().len(), 2);
        let (url, _) = server(vec![Reply::Hang]).await;
        let c = client(url, 1);
        let e = c.chat("s", "u", Sampling::greedy(8), &LlmStats::default()).await.unwrap_err();
        assert!(e.retryable && e.message.contains("no response") && e.message.contains("after 2 attempt"), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_in_flight_stay_within_the_concurrency_limit() {
        let (url, seen) = server(vec![Reply::Slow(150, "ok".into())]).await;
        let c = Arc::new(client(url, 0)); // concurrency 2
        let t = Instant::now();
        let all = futures::future::join_all((0..6).map(|_| {
            let c = c.clone();
            async move { c.chat("s", "u", Sampling::greedy(4), &LlmStats::default()).await.unwrap() }
        }))
        .await;
        assert_eq!(all.len(), 6);
        assert_eq!(seen.lock().unwrap().len(), 6);
        // 6 requests of 150 ms, 2 at a time: at least 3 rounds.
        assert!(t.elapsed() >= Duration::from_millis(450), "{:?}", t.elapsed());
    }

    #[test]
    fn the_key_is_read_from_a_file_and_never_debug_printed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        std::fs::write(&p, "sk-from-file-456\n").unwrap();
        let c = OpenAiLlm::new(OpenAiSettings { api_key: ApiKeySource::File(p), ..OpenAiSettings::default() }).unwrap();
        assert!(!format!("{:?}", c.settings).contains("sk-from-file"));
        assert!(!format!("{:?}", c.client).contains("sk-from-file"));
        let missing = OpenAiLlm::new(OpenAiSettings { api_key: ApiKeySource::File(dir.path().join("nope")), ..OpenAiSettings::default() });
        assert!(missing.err().unwrap().message.contains("API key file"));
    }
}
