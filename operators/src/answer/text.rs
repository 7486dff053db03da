//! Reading passages for answers: sentences, words with their places, and the spans an answer
//! can be (dates, numbers, names). Plain English rules, no model: what the extractive answerer
//! and the support checks read.

use crate::normalize::normalize;

/// English function words and question words: never what a question is about.
pub const STOP: &[&str] = &[
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "into", "about", "as", "and", "or",
    "but", "nor", "if", "than", "then", "so", "is", "was", "are", "were", "be", "been", "being", "am", "do", "does",
    "did", "has", "have", "had", "having", "can", "could", "will", "would", "shall", "should", "may", "might",
    "must", "who", "whom", "whose", "what", "which", "when", "where", "why", "how", "that", "this", "these",
    "those", "it", "its", "he", "she", "him", "her", "his", "hers", "they", "them", "their", "theirs", "we", "us",
    "our", "you", "your", "i", "me", "my", "there", "here", "not", "no", "yes", "any", "some", "all", "both",
    "either", "neither", "each", "other", "another", "same", "one", "ones", "s", "also", "only", "just", "very",
    "more", "most", "less", "least", "much", "many", "up", "out", "over", "under", "after", "before", "between",
    "during", "while", "until", "since", "again", "such", "own", "whether", "name", "named", "called", "known",
];

/// Words that open a yes-or-no question.
const YES_NO_OPENERS: &[&str] = &[
    "is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would", "should",
];

const MONTHS: &[&str] = &[
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
];

/// Lower-case words that may sit inside a name ("House of Commons", "Ludwig van Beethoven").
const NAME_JOINERS: &[&str] = &[
    "of", "the", "de", "da", "del", "della", "di", "du", "van", "von", "der", "den", "la", "le", "y", "bin", "ibn",
    "al", "upon", "super", "sur", "mac", "ap", "ben", "bint", "zu", "af",
];

/// Short words that end with a full stop without ending a sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "col", "lt", "sgt", "capt", "rev", "hon", "no", "vs",
    "etc", "inc", "ltd", "co", "corp", "mt", "ft", "approx", "c", "ca", "b", "d", "fl", "u.s", "u.k", "op",
];

pub fn is_stop(w: &str) -> bool {
    STOP.contains(&w)
}

/// The normalised words of `s` that are not [`STOP`] words.
pub fn content_words(s: &str) -> Vec<String> {
    normalize(&no_possessive(s)).split(' ').filter(|w| !w.is_empty() && !is_stop(w)).map(str::to_string).collect()
}

