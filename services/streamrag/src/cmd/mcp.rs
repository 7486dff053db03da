//! `streamrag mcp --http ADDR`: a Model Context Protocol server on stdin/stdout (the official
//! Rust SDK, rmcp) whose tools act on a running node through its HTTP API: ask a question,
//! ingest a document, delete one, read the graph's counts. An agent host (Claude Desktop, an
//! IDE, the MCP Python SDK) starts it as a child process. Logs go to stderr only: stdout is
//! the protocol's.

use anyhow::Result;
use clap::Args;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use streamrag_schemas::{Answer, Document};

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
    http: String,
    client: reqwest::Client,
    /// Built once; the handler routes every call through it.
    tool_router: ToolRouter<Self>,
}

/// A tool's failure as the client sees it: an error result with the reason, not a protocol
/// error (the call itself was fine).
fn failed(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

impl Tools {
    /// Sends a request to the node; the body as JSON on success, else the reason in one line.
    async fn call(&self, req: reqwest::RequestBuilder) -> Result<Value, String> {
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                format!("nothing answers at http://{}: is `streamrag run --http {}` running?", self.http, self.http)
            } else {
                format!("http://{}: {e}", self.http)
            }
        })?;
        let status = resp.status();
        let body: Value = resp.json().await.map_err(|e| format!("http://{} answered {status} with a body that is not JSON: {e}", self.http))?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("the node refused it ({status}): {}", body["error"].as_str().unwrap_or(&body.to_string())))
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    async fn publish(&self, doc: &Document) -> CallToolResult {
        match self.call(self.client.post(self.url("/documents")).json(doc)).await {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => failed(e),
        }
    }
}

#[tool_router]
impl Tools {
    fn new(http: String) -> Self {
        Tools { http, client: reqwest::Client::new(), tool_router: Self::tool_router() }
    }

    #[tool(description = "Ask the live knowledge graph a question. Returns the answer (the node's answering LLM's when it has one, else the supporting facts) with numbered sources, and the ranked documents, facts and seeds.")]
    async fn ask(&self, Parameters(p): Parameters<AskParams>) -> CallToolResult {
        let body = json!({ "question": p.question, "top_k": p.top_k });
        match self.call(self.client.post(self.url("/query")).json(&body)).await {
            Ok(v) => match serde_json::from_value::<Answer>(v.clone()) {
                Ok(a) => {
                    let mut r = CallToolResult::structured(v);
                    r.content = vec![ContentBlock::text(crate::openai::reply_text(&a))];
                    r
                }
                Err(e) => failed(format!("the node's answer did not parse: {e}")),
            },
            Err(e) => failed(e),
        }
    }

    #[tool(description = "Add a document to the knowledge graph, or replace the one with the same id. It is queryable once the pipeline has indexed it (usually within a second).")]
    async fn ingest(&self, Parameters(p): Parameters<IngestParams>) -> CallToolResult {
        let doc = Document::upsert(p.id, p.title.unwrap_or_default(), p.text);
        self.publish(&doc).await
    }

    #[tool(description = "Delete a document from the knowledge graph by id: the facts and entities only it supported leave the graph.")]
    async fn delete(&self, Parameters(p): Parameters<DeleteParams>) -> CallToolResult {
        self.publish(&Document::delete(p.id)).await
    }

    #[tool(description = "The knowledge graph's counts: documents, entities, triples, mentions, links.")]
    async fn stats(&self) -> CallToolResult {
        match self.call(self.client.get(self.url("/stats"))).await {
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
            .with_instructions(format!("Tools over the streamrag node at http://{}: ask questions of its live knowledge graph, add and delete documents, read its counts.", self.http))
    }
}

pub async fn run(a: McpArgs) -> Result<()> {
    let server = Tools::new(a.http).serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
