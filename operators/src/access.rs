//! Who may read what. A document carries access labels (none: public); a reader (a query, a
//! standing query, an HTTP token) carries the labels it may read, or may read everything.
//! A reader sees a document when it is public or shares a label with it, and sees a fact, an
//! entity name or a passage only through the documents it sees: retrieval runs on the graph
//! those documents alone would build ([`crate::graph::Views`]), so nothing another document
//! supports can reach its answer.

use std::collections::BTreeSet;

/// The labels a reader may read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Reader {
    /// Every document (no access control configured, an admin, a trusted producer).
    #[default]
    All,
    /// Public documents and those carrying one of these labels.
    Labels(BTreeSet<String>),
}

impl Reader {
    /// From a query's or a subscription's `access` (None: every document).
    pub fn of(access: Option<&[String]>) -> Self {
        match access {
            None => Reader::All,
            Some(labels) => Reader::Labels(
                labels
                    .iter()
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect(),
            ),
        }
    }

    /// Back to a message's `access` field.
    pub fn to_field(&self) -> Option<Vec<String>> {
        match self {
            Reader::All => None,
            Reader::Labels(l) => Some(l.iter().cloned().collect()),
        }
    }

    pub fn is_all(&self) -> bool {
        matches!(self, Reader::All)
    }

    /// Whether everything `other` may read, this reader may read too (so it may see answers
    /// made for `other`).
    pub fn covers(&self, other: &Reader) -> bool {
        match (self, other) {
            (Reader::All, _) => true,
            (Reader::Labels(_), Reader::All) => false,
            (Reader::Labels(mine), Reader::Labels(theirs)) => theirs.is_subset(mine),
        }
    }

    /// Whether a document with these labels may be read.
    pub fn may_read<'a>(&self, doc_labels: impl IntoIterator<Item = &'a str>) -> bool {
        match self {
            Reader::All => true,
            Reader::Labels(mine) => {
                let mut public = true;
                for l in doc_labels {
                    if mine.contains(l) {
                        return true;
                    }
                    public = false;
                }
                public
            }
        }
    }
}

impl std::fmt::Display for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reader::All => f.write_str("every document"),
            Reader::Labels(l) if l.is_empty() => f.write_str("public documents"),
            Reader::Labels(l) => write!(
                f,
                "public documents and {}",
                l.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_public_documents_and_those_sharing_a_label() {
        let a = Reader::of(Some(&["team-a".to_string()]));
        assert!(a.may_read([]));
        assert!(a.may_read(["team-a"]));
        assert!(a.may_read(["team-b", "team-a"]));
        assert!(!a.may_read(["team-b"]));
        let public_only = Reader::of(Some(&[]));
        assert!(public_only.may_read([]));
        assert!(!public_only.may_read(["team-a"]));
        assert!(Reader::of(None).may_read(["anything"]));
        assert_eq!(
            Reader::of(Some(&[" team-a ".to_string(), "".to_string()])),
            a
        );
        assert!(
            a.covers(&public_only)
                && !public_only.covers(&a)
                && !a.covers(&Reader::All)
                && Reader::All.covers(&a)
        );
    }
}
