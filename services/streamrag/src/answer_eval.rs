//! Scoring answer texts for `streamrag eval --answers`: exact match and token F1 with the
//! usual SQuAD / HotpotQA / 2Wiki normalisation, and questions the corpus cannot answer, made
//! by putting names that occur nowhere in it into the evaluated questions' own patterns.

use std::collections::{HashMap, HashSet};

use streamrag_operators::answer::text::{is_stop, spans, word_spans, SpanKind};
use streamrag_schemas::Document;

/// Lower case, punctuation and the articles a / an / the removed, whitespace collapsed.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower.chars().map(|c| if c.is_alphanumeric() || c.is_whitespace() { c } else { ' ' }).collect();
    no_punct.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" ")
}

/// An answer's text without its citation marks ("Paris [1][2]" -> "Paris").
pub fn strip_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        match rest[i..].find(']') {
            Some(j) if rest[i + 1..i + j].chars().all(|c| c.is_ascii_digit() || c == ',' || c == ' ') && j > 1 => {
                out.push_str(&rest[..i]);
                rest = &rest[i + j + 1..];
            }
            _ => {
                out.push_str(&rest[..=i]);
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

pub fn exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(u8::from(normalize_answer(prediction) == normalize_answer(gold)))
}

/// Token F1; yes / no / noanswer must match exactly (as the HotpotQA script scores them).
pub fn f1(prediction: &str, gold: &str) -> f64 {
    let (p, g) = (normalize_answer(prediction), normalize_answer(gold));
    let special = ["yes", "no", "noanswer"];
    if (special.contains(&p.as_str()) || special.contains(&g.as_str())) && p != g {
        return 0.0;
    }
    let pt: Vec<&str> = p.split_whitespace().collect();
    let gt: Vec<&str> = g.split_whitespace().collect();
    let mut counts: HashMap<&str, i32> = HashMap::new();
    for t in &gt {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0;
    for t in &pt {
        if let Some(c) = counts.get_mut(t) {
            if *c > 0 {
                *c -= 1;
                same += 1;
            }
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / pt.len() as f64;
    let recall = same as f64 / gt.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The best EM and F1 of `prediction` over the gold answers.
pub fn score(prediction: &str, golds: &[String]) -> (f64, f64) {
    golds.iter().map(|g| (exact_match(prediction, g), f1(prediction, g))).fold((0.0, 0.0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
}

/// A small deterministic generator (xorshift), so the made-up questions are the same on
/// every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ONSETS: &[&str] = &["b", "br", "d", "dr", "f", "g", "gl", "k", "kr", "l", "m", "n", "p", "qu", "r", "s", "st", "t", "tr", "v", "z", "zh"];
const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ae", "ou", "y"];
const CODAS: &[&str] = &["", "n", "r", "th", "x", "l", "sk", "nd", "v"];

/// How unanswerable questions are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fake {
    /// Invented words, none of which occurs in the corpus.
    Invented,
    /// Two words of real titles that no passage holds together.
    Recombined,
}

/// The corpus's words and, for each, the passages that hold it.
pub struct Vocabulary {
    docs_of: HashMap<String, HashSet<usize>>,
    title_words: Vec<String>,
}

impl Vocabulary {
    pub fn new(corpus: &[Document]) -> Self {
        let mut docs_of: HashMap<String, HashSet<usize>> = HashMap::new();
        let mut title_words = HashSet::new();
        for (i, d) in corpus.iter().enumerate() {
            for w in normalize_answer(&format!("{} {}", d.title, d.text.as_deref().unwrap_or(""))).split_whitespace() {
                docs_of.entry(w.to_string()).or_default().insert(i);
            }
            for w in normalize_answer(&d.title).split_whitespace() {
                if w.len() >= 4 && w.chars().all(char::is_alphabetic) {
                    title_words.insert(w.to_string());
                }
            }
        }
        let mut title_words: Vec<String> = title_words.into_iter().collect();
        title_words.sort();
        Vocabulary { docs_of, title_words }
    }

    fn invented(&self, rng: &mut Rng) -> String {
        loop {
            let syllables = 2 + rng.below(2);
            let mut w = String::new();
            for _ in 0..syllables {
                w.push_str(ONSETS[rng.below(ONSETS.len())]);
                w.push_str(VOWELS[rng.below(VOWELS.len())]);
            }
            w.push_str(CODAS[rng.below(CODAS.len())]);
            if !self.docs_of.contains_key(&w) {
                return capitalise(&w);
            }
        }
    }

    fn recombined(&self, rng: &mut Rng) -> String {
        loop {
            let a = &self.title_words[rng.below(self.title_words.len())];
            let b = &self.title_words[rng.below(self.title_words.len())];
            if a == b {
                continue;
            }
            let (da, db) = (&self.docs_of[a], &self.docs_of[b]);
            if da.is_disjoint(db) {
                return format!("{} {}", capitalise(a), capitalise(b));
            }
        }
    }

    /// `question` with each name it gives replaced by a made-up one; None when it gives none.
    pub fn unanswerable(&self, question: &str, kind: Fake, seed: u64) -> Option<String> {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let names: Vec<_> = spans(question).into_iter().filter(|s| s.kind == SpanKind::Name).collect();
        if names.is_empty() {
            return self.unanswerable_lower(question, &mut rng);
        }
        if kind == Fake::Recombined && self.title_words.len() < 2 {
            return None;
        }
        let mut out = String::new();
        let mut at = 0;
        for s in names {
            out.push_str(&question[at..s.start]);
            let name = match kind {
                Fake::Invented => format!("{} {}", self.invented(&mut rng), self.invented(&mut rng)),
                Fake::Recombined => self.recombined(&mut rng),
            };
            out.push_str(&name);
            at = s.end;
        }
        out.push_str(&question[at..]);
        Some(out)
    }
}

impl Vocabulary {
    /// A question without capitals: its rarest run of two or three content words (the name,
    /// most likely) replaced by invented lower-case words.
    fn unanswerable_lower(&self, question: &str, rng: &mut Rng) -> Option<String> {
        let ws = word_spans(question);
        let content = |k: usize| ws.get(k).is_some_and(|w| w.raw.chars().all(char::is_alphabetic) && !is_stop(&w.raw.to_lowercase()));
        let df = |k: usize| self.docs_of.get(&ws[k].raw.to_lowercase()).map_or(0, |d| d.len());
        let mut best: Option<(usize, usize, usize)> = None;
        for len in [2, 3] {
            for i in 0..ws.len().saturating_sub(len - 1) {
                if (i..i + len).all(content) {
                    let cost = (i..i + len).map(df).sum::<usize>() / len;
                    if best.is_none_or(|b| cost < b.0) {
                        best = Some((cost, i, i + len));
                    }
                }
            }
        }
        let (_, a, b) = best?;
        let fake: Vec<String> = (a..b).map(|_| self.invented(rng).to_lowercase()).collect();
        Some(format!("{}{}{}", &question[..ws[a].start], fake.join(" "), &question[ws[b - 1].end..]))
    }
}

fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_scored_as_the_hotpotqa_script_does() {
        assert_eq!(normalize_answer("The  Eiffel-Tower!"), "eiffel tower");
        assert_eq!(exact_match("the Eiffel Tower", "Eiffel Tower"), 1.0);
        assert!((f1("Weston-super-Mare", "Weston-super-Mare, Somerset") - 0.857).abs() < 0.01);
        assert_eq!(f1("yes", "no"), 0.0);
        assert_eq!(f1("no", "no"), 1.0);
        assert_eq!(f1("", "Paris"), 0.0);
        assert_eq!(score("Paris", &["Lyon".into(), "paris".into()]), (1.0, 1.0));
        assert_eq!(strip_citations("Paris [1][2]"), "Paris");
        assert_eq!(strip_citations("the [a] list [3, 4]."), "the [a] list .");
    }

    #[test]
    fn unanswerable_questions_keep_the_pattern_and_name_nothing_in_the_corpus() {
        let corpus = vec![
            Document::upsert("a", "Henry Edwards", "Henry Edwards was born in Weston."),
            Document::upsert("b", "Aylwin Film", "Aylwin is a film directed by Henry Edwards."),
            Document::upsert("c", "Marie Curie", "Marie Curie was born in Warsaw."),
        ];
        let v = Vocabulary::new(&corpus);
        let q = "Where was the director of film Aylwin born?";
        let fake = v.unanswerable(q, Fake::Invented, 7).unwrap();
        assert!(fake.starts_with("Where was the director of film ") && fake.ends_with(" born?"), "{fake}");
        for w in normalize_answer(&fake).split_whitespace().filter(|w| !normalize_answer(q).split_whitespace().any(|x| x == *w)) {
            assert!(!v.docs_of.contains_key(w), "{w} is in the corpus");
        }
        assert_eq!(v.unanswerable(q, Fake::Invented, 7), Some(fake), "deterministic");
        let re = v.unanswerable(q, Fake::Recombined, 3).unwrap();
        let name = re.trim_start_matches("Where was the director of film ").trim_end_matches(" born?");
        let ws: Vec<String> = normalize_answer(name).split_whitespace().map(str::to_string).collect();
        assert_eq!(ws.len(), 2, "{re}");
        assert!(v.docs_of[&ws[0]].is_disjoint(&v.docs_of[&ws[1]]), "{re}: the two words meet in a passage");
        assert_eq!(v.unanswerable("where was it?", Fake::Invented, 1), None);
        // lower case: the rarest run of words is the name that goes
        let low = v.unanswerable("where was the director of film aylwin born?", Fake::Invented, 5).unwrap();
        assert!(low.starts_with("where was the director of ") && low.ends_with(" born?") && !low.contains("aylwin"), "{low}");
    }
}
