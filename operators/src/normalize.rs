//! Name normalisation: the canonical form behind entity ids and question-to-entity matching.

/// Lower-cases, turns punctuation into spaces (keeping letters and digits of every script),
/// and collapses whitespace. `"  Ada   LOVELACE, (1815)"` -> `"ada lovelace 1815"`.
/// An apostrophe inside a word is dropped rather than split on, so `"O'Brien"` -> `"obrien"`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
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

#[cfg(test)]
mod tests {
    use super::normalize;

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
