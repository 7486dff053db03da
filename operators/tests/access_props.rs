//! Document access labels enforced inside retrieval, as a property: over random documents
//! (names shared between them, so hidden and readable documents meet in the graph), random
//! labels, relabels and deletions applied batch by batch to a live graph, and questions about
//! every name, no answer for a reader holds a document, a fact, an entity name or a passage
//! that only documents it may not read support. And each reader's view, kept up to date
//! batch by batch, equals the graph its documents alone build.
//! More cases: PROPTEST_CASES=2000 cargo test -p streamrag-operators --test access_props --release

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use proptest::prelude::*;
use streamrag_operators::access::Reader;
use streamrag_operators::graph::{view_of, Dirty, GraphState, Step};
use streamrag_operators::kg_writer::LiveGraph;
use streamrag_operators::passages::{DocSink, Passages};
use streamrag_operators::query::answer_batch_as;
use streamrag_operators::retrieve::{Bm25Index, Hybrid, HybridParams, PprParams, Retriever};
use streamrag_schemas::{Answer, Extraction, Query, SourceRef, SCHEMA_VERSION};

const NAMES: &[&str] = &[
    "Marie Curie",
    "Pierre Curie",
    "Warsaw",
    "Paris",
    "Lyon",
    "Alfred Nobel",
    "Vistula",
    "Sorbonne",
];
const SAYS: &[&str] = &[
    "{a} was born in {b}.",
    "{a} married {b}.",
    "{a} studied at {b}.",
    "{a} lies on the {b}.",
    "{a} founded {b}.",
];
const LABELS: &[&[&str]] = &[&[], &["team-a"], &["team-b"], &["team-a", "team-b"]];

/// One document version: its subject, two sentences, its labels.
#[derive(Debug, Clone)]
struct Doc {
    id: usize,
    a: usize,
    says: [(usize, usize); 2],
    labels: usize,
}

