//! The persistent fact vectors with the real all-MiniLM-L6-v2 weights: each fact is embedded
//! once, when it is asserted; a retraction removes it; a fact re-asserted under other names is
//! embedded again; vectors and position survive a reopen; another encoder's are not trusted;
//! the reader skips a record it cannot decode and moves on. Entity names the same way: embedded
//! when an entity first appears, dropped when its last mention goes, found by a question that
//! writes them another way; a store from before them reads the topic again to fill them.

use std::path::PathBuf;
use std::sync::Arc;

use candle_core::Device;
use streamrag_glm::SentenceEncoder;
use streamrag_operators::retrieve::{FactVectors, FactsReader};
use streamrag_operators::transport::Record;
use streamrag_operators::Topics;
use streamrag_schemas::{encode, EntityRef, GraphChange, ResolvedTriple, SourceRef, SCHEMA_VERSION};

fn minilm() -> PathBuf {
    let d = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.models/all-MiniLM-L6-v2"));
    assert!(d.join("model.safetensors").exists(), "scripts/fetch-models.sh fetches all-MiniLM-L6-v2 into .models/");
    d
}

fn encoder() -> Arc<SentenceEncoder> {
    Arc::new(SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap())
}

fn t(s: &str, r: &str, o: &str) -> ResolvedTriple {
    let id = |x: &str| x.to_lowercase();
    ResolvedTriple { subject_id: id(s), subject: s.into(), relation: r.into(), object_id: id(o), object: o.into() }
}

fn change(asserted: Vec<ResolvedTriple>, retracted: Vec<ResolvedTriple>) -> GraphChange {
    GraphChange {
        schema_version: SCHEMA_VERSION,
        op: Default::default(),
        doc_id: "d".into(),
        asserted,
        retracted,
        entities_added: vec![],
        entities_removed: vec![],
        source: SourceRef { topic: "streamrag.graph-deltas".into(), partition: 0, offset: 0, timestamp_ms: None },
    }
}

fn cos(ix: &FactVectors, enc: &SentenceEncoder, key: (&str, &str, &str), q: &str) -> Option<f32> {
    let qv = enc.embed_vecs(&[q]).unwrap();
    ix.cosine(key.0, key.1, key.2, &qv[0])
}

#[test]
fn facts_are_embedded_when_asserted_removed_when_retracted_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let enc = encoder();
    let insulin = ("insulin", "treats", "diabetes");
    let warsaw = ("warsaw", "lies on", "vistula");
    let q = "which hormone is used against diabetes";
    let before;
    {
        let ix = FactVectors::open(enc.clone(), dir.path(), "minilm").unwrap();
        assert!(ix.position().is_empty(), "a new store reads the topic from the start");
        let both = change(vec![t("Insulin", "treats", "Diabetes"), t("Warsaw", "lies on", "Vistula")], vec![]);
        assert_eq!(ix.apply(std::slice::from_ref(&both)).unwrap(), 2);
        assert_eq!(ix.apply(&[both]).unwrap(), 0, "a fact re-asserted with the same text keeps its vector");
        let (a, b) = (cos(&ix, &enc, insulin, q).unwrap(), cos(&ix, &enc, warsaw, q).unwrap());
        assert!(a > b + 0.2, "the insulin fact is the one near the question: {a} against {b}");
        // retracted: gone; asserted and retracted in one batch: the later word wins
        assert_eq!(ix.apply(&[change(vec![], vec![t("Warsaw", "lies on", "Vistula")])]).unwrap(), 0);
        assert_eq!(cos(&ix, &enc, warsaw, q), None);
        let flip = [change(vec![t("Paris", "capital of", "France")], vec![]), change(vec![], vec![t("Paris", "capital of", "France")])];
        assert_eq!(ix.apply(&flip).unwrap(), 0, "asserted then retracted in one batch: nothing to embed");
        assert_eq!(cos(&ix, &enc, ("paris", "capital of", "france"), q), None);
        assert_eq!(ix.len(), 1);
        // the same fact under another name of its subject: embedded again
        let renamed = ResolvedTriple { subject: "Human insulin".into(), ..t("Insulin", "treats", "Diabetes") };
        assert_eq!(ix.apply(&[change(vec![renamed], vec![])]).unwrap(), 1, "new text, same fact: embedded again");
        assert_eq!(ix.len(), 1);
        before = cos(&ix, &enc, insulin, q).unwrap();
        assert_ne!(before, a);
        ix.commit(&[(0, 7)].into()).unwrap();
    }
    let ix = FactVectors::open(enc.clone(), dir.path(), "minilm").unwrap();
    assert_eq!(ix.position(), [(0, 7)].into(), "the reader goes on from the commit");
    assert_eq!(ix.len(), 1);
    assert_eq!(cos(&ix, &enc, insulin, q), Some(before), "the vector reads back exactly");
    assert_eq!(cos(&ix, &enc, warsaw, q), None, "the retracted fact stays gone");
    drop(ix);
    let other = FactVectors::open(enc, dir.path(), "another encoder").unwrap();
    assert_eq!(other.len(), 0, "another encoder's vectors are dropped");
    assert!(other.position().is_empty());
}

