//! Whether the retrieved passages support a question at all, and whether they support an
//! answer an LLM wrote. Both read words, not scores: a retriever always ranks something, so
//! its scores say little about whether the graph knows what is asked.
//!
//! - A question with two words in a row that no passage of the corpus holds is not supported
//!   (a name the corpus never saw, capitalised or not).
//! - A question is supported when each thing it names (a run of capitalised words, or a
//!   number) is found in one retrieved passage: every word of a one- or two-word name, two
//!   thirds of a longer one, all in the same passage (title and text). A question that names
//!   nothing is supported when the passages together hold half its content words.
//! - An LLM's answer is supported when it is yes or no to a yes-or-no question, one of the
//!   question's alternatives, or when half its content words (all of them for one or two) are
//!   in the passages it was given.

use std::collections::HashSet;

use super::text::{content_words, is_stop, no_possessive, word_spans, Want};
use crate::normalize::normalize;

/// Question words that open a question with a capital letter without naming anything.
const OPENERS: &[&str] = &["who", "whom", "whose", "what", "which", "when", "where", "why", "how", "is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would", "should", "in", "on", "at", "for", "from", "name", "list", "tell", "give"];

/// The things a question names: runs of capitalised words (the opening question word and
/// capitalised function words left out) and numbers, each as its content words.
pub fn anchors(question: &str) -> Vec<Vec<String>> {
    let question = no_possessive(question);
    let ws = word_spans(&question);
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        if !run.is_empty() {
            out.push(std::mem::take(run));
        }
    };
    for (i, w) in ws.iter().enumerate() {
        let lower = normalize(w.raw);
        let capital = w.raw.chars().next().is_some_and(char::is_uppercase);
        let number = w.raw.chars().any(|c| c.is_ascii_digit());
        let opener = i == 0 && OPENERS.contains(&lower.as_str());
        if (capital || number) && !opener {
            for part in lower.split(' ').filter(|p| !p.is_empty() && !is_stop(p)) {
                run.push(part.to_string());
            }
            if w.stops_after {
                flush(&mut run, &mut out);
            }
        } else if !run.is_empty() && is_stop(&lower) && JOINERS.contains(&lower.as_str()) {
            // a joiner inside a name
        } else {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out.retain(|a| !a.is_empty());
    out
}

/// How many of a name's `n` words one passage must hold.
fn needed(n: usize) -> usize {
    if n <= 2 {
        n
    } else {
        (2 * n).div_ceil(3)
    }
}

/// The normalised words of a passage (its title and text).
pub fn passage_words(title: &str, text: &str) -> HashSet<String> {
    let mut s: HashSet<String> = normalize(&no_possessive(text)).split(' ').filter(|w| !w.is_empty()).map(str::to_string).collect();
    s.extend(normalize(&no_possessive(title)).split(' ').filter(|w| !w.is_empty()).map(str::to_string));
    s
}

/// Whether the passages (their word sets) support the question; when not, the first thing
/// it names that no passage holds (None when it names nothing and the words fell short).
pub fn question_supported(question: &str, passages: &[HashSet<String>], known: &dyn Fn(&str) -> bool) -> Result<(), Option<String>> {
    if passages.is_empty() {
        return Err(None);
    }
    // two words in a row that no passage of the whole corpus holds: a name it never saw
    // (what capitals cannot show in a question written in lower case)
    if let Some(w) = unknown_pair(question, known) {
        return Err(Some(w));
    }
    let anchors = anchors(question);
    if anchors.is_empty() {
        let words = content_words(question);
        if words.is_empty() {
            return Ok(());
        }
        // a question that names nothing may spread its words over several passages (a hop)
        let held = words.iter().filter(|w| passages.iter().any(|p| p.contains(*w))).count();
        return if 2 * held >= words.len() { Ok(()) } else { Err(None) };
    }
    for a in &anchors {
        let need = needed(a.len());
        if !passages.iter().any(|p| a.iter().filter(|w| p.contains(*w)).count() >= need) {
            return Err(Some(a.join(" ")));
        }
    }
    Ok(())
}

/// Two content words of the question side by side (nothing between them but a name's joiner,
/// "of", "von"; no punctuation), neither of which the corpus holds: a name it never saw. Words
/// apart in the question are not one name: a small corpus lacks many common words, and "...
/// lead, and where did it begin?" names nothing new.
fn unknown_pair(question: &str, known: &dyn Fn(&str) -> bool) -> Option<String> {
    let question = no_possessive(question);
    // (word, the question breaks after it: punctuation or a word that joins no name)
    let mut seq: Vec<(String, bool)> = Vec::new();
    for w in word_spans(&question) {
        let lower = normalize(w.raw);
        let parts: Vec<&str> = lower.split(' ').filter(|p| !p.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            if is_stop(part) {
                // a word that joins no name, or punctuation after a joiner, breaks the run
                if !JOINERS.contains(part) || (last && w.stops_after) {
                    if let Some(prev) = seq.last_mut() {
                        prev.1 = true;
                    }
                }
                continue;
            }
            seq.push((part.to_string(), last && w.stops_after));
        }
    }
    seq.windows(2).find(|p| !p[0].1 && !known(&p[0].0) && !known(&p[1].0)).map(|p| format!("{} {}", p[0].0, p[1].0))
}

/// Lower-case words inside a name ("Euphemia of Pomerania", "Ludwig van Beethoven").
const JOINERS: &[&str] = &["of", "the", "de", "von", "van", "da", "di", "la", "le", "del"];

/// Whether the passages support an answer an LLM wrote (see the module's rules).
pub fn answer_supported(answer: &str, question: &str, want: &Want, passages: &[HashSet<String>]) -> bool {
    let n = normalize(answer);
    if n.is_empty() {
        return false;
    }
    if matches!(want, Want::YesNo) && (n == "yes" || n == "no") {
        return true;
    }
    if let Want::Choice(alts) = want {
        if alts.iter().any(|a| normalize(a) == n) {
            return true;
        }
    }
    let words: Vec<&str> = n.split(' ').filter(|w| !w.is_empty() && !is_stop(w)).collect();
    if words.is_empty() {
        return false;
    }
    let qwords: HashSet<String> = content_words(question).into_iter().collect();
    // words the question itself gives do not count for the answer
    let own: Vec<&&str> = words.iter().filter(|w| !qwords.contains(**w)).collect();
    if own.is_empty() {
        return false;
    }
    let found = own.iter().filter(|w| passages.iter().any(|p| p.contains(***w))).count();
    if own.len() <= 2 {
        found == own.len()
    } else {
        2 * found >= own.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(title: &str, text: &str) -> HashSet<String> {
        passage_words(title, text)
    }

    #[test]
    fn anchors_are_the_names_and_numbers_a_question_gives() {
        assert_eq!(anchors("Who won the 2031 Mars chess championship?"), vec![vec!["2031".to_string(), "mars".into()]]);
        assert_eq!(anchors("Where was the director of film The Wanted 18 born?"), vec![vec!["wanted".to_string(), "18".into()]]);
        assert_eq!(
            anchors("Who was born later, Guy Tzarfati or Bruce Appleyard?"),
            vec![vec!["guy".to_string(), "tzarfati".into()], vec!["bruce".to_string(), "appleyard".into()]]
        );
        assert_eq!(anchors("what is the capital of france"), Vec::<Vec<String>>::new());
        assert_eq!(anchors("When was Euphemia of Pomerania born?"), vec![vec!["euphemia".to_string(), "pomerania".into()]]);
        assert_eq!(anchors("When did Lothair Ii's mother die?"), vec![vec!["lothair".to_string(), "ii".into()]]);
    }

    #[test]
    fn a_question_is_supported_only_when_one_passage_holds_what_it_names() {
        let ps = vec![p("Marie Curie", "Marie Curie married Pierre Curie in 1895."), p("Paris", "Paris is the capital of France.")];
        let corpus: HashSet<String> = ps.iter().flatten().cloned().chain(["husband", "city", "born", "won", "chess", "championship", "penguins", "eat"].map(String::from)).collect();
        let known = |w: &str| corpus.contains(w);
        let question_supported = |q: &str, ps: &[HashSet<String>]| question_supported(q, ps, &known);
        assert!(question_supported("In which city was the husband of Marie Curie born?", &ps).is_ok());
        assert_eq!(question_supported("Who won the 2031 Mars chess championship?", &ps), Err(Some("2031 mars".into())));
        // both words exist, never in one passage
        assert_eq!(question_supported("Where was Marie Paris born?", &ps), Err(Some("marie paris".into())));
        assert_eq!(question_supported("Where was Ada born?", &[]), Err(None));
        assert!(question_supported("what is the capital of france", &ps).is_ok());
        assert!(question_supported("what do penguins eat in winter", &ps).is_err());
        // the words of a question that names nothing may sit in two passages (one hop)
        assert!(question_supported("which city is the capital where the husband was married", &ps).is_ok());
        // in lower case, a name the corpus never saw
        assert_eq!(question_supported("where was the husband of zorvath quillen born", &ps), Err(Some("zorvath quillen".into())));
        assert!(question_supported("where was the husband of marie curie born", &ps).is_ok());
        // two words the corpus lacks, apart in the question: common words a small corpus has
        // not seen, not a name
        assert!(question_supported("Which city did Marie Curie leave, and where did she arrive?", &ps).is_ok());
        assert!(question_supported("where did marie curie leave and arrive in paris", &ps).is_ok());
        // side by side, or joined as a name's words are, they are one
        assert_eq!(question_supported("Which city did Marie Curie leave for Zorvath of Quillen?", &ps), Err(Some("zorvath quillen".into())));
    }

    #[test]
    fn an_llm_answer_must_come_from_the_passages() {
        let ps = vec![p("Pierre Curie", "Pierre Curie was born in Paris on 15 May 1859.")];
        let q = "Where was the husband of Marie Curie born?";
        assert!(answer_supported("Paris", q, &Want::Place, &ps));
        assert!(answer_supported("15 May 1859", "When was Pierre Curie born?", &Want::Date, &ps));
        assert!(!answer_supported("Michael Phelps", q, &Want::Place, &ps));
        assert!(!answer_supported("Marie Curie", q, &Want::Place, &ps), "the question's own words are no answer");
        assert!(answer_supported("no", "Were both born in Paris?", &Want::YesNo, &ps));
        assert!(!answer_supported("no", q, &Want::Place, &ps));
        assert!(answer_supported("Zed Q", "Who is older, Zed Q or Ann B?", &Want::Choice(vec!["Zed Q".into(), "Ann B".into()]), &ps));
    }
}
