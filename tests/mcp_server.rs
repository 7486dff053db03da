//! `streamrag mcp` driven by the official MCP Python SDK over stdio (scripts/test.sh installs
//! it), against a running node holding the sample corpus: the tools listed, a document
//! ingested, a question that needs it answered from it, the document deleted, bad input
//! answered as tool errors.

mod common;

use common::*;

#[test]
fn the_mcp_python_sdk_lists_the_tools_ingests_asks_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    let seen = python_client("mcp_client.py", &[bin(), &addr], "mcp");
    assert_eq!(seen["after"]["ids"][0], "zorvathian-tide");
    node.stop();
}
