//! The answer with no LLM: a span or a sentence of the top passages, cited.
//!
//! 1. What the question wants ([`want`]): a date, a place, a name, a number, one of its
//!    alternatives, yes or no.
//! 2. Each sentence of the top passages is scored by the question's words it holds (its names
//!    count in the passage's title too, since a passage's sentences are about its subject),
//!    and the best sentence with a span of the wanted kind that the question does not already
//!    give answers, with the span nearest the question's words.
//! 3. A sentence also gains what its best link adds: another sentence of its passage, or a
//!    sentence of another passage that names its subject ("the director of film X" -> the
//!    director's passage -> "born where"): the answer can sit one hop away.
//! 4. "Which ... first, A or B?" compares the dates of A and B (or of what each is linked to
//!    by the question's other words: "the director of A"); "Are both A and B ... the same
//!    ...?" compares the names that open their passages.
//! 5. Otherwise, the best sentence itself.

use std::collections::HashSet;

use super::text::{alternatives, asks_same, content_words, date_key, is_stop, no_possessive, sentences, spans, stem, word_spans, Span, SpanKind, Want};
use crate::normalize::{normalize, unqualified, TITLES_OF_RANK};

/// One retrieved passage, by rank.
#[derive(Debug, Clone, Copy)]
pub struct Passage<'a> {
    pub title: &'a str,
    pub text: &'a str,
}

/// An extractive answer: its text and the passages (indices by rank) it cites.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub text: String,
    pub cites: Vec<usize>,
}

/// Stems of words that say which way a comparison goes.
const EARLY: &[&str] = &["early", "old", "befor", "sooner"];
const LATE: &[&str] = &["late", "young", "after", "recen", "newer", "newes"];
/// Stems of words that are about dates, not about what links a thing to another.
const DATE_WORDS: &[&str] = &["born", "died", "early", "late", "old", "young", "relea", "publi", "came", "out", "date", "year", "befor", "after", "recen", "newer", "newes", "sooner", "found", "estab", "creat", "start", "open", "other", "than"];

fn stems(words: &[String]) -> HashSet<String> {
    words.iter().map(|w| stem(w)).collect()
}

fn norm_stems(s: &str) -> HashSet<String> {
    normalize(&no_possessive(s)).split(' ').filter(|w| !w.is_empty()).map(stem).collect()
}

/// A sentence's stems, with "born" and "died" where a date is wanted and it opens with a
/// life's dates in parentheses ("Henry Edwards (18 September 1882 – 2 November 1952) was ...").
fn sentence_stems(s: &str, want: &Want) -> HashSet<String> {
    let mut out = norm_stems(s);
    if *want == Want::Date && life_dates(s).is_some() {
        out.insert("born".into());
        out.insert("died".into());
    }
    out
}

/// The two dates of a "(date – date)" range in a sentence: (birth, death) spans.
fn life_dates(s: &str) -> Option<(Span, Span)> {
    let dates: Vec<Span> = spans(s).into_iter().filter(|x| x.kind == SpanKind::Date).collect();
    dates.windows(2).find(|w| {
        let between = &s[w[0].end..w[1].start];
        between.len() <= 8 && between.contains(['–', '-', '—'])
    }).map(|w| (w[0].clone(), w[1].clone()))
}

/// The passage whose subject `name` is: its title, or its title without a qualifier in
/// parentheses, equals the name.
fn passage_of(passages: &[Passage], name: &str, skip: &[usize]) -> Option<usize> {
    let n = normalize(name);
    if n.is_empty() {
        return None;
    }
    let same = |t: &str| normalize(t) == n || unqualified(t).is_some_and(|u| normalize(u) == n);
    passages.iter().enumerate().find(|(i, p)| !skip.contains(i) && same(p.title)).map(|(i, _)| i).or_else(|| {
        // the question's own spelling may drop a qualifier or an article, or change case
        let key = |x: &str| -> Vec<String> {
            let mut v: Vec<String> = normalize(&no_possessive(x)).split(' ').filter(|w| !w.is_empty() && !is_stop(w) && !TITLES_OF_RANK.contains(w)).map(str::to_string).collect();
            v.sort();
            v
        };
        let words = key(name);
        passages.iter().enumerate().find(|(i, p)| !skip.contains(i) && !words.is_empty() && (key(p.title) == words || unqualified(p.title).is_some_and(|u| key(u) == words))).map(|(i, _)| i)
    }).or_else(|| {
        // no title names it (a corpus of chunks, or titles that are ids): the passage that
        // opens with it
        let bare = normalize(&no_possessive(unqualified(name).unwrap_or(name)));
        let opens = |text: &str| {
            let t = format!("{} ", normalize(&no_possessive(text)));
            [&n, &bare].iter().any(|x| !x.is_empty() && t.starts_with(&format!("{x} ")))
        };
        passages.iter().enumerate().find(|(i, p)| !skip.contains(i) && opens(p.text)).map(|(i, _)| i)
    })
}

struct Scored<'a> {
    sentence: &'a str,
    score: f64,
    span: Option<Span>,
    /// Question stems this sentence (not its title) does not hold.
    missing: usize,
}

fn kinds_for(want: &Want) -> &'static [SpanKind] {
    match want {
        Want::Date => &[SpanKind::Date],
        Want::Number => &[SpanKind::Number, SpanKind::Date],
        Want::Place | Want::Name => &[SpanKind::Name],
        _ => &[SpanKind::Name, SpanKind::Date, SpanKind::Number],
    }
}

