//! `streamrag mcp --http ADDR`: a Model Context Protocol server on stdin/stdout (the official
//! Rust SDK, rmcp) whose tools act on a running node through its HTTP API, with the clients of
//! `streamrag ask --http`, `ingest --http` and `stats --http`: ask a question, ingest a
//! document, delete one, read the graph's counts. An agent host (Claude Desktop, an
//! IDE, the MCP Python SDK) starts it as a child process. Logs go to stderr only: stdout is
//! the protocol's.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::json;
use streamrag_operators::retrieve::RetrieverChoice;
use streamrag_operators::{Limits, Topics};
use streamrag_schemas::Document;

use crate::client::{self, Line, Target};
use crate::config::FileConfig;

#[derive(Args)]
pub struct McpArgs {
    /// The HTTP API of the running node the tools act on (`streamrag run --http ADDR`).
    #[arg(long, env = "STREAMRAG_HTTP", default_value = "127.0.0.1:8080")]
    pub http: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct AskParams {
    /// The question, in plain words.
    question: String,
    /// How many documents to retrieve (1-100; the node's default when absent).
    #[serde(default)]
    top_k: Option<u32>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct IngestParams {
    /// The document's id: a later document with the same id replaces it.
    id: String,
    /// Its title (often the name of what it is about).
    #[serde(default)]
    title: Option<String>,
    /// Its text.
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct DeleteParams {
    /// The id of the document to delete: what it alone supported leaves the graph.
    id: String,
}

#[derive(Clone)]
struct Tools {
    /// The node's HTTP API, as `streamrag ask --http` and `ingest --http` reach it.
    addr: String,
    topics: Topics,
    limits: Limits,
    /// Built once; the handler routes every call through it.
    tool_router: ToolRouter<Self>,
}

/// How long `ask` waits for the answer (the node's own HTTP wait).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A tool's failure as the client sees it: an error result with the reason, not a protocol
/// error (the call itself was fine).
fn failed(e: anyhow::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{e:#}"))])
}

impl Tools {
    fn node(&self) -> Target {
        Target::Http(self.addr.clone())
    }

    async fn publish(&self, doc: Document) -> CallToolResult {
        match client::ingest(&self.node(), &self.topics, vec![Line::Doc(doc)]).await {
            Ok(accepted) => CallToolResult::structured(json!({ "accepted": accepted })),
            Err(e) => failed(e),
        }
    }
}

#[tool_router]
impl Tools {
    fn new(http: String, file: &FileConfig) -> Self {
        Tools { addr: http, topics: file.topics.clone(), limits: file.limits.clone(), tool_router: Self::tool_router() }
    }

    #[tool(description = "Ask the live knowledge graph a question. Returns the answer (the node's answering LLM's when it has one, else the supporting facts) with numbered sources, and the ranked documents, facts and seeds.")]
    async fn ask(&self, Parameters(p): Parameters<AskParams>) -> CallToolResult {
        // the node answers with its own retriever: this choice only serves a data directory
        match client::ask(&self.node(), &self.topics, &self.limits, &p.question, p.top_k, ANSWER_TIMEOUT, &RetrieverChoice::Ppr).await {
            Ok(a) => {
                let mut r = CallToolResult::structured(serde_json::to_value(&a).expect("an answer serialises"));
                r.content = vec![ContentBlock::text(crate::openai::reply_text(&a))];
                r
            }
            Err(e) => failed(e),
        }
    }

    #[tool(description = "Add a document to the knowledge graph, or replace the one with the same id. It is queryable once the pipeline has indexed it (usually within a second).")]
    async fn ingest(&self, Parameters(p): Parameters<IngestParams>) -> CallToolResult {
        self.publish(Document::upsert(p.id, p.title.unwrap_or_default(), p.text)).await
    }

    #[tool(description = "Delete a document from the knowledge graph by id: the facts and entities only it supported leave the graph.")]
    async fn delete(&self, Parameters(p): Parameters<DeleteParams>) -> CallToolResult {
        self.publish(Document::delete(p.id)).await
    }

    #[tool(description = "The knowledge graph's counts: documents, entities, triples, mentions, links.")]
    async fn stats(&self) -> CallToolResult {
        match client::get_json(&self.addr, "/stats").await {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => failed(e),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("streamrag", env!("CARGO_PKG_VERSION")))
            .with_instructions("Tools over a running streamrag node: ask questions of its live knowledge graph, add and delete documents, read its counts.")
    }
}

pub async fn run(a: McpArgs, file: FileConfig) -> Result<()> {
    let server = Tools::new(a.http, &file).serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
