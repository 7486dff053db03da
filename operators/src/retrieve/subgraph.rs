//! Subgraph selection for the GLM (docs/glm.md, "Retrieval", step 2; the paper's App. B.2): the triplets that join
//! two seed entities first, then a randomized breadth-first search from the seeds fills the
//! budget, hop by hop, up to `max_hops`. Within a hop the frontier entities take turns (each
//! adds one of its not yet chosen triplets, in a shuffled order), so a hub seed cannot crowd
//! out a small one. The shuffles are seeded by the question: the same question on the same
//! graph gets the same subgraph.

use std::collections::{BTreeSet, HashSet};

use crate::graph::GraphState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubgraphParams {
    pub max_hops: usize,
    pub max_triplets: usize,
}

impl Default for SubgraphParams {
    fn default() -> Self {
        SubgraphParams { max_hops: 2, max_triplets: 600 }
    }
}

/// splitmix64: small, fast, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: &str) -> Self {
        Rng(seed.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3)))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

pub type TripleRef<'g> = (&'g str, &'g str, &'g str);

/// The selected triplets (subject id, relation, object id), seed-joining ones first.
pub fn select<'g>(g: &'g GraphState, seeds: &[String], question: &str, p: &SubgraphParams) -> Vec<TripleRef<'g>> {
    let seed_ids: BTreeSet<&'g str> = seeds.iter().filter_map(|s| g.entity(s).map(|e| e.id())).collect();
    let mut chosen: Vec<TripleRef<'g>> = Vec::new();
    let mut taken: HashSet<TripleRef<'g>> = HashSet::new();
    if p.max_triplets == 0 {
        return chosen;
    }
    // 1. triplets whose two ends are both seeds
    let mut joining: Vec<TripleRef<'g>> =
        seed_ids.iter().flat_map(|s| g.incident(s)).filter(|t| seed_ids.contains(t.0) && seed_ids.contains(t.2)).collect();
    joining.sort_unstable();
    joining.dedup();
    for t in joining {
        if chosen.len() == p.max_triplets {
            return chosen;
        }
        taken.insert(t);
        chosen.push(t);
    }
    // 2. randomized breadth-first search
    let mut rng = Rng::new(question);
    let mut visited: HashSet<&'g str> = seed_ids.iter().copied().collect();
    let mut frontier: Vec<&'g str> = seed_ids.iter().copied().collect();
    for _ in 0..p.max_hops {
        rng.shuffle(&mut frontier);
        let mut queues: Vec<(&'g str, Vec<TripleRef<'g>>)> = frontier
            .iter()
            .map(|u| {
                let mut ts: Vec<TripleRef<'g>> = g.incident(u).filter(|t| !taken.contains(t)).collect();
                ts.sort_unstable(); // the graph's order depends on history; the shuffle must not
                rng.shuffle(&mut ts);
                (*u, ts)
            })
            .collect();
        let mut next = Vec::new();
        let mut round = 0;
        loop {
            let mut any = false;
            for (u, ts) in queues.iter_mut() {
                let Some(&t) = ts.get(round) else { continue };
                any = true;
                if !taken.insert(t) {
                    continue; // reached from both ends in this hop
                }
                chosen.push(t);
                let other = if t.0 == *u { t.2 } else { t.0 };
                if visited.insert(other) {
                    next.push(other);
                }
                if chosen.len() == p.max_triplets {
                    return chosen;
                }
            }
            if !any {
                break;
            }
            round += 1;
        }
        frontier = next;
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DocEntry, Dirty};

    fn graph(triples: &[(&str, &str, &str)]) -> GraphState {
        let mut g = GraphState::new();
        for (i, (s, r, o)) in triples.iter().enumerate() {
            let e = DocEntry {
                title: format!("d{i}"),
                entities: [(s.to_string(), s.to_string()), (o.to_string(), o.to_string())].into_iter().collect(),
                triples: [(s.to_string(), r.to_string(), o.to_string())].into_iter().collect(),
                ..Default::default()
            };
            g.apply(&format!("d{i}"), Some(&e), &mut Dirty::default());
        }
        g
    }

    fn hub() -> GraphState {
        // a - b joined directly; a is a hub with 50 spokes; b has 2 neighbours, one of which
        // leads on to a 2-hop and a 3-hop entity
        let mut t: Vec<(String, String, String)> = vec![("a".into(), "knows".into(), "b".into())];
        for i in 0..50 {
            t.push(("a".into(), "has".into(), format!("s{i}")));
        }
        t.push(("b".into(), "r".into(), "c".into()));
        t.push(("d".into(), "r".into(), "b".into()));
        t.push(("c".into(), "r".into(), "e".into()));
        t.push(("e".into(), "r".into(), "f".into()));
        let refs: Vec<(&str, &str, &str)> = t.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
        graph(&refs)
    }

    #[test]
    fn seed_pairs_first_then_fair_bfs_within_budget_and_hops() {
        let g = hub();
        let seeds = vec!["a".to_string(), "b".to_string()];
        let p = SubgraphParams { max_hops: 2, max_triplets: 8 };
        let s = select(&g, &seeds, "q", &p);
        assert_eq!(s.len(), 8);
        assert_eq!(s[0], ("a", "knows", "b"));
        // b's two other triplets make it in although a has 50: the frontier takes turns
        assert!(s.contains(&("b", "r", "c")) && s.contains(&("d", "r", "b")), "{s:?}");
        let unique: HashSet<_> = s.iter().collect();
        assert_eq!(unique.len(), s.len());
        // with room for everything, 2 hops reach c-e but never e-f (3 hops)
        let all = select(&g, &seeds, "q", &SubgraphParams { max_hops: 2, max_triplets: 600 });
        assert_eq!(all.len(), 54);
        assert!(all.contains(&("c", "r", "e")) && !all.contains(&("e", "r", "f")));
        let one = select(&g, &seeds, "q", &SubgraphParams { max_hops: 1, max_triplets: 600 });
        assert!(!one.contains(&("c", "r", "e")));
    }

    #[test]
    fn deterministic_per_question_whatever_the_insertion_order() {
        let g = hub();
        let seeds = vec!["a".to_string()];
        let p = SubgraphParams { max_hops: 2, max_triplets: 10 };
        assert_eq!(select(&g, &seeds, "who?", &p), select(&g, &seeds, "who?", &p));
        // the same graph built in another order selects the same triplets
        let mut t: Vec<(String, String, String)> = hub().triples().map(|t| { let k = t.key(); (k.0.to_string(), k.1.to_string(), k.2.to_string()) }).collect();
        t.reverse();
        let refs: Vec<(&str, &str, &str)> = t.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
        let g2 = graph(&refs);
        assert_eq!(select(&g, &seeds, "who?", &p), select(&g2, &seeds, "who?", &p));
        // another question samples the hub's spokes differently
        let other = (0..20).map(|i| format!("q{i}")).any(|q| select(&g, &seeds, &q, &p) != select(&g, &seeds, "who?", &p));
        assert!(other);
        assert!(select(&g, &["nobody".to_string()], "who?", &p).is_empty());
    }
}
