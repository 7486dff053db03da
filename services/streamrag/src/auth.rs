//! Who may call the HTTP API: bearer tokens, each with scopes and the access labels it may read.
//!
//! Tokens are configured hashed (SHA-256, hex), never in the clear, in a TOML file
//! (`--tokens FILE` / `STREAMRAG_TOKENS_FILE`) or the same text in `STREAMRAG_TOKENS`:
//!
//! ```toml
//! [[token]]
//! name = "team-a-reader"          # shown in logs instead of the token
//! sha256 = "9c1185a5c5e9fc54612808977ee8f548b2258d31..."
//! scopes = ["query"]               # ingest, query, admin (admin implies both)
//! access = ["team-a"]              # the document access labels it may read
//! ```
//!
//! `streamrag token` makes one. With no token configured the API is open, as before, and only
//! a loopback bind is allowed unless the operator says `--allow-unauthenticated`. `GET /health`,
//! `GET /metrics` (counts only, for probes and scrapers) and the page itself (`GET /`) need no
//! token; `POST /documents` (upserts and deletes) needs `ingest`; questions, stats, standing
//! queries and the chat endpoint need `query`; `admin` holds every scope.
//! A refused request gets 401 (no or an unknown token) or 403 (a known token without the
//! scope), with the reason; the token itself is never logged or echoed.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use streamrag_operators::access::Reader;
use streamrag_operators::hash::hex;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Ingest,
    Query,
    Admin,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Query => "query",
            Scope::Admin => "admin",
        }
    }
}

/// A configured token, as the request that presented it carries it (request extension).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name (never the token).
    pub name: String,
    pub scopes: BTreeSet<Scope>,
    /// The document access labels it may read.
    pub access: BTreeSet<String>,
}

impl Caller {
    fn may(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope) || self.scopes.contains(&Scope::Admin)
    }

    /// What it may read: an admin every document, any other token the public documents and
    /// those carrying one of its access labels.
    pub fn reader(&self) -> Reader {
        if self.scopes.contains(&Scope::Admin) {
            Reader::All
        } else {
            Reader::Labels(self.access.clone())
        }
    }
}

/// The request's caller, for a handler: `Option<Extension<Arc<Caller>>>`.
pub type MaybeCaller = Option<axum::Extension<Arc<Caller>>>;