/// The best sentence of `within` for the question's `relation` stems and `names` stems, with
/// its best span of a wanted kind that `given` (stems already known) does not hold.
fn best_sentence<'a>(passages: &[Passage<'a>], within: &[usize], relation: &HashSet<String>, names: &HashSet<String>, given: &HashSet<String>, want: &Want) -> Option<Scored<'a>> {
    let mut best: Option<Scored> = None;
    for &pi in within {
        let p = passages[pi];
        let title = norm_stems(p.title);
        for (si, s) in sentences(p.text).into_iter().enumerate() {
            let in_s = sentence_stems(s, want);
            let rel_hits = relation.iter().filter(|r| in_s.contains(*r)).count();
            let name_hits = names.iter().filter(|n| in_s.contains(*n) || title.contains(*n)).count();
            let mut score = rel_hits as f64 + 1.5 * name_hits as f64 - 0.25 * pi as f64 - 0.05 * si.min(10) as f64;
            let span = best_span(s, want, relation, given, p.title);
            if span.is_none() && !matches!(want, Want::Any) {
                continue;
            }
            if let Some((b, _)) = &span {
                score += 0.5 * b;
            }
            let missing = relation.len() - rel_hits;
            if best.as_ref().is_none_or(|x| score > x.score) {
                best = Some(Scored { sentence: s, score, span: span.map(|(_, sp)| sp), missing });
            }
        }
    }
    best.filter(|b| b.score > 0.0)
}

/// A sentence of a retrieved passage, with its word stems.
struct Sent<'a> {
    passage: usize,
    index: usize,
    text: &'a str,
    stems: HashSet<String>,
}

/// The best span of a wanted kind in a sentence that the question does not give (`given`),
/// nearest the `relation` words: (its score, the span).
fn best_span(s: &str, want: &Want, relation: &HashSet<String>, given: &HashSet<String>, subject: &str) -> Option<(f64, Span)> {
    let subject_last = normalize(unqualified(subject).unwrap_or(subject)).rsplit(' ').next().filter(|w| !w.is_empty()).map(str::to_string);
    let kinds = kinds_for(want);
    let ws = word_spans(s);
    let positions: Vec<usize> = ws.iter().enumerate().filter(|(_, w)| relation.contains(&stem(&normalize(w.raw)))).map(|(i, _)| i).collect();
    let mut best: Option<(f64, Span)> = None;
    let life = life_dates(s);
    let (born, died) = (relation.contains("born"), relation.contains("died"));
    for sp in spans(s) {
        if !kinds.contains(&sp.kind) {
            continue;
        }
        let life_bonus = match &life {
            Some((b, _)) if *b == sp && born && !died => 1.0,
            Some((_, d)) if *d == sp && died => 1.0,
            Some(_) if sp.kind == SpanKind::Date && (born || died) => -0.5,
            _ => 0.0,
        };
        let own = norm_stems(&s[sp.start..sp.end]);
        if !own.is_empty() && own.iter().filter(|w| given.contains(*w)).count() * 2 >= own.len() {
            continue;
        }
        let dist = positions.iter().map(|&k| if k < sp.words.0 { sp.words.0 - k } else { k.saturating_sub(sp.words.1 - 1) }).min().unwrap_or(8) as f64;
        let cue = sp.words.0.checked_sub(1).map(|k| normalize(ws[k].raw)).unwrap_or_default();
        let cue_bonus = match (want, cue.as_str()) {
            (Want::Place, "in" | "at" | "near" | "from") => 1.0,
            // "an American singer": a word describing, not a place
            (Want::Place, "a" | "an" | "the") if sp.words.1 - sp.words.0 == 1 => -1.0,
            (Want::Name, "by" | "to" | "of" | "married") => 0.5,
            (Want::Date, "on" | "in") => 0.3,
            _ => 0.0,
        };
        let mut score = cue_bonus + life_bonus - 0.1 * dist.min(20.0);
        if *want == Want::Place && sp.kind == SpanKind::Name && !matches!(cue.as_str(), "in" | "at" | "near" | "from") {
            let one = sp.words.1 - sp.words.0 == 1;
            let word = ws[sp.words.0].raw.to_lowercase();
            let next_lower = ws.get(sp.words.1).is_some_and(|w| w.raw.chars().next().is_some_and(char::is_lowercase));
            // "a Swedish actor", "Italian film director": a word describing, not a place
            if one && next_lower && ["an", "ish", "ese", "ic", "i"].iter().any(|x| word.ends_with(x)) {
                score -= 1.0;
            }
            // the passage's own subject, under a longer name ("Jonathan Richard Guy Greenwood")
            if subject_last.as_deref().is_some_and(|l| normalize(ws[sp.words.1 - 1].raw) == l) {
                score -= 2.0;
            }
        }
        if best.as_ref().is_none_or(|(b, _)| score > *b) {
            best = Some((score, sp));
        }
    }
    best
}