/// `s` without the possessive endings "'s" and "s'" ("Lothair II's mother" -> "Lothair II
/// mother"), which [`normalize`] would otherwise glue to the name ("iis").
pub fn no_possessive(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        let apostrophe = c == '\'' || c == '\u{2019}';
        let word_end = |k: usize| cs.get(k).is_none_or(|n| !n.is_alphanumeric());
        if apostrophe && i > 0 && cs[i - 1].is_alphanumeric() {
            if cs.get(i + 1).is_some_and(|n| *n == 's' || *n == 'S') && word_end(i + 2) {
                i += 2;
                continue;
            }
            if (cs[i - 1] == 's' || cs[i - 1] == 'S') && word_end(i + 1) {
                i += 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A crude stem that lets "director" meet "directed" and "born" meet "birth": irregular
/// forms mapped by hand, the rest cut to their first five letters.
pub fn stem(w: &str) -> String {
    let w = match w {
        "born" | "birth" | "births" | "birthplace" | "birthday" => "born",
        "died" | "dies" | "die" | "death" | "deaths" | "dead" => "died",
        "buried" | "burial" | "bury" | "interred" => "buried",
        "married" | "marry" | "marries" | "spouse" | "spouses" | "wife" | "husband" | "wed" | "wedded" => "married",
        "studied" | "study" | "studies" | "educated" | "education" | "attended" | "graduated" | "alumnus" => "studied",
        "older" | "oldest" | "elder" | "eldest" => "old",
        "child" | "children" | "son" | "sons" | "daughter" | "daughters" => "child",
        "parent" | "parents" => "paren",
        "performer" | "performed" | "performs" | "singer" | "sung" | "sang" | "recorded" => "perfo",
        "younger" | "youngest" => "young",
        "earlier" | "earliest" | "first" => "early",
        "later" | "latest" | "last" => "late",
        other => other,
    };
    w.chars().take(5).collect()
}

/// A word of a text with its place: `start..end` are byte offsets of `raw`, the word stripped
/// of the punctuation around it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Word<'a> {
    pub start: usize,
    pub end: usize,
    pub raw: &'a str,
    /// Punctuation right after the word (",", ".", ")" ...): names and dates stop there.
    pub stops_after: bool,
}

/// The words of `text`, each stripped of surrounding punctuation (inner apostrophes, hyphens
/// and full stops stay: "O'Brien", "Weston-super-Mare", "U.S").
pub fn word_spans(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    let b = text.as_bytes();
    while i < text.len() {
        while i < text.len() && (b[i] as char).is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < text.len() && !(b[i] as char).is_ascii_whitespace() {
            i += 1;
        }
        if start == i {
            break;
        }
        let chunk = &text[start..i];
        let lead = chunk.len() - chunk.trim_start_matches(|c: char| !c.is_alphanumeric()).len();
        let core = chunk.trim_start_matches(|c: char| !c.is_alphanumeric()).trim_end_matches(|c: char| !c.is_alphanumeric());
        if core.is_empty() {
            if let Some(last) = out.last_mut() {
                let w: &mut Word = last;
                w.stops_after = true;
            }
            continue;
        }
        let s = start + lead;
        let tail = &chunk[lead + core.len()..];
        // an initial's full stop does not end a name ("Robert A. Stemmle")
        let initial = tail == "." && ((core.chars().count() == 1 && core.chars().all(char::is_uppercase)) || ["st", "mt", "ft", "jr", "sr", "dr"].contains(&core.to_lowercase().as_str()));
        out.push(Word { start: s, end: s + core.len(), raw: core, stops_after: !tail.is_empty() && !initial });
    }
    out
}

/// The sentences of a passage: split after ".", "!" or "?" followed by a space and a capital
/// letter or digit, except after an abbreviation or an initial ("J. R. R. Tolkien").
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for k in 0..chars.len() {
        let (i, c) = chars[k];
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let next_is_space = chars.get(k + 1).is_some_and(|(_, n)| n.is_whitespace());
        let after = chars[k + 1..].iter().map(|(_, n)| *n).find(|n| !n.is_whitespace());
        if !next_is_space || !after.is_some_and(|n| n.is_uppercase() || n.is_ascii_digit() || n == '"' || n == '(') {
            continue;
        }
        if c == '.' {
            let before = &text[start..i];
            let last = before.rsplit(|ch: char| ch.is_whitespace() || ch == '(').next().unwrap_or("");
            let lw = last.trim_start_matches(|ch: char| !ch.is_alphanumeric()).to_lowercase();
            if ABBREVIATIONS.contains(&lw.as_str()) || (lw.chars().count() == 1 && lw.chars().all(char::is_alphabetic)) {
                continue;
            }
        }
        let s = text[start..=i].trim();
        if !s.is_empty() {
            out.push(s);
        }
        start = i + 1;
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

/// What a question asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    /// A date or a year ("when", "what year", "date of").
    Date,
    /// A place ("where", "place of", "which city").
    Place,
    /// A person or a named thing ("who", "whose").
    Name,
    /// A count or amount ("how many").
    Number,
    /// One of the alternatives the question lists ("..., A or B?").
    Choice(Vec<String>),
    /// Yes or no.
    YesNo,
    /// Anything: the best sentence's best span, else the sentence.
    Any,
}

/// The alternatives of a question that lists them after its last comma or colon, or after
/// "between": "Who was born first, Ada Lovelace or Charles Babbage?"; else two names joined
/// by "or" ("Was A or B born first?"), or by "and" in a comparison ("Who was born first out
/// of A and B?").
pub fn alternatives(question: &str) -> Option<Vec<String>> {
    let q = question.trim().trim_end_matches(['?', '.', '!', ' ']);
    let lower = q.to_lowercase();
    // after "between", else after the first comma or colon whose tail lists alternatives (a
    // name may hold a comma: "Which came first, Love, Honor And Oh-Baby! or X?")
    let tail = if let Some(i) = lower.rfind(" between ") {
        Some(&q[i + " between ".len()..])
    } else if let Some(i) = lower.rfind(" out of ") {
        Some(&q[i + " out of ".len()..])
    } else {
        q.match_indices([',', ':']).map(|(i, _)| &q[i + 1..]).find(|t| t.to_lowercase().contains(" or ")).or_else(|| q.rfind([',', ':']).map(|i| &q[i + 1..]))
    };
    if let Some(tail) = tail {
        let parts: Vec<String> = split_or(tail).into_iter().map(|p| p.trim().trim_matches(|c: char| c == '"' || c == '\'').trim().to_string()).filter(|p| !p.is_empty()).collect();
        if parts.len() >= 2 {
            return Some(parts);
        }
    }
    let names: Vec<Span> = spans(q).into_iter().filter(|s| s.kind == SpanKind::Name).collect();
    let compares = normalize(q).split(' ').map(stem).any(|w| ["early", "late", "old", "young", "befor", "after", "lived", "live"].contains(&w.as_str()));
    names.windows(2).find_map(|w| {
        let between = q[w[0].end..w[1].start].to_lowercase();
        let between = between.trim();
        (between == "or" || (between == "and" && compares)).then(|| vec![q[w[0].start..w[0].end].to_string(), q[w[1].start..w[1].end].to_string()])
    })
}

/// `s` split at " or " (at " and " when it has no " or "), any case.
fn split_or(s: &str) -> Vec<&str> {
    let lower = s.to_lowercase();
    let sep = if lower.contains(" or ") { " or " } else { " and " };
    let mut out = Vec::new();
    let mut at = 0;
    for (i, _) in lower.match_indices(sep) {
        out.push(&s[at..i]);
        at = i + sep.len();
    }
    out.push(&s[at..]);
    out
}

/// What the question asks for, read from its opening words.
pub fn want(question: &str) -> Want {
    let n = normalize(question);
    let ws: Vec<&str> = n.split(' ').collect();
    let first = ws.first().copied().unwrap_or("");
    let has = |w: &str| ws.contains(&w);
    let has_seq = |a: &str, b: &str| ws.windows(2).any(|p| p[0] == a && p[1] == b);
    let same = has("same") || has("both");
    if (question.contains(" or ") || (question.contains(" and ") && !same && !YES_NO_OPENERS.contains(&first))) && !(YES_NO_OPENERS.contains(&first) && same) {
        if let Some(alts) = alternatives(question) {
            return Want::Choice(alts);
        }
    }
    if YES_NO_OPENERS.contains(&first) {
        return Want::YesNo;
    }
    if first == "when" || has_seq("what", "year") || has_seq("which", "year") || has_seq("what", "date") || has_seq("date", "of") || (has("year") && (first == "in" || first == "what")) {
        return Want::Date;
    }
    if has_seq("how", "many") || has_seq("how", "much") || has_seq("how", "old") || has_seq("how", "long") {
        return Want::Number;
    }
    if has("nationality") || has("citizenship") {
        return Want::Name;
    }
    if first == "where" || has_seq("place", "of") || ["city", "country", "town", "state", "place", "location"].iter().any(|w| has_seq("which", w) || has_seq("what", w)) || has("where") {
        return Want::Place;
    }
    if first == "who" || first == "whom" || first == "whose" || has("who") {
        return Want::Name;
    }
    Want::Any
}

/// A date in the words from `i`: "12 May 1820", "May 12, 1820", "May 1820", "1820"; returns
/// the index after it.
fn date_at(ws: &[Word], i: usize) -> Option<usize> {
    let low = |k: usize| ws.get(k).map(|w| w.raw.to_lowercase());
    let is_day = |k: usize| ws.get(k).is_some_and(|w| w.raw.len() <= 2 && w.raw.chars().all(|c| c.is_ascii_digit()) && w.raw.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d)));
    let is_year = |k: usize| ws.get(k).is_some_and(|w| is_year_word(w.raw));
    // a month counts beside a day or a year only (below), so "may" in lower-case text is safe
    let is_month = |k: usize| low(k).is_some_and(|m| MONTHS.contains(&m.as_str()));
    if is_day(i) && is_month(i + 1) && !ws[i].stops_after {
        return Some(if is_year(i + 2) && !ws[i + 1].stops_after { i + 3 } else { i + 2 });
    }
    if is_month(i) {
        if is_day(i + 1) && is_year(i + 2) {
            return Some(i + 3);
        }
        if is_year(i + 1) && !ws[i].stops_after {
            return Some(i + 2);
        }
    }
    if is_year(i) {
        return Some(i + 1);
    }
    None
}