impl Doc {
    fn title(&self) -> String {
        NAMES[self.a].to_string()
    }
    fn text(&self) -> String {
        self.says
            .iter()
            .map(|(s, b)| {
                SAYS[*s]
                    .replace("{a}", NAMES[self.a])
                    .replace("{b}", NAMES[*b])
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
    fn access(&self) -> Vec<String> {
        LABELS[self.labels].iter().map(|l| l.to_string()).collect()
    }
}

/// A change to the corpus: a document version, or a deletion.
#[derive(Debug, Clone)]
enum Op {
    Put(Doc),
    Delete(usize),
}

fn doc() -> impl Strategy<Value = Doc> {
    (
        0..6usize,
        0..NAMES.len(),
        [
            (0..SAYS.len(), 0..NAMES.len()),
            (0..SAYS.len(), 0..NAMES.len()),
        ],
        0..LABELS.len(),
    )
        .prop_map(|(id, a, says, labels)| Doc {
            id,
            a,
            says,
            labels,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![4 => doc().prop_map(Op::Put), 1 => (0..6usize).prop_map(Op::Delete)]
}

/// The step the writer applies for an op (the built-in extractor, the name resolver).
fn step(op: &Op, offset: i64) -> Step {
    match op {
        Op::Delete(id) => Step::Apply(format!("d{id}"), None),
        Op::Put(d) => {
            let got = streamrag_operators::extract::extract(&d.title(), &d.text());
            let ex = Extraction {
                schema_version: SCHEMA_VERSION,
                op: Default::default(),
                doc_id: format!("d{}", d.id),
                title: d.title(),
                entities: got.entities,
                triples: got.triples,
                extractor: "builtin".into(),
                source: SourceRef {
                    topic: "docs".into(),
                    partition: 0,
                    offset,
                    timestamp_ms: None,
                },
                access: d.access(),
            };
            let delta = streamrag_operators::resolve::resolve(&ex);
            Step::Apply(delta.doc_id.clone(), GraphState::entry_of(&delta))
        }
    }
}

/// What `reader` may see of the whole graph `g`: its documents, entity names and facts (as
/// names, each end under any name a readable document gives it).
struct Readable {
    docs: HashSet<String>,
    names: HashSet<String>,
    facts: HashSet<(String, String, String)>,
}

fn readable(g: &GraphState, reader: &Reader) -> Readable {
    let docs: Vec<_> = g.docs().filter(|d| reader.may_read(d.access())).collect();
    let mut names_of: std::collections::HashMap<&str, HashSet<&str>> = Default::default();
    for d in &docs {
        for (id, name) in d.entities() {
            names_of.entry(id).or_default().insert(name);
        }
    }
    let mut facts = HashSet::new();
    for d in &docs {
        for (s, r, o) in d.triples() {
            for sn in &names_of[s] {
                for on in &names_of[o] {
                    facts.insert((sn.to_string(), r.to_string(), on.to_string()));
                }
            }
        }
    }
    Readable {
        docs: docs.iter().map(|d| d.id().to_string()).collect(),
        names: names_of.values().flatten().map(|n| n.to_string()).collect(),
        facts,
    }
}

fn check(
    a: &Answer,
    r: &Readable,
    passages: &Passages,
    reader: &Reader,
    question: &str,
) -> Result<(), TestCaseError> {
    for d in &a.documents {
        prop_assert!(
            r.docs.contains(&d.id),
            "{reader}: document {} is not readable ({question})",
            d.id
        );
        prop_assert!(
            passages.may_read(&d.id, reader),
            "{reader}: passage {} is not readable",
            d.id
        );
    }
    for t in &a.triples {
        let key = (t.subject.clone(), t.relation.clone(), t.object.clone());
        prop_assert!(
            r.facts.contains(&key),
            "{reader}: fact {key:?} is supported by no readable document ({question})"
        );
    }
    let asked = question.to_lowercase();
    for n in a.seeds.iter().chain(a.entities.iter().map(|e| &e.name)) {
        prop_assert!(
            r.names.contains(n) || asked.contains(&n.to_lowercase()),
            "{reader}: name {n:?} is in no readable document ({question})"
        );
    }
    Ok(())
}

fn retrievers() -> Vec<Retriever> {
    let bm25 = Arc::new(Bm25Index::in_memory().unwrap());
    vec![
        Retriever::Hybrid(Arc::new(Hybrid {
            bm25: bm25.clone(),
            dense: None,
            facts: None,
            glm: None,
            params: HybridParams::default(),
        })),
        Retriever::Ppr(PprParams::default()),
        Retriever::Bm25(bm25),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_answer_holds_what_its_reader_may_not_read(batches in prop::collection::vec(prop::collection::vec(op(), 1..5), 1..5), asks_between in prop::collection::vec(0..4usize, 4)) {
        let live = LiveGraph::new(GraphState::new());
        let passages = Passages::default();
        let rs = retrievers();
        let Retriever::Bm25(bm25) = &rs[2] else { unreachable!() };
        let readers: Vec<Reader> = LABELS.iter().map(|l| Reader::of(Some(&l.iter().map(|x| x.to_string()).collect::<Vec<_>>()))).collect();
        let mut offset = 0;
        let mut held: Vec<Option<Arc<GraphState>>> = vec![None; readers.len()];
        for (b, ops) in batches.iter().enumerate() {
            // the docs topic's readers first (labels before text), then the writer's batch
            for op in ops {
                match op {
                    Op::Put(d) => {
                        let p = vec![(format!("d{}", d.id), d.title(), d.text())];
                        for s in [&passages as &dyn DocSink, bm25.as_ref()] {
                            s.access(&[(p[0].0.clone(), d.access())]);
                            s.upsert(&p).unwrap();
                        }
                    }
                    Op::Delete(id) => {
                        passages.remove(&format!("d{id}")).unwrap();
                        bm25.remove(&format!("d{id}")).unwrap();
                    }
                }
            }
            DocSink::commit(bm25.as_ref(), &[(0, offset + ops.len() as i64)].into()).unwrap();
            live.update(|next| {
                let mut steps = Vec::new();
                for op in ops {
                    let s = step(op, offset);
                    s.clone().apply(next, &mut Dirty::default());
                    steps.push(s);
                    next.set_offset("deltas", 0, offset, &mut Dirty::default());
                    steps.push(Step::Offset("deltas".into(), 0, offset));
                    offset += 1;
                }
                ((), steps)
            });
            // some readers ask between batches (their views then catch up), others only at the
            // end; each keeps its last view, as a query in flight would, so the next catch-up
            // goes through the spare copy or a fresh one
            let asking = asks_between.get(b).copied().unwrap_or(0);
            for (i, reader) in readers[..asking].iter().enumerate() {
                held[i] = Some(live.current_for(reader));
            }
        }
        let g = live.current();
        // the views held are whole versions of their own: each equals a fresh build of its version
        for (view, reader) in held.iter().zip(&readers) {
            if let Some(v) = view {
                prop_assert!(v.is_view());
                prop_assert!(v.docs().all(|d| reader.may_read(d.access())));
            }
        }
        let mut questions: Vec<String> = NAMES.iter().flat_map(|n| [format!("Where was {n} born?"), format!("Who married {n}?"), format!("What lies on the {n}?")]).collect();
        questions.push("Who founded something in a city?".into());
        for reader in &readers {
            let view = live.current_for(reader);
            let built = view_of(&g, reader);
            prop_assert_eq!(view.stats(), built.stats(), "{}: the view kept up to date differs from the one built afresh", reader);
            prop_assert_eq!(view.version(), g.version());
            let r = readable(&g, reader);
            let qs: Vec<Query> = questions
                .iter()
                .enumerate()
                .map(|(i, q)| Query { schema_version: SCHEMA_VERSION, query_id: format!("q{i}"), question: q.clone(), top_k: Some(5), access: reader.to_field() })
                .collect();
            for retriever in &rs {
                for (a, q) in answer_batch_as(&live, retriever, &passages, &qs).unwrap().iter().zip(&questions) {
                    check(a, &r, &passages, reader, q)?;
                }
            }
        }
        // the whole graph's readers see what they saw before: nothing is filtered
        let all = answer_batch_as(&live, &rs[0], &passages, &[Query { schema_version: SCHEMA_VERSION, query_id: "q".into(), question: questions[0].clone(), top_k: Some(5), access: None }]).unwrap();
        prop_assert_eq!(&all[0].documents, &rs[0].retrieve(&g, &questions[0], 5).unwrap().documents);
    }
}

#[test]
fn a_relabelled_document_leaves_the_old_labels_view_and_reaches_the_new() {
    let live = LiveGraph::new(GraphState::new());
    let d = |labels: usize| Doc {
        id: 1,
        a: 0,
        says: [(0, 2), (1, 1)],
        labels,
    };
    let apply = |op: Op, offset: i64| {
        let s = step(&op, offset);
        live.update(|next| {
            s.clone().apply(next, &mut Dirty::default());
            ((), vec![s])
        });
    };
    let a = Reader::of(Some(&["team-a".to_string()]));
    let b = Reader::of(Some(&["team-b".to_string()]));
    apply(Op::Put(d(1)), 0);
    assert_eq!(live.current_for(&a).document_count(), 1);
    assert_eq!(live.current_for(&b).document_count(), 0);
    assert!(
        live.current_for(&b).entity("warsaw").is_none(),
        "no name of a hidden document"
    );
    apply(Op::Put(d(2)), 1);
    assert_eq!(
        live.current_for(&a).document_count(),
        0,
        "relabelled away from team-a"
    );
    assert_eq!(live.current_for(&a).entity_count(), 0);
    assert_eq!(live.current_for(&b).document_count(), 1);
    apply(Op::Put(d(0)), 2);
    assert_eq!(live.current_for(&a).document_count(), 1, "public now");
    assert_eq!(live.views(), 2);
    let g = live.current();
    let labels: BTreeSet<&str> = g
        .docs()
        .flat_map(|d| d.access().collect::<Vec<_>>())
        .collect();
    assert!(labels.is_empty());
}

#[test]
fn views_asked_for_while_the_writer_applies_equal_a_fresh_build() {
    let live = LiveGraph::new(GraphState::new());
    let readers: Vec<Reader> = LABELS.iter().map(|l| Reader::of(Some(&l.iter().map(|x| x.to_string()).collect::<Vec<_>>()))).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..400usize {
                let op = if i % 7 == 6 { Op::Delete(i % 6) } else { Op::Put(Doc { id: i % 6, a: i % NAMES.len(), says: [(i % SAYS.len(), (i / 3) % NAMES.len()), ((i / 2) % SAYS.len(), (i / 5) % NAMES.len())], labels: (i / 6) % LABELS.len() }) };
                let st = step(&op, i as i64);
                live.update(|next| {
                    st.clone().apply(next, &mut Dirty::default());
                    ((), vec![st])
                });
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        // readers build their views while the writer runs, and catch them up
        s.spawn(|| {
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = live.current_for(&readers[i % readers.len()]);
                i += 1;
            }
        });
    });
    let g = live.current();
    for reader in &readers {
        assert_eq!(live.current_for(reader).stats(), view_of(&g, reader).stats(), "{reader}");
    }
}