/// The answer to `question` from the top `passages` (best first), or None when no sentence
/// holds any of its words.
///
/// A sentence with a span of the wanted kind is scored by the question's words it holds (the
/// names also in its passage's title), plus what its best *link* adds: another sentence of
/// its passage, or a sentence of another passage that names this passage's subject. So in
/// "Where was the director of film X born?", "He was born in Paris" in the director's passage
/// holds "born", and the sentence of X's passage that names the director adds "director" and
/// X: the answer can sit one hop from what the question names.
pub fn extract(question: &str, passages: &[Passage]) -> Option<Extracted> {
    if let Some((first, second)) = compound(question) {
        let (mut wa, wb) = (super::text::want(first), super::text::want(second));
        // "Which movement did X lead": beside a second question the first asks for the thing's
        // name, not a sentence to be joined with the second's answer
        let opener = first.split_whitespace().next().map(str::to_lowercase);
        if wa == Want::Any && wb != Want::Any && matches!(opener.as_deref(), Some("which" | "what")) {
            wa = Want::Name;
        }
        if wa != Want::Any || wb != Want::Any {
            // the first part names its subject; the second says "it" or "he" for it, so it is
            // read with the whole question's words and its own question word
            let a = extract_as(first, wa, passages);
            let b = extract_as(question, wb, passages);
            return match (a, b) {
                (Some(a), Some(b)) => Some(joined(a, b)),
                (a, b) => a.or(b),
            };
        }
    }
    extract_as(question, super::text::want(question), passages)
}

/// A question that asks two things ("Which movement did X lead, and where did it begin?",
/// "Who was the father of X and where did he die?"): the part before " and " and the part
/// from the question word after it.
fn compound(question: &str) -> Option<(&str, &str)> {
    const ASKS: &[&str] = &["where", "when", "who", "whom", "what", "which", "how", "why", "in which", "in what"];
    // as written: "And How They Grew" in a title is capitalised
    question.match_indices(" and ").find_map(|(i, m)| {
        let rest = &question[i + m.len()..];
        let asks = ASKS.iter().any(|w| rest.starts_with(w) && rest[w.len()..].starts_with(' '));
        let first = question[..i].trim_end_matches([',', ';', ' ']);
        (asks && first.split_whitespace().count() >= 3).then(|| (first, rest.trim()))
    })
}

/// Two parts' answers as one: the one alone when it holds the other ("Lech Wałęsa led the
/// Solidarity movement in Gdańsk." holds "Gdańsk"), else both, first part first.
fn joined(a: Extracted, b: Extracted) -> Extracted {
    let (na, nb) = (normalize(&a.text), normalize(&b.text));
    let mut cites = a.cites.clone();
    cites.extend(b.cites.iter().filter(|c| !a.cites.contains(c)));
    let text = if na.contains(&nb) {
        a.text
    } else if nb.contains(&na) {
        b.text
    } else {
        format!("{}; {}", a.text, b.text)
    };
    Extracted { text, cites }
}

fn extract_as(question: &str, want: Want, passages: &[Passage]) -> Option<Extracted> {
    let qwords = content_words(question);
    let anchor_words: HashSet<String> = super::support::anchors(question).into_iter().flatten().map(|w| stem(&w)).collect();
    let all = stems(&qwords);
    let relation: HashSet<String> = all.difference(&anchor_words).cloned().collect();
    match &want {
        Want::Choice(alts) => {
            if let Some(x) = choose(question, alts, passages, &relation) {
                return Some(x);
            }
        }
        Want::YesNo if asks_same(question) => {
            if let Some(x) = same(question, passages, &relation) {
                return Some(x);
            }
        }
        Want::Name => {
            if let Some(x) = kin(question, passages) {
                return Some(x);
            }
        }
        _ => {}
    }
    let sents: Vec<Sent> = passages
        .iter()
        .enumerate()
        .flat_map(|(pi, p)| {
            let want = &want;
            sentences(p.text).into_iter().enumerate().map(move |(si, t)| Sent { passage: pi, index: si, text: t, stems: sentence_stems(t, want) })
        })
        .collect();
    let titles: Vec<HashSet<String>> = passages.iter().map(|p| norm_stems(p.title)).collect();
    let subjects: Vec<String> = passages.iter().map(|p| normalize(unqualified(p.title).unwrap_or(p.title))).collect();
    let cover = |s: &Sent, rel: &mut HashSet<String>, names: &mut HashSet<String>| {
        rel.extend(relation.iter().filter(|r| s.stems.contains(*r)).cloned());
        names.extend(anchor_words.iter().filter(|n| s.stems.contains(*n) || titles[s.passage].contains(*n)).cloned());
    };
    let value = |rel: &HashSet<String>, names: &HashSet<String>| rel.len() as f64 + 1.5 * names.len() as f64;
    // (score, sentence, span, linking passage)
    let scan = |typed: bool| -> Option<(f64, &Sent, Option<Span>, Option<usize>)> {
    let mut best: Option<(f64, &Sent, Option<Span>, Option<usize>)> = None;
    for s in &sents {
        let title = passages[s.passage].title;
        let span = if typed { best_span(s.text, &want, &relation, &all, title) } else { best_span(s.text, &Want::Any, &relation, &all, title) };
        if typed && span.is_none() {
            continue;
        }
        let (mut rel, mut names) = (HashSet::new(), HashSet::new());
        cover(s, &mut rel, &mut names);
        let own = value(&rel, &names);
        if own == 0.0 {
            continue;
        }
        let mut link: (f64, Option<usize>) = (0.0, None);
        for l in &sents {
            let same_passage = l.passage == s.passage;
            if (same_passage && l.index == s.index) || (!same_passage && (subjects[s.passage].is_empty() || !normalize(l.text).contains(&subjects[s.passage]))) {
                continue;
            }
            let (mut r2, mut n2) = (rel.clone(), names.clone());
            cover(l, &mut r2, &mut n2);
            let gain = 0.95 * (value(&r2, &n2) - own);
            if gain > link.0 {
                link = (gain, (!same_passage).then_some(l.passage));
            }
        }
        let mut span_score = span.as_ref().map(|(b, _)| *b).unwrap_or(0.0);
        // a name that is another retrieved passage's subject, while the question asks more
        // than this sentence and its link hold, is a bridge to the answer, not the answer
        if let Some((_, sp)) = &span {
            let covered = own + link.0 / 0.95;
            let asked = relation.len() as f64 + 1.5 * anchor_words.len() as f64;
            if typed && sp.kind == SpanKind::Name && covered + 1e-9 < asked && passage_of(passages, &s.text[sp.start..sp.end], &[s.passage]).is_some() {
                span_score -= 4.0;
            }
        }
        let score = own + link.0 + 0.5 * span_score - 0.25 * s.passage as f64 - 0.05 * s.index.min(10) as f64;
        if best.as_ref().is_none_or(|b| score > b.0) {
            best = Some((score, s, span.map(|(_, sp)| sp), link.1));
        }
    }
    best
    };
    // with no span of the wanted kind anywhere (text without capitals has no names), the best
    // sentence answers
    let typed0 = !matches!(want, Want::Any | Want::YesNo);
    let (typed, best) = match scan(typed0) {
        Some(b) => (typed0, Some(b)),
        None if typed0 => (false, scan(false)),
        None => (false, None),
    };
    let best = best?;
    // the explicit hop wins when it covers more of what is asked than the best sentence alone
    if typed {
        let direct = relation.iter().filter(|r| best.1.stems.contains(*r)).count();
        if let Some((covered, x)) = hop(question, passages, &relation, &all, &want) {
            if covered > direct {
                return Some(x);
            }
        }
    }
    let (_, s, span, via) = best;
    let cites: Vec<usize> = via.into_iter().chain([s.passage]).collect();
    let text = match (&span, typed) {
        (Some(sp), true) => s.text[sp.start..sp.end].to_string(),
        _ => s.text.to_string(),
    };
    Some(Extracted { text, cites })
}

