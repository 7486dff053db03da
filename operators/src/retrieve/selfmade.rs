//! Questions the graph poses itself: training examples for the GLM from a deployment's own feed,
//! with no labelled question (issue 15, build item 1). Three kinds, each with the documents that
//! state its facts as its gold:
//!
//! - **fact**: a fact with its object masked, "Lothair II was married to what?" (GFM-RAG
//!   pretrains on this completion); gold: the documents stating the fact;
//! - **two-hop**: two facts chained through a bridge entity that different documents state,
//!   "Lothair II was married to someone who died in what?"; gold: one document of each fact;
//! - **comparison**: two entities' facts under the same relation, "died in: Teutberga or
//!   Waldrada?"; gold: one document of each.
//!
//! Sampling keeps any one thing from dominating: an entity is asked about (as the subject, the
//! chain's start or one of the compared) at most `per_entity` times, a relation phrase carries at
//! most `relation_share` of the questions, hubs (entities more than `hub_df` documents name)
//! are never asked about nor bridged through, and a fact more than `max_support` documents
//! state is common knowledge, not a question. The order is a hash of the seed and the fact, not
//! the graph's storage order, so the same graph and seed give the same questions on any machine.
//! Questions are deduplicated by their text, and a question whose gold is exactly an evaluation
//! question's gold (the same bridge, the same comparison) is dropped (`held_out`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::answer::text::STOP;
use crate::graph::GraphState;
use crate::hash::fnv1a;
use crate::normalize::{is_alias_relation, normalize};

/// How many questions of each kind, and what keeps one thing from dominating.
#[derive(Debug, Clone)]
pub struct SelfMadeOptions {
    /// Questions wanted (fewer when the graph has fewer to pose).
    pub count: usize,
    /// Picks which facts are asked about; the same seed gives the same questions.
    pub seed: u64,
    /// Shares of fact, two-hop and comparison questions (normalised).
    pub mix: [f64; 3],
    /// Most questions asking about one entity.
    pub per_entity: usize,
    /// Most share of the questions one relation phrase may carry.
    pub relation_share: f64,
    /// An entity more documents than this name is a hub: never asked about or bridged through.
    pub hub_df: usize,
    /// A fact more documents than this state is common knowledge, not asked.
    pub max_support: usize,
    /// Longest relation phrase asked, in words (the extractor's longer ones are clauses).
    pub max_relation_words: usize,
}

impl Default for SelfMadeOptions {
    fn default() -> Self {
        SelfMadeOptions { count: 1000, seed: 0, mix: [0.4, 0.4, 0.2], per_entity: 2, relation_share: 0.05, hub_df: 50, max_support: 3, max_relation_words: 5 }
    }
}

/// The kind of a self-made question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Fact,
    TwoHop,
    Comparison,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::TwoHop => "two-hop",
            Kind::Comparison => "comparison",
        }
    }
}

/// One question the graph posed, with the documents that answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfMade {
    pub kind: Kind,
    pub question: String,
    /// The documents stating its facts (ids), sorted.
    pub gold: Vec<String>,
}

/// A fact that may be asked: (subject id, relation, object id), its documents, its order key.
struct Fact<'g> {
    s: &'g str,
    r: &'g str,
    o: &'g str,
    docs: Vec<&'g str>,
    order: u64,
}

/// A relation phrase worth asking: short, says something (a word of three letters or more
/// outside the stop words), is not a fragment opening with a conjunction ("and a", "or the"),
/// and is not an alias statement ("also known as": the answer is the subject itself).
fn askable_relation(r: &str, max_words: usize) -> bool {
    let lower = r.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let says = words.iter().any(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 3 && !STOP.contains(w));
    let fragment = words.first().is_some_and(|w| ["and", "or", "but", "nor"].contains(w));
    let generic = lower == "mentions" || lower == "related to";
    !words.is_empty() && words.len() <= max_words && says && !fragment && !generic && !is_alias_relation(r)
}

/// A subject worth asking about has a word of three letters or more: not a year, not an opaque
/// chunk title standing for the chunk's subject ("n788").
fn askable_subject(name: &str) -> bool {
    name.split_whitespace().any(|w| w.chars().count() >= 3 && w.chars().all(char::is_alphabetic))
}