#[test]
fn the_reader_skips_an_undecodable_record_and_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let ix = Arc::new(FactVectors::open(encoder(), dir.path(), "minilm").unwrap());
    let reader = FactsReader::new(Topics::default(), ix.clone());
    let rec = |offset: i64, payload: Vec<u8>| Record { topic: reader.topic().to_string(), partition: 0, offset, key: None, payload, timestamp_ms: 0 };
    let good = encode(&change(vec![t("Insulin", "treats", "Diabetes")], vec![]));
    reader.apply(&[rec(0, b"not json".to_vec()), rec(1, good)]).unwrap();
    assert_eq!(ix.len(), 1);
    assert_eq!(reader.progress(), [(0, 2)].into());
    drop(reader);
    let again = FactsReader::new(Topics::default(), ix);
    assert_eq!(again.progress(), [(0, 2)].into(), "a new reader starts from the committed position");
}

fn entities(added: &[&str], removed: &[&str]) -> GraphChange {
    let r = |n: &&str| EntityRef { id: n.to_lowercase(), name: n.to_string() };
    GraphChange { entities_added: added.iter().map(r).collect(), entities_removed: removed.iter().map(r).collect(), ..change(vec![], vec![]) }
}

#[test]
fn entity_names_are_embedded_when_they_appear_and_dropped_when_they_go() {
    let dir = tempfile::tempdir().unwrap();
    let enc = encoder();
    let q = enc.embed_vecs(&["In which city was the husband of Curie born?"]).unwrap().remove(0);
    {
        let ix = FactVectors::open(enc.clone(), dir.path(), "minilm").unwrap();
        let added = entities(&["Marie Curie", "Vistula", "Insulin", "Alfred Nobel"], &[]);
        assert_eq!(ix.apply(std::slice::from_ref(&added)).unwrap(), 4);
        assert_eq!(ix.apply(&[added]).unwrap(), 0, "an entity added again keeps its vector");
        assert_eq!(ix.entities(), ["alfred nobel", "insulin", "marie curie", "vistula"]);
        let cos = |id: &str| ix.entity_cosine(id, &q).unwrap();
        let others = ["vistula", "insulin", "alfred nobel"].map(cos);
        assert!(others.iter().all(|c| cos("marie curie") > c + 0.1), "the name the question writes in part is the nearest, by a margin: {} against {others:?}", cos("marie curie"));
        // removed: gone, and the order within a batch holds (removed, then added again: kept)
        ix.apply(&[entities(&[], &["Marie Curie", "Insulin"]), entities(&["Insulin"], &[])]).unwrap();
        assert_eq!(ix.entities(), ["alfred nobel", "insulin", "vistula"]);
        assert_eq!(ix.entity_cosine("marie curie", &q), None);
        ix.commit(&[(0, 3)].into()).unwrap();
    }
    let ix = FactVectors::open(enc.clone(), dir.path(), "minilm").unwrap();
    assert_eq!(ix.entities(), ["alfred nobel", "insulin", "vistula"], "the name vectors survive a reopen");
    assert_eq!(ix.position(), [(0, 3)].into());
    drop(ix);
    let other = FactVectors::open(enc, dir.path(), "another encoder").unwrap();
    assert!(other.entities().is_empty(), "another encoder's name vectors are dropped too");
}

#[test]
fn a_store_from_before_entity_vectors_reads_the_topic_again() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ix = FactVectors::open(encoder(), dir.path(), "minilm").unwrap();
        ix.apply(&[change(vec![t("Insulin", "treats", "Diabetes")], vec![])]).unwrap();
        ix.commit(&[(0, 1)].into()).unwrap();
    }
    // the store as an earlier version left it: no entities tree
    {
        let db = sled::open(dir.path()).unwrap();
        assert!(db.drop_tree("entities").unwrap());
        db.flush().unwrap();
    }
    let ix = FactVectors::open(encoder(), dir.path(), "minilm").unwrap();
    assert!(ix.position().is_empty(), "the entities were never read: the topic is read again");
    assert_eq!(ix.len(), 1, "the facts it holds are kept");
    assert_eq!(ix.apply(&[change(vec![t("Insulin", "treats", "Diabetes")], vec![])]).unwrap(), 0, "and not embedded again");
}