/// The relation word of the question nearest the name `anchor` (its first hop: "husband" in
/// "the city where the husband of Marie Curie was born").
fn first_hop(question: &str, anchor: &Span, relation: &HashSet<String>) -> Option<String> {
    let ws = word_spans(question);
    // "the husband of X": the hop is before the name; "X's husband": after it
    let of = anchor.words.0 > 0 && ws[anchor.words.0 - 1].raw.eq_ignore_ascii_case("of");
    let rest = &question[anchor.end..];
    let possessive = rest.starts_with("'s") || rest.starts_with("\u{2019}s") || rest.starts_with("' ");
    ws.iter()
        .enumerate()
        .filter(|(k, _)| if of { *k < anchor.words.0 } else if possessive { *k >= anchor.words.1 } else { *k < anchor.words.0 || *k >= anchor.words.1 })
        .filter(|(_, w)| relation.contains(&stem(&normalize(w.raw))))
        .min_by_key(|(k, _)| if *k < anchor.words.0 { anchor.words.0 - k } else { k + 1 - anchor.words.1 })
        .map(|(_, w)| stem(&normalize(w.raw)))
}

/// The answer one hop from what the question names: from the passage of a name the question
/// gives (A), the bridge B is either a name in a sentence of A that holds the question's first
/// hop word and is another retrieved passage's subject, or a passage whose own sentence names
/// A and holds that word ("He married Marie Curie" in Pierre Curie's passage). The answer is
/// the best span in B's passage for the relation words the first hop did not use. Returns how
/// many relation words the two sentences hold, with the answer.
fn hop(question: &str, passages: &[Passage], relation: &HashSet<String>, given: &HashSet<String>, want: &Want) -> Option<(usize, Extracted)> {
    let (anchor, a) = spans(question).into_iter().filter(|s| s.kind == SpanKind::Name).find_map(|s| passage_of(passages, &question[s.start..s.end], &[]).map(|a| (s, a)))?;
    let first = first_hop(question, &anchor, relation)?;
    // (sentence stems, -distance, bridge passage)
    let mut best: Option<(HashSet<String>, i64, usize)> = None;
    for s in sentences(passages[a].text) {
        let ws = word_spans(s);
        let stems_at: Vec<String> = ws.iter().map(|w| stem(&normalize(w.raw))).collect();
        let Some(at) = stems_at.iter().position(|w| *w == first) else { continue };
        for sp in spans(s).into_iter().filter(|x| x.kind == SpanKind::Name) {
            let Some(b) = passage_of(passages, &s[sp.start..sp.end], &[a]) else { continue };
            let dist = if at < sp.words.0 { sp.words.0 - at } else { at.saturating_sub(sp.words.1 - 1) } as i64;
            if best.as_ref().is_none_or(|x| -dist > x.1) {
                best = Some((norm_stems(s), -dist, b));
            }
        }
    }
    if best.is_none() {
        let subject = normalize(unqualified(passages[a].title).unwrap_or(passages[a].title));
        'outer: for (b, p) in passages.iter().enumerate().filter(|(b, _)| *b != a) {
            for s in sentences(p.text) {
                let st = norm_stems(s);
                if st.contains(&first) && !subject.is_empty() && normalize(s).contains(&subject) {
                    best = Some((st, 0, b));
                    break 'outer;
                }
            }
        }
    }
    let (held_stems, _, b) = best?;
    let used: HashSet<String> = relation.iter().filter(|r| held_stems.contains(*r)).cloned().collect();
    let rest: HashSet<String> = relation.difference(&used).cloned().collect();
    let mut known = given.clone();
    known.extend(norm_stems(passages[a].title));
    known.extend(norm_stems(passages[b].title));
    let names = norm_stems(passages[b].title);
    let second = best_sentence(passages, &[b], &rest, &names, &known, want)?;
    let sp = second.span?;
    let rest_held = rest.len() - second.missing;
    Some((used.len() + rest_held, Extracted { text: second.sentence[sp.start..sp.end].to_string(), cites: vec![a, b] }))
}

