//! Name normalisation: the canonical form behind entity ids and question-to-entity matching.

/// Lower-cases, turns punctuation into spaces (keeping letters and digits of every script),
/// and collapses whitespace. `"  Ada   LOVELACE, (1815)"` -> `"ada lovelace 1815"`.
/// An apostrophe inside a word is dropped rather than split on, so `"O'Brien"` -> `"obrien"`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    if name.is_ascii() {
        // what normalize_chars writes, byte by byte: most names are ASCII, and this is on every
        // triple's path
        let mut pending_space = false;
        for b in name.bytes() {
            if b.is_ascii_alphanumeric() {
                if pending_space && !out.is_empty() {
                    out.push(' ');
                }
                pending_space = false;
                out.push(b.to_ascii_lowercase() as char);
            } else if b != b'\'' {
                pending_space = true;
            }
        }
        return out;
    }
    normalize_chars(name, out)
}

/// [`normalize`] char by char, for any script.
fn normalize_chars(name: &str, mut out: String) -> String {
    let mut pending_space = false;
    for c in name.chars() {
        if c.is_alphanumeric() {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.extend(c.to_lowercase());
        } else if c == '\'' || c == '\u{2019}' {
            // keep words with apostrophes together
        } else {
            pending_space = true;
        }
    }
    out
}

/// The words of a normalised string.
pub fn words(normalized: &str) -> impl Iterator<Item = &str> {
    normalized.split(' ').filter(|w| !w.is_empty())
}

/// Titles of rank and honorifics: they open a styled name ("King George I of Greece", "Grand
/// Duchess Olga of Russia") or follow its comma ("Albert III, Duke of Bavaria").
pub const TITLES_OF_RANK: &[&str] = &[
    "duke", "duchess", "archduke", "archduchess", "grand", "king", "queen", "prince", "princess", "emperor", "empress", "count",
    "countess", "earl", "baron", "baroness", "marquess", "marquis", "marchioness", "margrave", "margravine", "viscount",
    "viscountess", "elector", "electress", "landgrave", "lord", "lady", "sultan", "shah", "tsar", "czar", "pope", "bishop",
    "archbishop", "cardinal", "infante", "infanta", "sir", "dame", "saint",
];

/// A title without its qualifier in parentheses at the end ("James Young (director)" ->
/// "James Young"); None when it has none.
pub fn unqualified(title: &str) -> Option<&str> {
    let t = title.trim_end();
    let open = t.strip_suffix(')')?.rfind('(')?;
    Some(t[..open].trim_end()).filter(|b| !b.is_empty())
}

/// The name a styled title is built on, when a title of rank follows its comma (after an
/// ordinal or an adjective, within three words): "Siemowit IV, Duke of Masovia" -> "Siemowit
/// IV", "Robert Petre, 8th Baron Petre" -> "Robert Petre", "Frederick I, Holy Roman Emperor" ->
/// "Frederick I". Two words or more before the comma; None otherwise ("Paris, Texas", "New York,
/// New York").
pub fn styled_base(name: &str) -> Option<&str> {
    let (head, tail) = name.trim().split_once(", ")?;
    let ranked = tail.split_whitespace().take(3).any(|w| TITLES_OF_RANK.contains(&w.to_lowercase().as_str()));
    (ranked && head.split_whitespace().nth(1).is_some()).then_some(head.trim())
}
/// The shorter forms a styled name's own page may be titled by: without the titles of rank that
/// open it ("King George I of Greece" -> "George I of Greece"), without what follows its comma
/// ("Nicholas the Small, Duke of Ziębice" -> "Nicholas the Small"). Each keeps two words or more.
pub fn shorter_forms(name: &str) -> Vec<&str> {
    let name = name.trim();
    let mut out = Vec::new();
    let mut rest = name;
    while let Some((first, tail)) = rest.split_once(' ') {
        if !TITLES_OF_RANK.contains(&first.to_lowercase().as_str()) {
            break;
        }
        rest = tail.trim_start();
    }
    if rest != name && rest.split_whitespace().nth(1).is_some() {
        out.push(rest);
    }
    if let Some((head, _)) = name.split_once(", ") {
        if head.split_whitespace().nth(1).is_some() {
            out.push(head);
        }
    }
    out
}