/// Questions posed by `g`'s own facts (see the module doc). `held_out`: the gold document sets
/// of evaluation questions; a self-made question with exactly one of them as its gold is dropped.
pub fn self_made(g: &GraphState, o: &SelfMadeOptions, held_out: &[BTreeSet<String>]) -> Vec<SelfMade> {
    let seed = o.seed.to_string();
    let ok_entity = |id: &str| g.entity(id).is_some_and(|e| e.df() >= 1 && e.df() <= o.hub_df);
    let mut facts: Vec<Fact> = g
        .triples()
        .filter_map(|t| {
            let (s, r, ob) = t.key();
            let askable = s != ob && askable_relation(r, o.max_relation_words) && g.entity(s).is_some_and(|e| askable_subject(e.name()));
            if !askable || t.support_count() == 0 || t.support_count() > o.max_support || !ok_entity(s) || !ok_entity(ob) {
                return None;
            }
            let mut docs: Vec<&str> = t.support().collect();
            docs.sort_unstable();
            Some(Fact { s, r, o: ob, docs, order: fnv1a(&[&seed, s, r, ob]) })
        })
        .collect();
    facts.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| (a.s, a.r, a.o).cmp(&(b.s, b.r, b.o))));
    let name = |id: &str| g.entity(id).map(|e| e.name().to_string()).unwrap_or_else(|| id.to_string());
    let total: f64 = o.mix.iter().map(|x| x.max(0.0)).sum::<f64>().max(1e-9);
    let want: Vec<usize> = o.mix.iter().map(|x| (o.count as f64 * x.max(0.0) / total).round() as usize).collect();
    let relation_cap = ((o.count as f64 * o.relation_share).ceil() as usize).max(1);
    let held: HashSet<&BTreeSet<String>> = held_out.iter().collect();

    struct Caps<'a> {
        entity: HashMap<&'a str, usize>,
        relation: HashMap<String, usize>,
        texts: HashSet<String>,
        per_entity: usize,
        relation_cap: usize,
    }
    impl<'a> Caps<'a> {
        fn room(&self, ents: &[&'a str], r: &str) -> bool {
            ents.iter().all(|e| self.entity.get(e).copied().unwrap_or(0) < self.per_entity) && self.relation.get(&crate::graph::canonical_relation(r)).copied().unwrap_or(0) < self.relation_cap
        }
        fn take(&mut self, ents: &[&'a str], r: &str, text: &str) -> bool {
            if !self.texts.insert(normalize(text)) {
                return false;
            }
            for e in ents {
                *self.entity.entry(e).or_default() += 1;
            }
            *self.relation.entry(crate::graph::canonical_relation(r)).or_default() += 1;
            true
        }
    }
    let mut caps = Caps { entity: HashMap::new(), relation: HashMap::new(), texts: HashSet::new(), per_entity: o.per_entity.max(1), relation_cap };
    let mut out: [Vec<SelfMade>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let gold_of = |docs: &[&str]| -> Vec<String> {
        let set: BTreeSet<String> = docs.iter().map(|d| d.to_string()).collect();
        set.into_iter().collect()
    };
    let is_held = |gold: &[String]| {
        let set: BTreeSet<String> = gold.iter().cloned().collect();
        held.contains(&set)
    };

    // two-hop first: the scarcest kind gets the first pick of each entity's quota
    let by_subject: BTreeMap<&str, Vec<usize>> = facts.iter().enumerate().fold(BTreeMap::new(), |mut m, (i, f)| {
        m.entry(f.s).or_insert_with(Vec::new).push(i);
        m
    });
    for f in &facts {
        if out[1].len() >= want[1] {
            break;
        }
        if !caps.room(&[f.s], f.r) {
            continue;
        }
        // the bridge's own facts, stated by documents other than the first fact's
        let Some(next) = by_subject.get(f.o).into_iter().flatten().map(|&j| &facts[j]).find(|n| n.o != f.s && n.docs.iter().all(|d| !f.docs.contains(d))) else { continue };
        let text = format!("{} {} someone who {} what?", name(f.s), f.r, next.r);
        let gold = gold_of(&[f.docs[0], next.docs[0]]);
        if is_held(&gold) || !caps.take(&[f.s], f.r, &text) {
            continue;
        }
        out[1].push(SelfMade { kind: Kind::TwoHop, question: text, gold });
    }
    // comparisons: consecutive facts (in hash order) under one relation, about two entities
    let mut by_relation: BTreeMap<String, Vec<&Fact>> = BTreeMap::new();
    for f in &facts {
        by_relation.entry(crate::graph::canonical_relation(f.r)).or_default().push(f);
    }
    let mut pairs: Vec<(&Fact, &Fact)> = Vec::new();
    for fs in by_relation.values() {
        let mut it = fs.iter().peekable();
        while let Some(a) = it.next() {
            // two things of one sort: two names, or two concepts, not "a little water or Daniel"
            let sort = |id: &str| g.entity(id).is_some_and(|e| e.written_lower_case());
            if let Some(b) = it.next_if(|b| b.s != a.s && sort(b.s) == sort(a.s) && b.docs.iter().all(|d| !a.docs.contains(d))) {
                pairs.push((a, b));
            }
        }
    }
    pairs.sort_by_key(|(a, b)| a.order ^ b.order.rotate_left(17));
    for (a, b) in pairs {
        if out[2].len() >= want[2] {
            break;
        }
        if !caps.room(&[a.s, b.s], a.r) {
            continue;
        }
        let text = format!("{}: {} or {}?", a.r, name(a.s), name(b.s));
        let gold = gold_of(&[a.docs[0], b.docs[0]]);
        if is_held(&gold) || !caps.take(&[a.s, b.s], a.r, &text) {
            continue;
        }
        out[2].push(SelfMade { kind: Kind::Comparison, question: text, gold });
    }
    for f in &facts {
        if out[0].len() >= want[0] {
            break;
        }
        if !caps.room(&[f.s], f.r) {
            continue;
        }
        let text = format!("{} {} what?", name(f.s), f.r);
        let gold = gold_of(&f.docs);
        if is_held(&gold) || !caps.take(&[f.s], f.r, &text) {
            continue;
        }
        out[0].push(SelfMade { kind: Kind::Fact, question: text, gold });
    }
    // interleaved, so that a run cut short still trains on every kind
    let mut all = Vec::with_capacity(out.iter().map(Vec::len).sum());
    let mut its: Vec<std::vec::IntoIter<SelfMade>> = out.into_iter().map(Vec::into_iter).collect();
    loop {
        let before = all.len();
        for it in &mut its {
            if let Some(q) = it.next() {
                all.push(q);
            }
        }
        if all.len() == before {
            break;
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DocEntry, Dirty};

    fn doc(g: &mut GraphState, id: &str, title: &str, facts: &[(&str, &str, &str)]) {
        let mut e = DocEntry { title: title.to_string(), ..DocEntry::default() };
        for (s, r, o) in facts {
            for n in [s, o] {
                e.entities.insert(normalize(n), n.to_string());
            }
            e.triples.insert((normalize(s), r.to_string(), normalize(o)));
        }
        g.apply(id, Some(&e), &mut Dirty::default());
    }

    /// A family of pages: each person's page states a spouse and a birthplace, and the places'
    /// pages a river.
    fn family() -> GraphState {
        let mut g = GraphState::new();
        let people = ["Ada", "Bea", "Cy", "Dov", "Eli", "Fay", "Gus", "Hal"];
        let places = ["Avon", "Brent", "Cam", "Dee"];
        for (i, p) in people.iter().enumerate() {
            let spouse = people[(i + 1) % people.len()];
            let place = places[i % places.len()];
            doc(&mut g, &format!("p{i}"), p, &[(p, "married", spouse), (p, "born in", place)]);
        }
        for (i, c) in places.iter().enumerate() {
            doc(&mut g, &format!("c{i}"), c, &[(c, "lies on", &format!("River {i}"))]);
        }
        g
    }

    #[test]
    fn every_kind_is_posed_with_the_documents_that_state_it() {
        let g = family();
        let qs = self_made(&g, &SelfMadeOptions { count: 12, relation_share: 1.0, per_entity: 3, ..SelfMadeOptions::default() }, &[]);
        let kinds: HashSet<Kind> = qs.iter().map(|q| q.kind).collect();
        assert_eq!(kinds.len(), 3, "{qs:#?}");
        for q in &qs {
            assert!(!q.gold.is_empty() && q.gold.iter().all(|d| g.doc(d).is_some()), "{q:?}");
            match q.kind {
                // a masked fact: its subject's page states it
                Kind::Fact => assert!(q.question.ends_with(" what?") && q.gold.len() == 1, "{q:?}"),
                // a chain crosses two documents: the start's page and the bridge's
                Kind::TwoHop => {
                    assert!(q.question.contains(" someone who ") && q.gold.len() == 2, "{q:?}");
                    let start = q.question.split(' ').next().unwrap();
                    let page = g.docs().find(|d| d.title() == start).unwrap();
                    assert!(q.gold.contains(&page.id().to_string()), "{q:?}");
                }
                Kind::Comparison => assert!(q.question.contains(" or ") && q.gold.len() == 2, "{q:?}"),
            }
        }
        let texts: HashSet<&str> = qs.iter().map(|q| q.question.as_str()).collect();
        assert_eq!(texts.len(), qs.len(), "deduplicated");
        assert_eq!(qs, self_made(&g, &SelfMadeOptions { count: 12, relation_share: 1.0, per_entity: 3, ..SelfMadeOptions::default() }, &[]), "the same seed, the same questions");
        let other = self_made(&g, &SelfMadeOptions { count: 12, relation_share: 1.0, per_entity: 3, seed: 7, ..SelfMadeOptions::default() }, &[]);
        assert_ne!(qs, other, "another seed picks other facts");
    }

    #[test]
    fn fragments_and_alias_statements_are_not_asked() {
        for (r, ok) in [("married", true), ("was born in", true), ("and a", false), ("in a", false), ("and went in the", false), ("also known as", false), ("a b c d e f", false), ("mentions", false)] {
            assert_eq!(askable_relation(r, 5), ok, "{r}");
        }
        for (n, ok) in [("Lothair II", true), ("3 Dots", true), ("n788", false), ("1984", false)] {
            assert_eq!(askable_subject(n), ok, "{n}");
        }
    }

    #[test]
    fn no_entity_relation_or_hub_dominates() {
        let mut g = family();
        // a hub: every page names it
        for i in 0..8 {
            let mut e = DocEntry { title: format!("x{i}"), ..DocEntry::default() };
            e.entities.insert("earth".into(), "Earth".into());
            e.entities.insert(format!("thing {i}"), format!("Thing {i}"));
            e.triples.insert((format!("thing {i}"), "is on".into(), "earth".into()));
            g.apply(&format!("x{i}"), Some(&e), &mut Dirty::default());
        }
        let o = SelfMadeOptions { count: 40, hub_df: 5, per_entity: 1, relation_share: 0.1, ..SelfMadeOptions::default() };
        let qs = self_made(&g, &o, &[]);
        assert!(!qs.is_empty());
        assert!(qs.iter().all(|q| !q.question.contains("Earth") && !q.question.contains("is on")), "the hub is never asked about: {qs:#?}");
        let mut per_subject: HashMap<&str, usize> = HashMap::new();
        let mut per_relation: HashMap<&str, usize> = HashMap::new();
        for q in &qs {
            let subject = if q.kind == Kind::Comparison { q.question.split(": ").nth(1).unwrap().split(" or ").next().unwrap() } else { q.question.split(' ').next().unwrap() };
            *per_subject.entry(subject).or_default() += 1;
            let r = ["married", "born in", "lies on"].into_iter().find(|r| q.question.contains(r)).unwrap();
            *per_relation.entry(r).or_default() += 1;
        }
        assert!(per_subject.values().all(|&n| n <= 1), "{per_subject:?}");
        // 10% of 40 questions
        assert!(per_relation.values().all(|&n| n <= 4), "{per_relation:?}");
    }

    #[test]
    fn a_question_with_an_evaluation_questions_gold_is_held_out() {
        let g = family();
        let o = SelfMadeOptions { count: 12, relation_share: 1.0, per_entity: 3, ..SelfMadeOptions::default() };
        let all = self_made(&g, &o, &[]);
        let two = all.iter().find(|q| q.kind == Kind::TwoHop).expect("a chain");
        let held: BTreeSet<String> = two.gold.iter().cloned().collect();
        let kept = self_made(&g, &o, std::slice::from_ref(&held));
        assert!(kept.iter().all(|q| q.gold.iter().cloned().collect::<BTreeSet<_>>() != held), "{kept:#?}");
        assert!(!kept.is_empty());
    }
}