/// Kinship terms that are two relations in a row ("paternal grandfather": the father's
/// father), each relation as the stems that state it in a passage.
const KIN: &[(&str, &[&str])] = &[
    ("paternal grandfather", &["father", "father"]),
    ("paternal grandmother", &["father", "mother"]),
    ("maternal grandfather", &["mother", "father"]),
    ("maternal grandmother", &["mother", "mother"]),
    ("father in law", &["spouse", "father"]),
    ("mother in law", &["spouse", "mother"]),
    ("son in law", &["child", "spouse"]),
    ("daughter in law", &["child", "spouse"]),
    ("child in law", &["child", "spouse"]),
    ("stepmother", &["father", "spouse"]),
    ("stepfather", &["mother", "spouse"]),
    // one relation, after the two-relation terms that hold it: "the father of X" is in "X was
    // the daughter of Y" as well as in "his father, Y"
    ("father", &["father"]),
    ("mother", &["mother"]),
];

/// The stems that state a relation in a passage, and whether the name sought is the second
/// of a pair after the cue ("son of A and B": B is the mother).
fn kin_cues(relation: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match relation {
        // (the word itself, "son of" / "daughter of")
        "father" => (&["fathe"], &["child"]),
        "mother" => (&["mothe"], &["child"]),
        "child" => (&["child"], &[]),
        _ => (&["married"], &[]),
    }
}

/// "Who is X's paternal grandfather?": two relations walked from X's passage, each to the
/// name nearest its cue in the current passage that is another retrieved passage's subject
/// (or, for the last, any name there).
fn kin(question: &str, passages: &[Passage]) -> Option<Extracted> {
    let n = normalize(&no_possessive(question));
    let padded = format!(" {n} ");
    // one relation only where the person is asked for ("Who is X's father?"), not something
    // of theirs ("What nationality is X's father?")
    let who = matches!(n.split(' ').next(), Some("who" | "whom"));
    let (_, hops) = KIN.iter().find(|(term, hops)| (hops.len() > 1 || who) && padded.contains(&format!(" {term} ")))?;
    let (mut at, _) = spans(question).into_iter().filter(|s| s.kind == SpanKind::Name).find_map(|s| passage_of(passages, &question[s.start..s.end], &[]).map(|a| (a, s)))?;
    let mut cites = vec![at];
    let mut seen = vec![at];
    for (k, rel) in hops.iter().enumerate() {
        let last = k + 1 == hops.len();
        let (direct, of_pair) = kin_cues(rel);
        let subject = norm_stems(passages[at].title);
        // (distance to the cue, the name)
        let mut best: Option<(usize, String)> = None;
        for s in sentences(passages[at].text) {
            let ws = word_spans(s);
            let stems_at: Vec<String> = ws.iter().map(|w| stem(&normalize(w.raw))).collect();
            // not the passage's own subject ("Raghnall's father, Ruaidhri Mac Ruaidhri": a
            // relative may share the subject's names)
            let names: Vec<Span> = spans(s)
                .into_iter()
                .filter(|x| x.kind == SpanKind::Name)
                .filter(|sp| {
                    let t = &s[sp.start..sp.end];
                    let own = norm_stems(t);
                    passage_of(passages, t, &[]) != Some(at) && !(own.len() == 1 && own.iter().all(|w| subject.contains(w)))
                })
                .collect();
            let usable = |sp: &Span| last || passage_of(passages, &s[sp.start..sp.end], &seen).is_some();
            for (c, w) in stems_at.iter().enumerate() {
                let mut pick: Option<(usize, &Span)> = None;
                if direct.contains(&w.as_str()) {
                    // "his father, A" / "A, his father": the nearest name
                    pick = names.iter().filter(|sp| usable(sp)).map(|sp| (if c < sp.words.0 { sp.words.0 - c } else { c.saturating_sub(sp.words.1 - 1) }, sp)).min_by_key(|(d, _)| *d);
                } else if of_pair.contains(&w.as_str()) && stems_at.get(c + 1).is_some_and(|x| x == "of") {
                    // "son of A and B": A the father, B the mother
                    let after: Vec<&Span> = names.iter().filter(|sp| sp.words.0 > c).collect();
                    let i = if *rel == "mother" { 1 } else { 0 };
                    pick = after.get(i).filter(|sp| usable(sp) && sp.words.0 - c <= 8).map(|sp| (sp.words.0 - c, *sp));
                }
                if let Some((d, sp)) = pick {
                    if d <= 6 && best.as_ref().is_none_or(|b| d < b.0) {
                        best = Some((d, s[sp.start..sp.end].to_string()));
                    }
                }
            }
        }
        let (_, name) = best?;
        if last {
            cites.dedup();
            return Some(Extracted { text: name, cites });
        }
        at = passage_of(passages, &name, &seen)?;
        seen.push(at);
        cites.push(at);
    }
    None
}

