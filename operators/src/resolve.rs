//! The resolve stage: mentions -> canonical entity ids. Today the id is the normalised name
//! ([`crate::normalize::normalize`]), which is stable across runs and processes; embedding-based
//! merging of near-duplicates plugs in here.

use std::collections::BTreeMap;

use streamrag_schemas::{decode, encode, EntityRef, Extraction, GraphDelta, ResolvedTriple};

use crate::config::Topics;
use crate::normalize::normalize;
use crate::runtime::{Operator, Outcome};
use crate::transport::{Output, Record};

/// The canonical id of an entity name; empty when the name has no letters or digits.
pub fn entity_id(name: &str) -> String {
    normalize(name)
}

/// Resolves an extraction into a graph delta. Triples with an unnamable end are dropped.
pub fn resolve(ex: &Extraction) -> GraphDelta {
    let mut entities: BTreeMap<String, String> = BTreeMap::new();
    let mut order = Vec::new();
    fn add(entities: &mut BTreeMap<String, String>, order: &mut Vec<String>, name: &str) -> String {
        let id = entity_id(name);
        if !id.is_empty() && !entities.contains_key(&id) {
            entities.insert(id.clone(), name.trim().to_string());
            order.push(id.clone());
        }
        id
    }
    for m in &ex.entities {
        add(&mut entities, &mut order, &m.name);
    }
    let mut triples = Vec::new();
    for t in &ex.triples {
        let s = add(&mut entities, &mut order, &t.subject);
        let o = add(&mut entities, &mut order, &t.object);
        if s.is_empty() || o.is_empty() || t.relation.trim().is_empty() {
            continue;
        }
        triples.push(ResolvedTriple {
            subject: entities[&s].clone(),
            subject_id: s,
            relation: t.relation.trim().to_string(),
            object: entities[&o].clone(),
            object_id: o,
        });
    }
    GraphDelta {
        schema_version: 1,
        op: ex.op,
        doc_id: ex.doc_id.clone(),
        title: ex.title.clone(),
        entities: order.into_iter().map(|id| EntityRef { name: entities[&id].clone(), id }).collect(),
        triples,
        source: ex.source.clone(),
    }
}

pub struct Resolve {
    pub topics: Topics,
}

impl Operator for Resolve {
    fn name(&self) -> &'static str {
        "resolve"
    }
    fn input(&self) -> String {
        self.topics.triples.clone()
    }
    async fn process_batch(&mut self, batch: &[Record]) -> Result<Vec<Outcome>, crate::error::TransportError> {
        Ok(batch
            .iter()
            .map(|r| {
                let ex: Extraction = decode(&r.payload)?;
                let delta = resolve(&ex);
                Ok(vec![Output { topic: self.topics.graph_deltas.clone(), key: delta.doc_id.clone(), payload: encode(&delta) }])
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamrag_schemas::{Mention, SourceRef, Triple};

    #[test]
    fn variants_of_a_name_get_one_id() {
        let ex = Extraction {
            schema_version: 1,
            op: Default::default(),
            doc_id: "d".into(),
            title: "T".into(),
            entities: vec![Mention { name: "Ada  Lovelace".into(), kind: None }],
            triples: vec![
                Triple { subject: "ada lovelace".into(), relation: " born in ".into(), object: "London,".into() },
                Triple { subject: "ADA LOVELACE".into(), relation: "r".into(), object: "!!".into() },
            ],
            extractor: "builtin".into(),
            source: SourceRef { topic: "t".into(), partition: 0, offset: 1 },
        };
        let d = resolve(&ex);
        assert_eq!(d.entities.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), vec!["ada lovelace", "london"]);
        assert_eq!(d.entities[0].name, "Ada  Lovelace");
        assert_eq!(d.triples.len(), 1, "the triple to a punctuation-only name is dropped");
        assert_eq!(d.triples[0].relation, "born in");
        assert_eq!(d.triples[0].object_id, "london");
        assert_eq!(resolve(&ex), d, "deterministic");
    }
}
