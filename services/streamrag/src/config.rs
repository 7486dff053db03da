//! The configuration file and the environment: `--config FILE` (TOML) gives topics, limits and
//! raw librdkafka options; `STREAMRAG_KAFKA_OPT_<NAME>` variables add librdkafka options
//! (`STREAMRAG_KAFKA_OPT_SASL_PASSWORD` -> `sasl.password`), so secrets need not sit in a file
//! or on a command line. Flags win over both.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use streamrag_operators::{Limits, Topics};

const KAFKA_ENV_PREFIX: &str = "STREAMRAG_KAFKA_OPT_";

/// The config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub topics: Topics,
    #[serde(default)]
    pub limits: Limits,
    /// Raw librdkafka options for every client.
    #[serde(default)]
    pub kafka: BTreeMap<String, String>,
    #[serde(default)]
    pub query: QuerySection,
    #[serde(default)]
    pub llm: LlmSection,
    #[serde(default)]
    pub resolve: ResolveSection,
}

/// `[llm]`: the LLMs (`streamrag run` flags win). The API key is never read from this file: from
/// the environment variable `api_key_env` (default OPENAI_API_KEY) or the file `api_key_file`.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSection {
    /// The extraction LLM: `openai:MODEL` or `local:PATH.gguf`; unset: the built-in extractor.
    pub extract: Option<String>,
    /// The answering LLM; unset: retrieval only.
    pub answer: Option<String>,
    /// The OpenAI-compatible endpoint (vLLM: http://HOST:8000/v1, Ollama: http://HOST:11434/v1).
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<std::path::PathBuf>,
    /// Requests in flight at once.
    pub concurrency: Option<usize>,
    pub timeout_s: Option<u64>,
    /// tokenizer.json of a local model (default: beside the GGUF file).
    pub tokenizer: Option<std::path::PathBuf>,
}

/// `[resolve]`: entity resolution (`streamrag run` flags win); becomes the resolve stage's
/// [`streamrag_operators::stages::ResolveConfig`].
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveSection {
    /// Sentence encoder directory (all-MiniLM-L6-v2); unset: resolution by normalised name only.
    pub model: Option<std::path::PathBuf>,
    /// Cosine at or above which a new name joins an existing entity (default 0.8).
    pub threshold: Option<f32>,
}

/// `[query]`: the query stage's retriever (`streamrag run` flags win); becomes the query
/// stage's [`streamrag_operators::stages::QueryConfig`].
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuerySection {
    /// hybrid, ppr, glm, dense or bm25; default: glm when a checkpoint is set, else hybrid.
    pub retriever: Option<String>,
    /// A GLM checkpoint directory written by `streamrag train`.
    pub checkpoint: Option<std::path::PathBuf>,
    /// GLM graphs per forward pass.
    pub glm_batch: Option<usize>,
    /// The GLM's subgraph budget at query time (default: the one its checkpoint was trained
    /// with; the hybrid's GLM takes `[query.hybrid] glm_triplets`).
    pub glm_triplets: Option<usize>,
    /// The sentence encoder of the hybrid and dense retrievers (all-MiniLM-L6-v2 directory).
    pub sentence_model: Option<std::path::PathBuf>,
    /// Most graph changes the standing queries read at once (default 256). Reading only owes the
    /// subscriptions a change reaches an answer; answers are made and published 16 at a time
    /// whatever this is.
    pub standing_batch: Option<usize>,
    /// `[query.hybrid]`: the hybrid's weights by name (`HybridParams`' fields, as `eval --set`
    /// takes them); ignored by the other retrievers.
    #[serde(default)]
    pub hybrid: BTreeMap<String, toml::Value>,
}

impl QuerySection {
    /// The retriever this section names, with `[query.hybrid]`'s weights applied (what a
    /// command with no retriever flags of its own runs).
    pub fn retriever_choice(&self) -> Result<streamrag_operators::retrieve::RetrieverChoice> {
        let mut choice = streamrag_operators::retrieve::RetrieverChoice::from_flags(
            self.retriever.as_deref(),
            self.checkpoint.clone(),
            self.glm_batch.unwrap_or(4),
            crate::cmd::minilm_dir(self.sentence_model.clone()),
        )?;
        self.apply_hybrid(&mut choice)?;
        Ok(choice)
    }

    /// Sets `[query.hybrid]`'s weights on a hybrid choice (and `glm_triplets` on a GLM's); a
    /// key that names no weight, or a value of the wrong kind, is an error naming it.
    pub fn apply_hybrid(&self, choice: &mut streamrag_operators::retrieve::RetrieverChoice) -> Result<()> {
        choice.set_glm_triplets(self.glm_triplets);
        if let streamrag_operators::retrieve::RetrieverChoice::Hybrid { params, .. } = choice {
            for (k, v) in &self.hybrid {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(x) => x.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    _ => bail!("[query.hybrid] {k}: a number or true/false, not {v:?}"),
                };
                params.set(k, &text).map_err(|e| anyhow::anyhow!("[query.hybrid] {e}"))?;
            }
        }
        Ok(())
    }
}

