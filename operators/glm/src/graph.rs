//! Graph -> tokens: the extended Levi graph of a list of triplets (and the question text),
//! with the relative-position matrix P, the attention mask M and the extra-bucket flags A of
//! Graph Language Models, and from them the bucket id of every token pair.
//!
//! - Each distinct entity is one node, keyed by (kind, id); each triplet's relation is a node
//!   of its own, keyed by the triplet's index. Labels never key anything, so a relation label
//!   equal to an entity label, two edges between one pair and self-loops stay distinct.
//! - Each node label is tokenized on its own, without special tokens.
//! - P[q][k] = pos(k) - pos(q), with positions read per triplet as the text "h r t": head token
//!   i at i, relation token i at len(h) + i, tail token i at len(h) + len(r) + i. Tokens of one
//!   node get j - i. A pair of nodes that several triplets relate gets the reading with the
//!   smallest distance (ties: the earliest triplet), so the encoding does not depend on the
//!   order of the triplets; within a node, the node's own positions always win (self-loops).
//! - Local mode: pairs without a position are masked. Global mode: they attend through the
//!   graph-to-graph bucket.
//! - With the question (tokenized with the tokenizer's special tokens, as a sentence), question
//!   tokens get ordinary sequential positions among themselves, and question <-> graph pairs
//!   attend through two more buckets (text -> graph, graph -> text): buckets 32 (G2G, global
//!   only), then text -> graph, then graph -> text.
//! - Token order in the sequence: relation nodes in triplet order, then entity nodes in id
//!   order, then the question. T5 has no absolute positions, so the order changes nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// T5's bidirectional buckets.
pub const NUM_BUCKETS: u32 = 32;
pub const MAX_DISTANCE: i32 = 128;
/// Bucket id of a masked pair (never attended).
pub const MASKED: u8 = u8::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Local,
    Global,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "local" => Ok(Mode::Local),
            "global" => Ok(Mode::Global),
            _ => Err(format!("mode must be local or global, not {s:?}")),
        }
    }
}

/// An entity of a triplet: a stable id and the label the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    pub id: String,
    pub label: String,
}

impl Entity {
    /// An entity whose id is its label (for graphs given as plain strings).
    pub fn named(label: &str) -> Self {
        Entity { id: label.to_string(), label: label.to_string() }
    }
}

/// (head, relation label, tail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triplet {
    pub head: Entity,
    pub relation: String,
    pub tail: Entity,
}

