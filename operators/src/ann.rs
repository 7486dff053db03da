//! Approximate nearest neighbours over unit vectors (cosine = dot product): a Hierarchical
//! Navigable Small World graph (Malkov & Yashunin, 2016), insert-only, in memory. Search and
//! insertion cost grows with log(n), which is what keeps entity resolution from slowing down
//! linearly as the graph grows.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use rustc_hash::FxHashSet;

#[derive(Debug, Clone, Copy)]
pub struct HnswParams {
    /// Links per node above level 0 (level 0 keeps twice as many).
    pub m: usize,
    /// Candidate list while inserting.
    pub ef_construction: usize,
    /// Candidate list while searching (at least k).
    pub ef_search: usize,
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams { m: 16, ef_construction: 100, ef_search: 64, seed: 0x5eed }
    }
}

#[derive(Clone, Copy, PartialEq)]
struct Scored(f32, u32);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

pub struct Hnsw {
    dim: usize,
    p: HnswParams,
    vectors: Vec<f32>,
    /// node -> level -> neighbours
    links: Vec<Vec<Vec<u32>>>,
    entry: Option<u32>,
    rng: u64,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Hnsw {
    pub fn new(dim: usize, p: HnswParams) -> Self {
        Hnsw { dim, p, vectors: Vec::new(), links: Vec::new(), entry: None, rng: p.seed | 1 }
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn vector(&self, i: u32) -> &[f32] {
        &self.vectors[i as usize * self.dim..(i as usize + 1) * self.dim]
    }

    fn sim(&self, q: &[f32], i: u32) -> f32 {
        dot(q, self.vector(i))
    }

    fn random_level(&mut self) -> usize {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let ml = 1.0 / (self.p.m.max(2) as f64).ln();
        ((-u.ln() * ml) as usize).min(16)
    }

    /// Best-first search of one level from `entries`, keeping `ef` candidates; best first.
    fn search_level(&self, q: &[f32], entries: &[Scored], ef: usize, level: usize) -> Vec<Scored> {
        let mut visited: FxHashSet<u32> = entries.iter().map(|s| s.1).collect();
        let mut candidates: BinaryHeap<Scored> = entries.iter().copied().collect();
        let mut best: BinaryHeap<Reverse<Scored>> = entries.iter().copied().map(Reverse).collect();
        while let Some(c) = candidates.pop() {
            let worst = best.peek().map_or(f32::NEG_INFINITY, |w| w.0 .0);
            if c.0 < worst && best.len() >= ef {
                break;
            }
            for &n in &self.links[c.1 as usize][level] {
                if !visited.insert(n) {
                    continue;
                }
                let s = Scored(self.sim(q, n), n);
                let worst = best.peek().map_or(f32::NEG_INFINITY, |w| w.0 .0);
                if best.len() < ef || s.0 > worst {
                    candidates.push(s);
                    best.push(Reverse(s));
                    if best.len() > ef {
                        best.pop();
                    }
                }
            }
        }
        let mut out: Vec<Scored> = best.into_iter().map(|r| r.0).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }

    /// The neighbour-selection heuristic: keep a candidate only if it is closer to the base
    /// than to every neighbour kept so far (spreads links across clusters), then fill up.
    fn select(&self, candidates: &[Scored], max: usize) -> Vec<u32> {
        let mut kept: Vec<Scored> = Vec::with_capacity(max);
        let mut skipped = Vec::new();
        for &c in candidates {
            if kept.len() >= max {
                break;
            }
            let cv = self.vector(c.1);
            if kept.iter().all(|k| dot(cv, self.vector(k.1)) < c.0) {
                kept.push(c);
            } else {
                skipped.push(c);
            }
        }
        for c in skipped {
            if kept.len() >= max {
                break;
            }
            kept.push(c);
        }
        kept.into_iter().map(|s| s.1).collect()
    }

    /// Adds a unit vector; returns its node id (0, 1, 2, ... in insertion order).
    pub fn insert(&mut self, v: &[f32]) -> u32 {
        self.insert_tracked(v).0
    }

    /// [`Self::insert`], also returning the nodes whose links changed (the new one first), for a
    /// store that keeps the graph as it grows.
    pub fn insert_tracked(&mut self, v: &[f32]) -> (u32, Vec<u32>) {
        assert_eq!(v.len(), self.dim, "vector dimension");
        let id = self.links.len() as u32;
        let level = self.random_level();
        self.vectors.extend_from_slice(v);
        self.links.push(vec![Vec::new(); level + 1]);
        let mut touched = vec![id];
        let Some(entry) = self.entry else {
            self.entry = Some(id);
            return (id, touched);
        };
        let top = self.links[entry as usize].len() - 1;
        let mut eps = vec![Scored(self.sim(v, entry), entry)];
        for l in (level + 1..=top).rev() {
            eps = self.search_level(v, &eps, 1, l);
        }
        for l in (0..=level.min(top)).rev() {
            let found = self.search_level(v, &eps, self.p.ef_construction, l);
            let max = if l == 0 { 2 * self.p.m } else { self.p.m };
            let neighbours = self.select(&found, self.p.m);
            for &n in &neighbours {
                if !touched.contains(&n) {
                    touched.push(n);
                }
                let list = &mut self.links[n as usize][l];
                list.push(id);
                if list.len() > max {
                    let base = self.vector(n).to_vec();
                    let mut scored: Vec<Scored> =
                        self.links[n as usize][l].iter().map(|&x| Scored(dot(&base, self.vector(x)), x)).collect();
                    scored.sort_by(|a, b| b.cmp(a));
                    self.links[n as usize][l] = self.select(&scored, max);
                }
            }
            self.links[id as usize][l] = neighbours;
            eps = found;
        }
        if level > top {
            self.entry = Some(id);
        }
        (id, touched)
    }

    /// The links of node `i`, by level (bytes: the level count, then per level the neighbour
    /// count and the neighbours, little-endian u32).
    pub fn node_bytes(&self, i: u32) -> Vec<u8> {
        let levels = &self.links[i as usize];
        let mut out = Vec::with_capacity(1 + levels.iter().map(|l| 4 + 4 * l.len()).sum::<usize>());
        out.push(levels.len() as u8);
        for l in levels {
            out.extend((l.len() as u32).to_le_bytes());
            out.extend(l.iter().flat_map(|x| x.to_le_bytes()));
        }
        out
    }

    /// What else the index needs to go on growing as it would have: the entry node and the
    /// level generator's state (16 bytes).
    pub fn state_bytes(&self) -> Vec<u8> {
        let mut out = self.entry.unwrap_or(u32::MAX).to_le_bytes().to_vec();
        out.extend(self.rng.to_le_bytes());
        out.extend([0u8; 4]);
        out
    }

    /// The index as it was: its vectors in node order, each node's [`Self::node_bytes`] and its
    /// [`Self::state_bytes`]. No search or insertion is redone, so a large index opens in the
    /// time it takes to read it; inserting goes on exactly as it would have.
    pub fn restore(dim: usize, p: HnswParams, vectors: Vec<f32>, nodes: &[&[u8]], state: &[u8]) -> Result<Self, String> {
        let n = nodes.len();
        if vectors.len() != n * dim {
            return Err(format!("{} floats for {n} nodes of dimension {dim}", vectors.len()));
        }
        let u32_at = |b: &[u8], i: usize| -> Option<u32> { b.get(i..i + 4).map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]])) };
        let mut links = Vec::with_capacity(n);
        for (i, b) in nodes.iter().enumerate() {
            let bad = || format!("node {i}: malformed links");
            let levels = *b.first().ok_or_else(bad)? as usize;
            let mut at = 1;
            let mut node = Vec::with_capacity(levels);
            for _ in 0..levels {
                let count = u32_at(b, at).ok_or_else(bad)? as usize;
                at += 4;
                let mut list = Vec::with_capacity(count);
                for _ in 0..count {
                    let x = u32_at(b, at).ok_or_else(bad)?;
                    if x as usize >= n {
                        return Err(format!("node {i} links to node {x} of {n}"));
                    }
                    list.push(x);
                    at += 4;
                }
                node.push(list);
            }
            if levels == 0 || at != b.len() {
                return Err(bad());
            }
            links.push(node);
        }
        if state.len() != 16 {
            return Err("malformed state".into());
        }
        let entry = u32_at(state, 0).filter(|&e| e != u32::MAX);
        if entry.is_some_and(|e| e as usize >= n) || entry.is_none() != (n == 0) {
            return Err("the entry node is not in the index".into());
        }
        let rng = u64::from_le_bytes(state[4..12].try_into().expect("8 bytes"));
        Ok(Hnsw { dim, p, vectors, links, entry, rng })
    }

    /// The `k` nearest nodes to unit vector `q`, most similar first: (node, cosine).
    pub fn search(&self, q: &[f32], k: usize) -> Vec<(u32, f32)> {
        let Some(entry) = self.entry else { return Vec::new() };
        let top = self.links[entry as usize].len() - 1;
        let mut eps = vec![Scored(self.sim(q, entry), entry)];
        for l in (1..=top).rev() {
            eps = self.search_level(q, &eps, 1, l);
        }
        let found = self.search_level(q, &eps, self.p.ef_search.max(k), 0);
        found.into_iter().take(k).map(|s| (s.1, s.0)).collect()
    }

    /// Exact search (every node), the baseline the approximate one is measured against.
    pub fn search_exact(&self, q: &[f32], k: usize) -> Vec<(u32, f32)> {
        let mut all: Vec<Scored> = (0..self.len() as u32).map(|i| Scored(self.sim(q, i), i)).collect();
        all.sort_by(|a, b| b.cmp(a));
        all.into_iter().take(k).map(|s| (s.1, s.0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(rng: &mut u64, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                *rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((*rng >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect();
        let n = dot(&v, &v).sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn finds_what_exact_search_finds() {
        let (dim, n) = (32, 3000);
        let mut rng = 7u64;
        let mut h = Hnsw::new(dim, HnswParams::default());
        let data: Vec<Vec<f32>> = (0..n).map(|_| unit(&mut rng, dim)).collect();
        for v in &data {
            h.insert(v);
        }
        assert_eq!(h.len(), n);
        // A stored vector finds itself.
        for i in (0..n).step_by(97) {
            let got = h.search(&data[i], 1);
            assert_eq!(got[0].0, i as u32);
            assert!((got[0].1 - 1.0).abs() < 1e-5);
        }
        // Recall@10 against brute force on fresh queries.
        let mut hits = 0;
        let queries = 200;
        for _ in 0..queries {
            let q = unit(&mut rng, dim);
            let exact: FxHashSet<u32> = h.search_exact(&q, 10).into_iter().map(|x| x.0).collect();
            let got = h.search(&q, 10);
            assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "sorted best first");
            hits += got.iter().filter(|x| exact.contains(&x.0)).count();
        }
        let recall = hits as f64 / (queries * 10) as f64;
        assert!(recall > 0.9, "recall@10 {recall}");
    }

    #[test]
    fn a_restored_index_searches_and_grows_as_the_original() {
        let (dim, n) = (16, 500);
        let mut rng = 11u64;
        let data: Vec<Vec<f32>> = (0..n + 50).map(|_| unit(&mut rng, dim)).collect();
        let mut a = Hnsw::new(dim, HnswParams::default());
        // What a store keeps: every node's links as last written.
        let mut kept: Vec<Vec<u8>> = Vec::new();
        for v in &data[..n] {
            let (id, touched) = a.insert_tracked(v);
            kept.push(Vec::new());
            assert_eq!(touched[0], id);
            for t in touched {
                kept[t as usize] = a.node_bytes(t);
            }
        }
        let refs: Vec<&[u8]> = kept.iter().map(Vec::as_slice).collect();
        let mut b = Hnsw::restore(dim, HnswParams::default(), data[..n].concat(), &refs, &a.state_bytes()).unwrap();
        for v in &data[n..] {
            assert_eq!(a.insert(v), b.insert(v));
        }
        for i in 0..a.len() as u32 {
            assert_eq!(a.node_bytes(i), b.node_bytes(i), "node {i}");
        }
        for v in data.iter().step_by(37) {
            assert_eq!(a.search(v, 5), b.search(v, 5));
        }
        assert!(Hnsw::restore(dim, HnswParams::default(), data[..n - 1].concat(), &refs, &a.state_bytes()).is_err(), "a vector missing");
        assert!(Hnsw::restore(dim, HnswParams::default(), data[..n].concat(), &refs[..n - 1], &a.state_bytes()).is_err(), "links missing");
    }

    #[test]
    fn empty_and_tiny_indexes() {
        let mut h = Hnsw::new(2, HnswParams::default());
        assert!(h.search(&[1.0, 0.0], 3).is_empty());
        h.insert(&[1.0, 0.0]);
        h.insert(&[0.0, 1.0]);
        let got = h.search(&[0.6, 0.8], 5);
        assert_eq!(got.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 0]);
    }
}
