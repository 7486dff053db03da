//! The hybrid's entity-name vectors with the real all-MiniLM-L6-v2 weights, over the README's
//! sample corpus: a question that writes a name shorter than the graph holds it ("Lovelace" for
//! "Ada Lovelace") links that entity through its name's vector, and the link seeds the walk;
//! with the name vectors off (`entity_dense` 0) it does not. And a question about two named
//! things ("X or Y?") gets the facts of both, not only of the one whose rarer name makes every
//! fact of its own match more of the question.

use std::path::PathBuf;
use std::sync::Arc;

use candle_core::Device;
use streamrag_glm::SentenceEncoder;
use streamrag_operators::graph::{Dirty, GraphState};
use streamrag_operators::passages::DocSink;
use streamrag_operators::resolve::EntityResolver;
use streamrag_operators::retrieve::{Bm25Index, DenseIndex, FactVectors, Hybrid, HybridParams, Retriever};
use streamrag_schemas::{EntityRef, Extraction, GraphChange, ResolvedTriple, SourceRef, SCHEMA_VERSION};

fn minilm() -> PathBuf {
    let d = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.models/all-MiniLM-L6-v2"));
    assert!(d.join("model.safetensors").exists(), "scripts/fetch-models.sh fetches all-MiniLM-L6-v2 into .models/");
    d
}

fn samples() -> Vec<(String, String, String)> {
    include_str!("../../samples/corpus.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().into(), v["title"].as_str().unwrap().into(), v["text"].as_str().unwrap().into())
        })
        .collect()
}

/// A document as [`hybrid_over`] takes it: (id, title, text).
fn doc(id: &str, title: &str, text: &str) -> (String, String, String) {
    (id.to_string(), title.to_string(), text.to_string())
}

/// The samples through the built-in extractor into a graph, and the hybrid over it with every
/// index filled: BM25, passage vectors, fact and entity-name vectors (from the graph's changes).
fn hybrid(dir: &std::path::Path) -> (GraphState, Hybrid) {
    hybrid_over(dir, samples())
}

/// [`hybrid`] over the documents given (id, title, text).
fn hybrid_over(dir: &std::path::Path, docs: Vec<(String, String, String)>) -> (GraphState, Hybrid) {
    hybrid_resolved(dir, docs, None)
}

/// [`hybrid_over`], the names resolved by `resolver` when there is one (links included).
fn hybrid_resolved(dir: &std::path::Path, docs: Vec<(String, String, String)>, mut resolver: Option<EntityResolver>) -> (GraphState, Hybrid) {
    let mut g = GraphState::new();
    let mut changes = Vec::new();
    for (i, (id, title, text)) in docs.iter().enumerate() {
        let got = streamrag_operators::extract::extract(title, text);
        let ex = Extraction {
            access: Default::default(),
            schema_version: SCHEMA_VERSION,
            op: Default::default(),
            doc_id: id.clone(),
            title: title.clone(),
            entities: got.entities,
            triples: got.triples,
            extractor: "builtin".into(),
            source: SourceRef { topic: "docs".into(), partition: 0, offset: i as i64, timestamp_ms: None },
        };
        let d = match &mut resolver {
            Some(r) => {
                r.resolve_names(&EntityResolver::names_of(&ex).collect::<Vec<_>>()).unwrap();
                r.delta(&ex)
            }
            None => streamrag_operators::resolve::resolve(&ex),
        };
        if let Some(c) = g.apply(&d.doc_id, GraphState::entry_of(&d).as_ref(), &mut Dirty::default()) {
            changes.push((id.clone(), c));
        }
    }
    let src = SourceRef { topic: "streamrag.graph-deltas".into(), partition: 0, offset: 0, timestamp_ms: None };
    let name = |g: &GraphState, id: &str| g.entity(id).map(|e| e.name().to_string()).unwrap_or_default();
    let wire: Vec<GraphChange> = changes
        .iter()
        .map(|(doc, c)| GraphChange {
            schema_version: SCHEMA_VERSION,
            op: Default::default(),
            doc_id: doc.clone(),
            asserted: c
                .asserted
                .iter()
                .map(|(s, r, o)| ResolvedTriple { subject_id: s.clone(), subject: name(&g, s), relation: r.clone(), object_id: o.clone(), object: name(&g, o) })
                .collect(),
            retracted: vec![],
            entities_added: c.entities_added.iter().map(|(id, n)| EntityRef { id: id.clone(), name: n.clone() }).collect(),
            entities_removed: vec![],
            source: src.clone(),
        })
        .collect();
    let enc = SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap();
    let dense = DenseIndex::new(enc);
    dense.upsert(&docs).unwrap();
    let facts = FactVectors::open(dense.encoder.clone(), dir, "minilm").unwrap();
    facts.apply(&wire).unwrap();
    assert_eq!(facts.entities().len(), g.entities().count(), "every entity has its name's vector");
    let bm25 = Bm25Index::in_memory().unwrap();
    DocSink::upsert(&bm25, &docs).unwrap();
    DocSink::commit(&bm25, &[(0, docs.len() as i64)].into()).unwrap();
    (g, Hybrid { bm25: Arc::new(bm25), dense: Some(Arc::new(dense)), facts: Some(Arc::new(facts)), glm: None, params: HybridParams::default() })
}

