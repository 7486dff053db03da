//! The answers standing queries are owed, in the order they are owed.
//!
//! A graph change reaches some subscriptions; each is owed one answer however many changes
//! reach it before its turn ([`Owed::reach`]), and the owed answers are made a few at a time,
//! first owed first answered, each published as soon as it is made. An answer made before the
//! retriever's indexes (passages, fact vectors) read the change is owed again once they have:
//! such answers wait in rounds, one per set of index positions, oldest first ([`Owed::answered`],
//! [`Owed::take_round`]); a change that reaches a subscription again moves it to the newest.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// One round of answers owed again once the indexes read to `marks`.
struct Round<M> {
    seq: u64,
    marks: M,
    since: Instant,
    each: Vec<(String, String)>,
}

/// Owed answers: subscription id -> the reason its answer will carry.
pub(super) struct Owed<M> {
    /// Reached by a change, not answered since: in the order first reached.
    quick: VecDeque<String>,
    /// id -> its reason and when it was first reached.
    reasons: HashMap<String, (String, Instant)>,
    /// Answered before the indexes had the change: rounds, oldest first.
    rounds: VecDeque<Round<M>>,
    /// id -> the round that owes it (an entry of an older round is stale).
    round_of: HashMap<String, u64>,
    next: u64,
    /// Whether a task is making the owed answers.
    pub running: bool,
}

impl<M> Default for Owed<M> {
    fn default() -> Self {
        Owed { quick: VecDeque::new(), reasons: HashMap::new(), rounds: VecDeque::new(), round_of: HashMap::new(), next: 0, running: false }
    }
}

impl<M> Owed<M> {
    /// A change reached `id`: owed an answer, with `reason` unless one is owed already (the
    /// first change that reached it names it).
    pub fn reach(&mut self, id: &str, reason: &str) {
        if !self.reasons.contains_key(id) {
            self.reasons.insert(id.to_string(), (reason.to_string(), Instant::now()));
            self.quick.push_back(id.to_string());
        }
    }

    /// The next `n` owed answers at most, first reached first, with their reasons, and when
    /// the first of them was reached.
    pub fn take_quick(&mut self, n: usize) -> (Vec<(String, String)>, Option<Instant>) {
        let (mut out, mut first) = (Vec::new(), None);
        while out.len() < n {
            let Some(id) = self.quick.pop_front() else { break };
            if let Some((r, at)) = self.reasons.remove(&id) {
                first.get_or_insert(at);
                out.push((id, r));
            }
        }
        (out, first)
    }

    /// These were answered. Answered before the indexes read to `behind`, each is owed again
    /// once they have, with its reason as `again` makes it; otherwise it owes nothing more
    /// (a round that held it lets it go).
    pub fn answered(&mut self, each: &[(String, String)], behind: Option<M>, again: impl Fn(&str) -> String) {
        let Some(marks) = behind else {
            for (id, _) in each {
                self.round_of.remove(id);
            }
            return;
        };
        let seq = self.next;
        self.next += 1;
        for (id, _) in each {
            self.round_of.insert(id.clone(), seq);
        }
        let each = each.iter().map(|(id, r)| (id.clone(), again(r))).collect();
        self.rounds.push_back(Round { seq, marks, since: Instant::now(), each });
    }

    /// The oldest round that still owes an answer: its index positions and when it was made.
    pub fn round(&mut self) -> Option<(&M, Instant)> {
        while let Some(r) = self.rounds.front() {
            if r.each.iter().any(|(id, _)| self.round_of.get(id) == Some(&r.seq)) {
                break;
            }
            self.rounds.pop_front();
        }
        self.rounds.front().map(|r| (&r.marks, r.since))
    }

    /// The next `n` answers at most of the oldest round, none of a newer one (those that moved
    /// to a newer round, or were answered since with the indexes caught up, are no longer its).
    pub fn take_round(&mut self, n: usize) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let Some(r) = self.rounds.front_mut() else { return out };
        while out.len() < n {
            let Some((id, reason)) = r.each.pop() else { break };
            if self.round_of.get(&id) == Some(&r.seq) {
                self.round_of.remove(&id);
                out.push((id, reason));
            }
        }
        if r.each.is_empty() {
            self.rounds.pop_front();
        }
        out
    }

    /// A subscription that ended owes nothing.
    pub fn forget(&mut self, id: &str) {
        self.reasons.remove(id);
        self.round_of.remove(id);
    }

    /// How many answers are owed (each subscription once per queue).
    pub fn len(&self) -> usize {
        self.reasons.len() + self.round_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reasons.is_empty() && self.rounds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[(String, String)]) -> Vec<&str> {
        v.iter().map(|(id, _)| id.as_str()).collect()
    }

    #[test]
    fn a_subscription_is_owed_once_in_the_order_first_reached_with_the_first_reason() {
        let mut o: Owed<u32> = Owed::default();
        o.reach("b", "changed d1");
        o.reach("a", "changed d1");
        o.reach("b", "changed d2");
        assert_eq!(o.len(), 2);
        let first = o.take_quick(1).0;
        assert_eq!(first, [("b".to_string(), "changed d1".to_string())]);
        // reached again once taken: owed again, now for the newer change
        o.reach("b", "changed d3");
        assert_eq!(o.take_quick(10).0, [("a".to_string(), "changed d1".to_string()), ("b".to_string(), "changed d3".to_string())]);
        assert!(o.is_empty());
    }

    #[test]
    fn answers_made_before_the_indexes_caught_up_are_owed_again_once_in_the_newest_round() {
        let mut o: Owed<u32> = Owed::default();
        let again = |r: &str| r.replacen("changed ", "indexed ", 1);
        o.reach("a", "changed d1");
        o.reach("b", "changed d1");
        let each = o.take_quick(10).0;
        o.answered(&each, Some(1), again);
        assert_eq!(o.round().map(|r| *r.0), Some(1));
        // b reached again and answered while the indexes are still behind: its round is the newer
        o.reach("b", "changed d2");
        let each = o.take_quick(10).0;
        o.answered(&each, Some(2), again);
        assert_eq!(o.take_round(10), [("a".to_string(), "indexed d1".to_string())]);
        assert_eq!(o.round().map(|r| *r.0), Some(2));
        assert_eq!(o.take_round(10), [("b".to_string(), "indexed d2".to_string())]);
        assert!(o.round().is_none() && o.is_empty());
        // answered with the indexes caught up: the round that held it lets it go
        o.reach("c", "changed d3");
        let each = o.take_quick(10).0;
        o.answered(&each, Some(3), again);
        o.reach("c", "changed d4");
        let each = o.take_quick(10).0;
        o.answered(&each, None, again);
        assert!(o.round().is_none());
        assert!(o.is_empty(), "{}", o.len());
    }

    #[test]
    fn an_ended_subscription_is_owed_nothing() {
        let mut o: Owed<u32> = Owed::default();
        o.reach("a", "changed d1");
        o.reach("b", "changed d1");
        o.forget("a");
        assert_eq!(ids(&o.take_quick(10).0), ["b"]);
        o.reach("c", "changed d2");
        let each = o.take_quick(10).0;
        o.answered(&each, Some(1), |r| r.to_string());
        o.forget("c");
        assert!(o.take_round(10).is_empty());
    }
}