fn is_year_word(w: &str) -> bool {
    let digits = w.trim_end_matches('s');
    (digits.len() == 4 || digits.len() == 3) && digits.chars().all(|c| c.is_ascii_digit()) && digits.parse::<u32>().is_ok_and(|y| (100..=2100).contains(&y))
}

/// The year of a date span (for comparisons), with month and day when given.
pub fn date_key(span: &str) -> Option<(i32, u32, u32)> {
    let ws = word_spans(span);
    let year = ws.iter().find(|w| is_year_word(w.raw))?.raw.trim_end_matches('s').parse::<i32>().ok()?;
    let month = ws
        .iter()
        .find_map(|w| MONTHS.iter().position(|m| *m == w.raw.to_lowercase()))
        .map(|p| if p < 12 { p as u32 + 1 } else { [1, 2, 3, 4, 6, 7, 8, 9, 9, 10, 11, 12][p - 12] })
        .unwrap_or(0);
    let day = ws.iter().find(|w| w.raw.len() <= 2 && w.raw.chars().all(|c| c.is_ascii_digit())).and_then(|w| w.raw.parse().ok()).unwrap_or(0);
    Some((year, month, day))
}

/// A span of a sentence an answer can be.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Byte offsets in the sentence.
    pub start: usize,
    pub end: usize,
    /// Index of its first and one past its last word.
    pub words: (usize, usize),
    pub kind: SpanKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Date,
    Number,
    Name,
}

