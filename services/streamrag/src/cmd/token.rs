//! `streamrag token`: a new bearer token for the HTTP API. The token goes to stderr, once; the
//! `[[token]]` entry for the tokens file (its SHA-256, never the token) goes to stdout, so
//! `streamrag token --name team-a --scopes query >> tokens.toml` keeps only the hash.

use anyhow::Result;
use clap::Args;

use crate::auth::{new_token, Scope};

#[derive(Args)]
pub struct TokenArgs {
    /// The token's name: what logs and refusals show instead of the token.
    #[arg(long)]
    pub name: String,
    /// What it may do: ingest, query, admin (every scope).
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_scope)]
    pub scopes: Vec<Scope>,
    /// The document access labels it may read (none: public documents only, once access
    /// labels are enforced).
    #[arg(long, value_delimiter = ',')]
    pub access: Vec<String>,
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    match s.trim() {
        "ingest" => Ok(Scope::Ingest),
        "query" => Ok(Scope::Query),
        "admin" => Ok(Scope::Admin),
        other => Err(format!("{other:?} is no scope: ingest, query or admin")),
    }
}

pub fn run(a: TokenArgs) -> Result<()> {
    let (token, entry) = new_token(&a.name, &a.scopes, &a.access)?;
    eprintln!("token {:?} (shown once; give it as `Authorization: Bearer <token>` or STREAMRAG_TOKEN): {token}", a.name);
    print!("{entry}");
    Ok(())
}
