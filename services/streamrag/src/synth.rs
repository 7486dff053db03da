//! A deterministic synthetic corpus with multi-hop questions and their gold documents: films,
//! their directors, the directors' birthplaces and the cities' countries. Used by the
//! end-to-end tests and `streamrag bench pipeline`; names are invented so no test depends on
//! world knowledge.

use std::collections::HashSet;

use serde::Serialize;
use streamrag_schemas::Document;

/// A question with the ids of the documents that answer it.
#[derive(Debug, Clone, Serialize)]
pub struct SynthQuestion {
    pub question: String,
    pub gold: Vec<String>,
}

/// A small linear congruential generator: enough for reproducible test data.
pub struct Lcg(u64);
impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

const SYL: &[&str] = &["ka", "lo", "ri", "ven", "dor", "mi", "sa", "tul", "be", "ran", "zo", "el", "mar", "qui", "no", "fa", "gel", "tor", "ia", "sen", "pa", "lu", "wen", "os"];
const ADJ: &[&str] = &["Silent", "Golden", "Hidden", "Broken", "Crimson", "Distant", "Frozen", "Hollow", "Iron", "Last", "Northern", "Pale", "Quiet", "Scarlet", "Wandering"];
const NOUN: &[&str] = &["Harbor", "Orchard", "Lantern", "Mirror", "Frontier", "Garden", "Voyage", "Tower", "River", "Winter", "Meadow", "Signal", "Empire", "Bridge", "Horizon"];
const GENRES: &[&str] = &["drama", "comedy", "thriller", "documentary", "western", "musical"];
const MONTHS: &[&str] = &["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

fn word(rng: &mut Lcg, syllables: usize) -> String {
    let mut w = String::new();
    for _ in 0..syllables {
        w.push_str(SYL[rng.below(SYL.len())]);
    }
    let mut c = w.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

/// A name not yet used. Where the names `make` gives are nearly used up (a corpus of 100,000
/// documents needs more cities than there are 3-syllable names), each 64 tries in a row that
/// collide add a syllable, instead of looping for ever.
fn unique(rng: &mut Lcg, seen: &mut HashSet<String>, make: impl Fn(&mut Lcg) -> String) -> String {
    for tries in 0usize.. {
        let mut n = make(rng);
        for _ in 0..tries / 64 {
            n.push_str(SYL[rng.below(SYL.len())]);
        }
        if seen.insert(n.to_lowercase()) {
            return n;
        }
    }
    unreachable!("the tries never end")
}

/// `n_docs` documents (films 45%, people 30%, cities 20%, countries 5%) and questions.
pub fn corpus(n_docs: usize, seed: u64) -> (Vec<Document>, Vec<SynthQuestion>) {
    let mut rng = Lcg::new(seed);
    let mut seen = HashSet::new();
    let n_countries = (n_docs / 20).max(1);
    let n_cities = (n_docs / 5).max(1);
    let n_people = (n_docs * 3 / 10).max(1);
    let n_films = n_docs.saturating_sub(n_countries + n_cities + n_people).max(1);
    let countries: Vec<String> = (0..n_countries).map(|_| unique(&mut rng, &mut seen, |r| word(r, 3))).collect();
    let cities: Vec<(String, usize)> = (0..n_cities)
        .map(|i| (unique(&mut rng, &mut seen, |r| word(r, 2) + &word(r, 1).to_lowercase()), i % n_countries))
        .collect();
    let people: Vec<(String, usize, u32)> = (0..n_people)
        .map(|_| {
            let name = unique(&mut rng, &mut seen, |r| format!("{} {}", word(r, 2), word(r, 3)));
            (name, rng.below(n_cities), 1900 + rng.below(80) as u32)
        })
        .collect();
    let films: Vec<(String, usize, u32)> = (0..n_films)
        .map(|_| {
            let name = unique(&mut rng, &mut seen, |r| {
                let base = format!("{} {}", ADJ[r.below(ADJ.len())], NOUN[r.below(NOUN.len())]);
                if r.below(4) == 0 { format!("The {base} of {}", word(r, 2)) } else { format!("{base} {}", word(r, 2)) }
            });
            (name, rng.below(n_people), 1930 + rng.below(90) as u32)
        })
        .collect();
    let mut docs = Vec::with_capacity(n_docs);
    for (i, (f, p, year)) in films.iter().enumerate() {
        let star = &people[(p + 1 + i) % n_people].0;
        let premiere = &cities[(i * 7) % n_cities].0;
        let text = format!(
            "{f} is a {year} {} film directed by {}. The film stars {star} and premiered in {premiere}.",
            GENRES[i % GENRES.len()],
            people[*p].0
        );
        docs.push(Document::upsert(format!("film-{i}"), f.clone(), text));
    }
    for (i, (p, c, year)) in people.iter().enumerate() {
        let text = format!(
            "{p} was born in {} on {} {} {year}. {} worked as a film director in {}.",
            cities[*c].0,
            1 + i % 28,
            MONTHS[i % 12],
            if i % 2 == 0 { "She" } else { "He" },
            countries[(c + i) % n_countries]
        );
        docs.push(Document::upsert(format!("person-{i}"), p.clone(), text));
    }
    for (i, (c, k)) in cities.iter().enumerate() {
        let text = format!("{c} is a city in {}. It has a population of {} people.", countries[*k], 1000 + 37 * i);
        docs.push(Document::upsert(format!("city-{i}"), c.clone(), text));
    }
    for (i, k) in countries.iter().enumerate() {
        let capital = cities.iter().find(|(_, kk)| *kk == i).map(|(c, _)| c.clone()).unwrap_or_default();
        let text = format!("{k} is a country. Its capital is {capital}.");
        docs.push(Document::upsert(format!("country-{i}"), k.clone(), text));
    }
    let mut questions = Vec::new();
    for q in 0..n_films.min(40) {
        let i = (q * 7919) % n_films;
        let (f, p, _) = &films[i];
        let j = (i + 1 + q) % n_films;
        questions.push(match q % 3 {
            0 => SynthQuestion {
                question: format!("Where was the director of {f} born?"),
                gold: vec![format!("film-{i}"), format!("person-{p}")],
            },
            1 => SynthQuestion {
                question: format!("When was the director of the film {f} born?"),
                gold: vec![format!("film-{i}"), format!("person-{p}")],
            },
            _ => SynthQuestion {
                question: format!("Which film came out first, {f} or {}?", films[j].0),
                gold: vec![format!("film-{i}"), format!("film-{j}")],
            },
        });
    }
    (docs, questions)
}

/// Document recall@k of one answer: the share of gold ids among the first k returned.
pub fn recall_at(returned: &[String], gold: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    let top: HashSet<&String> = returned.iter().take(k).collect();
    gold.iter().filter(|g| top.contains(g)).count() as f64 / gold.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_unique_and_sized() {
        let (a, qa) = corpus(200, 7);
        let (b, _) = corpus(200, 7);
        assert_eq!(a, b);
        assert_eq!(a.len(), 200);
        let ids: HashSet<_> = a.iter().map(|d| &d.id).collect();
        assert_eq!(ids.len(), 200);
        assert!(qa.len() >= 10);
        for q in &qa {
            for g in &q.gold {
                assert!(ids.contains(g), "{g}");
            }
        }
        assert_ne!(corpus(200, 8).0, a);
    }

    #[test]
    fn a_corpus_past_its_short_names_is_made_with_longer_ones() {
        // 3,000 countries and 12,000 cities share the 13,824 three-syllable names: the loop
        // for an unused name never ended before
        let (a, _) = corpus(60_000, 1);
        assert_eq!(a.len(), 60_000);
        let titles: HashSet<String> = a.iter().map(|d| d.title.to_lowercase()).collect();
        assert_eq!(titles.len(), 60_000, "every document has a title of its own");
    }

    #[test]
    fn recall() {
        let r = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(recall_at(&r(&["a", "x", "b"]), &r(&["a", "b"]), 2), 0.5);
        assert_eq!(recall_at(&r(&["a", "x", "b"]), &r(&["a", "b"]), 5), 1.0);
    }
}