/// The passage that speaks for `thing` in the question: its own, or, when the question links
/// it to something else ("the director of A"), the passage of what its own passage names
/// beside the linking words.
fn subject_passage(thing: &str, passages: &[Passage], relation: &HashSet<String>, avoid: &[usize]) -> Option<(usize, Vec<usize>)> {
    let own = passage_of(passages, thing, avoid)?;
    let bridge: HashSet<String> = relation.iter().filter(|r| !DATE_WORDS.contains(&r.as_str()) && !own_title_has(passages[own].title, r)).cloned().collect();
    if bridge.is_empty() {
        return Some((own, vec![own]));
    }
    let names = norm_stems(thing);
    if let Some(s) = best_sentence(passages, &[own], &bridge, &names, &names, &Want::Name) {
        if s.missing < bridge.len() {
            if let Some(sp) = s.span {
                let mut skip = avoid.to_vec();
                skip.push(own);
                if let Some(next) = passage_of(passages, &s.sentence[sp.start..sp.end], &skip) {
                    return Some((next, vec![own, next]));
                }
            }
        }
    }
    Some((own, vec![own]))
}

fn own_title_has(title: &str, stem_: &str) -> bool {
    norm_stems(title).contains(stem_)
}

/// The date a passage gives for the question: of death when it asks about death, else the
/// first (birth, release, founding).
fn date_in(p: &Passage, relation: &HashSet<String>) -> Option<(i32, u32, u32)> {
    let death = relation.contains("died");
    for s in sentences(p.text) {
        let dates: Vec<Span> = spans(s).into_iter().filter(|x| x.kind == SpanKind::Date).collect();
        if dates.is_empty() {
            continue;
        }
        let pick = if death {
            let ws = word_spans(s);
            let after_died = dates.iter().find(|d| d.words.0 > 0 && ws[..d.words.0].iter().rev().take(3).any(|w| stem(&normalize(w.raw)) == "died"));
            match after_died.or(if dates.len() >= 2 { dates.get(1) } else { None }) {
                Some(d) => d,
                None => continue,
            }
        } else {
            &dates[0]
        };
        return date_key(&s[pick.start..pick.end]);
    }
    None
}

/// "Which ..., A or B?": the alternative whose date comes first or last.
fn choose(question: &str, alts: &[String], passages: &[Passage], relation: &HashSet<String>) -> Option<Extracted> {
    let q = norm_stems(question);
    if q.contains("lived") || q.contains("live") {
        return lifespans(&q, alts, passages, relation);
    }
    let early = EARLY.iter().any(|w| q.contains(*w));
    let late = LATE.iter().any(|w| q.contains(*w));
    if early == late {
        return None;
    }
    let mut dated = Vec::new();
    let mut cites = Vec::new();
    let mut used = Vec::new();
    for a in alts {
        let (p, via) = subject_passage(a, passages, relation, &used)?;
        used.push(via[0]);
        let d = date_in(&passages[p], relation)?;
        dated.push((d, a));
        cites.extend(via);
    }
    let pick = if early { dated.iter().min_by_key(|(d, _)| *d) } else { dated.iter().max_by_key(|(d, _)| *d) }?;
    cites.dedup();
    Some(Extracted { text: pick.1.clone(), cites })
}

/// "Who lived longer, A or B?": the alternative with the longer (or shorter) life by the
/// "(birth – death)" dates of their passages.
fn lifespans(q: &HashSet<String>, alts: &[String], passages: &[Passage], relation: &HashSet<String>) -> Option<Extracted> {
    let longer = q.contains("longe");
    if !longer && !q.contains("short") {
        return None;
    }
    let mut lives = Vec::new();
    let mut cites = Vec::new();
    let mut used = Vec::new();
    for a in alts {
        let (p, via) = subject_passage(a, passages, relation, &used)?;
        used.push(via[0]);
        // "(birth – death)", else the first and the last date of the first sentence that has two
        let (b, d) = sentences(passages[p].text).into_iter().find_map(|s| {
            let (b, d) = life_dates(s).or_else(|| {
                let dates: Vec<Span> = spans(s).into_iter().filter(|x| x.kind == SpanKind::Date).collect();
                (dates.len() >= 2).then(|| (dates[0].clone(), dates[dates.len() - 1].clone()))
            })?;
            Some((date_key(&s[b.start..b.end])?, date_key(&s[d.start..d.end])?))
        })?;
        let days = |(y, m, dd): (i32, u32, u32)| y as i64 * 372 + m as i64 * 31 + dd as i64;
        lives.push((days(d) - days(b), a));
        cites.extend(via);
    }
    let pick = if longer { lives.iter().max_by_key(|(l, _)| *l) } else { lives.iter().min_by_key(|(l, _)| *l) }?;
    Some(Extracted { text: pick.1.clone(), cites })
}

/// The names that open a passage, less its own title's words.
fn descriptors(p: &Passage) -> HashSet<String> {
    let title = norm_stems(p.title);
    let first = sentences(p.text).into_iter().next().unwrap_or("");
    let mut out = HashSet::new();
    for sp in spans(first) {
        if sp.kind != SpanKind::Name {
            continue;
        }
        for w in norm_stems(&first[sp.start..sp.end]) {
            if !title.contains(&w) {
                out.insert(w);
            }
        }
    }
    out
}