/// The hybrid's graph part alone (no BM25 or dense passage prior, whose best passages' facts
/// would reach much the same), with one weight set by name.
fn graph_only(g: &GraphState, h: &Hybrid, q: &str, k: usize, key: &str, value: &str) -> streamrag_operators::retrieve::Retrieved {
    let mut p = h.params.clone();
    for (k, v) in [("bm25", "0"), ("dense", "0"), (key, value)] {
        p.set(k, v).unwrap();
    }
    Retriever::Hybrid(Arc::new(Hybrid { params: p, ..h.clone() })).retrieve(g, q, k).unwrap()
}

/// The ids the full hybrid ranks for `q`, with the weights `set` by name.
fn ranked_with(g: &GraphState, h: &Hybrid, q: &str, k: usize, set: &[(&str, &str)]) -> Vec<String> {
    let mut p = h.params.clone();
    for (key, value) in set {
        p.set(key, value).unwrap();
    }
    Retriever::Hybrid(Arc::new(Hybrid { params: p, ..h.clone() })).retrieve(g, q, k).unwrap().documents.into_iter().map(|d| d.id).collect()
}

#[test]
fn a_name_written_short_links_through_its_vector() {
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid(dir.path());
    let q = "Who was the father of Lovelace?";
    assert!(g.entity("lovelace").is_none(), "the graph holds the name only in full");
    // the graph's part alone (no passage prior, whose best passages' facts would reach her too)
    let ask = |entity_dense: &str| graph_only(&g, &h, q, 3, "entity_dense", entity_dense);
    let on = ask("1");
    assert_eq!(on.seeds.first().map(String::as_str), Some("Ada Lovelace"), "linked by its name's vector: {:?}", on.seeds);
    let top: Vec<&str> = on.documents.iter().map(|d| d.id.as_str()).collect();
    assert!(top.contains(&"ada-lovelace") && top.contains(&"lord-byron"), "the walk from her reaches her page and her father's: {top:?}");
    let off = ask("0");
    assert!(!off.seeds.iter().any(|s| s == "Ada Lovelace"), "without the name vectors nothing links her: {:?}", off.seeds);
    // the whole hybrid, as it runs by default, finds her page first
    let all = Retriever::Hybrid(Arc::new(h.clone())).retrieve(&g, q, 3).unwrap();
    assert_eq!(all.documents[0].id, "ada-lovelace", "{:?}", all.documents);
    assert!(all.seeds.iter().any(|s| s == "Ada Lovelace"));
}