/// What the request's caller may read: every document when the node has no tokens.
pub fn reader_of(caller: &MaybeCaller) -> Reader {
    caller.as_ref().map(|c| c.0.reader()).unwrap_or(Reader::All)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    sha256: String,
    scopes: Vec<Scope>,
    #[serde(default)]
    access: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

/// The configured tokens, by the SHA-256 of the token.
#[derive(Debug, Default)]
pub struct Tokens {
    by_hash: HashMap<[u8; 32], Arc<Caller>>,
}

fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Tokens {
    /// Parses a tokens file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Tokens> {
        let f: TokensFile = toml::from_str(text).with_context(|| format!("{origin}: expected [[token]] tables with name, sha256, scopes and access"))?;
        let mut by_hash = HashMap::new();
        let mut names = BTreeSet::new();
        for t in f.token {
            if t.name.trim().is_empty() {
                bail!("{origin}: a token has an empty name");
            }
            let Some(h) = unhex(&t.sha256) else {
                bail!("{origin}: token {:?}: sha256 must be 64 hex digits (the token's SHA-256; `streamrag token` writes it), not the token itself", t.name)
            };
            if t.scopes.is_empty() {
                bail!("{origin}: token {:?} has no scopes (ingest, query, admin)", t.name);
            }
            if !names.insert(t.name.clone()) {
                bail!("{origin}: two tokens are named {:?}", t.name);
            }
            let caller = Caller { name: t.name, scopes: t.scopes.into_iter().collect(), access: t.access.into_iter().map(|a| a.trim().to_string()).collect() };
            if by_hash.insert(h, Arc::new(caller)).is_some() {
                bail!("{origin}: two tokens have the same sha256");
            }
        }
        Ok(Tokens { by_hash })
    }

    /// The tokens from `file`, else from `inline` (the text of one), else none.
    pub fn load(file: Option<&Path>, inline: Option<&str>) -> Result<Tokens> {
        match (file, inline) {
            (Some(_), Some(_)) => bail!("tokens are given both as a file (--tokens / STREAMRAG_TOKENS_FILE) and inline (STREAMRAG_TOKENS): give one"),
            (Some(p), None) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading the tokens file {}", p.display()))?;
                let t = Tokens::parse(&text, &p.display().to_string())?;
                if t.is_empty() {
                    bail!("the tokens file {} holds no [[token]]", p.display());
                }
                Ok(t)
            }
            (None, Some(text)) => {
                let t = Tokens::parse(text, "STREAMRAG_TOKENS")?;
                if t.is_empty() {
                    bail!("STREAMRAG_TOKENS holds no [[token]]");
                }
                Ok(t)
            }
            (None, None) => Ok(Tokens::default()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    fn caller(&self, token: &str) -> Option<Arc<Caller>> {
        self.by_hash.get(&sha256(token)).cloned()
    }
}

/// Whether serving `addr` without tokens is allowed: loopback only, unless the operator said so.
pub fn check_open_bind(addr: &SocketAddr, tokens: &Tokens, allow_unauthenticated: bool) -> Result<()> {
    if tokens.is_empty() && !addr.ip().is_loopback() && !allow_unauthenticated {
        bail!(
            "refusing to serve the HTTP API on {addr} without tokens: anyone who reaches it could ingest, delete and read everything. \
             Configure tokens (--tokens FILE or STREAMRAG_TOKENS; `streamrag token` makes one), bind 127.0.0.1, \
             or say --allow-unauthenticated"
        );
    }
    Ok(())
}

/// The scope a route needs; `None`: open to anyone.
fn needed(method: &axum::http::Method, path: &str) -> Option<Scope> {
    match (method.as_str(), path) {
        // probes, scrapers and the page's own HTML: no document text, no tokens
        (_, "/health") | (_, "/metrics") | ("GET", "/") => None,
        (_, "/documents") => Some(Scope::Ingest),
        _ => Some(Scope::Query),
    }
}

/// A refusal, in OpenAI's error shape under `/v1/` (its clients read that), else ours.
fn refuse(status: StatusCode, path: &str, message: String) -> Response {
    let body = if path.starts_with("/v1/") {
        let code = if status == StatusCode::UNAUTHORIZED { "invalid_api_key" } else { "insufficient_scope" };
        json!({ "error": { "message": message, "type": "invalid_request_error", "param": null, "code": code } })
    } else {
        json!({ "error": message })
    };
    let mut r = (status, Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"streamrag\""));
    }
    r
}

