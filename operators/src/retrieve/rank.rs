//! From scored entities to an answer's evidence: GFM-RAG's IDF-weighted entity -> document
//! ranking (docs/retrieval.md, "Document ranking") and the supporting triples between the top
//! entities.

use std::collections::{HashMap, HashSet};

use streamrag_schemas::{ScoredDocument, ScoredEntity, Triple};

use crate::graph::GraphState;

/// The entities an answer's subgraph draws (its seeds and its triples' ends, by name) with
/// `score` of each one's id, scaled so that the best is 1, best first; empty when none scored.
pub fn subgraph_entities(seeds: &[String], triples: &[Triple], score: impl Fn(&str) -> f64) -> Vec<ScoredEntity> {
    let mut seen = HashSet::new();
    let mut out: Vec<ScoredEntity> = seeds
        .iter()
        .chain(triples.iter().flat_map(|t| [&t.subject, &t.object]))
        .filter_map(|name| {
            let id = crate::normalize::normalize(name);
            seen.insert(id.clone()).then(|| ScoredEntity { name: name.clone(), score: score(&id) })
        })
        .collect();
    let best = out.iter().map(|e| e.score).fold(0.0f64, f64::max);
    if best <= 0.0 {
        return Vec::new();
    }
    for e in &mut out {
        e.score = (e.score / best).max(0.0);
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
    out
}

/// The name an entity is shown by (its id when it is not live).
pub fn display_name(g: &GraphState, id: &str) -> String {
    g.entity(id).map(|e| e.name().to_string()).unwrap_or_else(|| id.to_string())
}

/// A graph triple (entity ids and relation) as an answer shows it: its ends by their names.
pub fn shown_triple(g: &GraphState, (s, r, o): (&str, &str, &str)) -> Triple {
    Triple { subject: display_name(g, s), relation: r.to_string(), object: display_name(g, o) }
}

/// The top `k` entities by score, best first (ties by id, for determinism).
pub fn top_entities(scores: &HashMap<String, f64>, k: usize) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = scores.iter().map(|(e, s)| (e.clone(), *s)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

/// GFM-RAG's IDF-weighted ranker: score(d) = sum over the given entities e that occur in d of
/// 1 / df(e). Ties are broken by the summed entity scores, then by document id.
pub fn rank_documents(g: &GraphState, entities: &[(String, f64)], top_k: usize) -> Vec<ScoredDocument> {
    let mut score: HashMap<&str, (f64, f64)> = HashMap::new();
    for (e, s) in entities {
        let Some(entry) = g.entity(e) else { continue };
        let idf = 1.0 / entry.df().max(1) as f64;
        for d in entry.docs() {
            let x = score.entry(d).or_default();
            x.0 += idf;
            x.1 += s;
        }
    }
    let mut ranked: Vec<(&str, (f64, f64))> = score.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then(b.1 .1.total_cmp(&a.1 .1)).then(a.0.cmp(b.0)));
    ranked
        .into_iter()
        .take(top_k)
        .map(|(d, (s, _))| ScoredDocument {
            id: d.to_string(),
            title: g.doc(d).map(|x| x.title().to_string()).unwrap_or_default(),
            score: s,
        })
        .collect()
}

/// Triples of the returned documents whose two ends are among the top entities, best first.
pub fn supporting_triples(g: &GraphState, docs: &[ScoredDocument], top: &[(String, f64)], limit: usize) -> Vec<Triple> {
    let score: HashMap<&str, f64> = top.iter().map(|(e, s)| (e.as_str(), *s)).collect();
    let mut seen = HashSet::new();
    let mut out: Vec<(f64, Triple)> = Vec::new();
    for d in docs {
        let Some(entry) = g.doc(&d.id) else { continue };
        for t in entry.triples() {
            if let (Some(a), Some(b)) = (score.get(t.0), score.get(t.2)) {
                if seen.insert(t) {
                    out.push((a + b, shown_triple(g, t)));
                }
            }
        }
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| (&a.1.subject, &a.1.relation, &a.1.object).cmp(&(&b.1.subject, &b.1.relation, &b.1.object))));
    out.into_iter().take(limit).map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subgraph_entities_are_each_scored_once_against_the_best() {
        let t = |s: &str, o: &str| Triple { subject: s.into(), relation: "r".into(), object: o.into() };
        let scores: HashMap<String, f64> = [("marie curie", 0.2), ("paris", 0.4), ("warsaw", 0.1)].into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let got = subgraph_entities(&["Marie Curie".into()], &[t("Marie Curie", "Paris"), t("marie curie", "Nowhere"), t("Warsaw", "Paris")], |id| scores.get(id).copied().unwrap_or(0.0));
        let shown: Vec<(&str, f64)> = got.iter().map(|e| (e.name.as_str(), e.score)).collect();
        assert_eq!(shown, [("Paris", 1.0), ("Marie Curie", 0.5), ("Warsaw", 0.25), ("Nowhere", 0.0)]);
        assert!(subgraph_entities(&["A".into()], &[], |_| 0.0).is_empty(), "nothing scored: nothing to show");
    }
}
