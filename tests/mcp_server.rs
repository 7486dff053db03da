//! `streamrag mcp` driven by the official MCP Python SDK over stdio (scripts/test.sh installs
//! it), against a running node holding the sample corpus: the tools listed, a document
//! ingested, a question that needs it answered from it, the document deleted, bad input
//! answered as tool errors.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

#[test]
fn the_mcp_python_sdk_lists_the_tools_ingests_asks_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = node_with_samples(dir.path());
    let py = std::env::var("STREAMRAG_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp_client.py");
    let o = std::process::Command::new(&py).arg(&script).arg(bin()).arg(&addr).output().unwrap();
    assert!(
        o.status.success(),
        "the MCP client failed (scripts/test.sh installs the mcp package):\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let seen: Value = serde_json::from_slice(&o.stdout).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&seen).unwrap());
    assert_eq!(seen["after"]["ids"][0], "zorvathian-tide");
    node.stop();
}