/// The middleware: with tokens configured, every route but the open ones needs a bearer token
/// with the route's scope; the caller rides along as a request extension.
pub async fn check(State(tokens): State<Arc<Tokens>>, mut req: Request, next: Next) -> Response {
    if tokens.is_empty() {
        return next.run(req).await;
    }
    let path = req.uri().path().to_string();
    let Some(scope) = needed(req.method(), &path) else {
        return next.run(req).await;
    };
    let presented = req.headers().get(header::AUTHORIZATION).map(|v| v.to_str().map(|s| s.trim().to_string()));
    let token = match presented {
        None => return refuse(StatusCode::UNAUTHORIZED, &path, format!("{path} needs a bearer token with the {} scope (Authorization: Bearer <token>)", scope.name())),
        Some(Err(_)) => return refuse(StatusCode::UNAUTHORIZED, &path, "the Authorization header is not text".into()),
        Some(Ok(v)) => match v.split_once(' ') {
            Some((kind, t)) if kind.eq_ignore_ascii_case("bearer") && !t.trim().is_empty() => t.trim().to_string(),
            _ => return refuse(StatusCode::UNAUTHORIZED, &path, "the Authorization header must be `Bearer <token>`".into()),
        },
    };
    let Some(caller) = tokens.caller(&token) else {
        return refuse(StatusCode::UNAUTHORIZED, &path, "the bearer token is not one this node knows".into());
    };
    if !caller.may(scope) {
        return refuse(StatusCode::FORBIDDEN, &path, format!("the token {:?} lacks the {} scope that {path} needs", caller.name, scope.name()));
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// A new random token and its `[[token]]` entry for the tokens file.
pub fn new_token(name: &str, scopes: &[Scope], access: &[String]) -> Result<(String, String)> {
    if name.trim().is_empty() {
        bail!("a token needs a name");
    }
    if scopes.is_empty() {
        bail!("a token needs at least one scope (ingest, query, admin)");
    }
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
    let token = format!("srk_{}", hex(&raw));
    let list = |v: Vec<String>| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    let entry = format!(
        "[[token]]\nname = {name:?}\nsha256 = \"{}\"\nscopes = [{}]\naccess = [{}]\n",
        hex(&sha256(&token)),
        list(scopes.iter().map(|s| s.name().to_string()).collect()),
        list(access.to_vec())
    );
    // the entry must read back as the token it describes
    let back = Tokens::parse(&entry, "the new entry")?;
    debug_assert!(back.caller(&token).is_some());
    Ok((token, entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_reads_back_with_its_scopes_and_labels() {
        let (token, entry) = new_token("team-a", &[Scope::Query], &["team-a".into()]).unwrap();
        assert!(!entry.contains(&token), "the entry holds the token in the clear");
        let t = Tokens::parse(&entry, "test").unwrap();
        let c = t.caller(&token).unwrap();
        assert_eq!(c.name, "team-a");
        assert!(c.may(Scope::Query) && !c.may(Scope::Ingest) && !c.may(Scope::Admin));
        assert_eq!(c.access.iter().collect::<Vec<_>>(), ["team-a"]);
        assert!(t.caller("srk_wrong").is_none());
        let admin = Caller { name: "a".into(), scopes: [Scope::Admin].into(), access: BTreeSet::new() };
        assert!(admin.may(Scope::Ingest) && admin.may(Scope::Query));
    }

    #[test]
    fn bad_token_files_are_refused_with_the_reason() {
        for (text, want) in [
            ("[[token]]\nname = \"a\"\nsha256 = \"srk_plain\"\nscopes = [\"query\"]\n", "64 hex digits"),
            ("[[token]]\nname = \"a\"\nsha256 = \"%s\"\nscopes = []\n", "no scopes"),
            ("[[token]]\nname = \"a\"\nsha256 = \"%s\"\nscopes = [\"root\"]\n", "expected [[token]]"),
            ("[[token]]\nname = \"a\"\nsha256 = \"%s\"\nscopes = [\"query\"]\n[[token]]\nname = \"a\"\nsha256 = \"%t\"\nscopes = [\"query\"]\n", "two tokens are named"),
        ] {
            let text = text.replace("%s", &"ab".repeat(32)).replace("%t", &"cd".repeat(32));
            let e = format!("{:#}", Tokens::parse(&text, "f").unwrap_err());
            assert!(e.contains(want), "{text} -> {e}");
        }
    }

    #[test]
    fn open_binds_need_tokens_or_an_explicit_yes() {
        let none = Tokens::default();
        let some = Tokens::parse(&new_token("a", &[Scope::Query], &[]).unwrap().1, "t").unwrap();
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert!(check_open_bind(&lo, &none, false).is_ok());
        assert!(check_open_bind(&any, &none, false).is_err());
        assert!(check_open_bind(&any, &none, true).is_ok());
        assert!(check_open_bind(&any, &some, false).is_ok());
    }
}