/// The dates, numbers and capitalised names of a sentence, in order. A name is a run of
/// capitalised words (with joiners such as "of" or "von" inside), not opened by a capitalised
/// function word ("The", "He"), that stops at punctuation.
pub fn spans(sentence: &str) -> Vec<Span> {
    let ws = word_spans(sentence);
    let mut out = Vec::new();
    let mut i = 0;
    let cap = |w: &Word| w.raw.chars().next().is_some_and(char::is_uppercase);
    while i < ws.len() {
        if let Some(e) = date_at(&ws, i) {
            out.push(Span { start: ws[i].start, end: ws[e - 1].end, words: (i, e), kind: SpanKind::Date });
            i = e;
            continue;
        }
        if ws[i].raw.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '.') && ws[i].raw.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            out.push(Span { start: ws[i].start, end: ws[i].end, words: (i, i + 1), kind: SpanKind::Number });
            i += 1;
            continue;
        }
        if cap(&ws[i]) && !is_stop(&ws[i].raw.to_lowercase()) && !MONTHS.contains(&ws[i].raw.to_lowercase().as_str()) {
            let mut e = i + 1;
            let mut last_cap = i;
            if !ws[i].stops_after {
                while e < ws.len() {
                    let w = &ws[e];
                    if cap(w) && date_at(&ws, e).is_none() {
                        last_cap = e;
                    } else if !NAME_JOINERS.contains(&w.raw.to_lowercase().as_str()) {
                        break;
                    }
                    e += 1;
                    if w.stops_after {
                        break;
                    }
                }
            }
            let e = last_cap + 1;
            out.push(Span { start: ws[i].start, end: ws[e - 1].end, words: (i, e), kind: SpanKind::Name });
            i = e;
            continue;
        }
        i += 1;
    }
    out
}