#[test]
fn a_question_about_two_named_things_follows_the_facts_of_both() {
    let docs = vec![
        doc("qz", "Quorvath Zenthal", "Quorvath Zenthal is a 1961 Estonian science fiction film directed by Mart Kask. Quorvath Zenthal was produced by Tallinnfilm. Quorvath Zenthal premiered in Tallinn. Quorvath Zenthal starred Ants Lauter."),
        doc("rd", "The Red Door", "The Red Door is a 1950 American drama film directed by John Hale. The Red Door was filmed in Ohio. The Red Door starred Lee Marsh. The Red Door is based on a novel by Ruth Ames."),
        doc("mk", "Mart Kask", "Mart Kask was an Estonian director. He was born in 1920 in Tartu."),
        doc("jh", "John Hale", "John Hale was an American director. He was born in 1915 in Boston."),
        doc("oh", "Ohio", "Ohio is a state of the United States. Ohio borders Lake Erie."),
        doc("lm", "Lee Marsh", "Lee Marsh was an American actor who starred in The Red Door and in Green Fields."),
        doc("ra", "Ruth Ames", "Ruth Ames was an American novelist. Ruth Ames wrote The Red Door."),
        doc("tf", "Tallinnfilm", "Tallinnfilm is an Estonian film studio in Tallinn."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    let q = "Which film has the director who was born later, Quorvath Zenthal or The Red Door?";
    // the graph's part alone: BM25 and dense would find both directors' pages by "born" anyway
    let ask = |per_name: &str| graph_only(&g, &h, q, 4, "fact_per_name", per_name);
    let ids = |r: &streamrag_operators::retrieve::Retrieved| r.documents.iter().map(|d| d.id.clone()).collect::<Vec<_>>();
    let on = ask("12");
    let mut top = ids(&on);
    top.sort();
    assert_eq!(top, ["jh", "mk", "qz", "rd"], "both films and both directors: {:?} (seeds {:?})", on.documents, on.seeds);
    let off = ask("0");
    assert!(!ids(&off).contains(&"jh".to_string()), "without facts per name the rarer name's facts drown the other's: {:?}", off.documents);
}

/// A film, its director's page "David Bradley (director)" with the text given, its star's page,
/// a review naming both, and a page nothing asks about.
fn talk_about_a_stranger(director_text: &str) -> Vec<(String, String, String)> {
    vec![
        doc("film", "Talk About a Stranger", "Talk About a Stranger is a 1952 American film noir directed by David Bradley and starring George Murphy."),
        doc("director", "David Bradley (director)", director_text),
        doc("murphy", "George Murphy", "George Murphy was an American dancer and actor. George Murphy starred in Talk About a Stranger."),
        doc("review", "Film noir revival", "The critic Ann Lowe praised David Bradley and George Murphy in a 1990 essay on film noir."),
        doc("ucla", "UCLA", "UCLA is a public university in Los Angeles."),
    ]
}

#[test]
fn a_bridge_whose_page_is_titled_with_a_qualifier_still_gets_its_page() {
    let mut docs = talk_about_a_stranger("David Bradley was an American film director and film historian. He later taught film at UCLA.");
    docs.insert(2, doc("actor", "David Bradley (actor)", "David Bradley is an English actor. David Bradley was born in York."));
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    assert!(g.entity("david bradley").is_some_and(|e| e.docs().any(|d| d == "film")), "the film names him without the qualifier");
    let q = "Where did the director of film Talk About a Stranger work?";
    let rank = |variants: &str| {
        let got = graph_only(&g, &h, q, 6, "page_variants", variants);
        (got.documents.iter().position(|d| d.id == "director"), got.documents)
    };
    let (on, docs_on) = rank("true");
    let (off, docs_off) = rank("false");
    let score = |docs: &[streamrag_schemas::ScoredDocument], id: &str| docs.iter().find(|d| d.id == id).map_or(0.0, |d| d.score);
    // both pages titled "David Bradley (...)" share the fact page's lift; the director's rises
    // (without the variants it may still rank as high: "He later taught film at UCLA" makes it a
    // page of the concept "film" the question asks with)
    assert!(on.is_some() && off.is_none_or(|r| r >= on.unwrap()), "qualified titles on: {docs_on:?}\noff: {docs_off:?}");
    assert!(score(&docs_on, "director") > score(&docs_off, "director") && score(&docs_on, "actor") > score(&docs_off, "actor"), "on: {docs_on:?}\noff: {docs_off:?}");
    assert!(score(&docs_on, "director") > score(&docs_on, "review"), "the page of the bridge, not any page naming him: {docs_on:?}");
}

/// The bridge's page is titled "David Bradley (director)" but its text writes "David Shedd
/// Bradley", so the name the film's page gives is never mentioned there: the title alone finds it.
#[test]
fn a_qualified_page_that_writes_the_name_longer_is_found_by_its_title() {
    let docs = talk_about_a_stranger("David Shedd Bradley was an American film director and film historian. He later taught film at UCLA.");
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    assert!(g.entity("david bradley").is_some_and(|e| !e.docs().any(|d| d == "director")), "the director's page never writes \"David Bradley\"");
    let q = "Where did the director of film Talk About a Stranger work?";
    let got = |variants: &str| graph_only(&g, &h, q, 5, "page_variants", variants).documents;
    let (on, off) = (got("true"), got("false"));
    let rank = |docs: &[streamrag_schemas::ScoredDocument]| docs.iter().position(|d| d.id == "director");
    let score = |docs: &[streamrag_schemas::ScoredDocument]| docs.iter().find(|d| d.id == "director").map_or(0.0, |d| d.score);
    assert!(rank(&on).is_some(), "the bridge's page is found: {on:?}");
    assert!(rank(&off).is_none_or(|r| r >= rank(&on).unwrap()) && score(&off) < score(&on), "without qualified titles it falls: {off:?}\non: {on:?}");
}

#[test]
fn a_name_the_page_gives_as_an_alias_gets_that_page() {
    let docs = vec![
        doc("king", "Zorvan I, King of Quell", "Zorvan I (1122 – 1190), also known as Zorvan Redbeard, was King of Quell from 1150. His mother was Adela of Brin."),
        doc("battle", "Battle of Morr", "The Battle of Morr was fought between Zorvan Redbeard and Ulric Stone in 1167. Zorvan Redbeard won the battle."),
        doc("chronicle", "Chronicle of Quell", "The Chronicle of Quell tells of Zorvan Redbeard and of Ulric Stone."),
        doc("ulric", "Ulric Stone", "Ulric Stone was a knight of Brin. Ulric Stone was born in 1130 in Tarn."),
        doc("adela", "Adela of Brin", "Adela of Brin was a duchess of Brin. She was born in 1101."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    assert!(g.entity("zorvan redbeard").is_some_and(|e| e.docs().any(|d| d == "king")), "the king's page names his alias");
    let q = "Who was born first, Zorvan Redbeard or Ulric Stone?";
    let rank = |aliases: &str| {
        let got = graph_only(&g, &h, q, 5, "page_aliases", aliases);
        (got.documents.iter().position(|d| d.id == "king"), got.documents)
    };
    let (on, docs_on) = rank("true");
    let (off, docs_off) = rank("false");
    assert!(on.is_some_and(|r| r < 2), "the page whose subject the alias names is one of the two named things' pages: {docs_on:?}");
    assert!(off.is_none_or(|r| r > on.unwrap()), "without alias pages it is only a page naming him: on {docs_on:?}\noff: {docs_off:?}");
}

/// The film's page names its director "David S. Bradley", his own page "David Bradley": entity
/// resolution links the two names (close, not the same), the graph agrees (both meet the film),
/// and the director's page becomes the bridge's own page. A link the graph does not back (a
/// namesake who shares no neighbour) gives nothing.
#[test]
fn a_page_entity_resolution_linked_and_the_graph_backs_is_the_bridge_page() {
    let docs = vec![
        doc("film", "Talk About a Stranger", "Talk About a Stranger is a 1952 American film noir directed by David S. Bradley and starring George Murphy."),
        doc("director", "David Bradley", "David Bradley was an American film director and film historian. David Bradley directed Talk About a Stranger. He later taught film at UCLA."),
        doc("namesake", "David S. Bradford", "David S. Bradford is a Canadian chemist. David S. Bradford was born in Ottawa."),
        doc("murphy", "George Murphy", "George Murphy was an American dancer and actor. George Murphy starred in Talk About a Stranger."),
        doc("ucla", "UCLA", "UCLA is a public university in Los Angeles."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let resolver = EntityResolver::open(SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap(), 0.8, None).unwrap();
    let (g, h) = hybrid_resolved(dir.path(), docs, Some(resolver));
    let linked: Vec<&str> = g.synonyms("david s bradley").iter().map(|l| l.0).collect();
    assert!(linked.contains(&"david bradley"), "the two names are linked, not merged: {linked:?}");
    assert!(g.entity("david s bradley").is_some_and(|e| !e.docs().any(|d| d == "director")), "the director's page never writes \"David S. Bradley\"");
    let q = "Where did the director of film Talk About a Stranger work?";
    let got = |links: &str| graph_only(&g, &h, q, 5, "page_links", links).documents;
    let (on, off) = (got("true"), got("false"));
    let rank = |docs: &[streamrag_schemas::ScoredDocument], id: &str| docs.iter().position(|d| d.id == id);
    let score = |docs: &[streamrag_schemas::ScoredDocument]| docs.iter().find(|d| d.id == "director").map_or(0.0, |d| d.score);
    assert!(rank(&on, "director").is_some_and(|r| r < 2), "the bridge's page, through the link: {on:?}\noff: {off:?}");
    assert!(score(&off) < score(&on), "without links it falls: {off:?}\non: {on:?}");
    assert!(rank(&on, "namesake").is_none_or(|r| r > rank(&on, "director").unwrap()), "{on:?}");
}

#[test]
fn a_concept_the_question_writes_in_lower_case_does_not_seed_the_walk_beside_a_name() {
    let docs = vec![
        doc("film", "Blue Harbor", "Blue Harbor is a 1950 film directed by Tom Reed. The music of Blue Harbor was by Carl Vinter."),
        doc("carl", "Carl Vinter", "Carl Vinter was a Norwegian musician. Carl Vinter was born in Bergen."),
        doc("tom", "Tom Reed", "Tom Reed was an English director. Tom Reed was born in Leeds."),
        // "Composer" opens a sentence here, so the graph holds it as a name of this page's
        doc("junk", "Dog Days (film)", "Dog Days is a 1976 comedy film. Composer: Piero Piccioni. Composer Piero Piccioni was born in Turin."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    assert!(g.entity("composer").is_some_and(|e| e.docs().any(|d| d == "junk")), "the concept is an entity of the junk page");
    let q = "Where was the composer of film Blue Harbor born?";
    let ranked = |w: &str| graph_only(&g, &h, q, 4, "concept_weight", w).documents;
    let score = |docs: &[streamrag_schemas::ScoredDocument], id: &str| docs.iter().find(|d| d.id == id).map_or(0.0, |d| d.score);
    let (whole, none) = (ranked("1"), ranked("0"));
    // the concept's seed is what carried the junk page: without it the page keeps only what the
    // walk from the film brings
    assert!(score(&none, "junk") < 0.6 * score(&whole, "junk"), "the concept's page falls: 1 {whole:?}\n0 {none:?}");
    assert!(score(&none, "carl") >= score(&whole, "carl") - 1e-9, "the composer's page does not: 1 {whole:?}\n0 {none:?}");
    assert!(score(&none, "carl") > 2.0 * score(&none, "junk"), "{none:?}");
    // a question that writes no name with a capital keeps its concepts
    let lower = |w: &str| graph_only(&g, &h, "where was the composer piero piccioni born?", 4, "concept_weight", w).documents;
    assert_eq!(lower("0").iter().map(|d| d.id.clone()).collect::<Vec<_>>(), lower("1").iter().map(|d| d.id.clone()).collect::<Vec<_>>());
}

/// A concept shared by passages carries the walk from one to the others ("irrigation canals" on
/// the ruler's page, a town's and a river's) whatever they say of it: `concept_edge` weighs the
/// edge between a passage and a concept it mentions.
#[test]
fn a_named_question_walks_a_shared_concept_at_its_edge_weight() {
    let docs = vec![
        doc("ruler", "Zorvan Redbeard", "Zorvan Redbeard was a ruler of Quell. He dug irrigation canals."),
        doc("town", "Ostra", "Ostra is a market town. The irrigation canals of the plain are old."),
        doc("river", "Velt", "Velt is a river. The irrigation canals there are long."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    let canals = g.entity("irrigation canals").expect("the shared concept is an entity");
    assert_eq!(canals.docs().count(), 3, "every page mentions it");
    let score = |docs: &[streamrag_schemas::ScoredDocument], id: &str| docs.iter().find(|d| d.id == id).map_or(0.0, |d| d.score);
    let share = |q: &str, w: &str| {
        let d = graph_only(&g, &h, q, 3, "concept_edge", w).documents;
        (score(&d, "town") + score(&d, "river")) / score(&d, "ruler")
    };
    let q = "What did Zorvan Redbeard dig?";
    assert!(share(q, "0.03") < 0.5 * share(q, "1"), "the other pages get less through the concept: {} against {}", share(q, "0.03"), share(q, "1"));
    assert!(share(q, "1") > 0.0, "at 1 the concept carries the walk to them");
}

/// A question about one named thing ("the mother of Lord Ashby") needs two pages: that thing's
/// and the page of something its page names. The relation is written otherwise there ("son of
/// Margaret Hale"), so no fact matches "mother", while a page that is not named there holds
/// the question's words ("Anne Ashby ... mother ... born"). With hop pages the page asked from
/// ranks first and the best scored page it names second; without, the wordy page comes before
/// one of them.
#[test]
fn the_second_page_of_a_question_about_one_thing_is_one_its_page_names() {
    let docs = vec![
        doc("lord", "Lord Ashby", "Lord Ashby was an English landowner, the son of Margaret Hale and the Earl of Fenwick. Lord Ashby sat in the House of Lords."),
        doc("margaret", "Margaret Hale", "Margaret Hale was an English noblewoman and letter writer. Margaret Hale lived at Fenwick Hall."),
        doc("earl", "Earl of Fenwick", "The Earl of Fenwick was a title in the Peerage of England. The Earl of Fenwick held lands in Kent."),
        doc("anne", "Anne Ashby", "Anne Ashby was a mother and a novelist. Anne Ashby was born in York, and her mother was born in Leeds."),
        doc("hall", "Fenwick Hall", "Fenwick Hall is a country house in Kent."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    let q = "Where was the mother of Lord Ashby born?";
    let ranked = |hop: &str| ranked_with(&g, &h, q, 5, &[("hop_pages", hop)]);
    let (on, off) = (ranked("1"), ranked("0"));
    assert_eq!(on[0], "lord", "the page asked from first: {on:?}");
    assert!(["margaret", "earl"].contains(&on[1].as_str()), "then a page it names: {on:?}");
    let pos = |v: &[String], id: &str| v.iter().position(|d| d == id).unwrap_or(usize::MAX);
    assert!(pos(&on, "anne") > 1, "the wordy page below the page named there: {on:?}");
    assert!(pos(&off, "anne") < pos(&off, "margaret").max(pos(&off, "earl")), "without hop pages the wordy page comes before one of them: {off:?}");
    // a question about two things is left as it was
    let two = "Was Lord Ashby born before Anne Ashby?";
    let both = |hop: &str| {
        let mut p = h.params.clone();
        p.set("hop_pages", hop).unwrap();
        Retriever::Hybrid(Arc::new(Hybrid { params: p, ..h.clone() })).retrieve(&g, two, 5).unwrap().documents.into_iter().map(|d| (d.id, d.score)).collect::<Vec<_>>()
    };
    assert_eq!(both("1"), both("0"));
}

/// Of the pages the page asked from names, the one whose fact there says what the question
/// asks rises (`hop_fact`): Lord Ashby's page names his wife and his school, the school's page
/// holds more of the question's words, but the question asks for the wife, and the fact that
/// names her ("married") is nearest the question by its embedding.
#[test]
fn the_page_named_by_the_fact_the_question_asks_about_is_the_second() {
    let docs = vec![
        doc("lord", "Lord Ashby", "Lord Ashby was an English landowner. Lord Ashby married Margaret Hale in 1790. Lord Ashby was educated at Fenwick Hall."),
        doc("margaret", "Margaret Hale", "Margaret Hale was an English noblewoman and letter writer."),
        doc("hall", "Fenwick Hall", "Fenwick Hall is a school in Kent. Lord Ashby was a pupil there; the wife of its founder was born there, and where each wife was born is written in its register."),
        doc("york", "York", "York is a city in England."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    let q = "Where was the wife of Lord Ashby born?";
    // facts matched by their words alone, as a corpus too large for every fact's vector to be
    // read: "married" does not write "wife". (The school's page also gives concepts, "pupil",
    // "wife", "founder", "register": more of the walk's mass than the default weight of 4 makes
    // up for on four pages; 10, which measured the same as 4 on 2Wiki's questions 0-499, does.)
    let ranked = |w: &str| ranked_with(&g, &h, q, 4, &[("hop_fact", w), ("fact_dense", "0")]);
    let (on, off) = (ranked("10"), ranked("0"));
    assert_eq!(on[..2], ["lord", "margaret"], "the wife's page second: {on:?}");
    let pos = |v: &[String], id: &str| v.iter().position(|d| d == id).unwrap_or(usize::MAX);
    assert!(pos(&off, "hall") < pos(&off, "margaret"), "by score alone the wordier page first: {off:?}");
}

/// The page asked from is the one whose whole title the question writes, even when the name that
/// links is another's: the 4th Baron's page writes his name with a middle name, so no entity is
/// titled as the question writes him and the name linked is the 1st Baron's; with `hop_titled`
/// the 4th Baron's page is the anchor, and his father's page, which it names, comes next.
#[test]
fn the_page_whose_title_the_question_writes_is_the_one_asked_from() {
    let docs = vec![
        doc("first", "Alexander Baring, 1st Baron Ashburton", "Alexander Baring, 1st Baron Ashburton was a British banker and politician. Alexander Baring married Anne Louisa Bingham."),
        doc("fourth", "Alexander Baring, 4th Baron Ashburton", "Alexander Hugh Baring, 4th Baron Ashburton was a British politician. He was the son of Francis Baring, 3rd Baron Ashburton."),
        doc("third", "Francis Baring, 3rd Baron Ashburton", "Francis Baring, 3rd Baron Ashburton was a British politician who died in 1868."),
        doc("anne", "Anne Louisa Bingham", "Anne Louisa Bingham was an American socialite who died in 1848."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    let q = "When did Alexander Baring, 4Th Baron Ashburton's father die?";
    let ranked = |on: &str| ranked_with(&g, &h, q, 4, &[("hop_titled", on)]);
    let (on, off) = (ranked("true"), ranked("false"));
    assert_eq!(on[..2], ["fourth", "third"], "the page the question writes, then the father's: {on:?}");
    let pos = |v: &[String], id: &str| v.iter().position(|d| d == id).unwrap_or(usize::MAX);
    assert!(pos(&off, "third") > 1, "without, the 1st Baron's page is asked from: {off:?}");
}

/// A question about two named things asks for their two pages: with `titled_pages` the pages
/// whose whole titles it writes come first, above a page that holds more of its other words.
#[test]
fn the_pages_a_question_about_two_things_titles_come_first() {
    let docs = vec![
        doc("em", "Entertain Magazine", "Entertain Magazine is a British entertainment magazine first published in 2008."),
        doc("wc", "Woman's Century", "Woman's Century was a Canadian periodical, published from 1913 to 1921."),
        doc("ff", "First for Women", "First for Women is a magazine for women. It came out first in 1989, before Entertain Magazine came out, and Woman's Century came out first of all the magazines; First for Women came out weekly, Entertain Magazine monthly, Woman's Century monthly."),
        doc("mg", "Magazine", "A magazine is a periodical publication."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = hybrid_over(dir.path(), docs);
    let q = "Which magazine came out first, Entertain Magazine or Woman's Century?";
    let (on, off) = (ranked_with(&g, &h, q, 4, &[("titled_pages", "1")]), ranked_with(&g, &h, q, 4, &[("titled_pages", "0")]));
    let mut top2 = on[..2].to_vec();
    top2.sort();
    assert_eq!(top2, ["em", "wc"], "the two pages the question titles first: {on:?}");
    let pos = |v: &[String], id: &str| v.iter().position(|d| d == id).unwrap_or(usize::MAX);
    assert!(pos(&off, "ff") < pos(&off, "em").max(pos(&off, "wc")), "without, the wordy page comes before one of them: {off:?}");
}