impl Triplet {
    pub fn named(h: &str, r: &str, t: &str) -> Self {
        Triplet { head: Entity::named(h), relation: r.to_string(), tail: Entity::named(t) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Relation,
    Entity,
    Question,
}

/// A node of the extended Levi graph and its tokens' span in the sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    pub kind: NodeKind,
    /// Entity id, the triplet index of a relation, or "question".
    pub id: String,
    pub label: String,
    pub start: usize,
    pub end: usize,
}

/// A graph ready for the encoder: token ids, the node of each token, and per token pair the
/// relative position (None: no position), the mask and the bucket id.
#[derive(Debug, Clone)]
pub struct TokenizedGraph {
    pub mode: Mode,
    pub tokens: Vec<u32>,
    pub token_node: Vec<usize>,
    pub nodes: Vec<Node>,
    /// Row-major L x L; None where the pair has no relative position.
    pub position: Vec<Option<i32>>,
    /// Row-major L x L; true where the query (row) may attend to the key (column).
    pub mask: Vec<bool>,
    /// Row-major L x L; the extra bucket (0 = G2G in global mode, then text->graph,
    /// graph->text) a pair uses instead of its relative position.
    pub extra: Vec<Option<u8>>,
    /// Extra buckets this graph's mode and text use.
    pub num_extra_buckets: u8,
}

/// Token ids of one label, without special tokens.
pub trait LabelTokenizer {
    fn label_ids(&self, label: &str) -> crate::Result<Vec<u32>>;
    /// A sentence's ids with the tokenizer's special tokens (T5: trailing `</s>`).
    fn sentence_ids(&self, text: &str) -> crate::Result<Vec<u32>>;
}

/// A Hugging Face `tokenizer.json`, with its padding and truncation turned off (the shipped
/// MiniLM, MPNet and T5 files have fixed padding and truncation on).
pub struct HfTokenizer(pub tokenizers::Tokenizer);

impl HfTokenizer {
    pub fn from_file(path: &std::path::Path) -> crate::Result<Self> {
        let mut t = tokenizers::Tokenizer::from_file(path).map_err(crate::Error::format(path))?;
        t.with_padding(None);
        t.with_truncation(None).map_err(crate::Error::format(path))?;
        Ok(HfTokenizer(t))
    }
}

impl LabelTokenizer for HfTokenizer {
    fn label_ids(&self, label: &str) -> crate::Result<Vec<u32>> {
        Ok(self.0.encode(label, false).map_err(|e| crate::Error::Tokenizer(e.to_string()))?.get_ids().to_vec())
    }
    fn sentence_ids(&self, text: &str) -> crate::Result<Vec<u32>> {
        Ok(self.0.encode(text, true).map_err(|e| crate::Error::Tokenizer(e.to_string()))?.get_ids().to_vec())
    }
}

/// T5's bidirectional relative-position bucket (32 buckets, max distance 128).
pub fn t5_bucket(relative_position: i32) -> u8 {
    let half = NUM_BUCKETS as i32 / 2; // 16
    let mut bucket = if relative_position > 0 { half } else { 0 };
    let n = relative_position.abs();
    let max_exact = half / 2; // 8
    if n < max_exact {
        bucket += n;
    } else {
        let large = max_exact
            + ((n as f32 / max_exact as f32).ln() / (MAX_DISTANCE as f32 / max_exact as f32).ln() * (half - max_exact) as f32)
                as i32;
        bucket += large.min(half - 1);
    }
    bucket as u8
}

impl TokenizedGraph {
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
    /// The bucket id of (query, key): a T5 bucket, 32 + an extra bucket, or [`MASKED`].
    pub fn bucket(&self, q: usize, k: usize) -> u8 {
        let i = q * self.len() + k;
        if !self.mask[i] {
            return MASKED;
        }
        match (self.extra[i], self.position[i]) {
            (Some(x), _) => NUM_BUCKETS as u8 + x,
            (None, Some(p)) => t5_bucket(p),
            (None, None) => MASKED,
        }
    }
    /// All bucket ids, row-major.
    pub fn buckets(&self) -> Vec<u8> {
        let l = self.len();
        let mut out = Vec::with_capacity(l * l);
        for q in 0..l {
            for k in 0..l {
                out.push(self.bucket(q, k));
            }
        }
        out
    }
    /// Entity nodes with their token spans, in sequence order.
    pub fn entities(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.kind == NodeKind::Entity)
    }
}

/// A plain token sequence as one node: sequential positions, full attention. The encoder on
/// this is T5 itself (the parity tests use it).
pub fn sequence(ids: &[u32]) -> TokenizedGraph {
    let l = ids.len();
    let mut position = Vec::with_capacity(l * l);
    for q in 0..l {
        for k in 0..l {
            position.push(Some(k as i32 - q as i32));
        }
    }
    TokenizedGraph {
        mode: Mode::Local,
        tokens: ids.to_vec(),
        token_node: vec![0; l],
        nodes: vec![Node { kind: NodeKind::Question, id: "text".into(), label: String::new(), start: 0, end: l }],
        position,
        mask: vec![true; l * l],
        extra: vec![None; l * l],
        num_extra_buckets: 0,
    }
}