/// True when the question is a yes-or-no question that compares two things ("Are both ... from
/// the same country?").
pub fn asks_same(question: &str) -> bool {
    let n = normalize(question);
    n.split(' ').any(|w| w == "same" || w == "both")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_at_full_stops_but_not_after_initials_or_abbreviations() {
        let s = sentences("J. R. R. Tolkien was born in 1892. He wrote books. Dr. Smith met him in St. Louis. The end");
        assert_eq!(s, vec!["J. R. R. Tolkien was born in 1892.", "He wrote books.", "Dr. Smith met him in St. Louis.", "The end"]);
    }

    #[test]
    fn spans_find_dates_numbers_and_names() {
        let s = "Henry Edwards (18 September 1882 – 2 November 1952) was born in Weston-super-Mare, Somerset and made 30 films with the Duke of York.";
        let got: Vec<(&str, SpanKind)> = spans(s).iter().map(|x| (&s[x.start..x.end], x.kind)).collect();
        assert_eq!(
            got,
            vec![
                ("Henry Edwards", SpanKind::Name),
                ("18 September 1882", SpanKind::Date),
                ("2 November 1952", SpanKind::Date),
                ("Weston-super-Mare", SpanKind::Name),
                ("Somerset", SpanKind::Name),
                ("30", SpanKind::Number),
                ("Duke of York", SpanKind::Name),
            ]
        );
        let s = "He was born in St. Louis, Missouri.";
        let got: Vec<&str> = spans(s).iter().map(|x| &s[x.start..x.end]).collect();
        assert_eq!(got, vec!["St. Louis", "Missouri"]);
        let s = "It was directed by Robert A. Stemmle.";
        let got: Vec<&str> = spans(s).iter().map(|x| &s[x.start..x.end]).collect();
        assert_eq!(got, vec!["Robert A. Stemmle"]);
        let s = "He died on May 5, 2002 in New York.";
        let got: Vec<&str> = spans(s).iter().map(|x| &s[x.start..x.end]).collect();
        assert_eq!(got, vec!["May 5, 2002", "New York"]);
    }

    #[test]
    fn questions_say_what_they_want() {
        assert_eq!(want("When did the composer of film X die?"), Want::Date);
        assert_eq!(want("What is the date of birth of X's mother?"), Want::Date);
        assert_eq!(want("Where was the director of film X born?"), Want::Place);
        assert_eq!(want("What is the place of birth of X?"), Want::Place);
        assert_eq!(want("Who is the spouse of the director of film X?"), Want::Name);
        assert_eq!(want("Are both X and Y from the same country?"), Want::YesNo);
        assert_eq!(want("Who was born later, Guy Tzarfati or Bruce Appleyard?"), Want::Choice(vec!["Guy Tzarfati".into(), "Bruce Appleyard".into()]));
        assert_eq!(want("Which film came out first, Stella's Favor or Across The Blue Sea?"), Want::Choice(vec!["Stella's Favor".into(), "Across The Blue Sea".into()]));
        assert_eq!(want("How many films did X make?"), Want::Number);
        assert_eq!(want("Which film has the director who died later, Love, Honor And Oh-Baby! or I Cover The Underworld?"), Want::Choice(vec!["Love, Honor And Oh-Baby!".into(), "I Cover The Underworld".into()]));
        assert_eq!(want("Was Angus Wagner or Juan Carlos Falcón born first?"), Want::Choice(vec!["Angus Wagner".into(), "Juan Carlos Falcón".into()]));
        assert_eq!(want("Who was born first out of Aivar Kuusmaa and Andy Summers?"), Want::Choice(vec!["Aivar Kuusmaa".into(), "Andy Summers".into()]));
        assert_eq!(want("who was born first out of aivar kuusmaa and andy summers?"), Want::Choice(vec!["aivar kuusmaa".into(), "andy summers".into()]));
        assert_eq!(want("Do both films Interview With A Hitman and The Last Coupon have the directors from the same country?"), Want::YesNo);
    }

    #[test]
    fn possessives_come_off_names() {
        assert_eq!(no_possessive("When did Lothair II's mother die?"), "When did Lothair II mother die?");
        assert_eq!(no_possessive("the Curies' daughter, O'Brien\u{2019}s house"), "the Curies daughter, O'Brien house");
        assert_eq!(content_words("Lothair Ii's mother"), vec!["lothair", "ii", "mother"]);
    }

    #[test]
    fn date_keys_order_dates() {
        assert!(date_key("2 June 1946") > date_key("5 September 1942"));
        assert!(date_key("May 5, 2002") < date_key("8 May 2002"));
        assert_eq!(date_key("1991"), Some((1991, 0, 0)));
        assert_eq!(date_key("no date"), None);
    }
}
