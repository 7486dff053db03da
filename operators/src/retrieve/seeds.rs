//! Seed linking: which entities of the graph a question names. The longest word n-grams of
//! the question that are entity ids (ids are normalised names) win; when none match, the
//! entities that share the question's rarest content words.

use std::collections::HashMap;

use crate::graph::GraphState;
use crate::normalize::{normalize, words};

/// Words that never seed a query on their own.
pub(super) const QUESTION_STOP: &[&str] = &[
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "was", "are",
    "were", "be", "been", "who", "whom", "whose", "what", "which", "when", "where", "why", "how", "did", "does",
    "do", "has", "have", "had", "that", "this", "these", "those", "it", "its", "he", "she", "his", "her", "they",
    "their", "as", "than", "more", "most", "first", "later", "earlier", "both", "same", "born", "died", "film",
    "director", "name", "country", "year", "one", "many", "much", "not", "there", "s",
];

/// Links a question to entities: the longest word n-grams that are entity ids (ids are
/// normalised names); when none match, entities sharing the question's rarest content words.
pub fn seeds(g: &GraphState, question: &str, max_ngram: usize) -> Vec<String> {
    let found = exact_seeds(g, question, max_ngram);
    if !found.is_empty() {
        return found;
    }
    word_candidates(g, question, 5)
}

/// The longest word n-grams of the question that are entity ids, sorted; n-grams made only of
/// [`QUESTION_STOP`] words are skipped.
pub fn exact_seeds(g: &GraphState, question: &str, max_ngram: usize) -> Vec<String> {
    longest_names(g, question, max_ngram, |window| window.iter().all(|w| QUESTION_STOP.contains(w)))
}

/// The longest word n-grams of the question (normalised) that are entity ids, left to right,
/// none overlapping a longer one found before; `skip` passes over a window. Sorted, each once.
pub fn longest_names(g: &GraphState, question: &str, max_ngram: usize, skip: impl Fn(&[&str]) -> bool) -> Vec<String> {
    let norm = normalize(question);
    let ws: Vec<&str> = words(&norm).collect();
    let mut covered = vec![false; ws.len()];
    let mut found = Vec::new();
    for n in (1..=max_ngram.min(ws.len())).rev() {
        for i in 0..=ws.len() - n {
            if covered[i..i + n].iter().any(|&c| c) {
                continue;
            }
            let window = &ws[i..i + n];
            if skip(window) {
                continue;
            }
            let cand = window.join(" ");
            if g.entity(&cand).is_some() {
                covered[i..i + n].iter_mut().for_each(|c| *c = true);
                found.push(cand);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Up to `k` entities scored by the inverse frequency of the question's content words they
/// share (per word of the entity name), best first.
pub fn word_candidates(g: &GraphState, question: &str, k: usize) -> Vec<String> {
    let norm = normalize(question);
    let mut score: HashMap<&str, f64> = HashMap::new();
    for w in words(&norm).filter(|w| !QUESTION_STOP.contains(w)) {
        let ents = g.entities_with_word(w);
        if !ents.is_empty() {
            let idf = 1.0 / ents.len() as f64;
            for e in ents {
                *score.entry(e).or_default() += idf;
            }
        }
    }
    let mut ranked: Vec<(&str, f64)> = score
        .into_iter()
        .map(|(e, s)| (e, s / words(e).count().max(1) as f64))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.into_iter().take(k).map(|(e, _)| e.to_string()).collect()
}