/// Builds the extended Levi graph of `triplets` (and `question`) in `mode`.
pub fn build(triplets: &[Triplet], question: Option<&str>, mode: Mode, tok: &dyn LabelTokenizer) -> crate::Result<TokenizedGraph> {
    let mut tokens = Vec::new();
    let mut token_node = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut push = |kind: NodeKind, id: String, label: &str, ids: Vec<u32>, tokens: &mut Vec<u32>, token_node: &mut Vec<usize>| {
        let start = tokens.len();
        let n = nodes.len();
        token_node.extend(std::iter::repeat_n(n, ids.len()));
        tokens.extend(ids);
        nodes.push(Node { kind, id, label: label.to_string(), start, end: tokens.len() });
        n
    };
    let ids_of = |label: &str| tok.label_ids(label);
    // relations, one node per triplet
    let mut rel_nodes = Vec::with_capacity(triplets.len());
    for (i, t) in triplets.iter().enumerate() {
        let ids = ids_of(&t.relation)?;
        rel_nodes.push(push(NodeKind::Relation, i.to_string(), &t.relation, ids, &mut tokens, &mut token_node));
    }
    // entities, one node per distinct id, in id order; the first label seen is the node's
    let mut entity_labels: BTreeMap<&str, &str> = BTreeMap::new();
    for t in triplets {
        entity_labels.entry(&t.head.id).or_insert(&t.head.label);
        entity_labels.entry(&t.tail.id).or_insert(&t.tail.label);
    }
    let mut entity_node: BTreeMap<&str, usize> = BTreeMap::new();
    for (id, label) in &entity_labels {
        let ids = ids_of(label)?;
        entity_node.insert(id, push(NodeKind::Entity, id.to_string(), label, ids, &mut tokens, &mut token_node));
    }
    let graph_len = tokens.len();
    let question_node = match question {
        Some(q) => {
            let ids = tok.sentence_ids(q)?;
            Some(push(NodeKind::Question, "question".into(), q, ids, &mut tokens, &mut token_node))
        }
        None => None,
    };
    let l = tokens.len();
    let mut position: Vec<Option<i32>> = vec![None; l * l];
    // best reading per ordered node pair: (|distance| of the first tokens, triplet index, offset)
    // where offset = pos(start of k) - pos(start of q)
    let mut pair: BTreeMap<(usize, usize), (i32, usize, i32)> = BTreeMap::new();
    let mut offer = |a: usize, b: usize, off: i32, triplet: usize| {
        if a == b {
            return; // within a node its own positions hold
        }
        for (x, y, o) in [(a, b, off), (b, a, -off)] {
            let cand = (o.abs(), triplet, o);
            pair.entry((x, y)).and_modify(|cur| if (cand.0, cand.1) < (cur.0, cur.1) { *cur = cand }).or_insert(cand);
        }
    };
    for (i, t) in triplets.iter().enumerate() {
        let h = entity_node[t.head.id.as_str()];
        let r = rel_nodes[i];
        let tl = entity_node[t.tail.id.as_str()];
        let lh = (nodes[h].end - nodes[h].start) as i32;
        let lr = (nodes[r].end - nodes[r].start) as i32;
        offer(h, r, lh, i);
        offer(h, tl, lh + lr, i);
        offer(r, tl, lr, i);
    }
    for ((a, b), (_, _, off)) in &pair {
        let (na, nb) = (&nodes[*a], &nodes[*b]);
        for (i, q) in (na.start..na.end).enumerate() {
            for (j, k) in (nb.start..nb.end).enumerate() {
                position[q * l + k] = Some(off + j as i32 - i as i32);
            }
        }
    }
    for n in &nodes {
        for q in n.start..n.end {
            for k in n.start..n.end {
                position[q * l + k] = Some(k as i32 - q as i32);
            }
        }
    }
    let mut mask = vec![false; l * l];
    let mut extra: Vec<Option<u8>> = vec![None; l * l];
    let g2g = mode == Mode::Global;
    let base = u8::from(g2g);
    for q in 0..l {
        for k in 0..l {
            let i = q * l + k;
            let (qg, kg) = (q < graph_len, k < graph_len);
            match (qg, kg) {
                (true, true) => {
                    if position[i].is_some() {
                        mask[i] = true;
                    } else if g2g {
                        mask[i] = true;
                        extra[i] = Some(0);
                    }
                }
                (false, false) => mask[i] = true, // question tokens: sequential, one node
                (false, true) => {
                    mask[i] = true;
                    extra[i] = Some(base); // text -> graph
                }
                (true, false) => {
                    mask[i] = true;
                    extra[i] = Some(base + 1); // graph -> text
                }
            }
        }
    }
    let num_extra_buckets = base + if question_node.is_some() { 2 } else { 0 };
    Ok(TokenizedGraph { mode, tokens, token_node, nodes, position, mask, extra, num_extra_buckets })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per word: ids are positions in a growing vocabulary.
    struct Words(std::cell::RefCell<Vec<String>>);
    impl Words {
        fn new() -> Self {
            Words(std::cell::RefCell::new(vec!["</s>".into()]))
        }
        fn id(&self, w: &str) -> u32 {
            let mut v = self.0.borrow_mut();
            match v.iter().position(|x| x == w) {
                Some(i) => i as u32,
                None => {
                    v.push(w.to_string());
                    (v.len() - 1) as u32
                }
            }
        }
    }
    impl LabelTokenizer for Words {
        fn label_ids(&self, label: &str) -> crate::Result<Vec<u32>> {
            Ok(label.split_whitespace().map(|w| self.id(w)).collect())
        }
        fn sentence_ids(&self, text: &str) -> crate::Result<Vec<u32>> {
            let mut v = self.label_ids(text)?;
            v.push(0);
            Ok(v)
        }
    }

    fn tok_of(g: &TokenizedGraph, kind: NodeKind, id: &str, i: usize) -> usize {
        let n = g.nodes.iter().find(|n| n.kind == kind && n.id == id).unwrap_or_else(|| panic!("no node {kind:?} {id}"));
        assert!(n.start + i < n.end);
        n.start + i
    }

    fn pos(g: &TokenizedGraph, q: usize, k: usize) -> Option<i32> {
        g.position[q * g.len() + k]
    }

    fn worked() -> Vec<Triplet> {
        vec![Triplet::named("dog", "is a", "animal"), Triplet::named("black poodle", "is a", "dog")]
    }

    #[test]
    fn the_worked_example_of_glm_md() {
        let w = Words::new();
        let g = build(&worked(), None, Mode::Local, &w).unwrap();
        let dog = tok_of(&g, NodeKind::Entity, "dog", 0);
        // first triplet: "is"/"a" at +1/+2, "animal" at +3
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Relation, "0", 0)), Some(1));
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Relation, "0", 1)), Some(2));
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Entity, "animal", 0)), Some(3));
        // second triplet: "is"/"a" at -2/-1, "black"/"poodle" at -4/-3
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Relation, "1", 0)), Some(-2));
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Relation, "1", 1)), Some(-1));
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Entity, "black poodle", 0)), Some(-4));
        assert_eq!(pos(&g, dog, tok_of(&g, NodeKind::Entity, "black poodle", 1)), Some(-3));
        // within a node; antisymmetry everywhere
        let bp = tok_of(&g, NodeKind::Entity, "black poodle", 0);
        assert_eq!(pos(&g, bp, bp + 1), Some(1));
        for q in 0..g.len() {
            for k in 0..g.len() {
                assert_eq!(pos(&g, q, k), pos(&g, k, q).map(|p| -p), "({q},{k})");
            }
        }
        // local: "animal" and "black poodle" share no triplet: masked
        let animal = tok_of(&g, NodeKind::Entity, "animal", 0);
        assert_eq!(pos(&g, animal, bp), None);
        assert_eq!(g.bucket(animal, bp), MASKED);
        assert_eq!(g.bucket(dog, animal), t5_bucket(3));
        assert_eq!(g.num_extra_buckets, 0);
        // global: the G2G bucket
        let g = build(&worked(), None, Mode::Global, &w).unwrap();
        let (animal, bp) = (tok_of(&g, NodeKind::Entity, "animal", 0), tok_of(&g, NodeKind::Entity, "black poodle", 0));
        assert_eq!(g.bucket(animal, bp), 32);
        assert_eq!(g.num_extra_buckets, 1);
    }

    #[test]
    fn question_buckets_and_sequential_text() {
        let w = Words::new();
        for (mode, t2g, g2t, n) in [(Mode::Local, 32u8, 33u8, 2u8), (Mode::Global, 33, 34, 3)] {
            let g = build(&worked(), Some("what is a dog"), mode, &w).unwrap();
            let qn = g.nodes.iter().find(|n| n.kind == NodeKind::Question).unwrap();
            assert_eq!(qn.end - qn.start, 5, "four words and the end token");
            let (q0, dog) = (qn.start, tok_of(&g, NodeKind::Entity, "dog", 0));
            assert_eq!(pos(&g, q0, q0 + 3), Some(3));
            assert_eq!(g.bucket(q0, q0 + 3), t5_bucket(3));
            assert_eq!(g.bucket(q0, dog), t2g);
            assert_eq!(g.bucket(dog, q0), g2t);
            assert_eq!(g.num_extra_buckets, n);
        }
    }

    #[test]
    fn t5_buckets_match_the_reference_formula() {
        // printed by transformers' T5Attention._relative_position_bucket(bidirectional, 32, 128)
        let cases = [
            (0, 0), (1, 17), (-1, 1), (7, 23), (8, 24), (-8, 8), (12, 25), (20, 26), (50, 29), (127, 31), (128, 31),
            (1000, 31), (-1000, 15), (-50, 13), (15, 25), (16, 26), (31, 27), (32, 28), (63, 29), (64, 30),
        ];
        for (rp, b) in cases {
            assert_eq!(t5_bucket(rp), b, "rp {rp}");
        }
    }

    #[test]
    fn relation_label_equal_to_an_entity_label_stays_two_nodes() {
        let w = Words::new();
        let g = build(&[Triplet::named("a", "b", "c"), Triplet::named("b", "r", "d")], None, Mode::Local, &w).unwrap();
        let bs: Vec<_> = g.nodes.iter().filter(|n| n.label == "b").map(|n| n.kind).collect();
        assert_eq!(bs, vec![NodeKind::Relation, NodeKind::Entity]);
        let (rel_b, ent_b) = (tok_of(&g, NodeKind::Relation, "0", 0), tok_of(&g, NodeKind::Entity, "b", 0));
        assert_eq!(pos(&g, rel_b, ent_b), None, "they share no triplet");
        assert_eq!(pos(&g, tok_of(&g, NodeKind::Entity, "a", 0), rel_b), Some(1));
        assert_eq!(pos(&g, ent_b, tok_of(&g, NodeKind::Entity, "d", 0)), Some(2));
    }

    #[test]
    fn two_edges_between_one_pair_take_the_closest_reading_whatever_the_order() {
        let w = Words::new();
        let ts = vec![Triplet::named("a", "is the long name of", "b"), Triplet::named("a", "is", "b")];
        let g1 = build(&ts, None, Mode::Local, &w).unwrap();
        let (a, b) = (tok_of(&g1, NodeKind::Entity, "a", 0), tok_of(&g1, NodeKind::Entity, "b", 0));
        assert_eq!(pos(&g1, a, b), Some(2)); // via "is", not 6 via the long relation
        assert_eq!(pos(&g1, b, a), Some(-2));
        // each relation node keeps its own triplet's positions
        assert_eq!(pos(&g1, a, tok_of(&g1, NodeKind::Relation, "0", 4)), Some(5));
        let rev: Vec<_> = ts.iter().rev().cloned().collect();
        let g2 = build(&rev, None, Mode::Local, &w).unwrap();
        let (a2, b2) = (tok_of(&g2, NodeKind::Entity, "a", 0), tok_of(&g2, NodeKind::Entity, "b", 0));
        assert_eq!(pos(&g2, a2, b2), Some(2));
    }

    #[test]
    fn self_loop_keeps_the_nodes_own_positions() {
        let w = Words::new();
        let g = build(&[Triplet::named("big cat", "likes", "big cat")], None, Mode::Local, &w).unwrap();
        assert_eq!(g.entities().count(), 1);
        let c = tok_of(&g, NodeKind::Entity, "big cat", 0);
        assert_eq!(pos(&g, c, c + 1), Some(1));
        let r = tok_of(&g, NodeKind::Relation, "0", 0);
        // the entity reads the relation as its head (+2) and as its tail (-1): the closer wins
        assert_eq!(pos(&g, c, r), Some(-1));
        assert_eq!(pos(&g, r, c), Some(1));
    }

    #[test]
    fn empty_graph_and_question_only() {
        let w = Words::new();
        let g = build(&[], None, Mode::Global, &w).unwrap();
        assert!(g.is_empty() && g.nodes.is_empty());
        let g = build(&[], Some("hello world"), Mode::Local, &w).unwrap();
        assert_eq!(g.len(), 3);
        assert!(g.buckets().iter().all(|&b| b != MASKED));
    }

    #[test]
    fn six_hundred_triplets() {
        let w = Words::new();
        let ts: Vec<Triplet> = (0..600).map(|i| Triplet::named(&format!("e{}", i % 250), &format!("r{} x", i % 7), &format!("e{}", (i * 7 + 3) % 250))).collect();
        let g = build(&ts, Some("which e1 is r3"), Mode::Global, &w).unwrap();
        assert_eq!(g.nodes.iter().filter(|n| n.kind == NodeKind::Relation).count(), 600);
        assert_eq!(g.entities().count(), 250);
        assert_eq!(g.len(), 600 * 2 + 250 + 5);
        let b = g.buckets();
        assert_eq!(b.len(), g.len() * g.len());
        assert!(!b.contains(&MASKED), "global mode with text attends everywhere");
        assert!(b.iter().all(|&x| x < 35));
        // local mode masks most pairs of a sparse graph
        let l = build(&ts, None, Mode::Local, &w).unwrap();
        let masked = l.buckets().iter().filter(|&&x| x == MASKED).count();
        assert!(masked > l.len() * l.len() / 2, "{masked}");
    }
}