impl FileConfig {
    /// Reads the file (if any), then adds the librdkafka options found in `env`.
    pub fn load(path: Option<&Path>, env: impl Iterator<Item = (String, String)>) -> Result<Self> {
        let mut cfg: FileConfig = match path {
            None => FileConfig::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", p.display()))?
            }
        };
        if let Err(e) = cfg.limits.check() {
            bail!("{}: {e}", path.map(|p| p.display().to_string()).unwrap_or_default());
        }
        for (k, v) in env {
            if let Some(name) = k.strip_prefix(KAFKA_ENV_PREFIX) {
                cfg.kafka.insert(name.to_lowercase().replace('_', "."), v);
            }
        }
        Ok(cfg)
    }

    pub fn kafka_options(&self) -> Vec<(String, String)> {
        self.kafka.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_example_parses_to_the_defaults() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/streamrag.toml");
        let cfg = FileConfig::load(Some(&p), std::iter::empty()).unwrap();
        assert_eq!(cfg.topics, Topics::default());
        assert_eq!(cfg.limits, Limits::default());
        assert!(cfg.kafka.is_empty());
        assert_eq!(cfg.query, QuerySection::default());
        assert_eq!((cfg.llm, cfg.resolve), (LlmSection::default(), ResolveSection::default()));
    }

    #[test]
    fn the_commented_llm_and_resolve_keys_parse_and_a_key_in_the_file_is_refused() {
        // Uncomment every "# key = value" line of the shipped [llm] and [resolve] sections.
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/streamrag.toml");
        let text = std::fs::read_to_string(p).unwrap();
        let mut out = String::new();
        let mut on = false;
        for line in text.lines() {
            if line.starts_with('[') {
                on = line == "[llm]" || line == "[resolve]";
                out.push_str(line);
            } else if on && line.starts_with("# ") && line.contains(" = ") {
                out.push_str(line.trim_start_matches("# ").split("   #").next().unwrap());
            }
            out.push('\n');
        }
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, &out).unwrap();
        let cfg = FileConfig::load(Some(&f), std::iter::empty()).unwrap();
        assert!(cfg.llm.extract.as_deref().unwrap().starts_with("local:"));
        assert!(cfg.llm.answer.as_deref().unwrap().starts_with("openai:"));
        assert_eq!((cfg.llm.concurrency, cfg.llm.timeout_s), (Some(8), Some(60)));
        assert!(cfg.llm.api_key_file.is_some() && cfg.llm.tokenizer.is_some() && cfg.llm.base_url.is_some());
        assert_eq!(cfg.resolve.threshold, Some(0.8));
        std::fs::write(&f, "[llm]\napi_key = \"sk-in-a-file\"\n").unwrap();
        let e = FileConfig::load(Some(&f), std::iter::empty()).unwrap_err();
        assert!(format!("{e:#}").contains("api_key"), "{e:#}");
    }

    #[test]
    fn the_kubernetes_configmap_holds_a_valid_config() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s/configmap.yaml");
        let yaml = std::fs::read_to_string(p).unwrap();
        let body: String = yaml
            .split_once("streamrag.toml: |\n")
            .unwrap()
            .1
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, body).unwrap();
        let cfg = FileConfig::load(Some(&f), std::iter::empty()).unwrap();
        assert_eq!(cfg.topics, Topics::default());
        assert_eq!(cfg.llm.api_key_file.as_deref(), Some(Path::new("/run/secrets/streamrag/openai-api-key")));
    }

    #[test]
    fn query_hybrid_weights_are_set_by_name_and_a_wrong_one_is_refused() {
        use streamrag_operators::retrieve::RetrieverChoice;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "[query]\nretriever = \"hybrid\"\n[query.hybrid]\nname_pages = 0\ndamping = 0.5\nwalk = false\n").unwrap();
        let cfg = FileConfig::load(Some(&f), std::iter::empty()).unwrap();
        let mut choice = RetrieverChoice::hybrid("m".into());
        cfg.query.apply_hybrid(&mut choice).unwrap();
        let RetrieverChoice::Hybrid { params, .. } = &choice else { unreachable!() };
        assert_eq!((params.name_pages, params.damping, params.walk), (0.0, 0.5, false));
        let mut ppr = RetrieverChoice::Ppr;
        cfg.query.apply_hybrid(&mut ppr).unwrap();
        std::fs::write(&f, "[query.hybrid]\ndampng = 0.5\n").unwrap();
        let e = FileConfig::load(Some(&f), std::iter::empty()).unwrap().query.apply_hybrid(&mut choice).unwrap_err();
        assert!(format!("{e:#}").contains("no hybrid parameter dampng"), "{e:#}");
        std::fs::write(&f, "[query.hybrid]\nfacts = \"many\"\n").unwrap();
        let e = FileConfig::load(Some(&f), std::iter::empty()).unwrap().query.apply_hybrid(&mut choice).unwrap_err();
        assert!(format!("{e:#}").contains("not a number"), "{e:#}");
    }

    #[test]
    fn env_adds_kafka_options_and_unknown_keys_are_errors() {
        let env = vec![("STREAMRAG_KAFKA_OPT_SASL_PASSWORD".to_string(), "s3cret".to_string()), ("OTHER".into(), "x".into())];
        let cfg = FileConfig::load(None, env.into_iter()).unwrap();
        assert_eq!(cfg.kafka_options(), vec![("sasl.password".to_string(), "s3cret".to_string())]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[topics]\ndocz = \"x\"\n").unwrap();
        let e = FileConfig::load(Some(&p), std::iter::empty()).unwrap_err();
        assert!(format!("{e:#}").contains("docz"), "{e:#}");
        std::fs::write(&p, "[topics]\ndocs = \"my.docs\"\n[limits]\nmax_text_bytes = 10\n").unwrap();
        let cfg = FileConfig::load(Some(&p), std::iter::empty()).unwrap();
        assert_eq!(cfg.topics.docs, "my.docs");
        assert_eq!(cfg.topics.answers, "streamrag.answers");
        assert_eq!(cfg.limits.max_text_bytes, 10);
    }
}