/// The two things an "A and B" of the question names: the longest words before and after
/// the "and" that are retrieved passages' subjects ("Are Christopher Newton (Criminal) and
/// Frances M. Vega of the same nationality?").
fn around_and(question: &str, passages: &[Passage]) -> Option<(String, String)> {
    let lower = question.to_lowercase();
    for (i, _) in lower.match_indices(" and ") {
        let (left, right) = (&question[..i], &question[i + " and ".len()..]);
        let a = word_spans(left).iter().map(|w| left[w.start..].trim()).find(|t| passage_of(passages, t, &[]).is_some());
        let ends: Vec<usize> = word_spans(right).iter().map(|w| if right[w.end..].starts_with(')') { w.end + 1 } else { w.end }).collect();
        let b = ends.iter().rev().map(|&e| right[..e].trim()).find(|t| passage_of(passages, t, &[]).is_some());
        if let (Some(a), Some(b)) = (a, b) {
            return Some((a.to_string(), b.to_string()));
        }
    }
    None
}

/// "Are both A and B ... the same ...?": yes when the names that open their passages meet.
fn same(question: &str, passages: &[Passage], relation: &HashSet<String>) -> Option<Extracted> {
    let things: Vec<String> = match alternatives(question) {
        Some(a) if a.len() == 2 && a.iter().all(|t| passage_of(passages, t, &[]).is_some()) => a,
        _ => {
            let (a, b) = around_and(question, passages)?;
            vec![a, b]
        }
    };
    let mut sets = Vec::new();
    let mut cites = Vec::new();
    let mut used = Vec::new();
    for t in &things {
        let (p, via) = subject_passage(t, passages, relation, &used)?;
        used.push(via[0]);
        sets.push(descriptors(&passages[p]));
        cites.extend(via);
    }
    let yes = sets[0].intersection(&sets[1]).next().is_some();
    Some(Extracted { text: if yes { "yes".into() } else { "no".into() }, cites })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ps() -> Vec<Passage<'static>> {
        vec![
            Passage { title: "Aylwin (film)", text: "Aylwin is a 1920 British silent drama film directed by Henry Edwards and starring Chrissie White. It was based on a novel." },
            Passage { title: "Henry Edwards", text: "Henry Edwards (18 September 1882 – 2 November 1952) was an English actor and film director. He was born in Weston-super-Mare, Somerset. He married Chrissie White." },
            Passage { title: "Hot Saturday", text: "Hot Saturday is a 1932 American drama film directed by William A. Seiter." },
            Passage { title: "Donne con le gonne", text: "Donne con le gonne is a 1991 Italian comedy film directed by Francesco Nuti." },
        ]
    }

    fn ask(q: &str) -> Option<Extracted> {
        extract(q, &ps())
    }

    #[test]
    fn a_question_that_asks_two_things_gets_both() {
        let ps = [
            Passage { title: "Ada Lovelace", text: "Ada Lovelace was an English mathematician born in London on 10 December 1815. She worked with Charles Babbage on the Analytical Engine. She was the daughter of Lord Byron." },
            Passage { title: "Lord Byron", text: "Lord Byron was an English poet born in London in 1788. He wrote Don Juan. He died in Missolonghi in 1824 during the Greek War of Independence." },
            Passage { title: "Lech Wałęsa", text: "Lech Wałęsa led the Solidarity movement in Gdańsk. He won the Nobel Peace Prize in 1983." },
        ];
        let a = extract("Who was the father of Ada Lovelace and where did he die?", &ps).unwrap();
        assert_eq!(a, Extracted { text: "Lord Byron; Missolonghi".into(), cites: vec![0, 1] });
        assert_eq!(extract("Who was the father of Ada Lovelace?", &ps).unwrap().text, "Lord Byron", "\"daughter of\" answers \"father of\"");
        // "which movement": the movement's name, then the place
        let a = extract("Which movement did the winner of the 1983 Nobel Peace Prize lead, and where did it begin?", &ps).unwrap();
        assert_eq!(a.text, "Solidarity; Gdańsk", "{a:?}");
        assert_eq!(a.cites, vec![2]);
        // an answer that holds the other's is given alone
        let sentence = Extracted { text: "Lech Wałęsa led the Solidarity movement in Gdańsk.".into(), cites: vec![2] };
        assert_eq!(joined(sentence.clone(), Extracted { text: "Gdańsk".into(), cites: vec![2] }), sentence);
        // "and" inside one question is no second question
        assert_eq!(compound("Who was born first, Ada Lovelace and Lord Byron?"), None);
        assert_eq!(compound("Are both Ada Lovelace and Lord Byron English?"), None);
        assert_eq!(compound("Which film came out first, Peppers And How They Grew or Mary?"), None, "a title's words");
        // the nationality of the father is not the father
        assert_ne!(extract("What nationality is Ada Lovelace's father?", &ps).map(|a| a.text), Some("Lord Byron".to_string()));
        assert_eq!(compound("Who was the father of Ada Lovelace and where did he die?"), Some(("Who was the father of Ada Lovelace", "where did he die?")));
    }

    #[test]
    fn a_date_question_gets_the_date_span() {
        assert_eq!(ask("When was Henry Edwards born?").unwrap(), Extracted { text: "18 September 1882".into(), cites: vec![1] });
    }

    #[test]
    fn a_two_hop_question_follows_the_name_to_its_passage() {
        let a = ask("Where was the director of film Aylwin (Film) born?").unwrap();
        assert_eq!(a.text, "Weston-super-Mare");
        assert_eq!(a.cites, vec![0, 1]);
        assert_eq!(ask("Who is the director of film Aylwin?").unwrap().text, "Henry Edwards");
    }

    #[test]
    fn the_first_hop_is_the_relation_the_name_hangs_on() {
        let ps = [
            Passage { title: "Marie Curie", text: "Marie Curie was a physicist born in Warsaw in 1867." },
            Passage { title: "Pierre Curie", text: "Pierre Curie was a French physicist born in Paris in 1859. He married Marie Curie in 1895." },
            Passage { title: "Warsaw", text: "Warsaw is the capital of Poland. The city lies on the Vistula river." },
        ];
        assert_eq!(extract("In which city was the husband of Marie Curie born?", &ps).unwrap(), Extracted { text: "Paris".into(), cites: vec![0, 1] });
        assert_eq!(extract("Where was Marie Curie's husband born?", &ps).unwrap().text, "Paris");
        assert_eq!(extract("Where was Marie Curie born?", &ps).unwrap().text, "Warsaw");
    }

    #[test]
    fn kinship_terms_walk_two_relations() {
        let ps = [
            Passage { title: "Raghnall mac Ruaidhri", text: "Raghnall mac Ruaidhri was a Scottish magnate. He was the son of Ruaidhri mac Ailein." },
            Passage { title: "Ruaidhri mac Ailein", text: "Ruaidhri mac Ailein was a Hebridean lord, the son of Ailean mac Ruaidhri and Mor of Lorn." },
        ];
        assert_eq!(extract("Who is Raghnall Mac Ruaidhri's paternal grandfather?", &ps).unwrap(), Extracted { text: "Ailean mac Ruaidhri".into(), cites: vec![0, 1] });
        assert_eq!(extract("Who is the paternal grandmother of Raghnall Mac Ruaidhri?", &ps).unwrap().text, "Mor of Lorn");
    }

    #[test]
    fn a_choice_compares_the_alternatives_dates() {
        let a = ask("Which film was released earlier, Donne Con Le Gonne or Hot Saturday?").unwrap();
        assert_eq!(a.text, "Hot Saturday");
        let a = ask("Which film came out later, Donne Con Le Gonne or Hot Saturday?").unwrap();
        assert_eq!(a.text, "Donne Con Le Gonne");
    }

    #[test]
    fn who_lived_longer_compares_the_lives_dates() {
        let ps = [
            Passage { title: "Ann B", text: "Ann B (1 May 1900 – 2 June 1950) was a painter." },
            Passage { title: "Carl D", text: "Carl D (3 March 1910 – 1 January 1990) was a poet." },
        ];
        assert_eq!(extract("Who lived longer, Ann B or Carl D?", &ps).unwrap().text, "Carl D");
        assert_eq!(extract("Was Ann B or Carl D born first?", &ps).unwrap().text, "Ann B");
        let ps = [
            Passage { title: "Ann B", text: "Ann B (born November 8, 1913 in Salz, Germany – d. March 28, 2003) was an inventor." },
            Passage { title: "Carl D", text: "Carl D (January 16, 1941 – September 21, 2011) was a judge." },
        ];
        assert_eq!(extract("Who lived longer, Ann B or Carl D?", &ps).unwrap().text, "Ann B");
    }

    #[test]
    fn same_country_questions_compare_what_opens_each_passage() {
        assert_eq!(ask("Are Hot Saturday and Donne Con Le Gonne from the same country?").unwrap().text, "no");
        let ps = [
            Passage { title: "Christopher Newton (criminal)", text: "Christopher Newton was an American murderer." },
            Passage { title: "Frances M. Vega", text: "Frances M. Vega is an American politician." },
        ];
        assert_eq!(extract("Are Christopher Newton (Criminal) and Frances M. Vega of the same nationality?", &ps).unwrap().text, "yes");
    }

    #[test]
    fn text_without_titles_or_capitals_still_answers() {
        let ps = [
            Passage { title: "p0", text: "hot saturday is a 1932 american drama film directed by william a. seiter." },
            Passage { title: "p1", text: "donne con le gonne is a 1991 italian comedy film directed by francesco nuti." },
        ];
        assert_eq!(extract("which film came out first, donne con le gonne or hot saturday?", &ps).unwrap().text, "hot saturday");
        let x = extract("who directed donne con le gonne?", &ps).unwrap();
        assert_eq!(x.text, "donne con le gonne is a 1991 italian comedy film directed by francesco nuti.", "the sentence, for want of a name");
        assert_eq!(extract("when was hot saturday released?", &ps).unwrap().text, "1932");
    }

    #[test]
    fn no_words_in_common_means_no_answer() {
        assert_eq!(ask("Zzyzx qwerty?"), None);
    }
}

#[cfg(test)]
mod debug_local {
    /// Local debugging only: STREAMRAG_DBG=file.json with [{q, index, passages: [[title, text]]}].
    #[test]
    #[ignore]
    fn debug_from_file() {
        let path = std::env::var("STREAMRAG_DBG").unwrap();
        let want: Vec<usize> = std::env::var("STREAMRAG_DBG_Q").unwrap_or_default().split(',').filter_map(|x| x.parse().ok()).collect();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for q in v.as_array().unwrap() {
            let i = q["index"].as_u64().unwrap() as usize;
            if !want.is_empty() && !want.contains(&i) {
                continue;
            }
            let ps: Vec<(String, String)> = q["passages"].as_array().unwrap().iter().map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string())).collect();
            let passages: Vec<super::Passage> = ps.iter().map(|(t, x)| super::Passage { title: t, text: x }).collect();
            let question = q["q"].as_str().unwrap();
            eprintln!("{i} {question}\n  want {:?}\n  -> {:?}", super::super::text::want(question), super::extract(question, &passages));
        }
    }
}
