//! The GLM retriever on a small graph with the real all-MiniLM-L6-v2 weights (an untrained
//! head: what is checked is linking, subgraph and plumbing, not ranking quality).

use std::path::PathBuf;

use candle_core::Device;
use streamrag_glm::graph::Mode;
use streamrag_glm::model::{BackboneKind, GlmConfig, GlmModel, Training};
use streamrag_operators::retrieve::GlmRetriever;
use streamrag_operators::graph::{DocEntry, Dirty, GraphState};

fn minilm() -> PathBuf {
    let d = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.models/all-MiniLM-L6-v2"));
    assert!(d.join("model.safetensors").exists(), "scripts/fetch-models.sh fetches all-MiniLM-L6-v2 into .models/");
    d
}

type Doc<'a> = (&'a str, &'a [(&'a str, &'a str, &'a str)]);

fn graph() -> GraphState {
    let docs: &[Doc] = &[
        ("d1", &[("Nobel Prize in Chemistry", "awarded by", "Royal Swedish Academy"), ("Nobel Prize in Chemistry", "first awarded in", "1901")]),
        ("d2", &[("Nobel Prize in Physics", "awarded by", "Royal Swedish Academy")]),
        ("d3", &[("Nobel Peace Center", "located in", "Oslo")]),
        ("d4", &[("Nobel Street", "located in", "Sofia"), ("Nobel Lane", "located in", "Oslo")]),
        ("d5", &[("Alfred Nobel", "born in", "Stockholm"), ("Alfred Nobel", "invented", "dynamite")]),
        ("d6", &[("Nobel Institute", "located in", "Oslo")]),
    ];
    let mut g = GraphState::new();
    for (id, ts) in docs {
        let mut e = DocEntry { title: id.to_string(), ..Default::default() };
        for (s, r, o) in ts.iter() {
            for n in [s, o] {
                e.entities.insert(n.to_lowercase(), n.to_string());
            }
            e.triples.insert((s.to_lowercase(), r.to_string(), o.to_lowercase()));
        }
        g.apply(id, Some(&e), &mut Dirty::default());
    }
    g
}

#[test]
fn links_by_similarity_selects_and_scores_a_subgraph() {
    let dir = minilm();
    let cfg = GlmConfig {
        backbone: BackboneKind::Bert,
        mode: Mode::Global,
        question_text: true,
        max_hops: 2,
        max_triplets: 5,
        top_entities: 20,
        hidden: 0,
        question_dim: 0,
        training: Training::default(),
    };
    let mut r = GlmRetriever::new(GlmModel::init(&dir, &dir, cfg, &Device::Cpu).unwrap());
    let g = graph();
    // no entity name occurs in the question: 7 entities share "nobel"; the closest name wins
    let q = "which chemistry prize carries the nobel name?";
    let qv = r.model.question.embed_vecs(&[q]).unwrap().remove(0);
    let seeds = r.link(&g, q, &qv).unwrap();
    assert_eq!(seeds.len(), 5, "{seeds:?}");
    assert_eq!(seeds[0], "nobel prize in chemistry", "{seeds:?}");
    // an exact name short-circuits the similarity
    let q2 = "Where was Alfred Nobel born?";
    let qv2 = r.model.question.embed_vecs(&[q2]).unwrap().remove(0);
    assert_eq!(r.link(&g, q2, &qv2).unwrap(), vec!["alfred nobel"]);
    let p = r.prepare(&g, q2, &qv2).unwrap();
    assert_eq!(p.triplets.len(), 2, "both of Alfred Nobel's triplets, nothing 2 hops away exists");
    assert!(p.graph.is_some());
    // batch retrieval: one result per question, documents come from the subgraph's entities
    let out = r.retrieve_batch(&g, &[(q2, 3), ("no such thing here", 3)]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].documents[0].id, "d5", "{:?}", out[0]);
    assert!(out[1].documents.is_empty() && out[1].seeds.is_empty(), "{:?}", out[1]);
    // a budget at query time other than the trained one (run --glm-triplets)
    assert_eq!(r.prepare(&g, q, &qv).unwrap().triplets.len(), 5, "the checkpoint's budget fills");
    r.max_triplets = Some(2);
    let small = r.prepare(&g, q, &qv).unwrap();
    assert_eq!(small.triplets.len(), 2);
    assert_eq!(small.seeds, seeds, "the budget bounds the subgraph, not the linking");
    r.max_triplets = Some(50);
    assert!(r.prepare(&g, q, &qv).unwrap().triplets.len() > 5, "a larger budget takes more of the graph");
}