/// Whether a relation phrase says that its two ends name one thing: "known as" with up to two
/// more words ("also known as", "better known as", "known professionally as"), or "called" after
/// "also", "commonly", "sometimes", "often" or "formerly". A list or a plain "or" is not enough.
pub fn is_alias_relation(r: &str) -> bool {
    // asked of every relation the extractor writes: no allocation for an ASCII one
    let lower: std::borrow::Cow<'_, str> = if r.is_ascii() { r.into() } else { r.to_lowercase().into() };
    let is = |w: &str, x: &str| w.eq_ignore_ascii_case(x);
    let (mut n, mut known, mut first, mut last) = (0, false, "", "");
    for w in lower.split_whitespace() {
        if n == 0 {
            first = w;
        }
        last = w;
        n += 1;
        known |= is(w, "known");
    }
    (n > 0 && is(last, "as") && n <= 4 && known)
        || (n == 2 && is(last, "called") && ["also", "commonly", "sometimes", "often", "formerly"].iter().any(|f| is(first, f)))
}

#[cfg(test)]
mod tests {
    use super::{is_alias_relation, normalize, shorter_forms, styled_base, unqualified};

    #[test]
    fn a_styled_title_is_built_on_the_name_before_its_comma() {
        assert_eq!(styled_base("Siemowit IV, Duke of Masovia"), Some("Siemowit IV"));
        assert_eq!(styled_base("Robert Petre, 8th Baron Petre"), Some("Robert Petre"));
        assert_eq!(styled_base("Frederick I, Holy Roman Emperor"), Some("Frederick I"));
        assert_eq!(styled_base("Paris, Texas"), None, "no title of rank after the comma");
        assert_eq!(styled_base("New York, New York"), None);
        assert_eq!(styled_base("Albert, Prince Consort"), None, "one word is not a name to stand alone");
        assert_eq!(styled_base("Siemowit IV"), None);
    }

    #[test]
    fn a_qualified_title_loses_its_qualifier() {
        assert_eq!(unqualified("James Young (director)"), Some("James Young"));
        assert_eq!(unqualified("Merry-Go-Round (Ayumi Hamasaki song) "), Some("Merry-Go-Round"));
        assert_eq!(unqualified("Blood Street"), None);
        assert_eq!(unqualified("(film)"), None);
        assert_eq!(unqualified("Do You Believe?"), None);
    }

    #[test]
    fn the_ascii_path_writes_what_the_general_one_does() {
        // stored entity ids are these strings: the fast path must not change one
        let mut cases: Vec<String> = (0u8..128).map(|b| format!("Ab{}c D'E", b as char)).collect();
        cases.extend(["  Ada   LOVELACE, (1815)", "O'Brien", "'quoted'", "x--y", "", " ", "A.B.C.", "Robert A. Stemmle's"].map(String::from));
        for c in cases {
            assert_eq!(normalize(&c), super::normalize_chars(&c, String::new()), "{c:?}");
        }
        assert_eq!(normalize("  Ada   LOVELACE, (1815)"), "ada lovelace 1815");
    }

    #[test]
    fn alias_phrases_and_what_is_not_one() {
        for r in ["also known as", "Better Known As", "known professionally as", "known as", "commonly known as", "also called"] {
            assert!(is_alias_relation(r), "{r}");
        }
        for r in ["as", "or", "known for", "called", "a film called", "is known to have worked as", "also known"] {
            assert!(!is_alias_relation(r), "{r}");
        }
    }

    #[test]
    fn a_styled_name_has_shorter_forms() {
        assert_eq!(shorter_forms("King George I of Greece"), vec!["George I of Greece"]);
        assert_eq!(shorter_forms("Grand Duchess Olga Constantinovna of Russia"), vec!["Olga Constantinovna of Russia"]);
        assert_eq!(shorter_forms("Nicholas the Small, Duke of Ziębice"), vec!["Nicholas the Small"]);
        assert_eq!(shorter_forms("Prince Albert, Duke of York"), vec!["Albert, Duke of York", "Prince Albert"]);
        assert!(shorter_forms("Queen Victoria").is_empty(), "one word left is too little to name a page");
        assert!(shorter_forms("George I of Greece").is_empty());
    }

    #[test]
    fn case_punctuation_and_whitespace() {
        assert_eq!(normalize("  Ada   LOVELACE, (1815)"), "ada lovelace 1815");
        assert_eq!(normalize("Ada Lovelace"), normalize("ada-lovelace"));
        assert_eq!(normalize("O'Brien"), "obrien");
        assert_eq!(normalize("Zürich\tCity"), "zürich city");
        assert_eq!(normalize("..."), "");
    }

    #[test]
    fn stable_and_idempotent() {
        for s in ["The Beatles", "São Paulo!", "U.S.A.", "東京 タワー"] {
            let n = normalize(s);
            assert_eq!(normalize(&n), n);
            assert_eq!(normalize(s), n);
        }
    }
}
