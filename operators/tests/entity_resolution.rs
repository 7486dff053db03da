//! Entity resolution with the real all-MiniLM-L6-v2: merges of the same name only, links above
//! the threshold, the numbers and qualifier guards, persistence across a restart, and the
//! resolve stage's deltas.

use std::path::PathBuf;

use candle_core::Device;
use streamrag_glm::SentenceEncoder;
use streamrag_operators::config::Topics;
use streamrag_operators::resolve::{open_store, EntityResolver, Resolution, Resolve};
use streamrag_operators::runtime::Operator;
use streamrag_operators::transport::Record;
use streamrag_schemas::{decode, encode, Extraction, GraphDelta, Mention, SourceRef, Triple};

fn minilm() -> PathBuf {
    let d = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.models/all-MiniLM-L6-v2"));
    assert!(d.join("model.safetensors").exists(), "scripts/fetch-models.sh fetches all-MiniLM-L6-v2 into .models/");
    d
}

fn encoder() -> SentenceEncoder {
    SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap()
}

fn cos(e: &SentenceEncoder, a: &str, b: &str) -> f32 {
    let v = e.embed_vecs(&[a, b]).unwrap();
    v[0].iter().zip(&v[1]).map(|(x, y)| x * y).sum()
}

#[test]
fn only_the_same_name_merges_near_names_link_and_decisions_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let enc = encoder();
    // The pairs this test relies on, measured with the real model.
    let close = cos(&enc, "Barack Obama", "Barack H. Obama");
    let far = cos(&enc, "Barack Obama", "London");
    let apollo = cos(&enc, "Apollo 11", "Apollo 13");
    let bradley = cos(&enc, "David Bradley (director)", "David Bradley (actor)");
    eprintln!("cosines: obama/h-obama {close:.3}, obama/london {far:.3}, apollo 11/13 {apollo:.3}, bradley director/actor {bradley:.3}");
    assert!(close >= 0.8 && far < 0.8 && apollo >= 0.8 && bradley >= 0.8, "{close} {far} {apollo} {bradley}");

    let mut r = EntityResolver::open(enc, 0.8, Some(open_store(dir.path()).unwrap())).unwrap();
    let got = r
        .resolve_names(&["Barack Obama", "London", "Apollo 11", "barack obama", "Barack H. Obama", "Apollo 13", "LONDON", "Martin Luther King Jr.", "Martin Luther King Junior"])
        .unwrap();
    let ids: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
    assert_eq!(
        ids,
        vec!["barack obama", "london", "apollo 11", "barack obama", "barack h obama", "apollo 13", "london", "martin luther king jr", "martin luther king jr"]
    );
    let how: Vec<Resolution> = got.iter().map(|g| g.1).collect();
    use Resolution::*;
    assert_eq!(how, vec![New, New, New, Known, Linked, New, Known, New, Merged], "a middle initial links, a number parts, \"Jr\" is \"Junior\"");
    assert_eq!(r.links("barack h obama").iter().map(|l| l.to.as_str()).collect::<Vec<_>>(), vec!["barack obama"]);
    assert!((r.links("barack h obama")[0].confidence - close).abs() < 1e-4, "the link's confidence is the names' cosine");
    assert!(r.links("apollo 13").is_empty());

    // A bare name and its qualified forms link; two different qualifiers never do.
    let got = r.resolve_names(&["David Bradley (director)", "David Bradley", "David Bradley (actor)"]).unwrap();
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), vec![New, Linked, Linked]);
    assert!(r.links("david bradley").iter().any(|l| l.to == "david bradley director"));
    assert_eq!(r.links("david bradley actor").iter().map(|l| l.to.as_str()).collect::<Vec<_>>(), vec!["david bradley"]);
    // A styled title links to the name it is built on, whatever their cosine; two styles of
    // one name part as two qualifiers do.
    let got = r.resolve_names(&["Siemowit IV, Duke of Masovia", "Siemowit IV", "Siemowit IV, Prince of Plock"]).unwrap();
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), vec![New, Linked, Linked]);
    assert!(r.links("siemowit iv").iter().any(|l| l.to == "siemowit iv duke of masovia"));
    assert_eq!(r.links("siemowit iv prince of plock").iter().map(|l| l.to.as_str()).collect::<Vec<_>>(), vec!["siemowit iv"]);
    assert_eq!(r.entities(), 12);
    let probe = r.encoder().embed_vecs(&["Dave Bradley", "Apollo 12", "Londres"]).unwrap();
    let near = |r: &EntityResolver| probe.iter().map(|v| r.nearest("probe", v, 5, false)).collect::<Vec<_>>();
    let before = near(&r);
    drop(r);

    // Reopened: every name is known (no new decision), links and qualifiers are back, the
    // index is rebuilt.
    let mut r = EntityResolver::open(encoder(), 0.8, Some(open_store(dir.path()).unwrap())).unwrap();
    assert_eq!(r.entities(), 12);
    assert_eq!(near(&r), before, "the index read back finds what it found");
    assert_eq!(r.canonical("martin luther king junior"), Some("martin luther king jr"));
    assert_eq!(r.links("barack h obama")[0].to, "barack obama");
    let again = r.resolve_names(&["Barack H. Obama", "Apollo 13"]).unwrap();
    assert_eq!(again, vec![("barack h obama".to_string(), Known), ("apollo 13".to_string(), Known)]);
    let v = r.resolve_names(&["David Bradley (footballer)"]).unwrap();
    assert_eq!(v[0].1, Linked);
    assert_eq!(
        r.links("david bradley footballer").iter().map(|l| l.to.as_str()).collect::<Vec<_>>(),
        vec!["david bradley"],
        "the qualifiers are remembered across the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolve_stage_publishes_merged_ids() {
    let ex = |doc: &str, s: &str, o: &str| Extraction {
        access: Default::default(),
        schema_version: streamrag_schemas::SCHEMA_VERSION,
        op: Default::default(),
        doc_id: doc.into(),
        title: doc.into(),
        entities: vec![Mention { name: s.into(), kind: None }],
        triples: vec![Triple { subject: s.into(), relation: "born in".into(), object: o.into() }],
        extractor: "test".into(),
        source: SourceRef { topic: "t".into(), partition: 0, offset: 0, timestamp_ms: None },
    };
    let rec = |o: i64, e: &Extraction| Record { topic: "triples".into(), partition: 0, offset: o, key: None, payload: encode(e), timestamp_ms: 0 };
    let mut stage = Resolve { topics: Topics::default(), resolver: Some(EntityResolver::open(encoder(), 0.8, None).unwrap()) };
    let out = stage
        .process_batch(&[rec(0, &ex("a", "Martin Luther King Jr.", "Atlanta")), Record { payload: b"junk".to_vec(), ..rec(1, &ex("x", "y", "z")) }, rec(2, &ex("b", "Martin Luther King Junior", "Atlanta, Georgia"))])
        .await
        .unwrap();
    assert!(out[1].is_err(), "a bad record fails alone");
    let d: Vec<GraphDelta> = [0, 2].iter().map(|&i| decode(&out[i].as_ref().unwrap()[0].payload).unwrap()).collect();
    assert_eq!(d[1].triples[0].subject_id, "martin luther king jr", "merged into the first name's entity");
    assert_eq!(d[1].triples[0].subject, "Martin Luther King Junior", "the document keeps its own name");
    assert_eq!(d[0].triples[0].subject_id, "martin luther king jr");
    assert!(d[0].links.is_empty());
    let l: Vec<(&str, &str)> = d[1].links.iter().map(|l| (l.id.as_str(), l.to_id.as_str())).collect();
    assert_eq!(l, vec![("atlanta georgia", "atlanta")], "a place with its state links to the place, not merged");

    // A near name gets its own id and a link, which every later document naming it carries.
    let out = stage.process_batch(&[rec(3, &ex("c", "Barack Obama", "Honolulu")), rec(4, &ex("d", "Barack H. Obama", "Chicago"))]).await.unwrap();
    let out2 = stage.process_batch(&[rec(5, &ex("e", "Barack H. Obama", "Washington"))]).await.unwrap();
    let d: Vec<GraphDelta> = out.iter().chain(&out2).map(|o| decode(&o.as_ref().unwrap()[0].payload).unwrap()).collect();
    assert!(d[0].links.is_empty());
    for later in &d[1..] {
        assert_eq!(later.triples[0].subject_id, "barack h obama");
        assert_eq!(later.links.len(), 1, "{:?}", later.links);
        assert_eq!((later.links[0].id.as_str(), later.links[0].to_id.as_str()), ("barack h obama", "barack obama"));
        assert!(later.links[0].confidence >= 0.8);
    }
}

/// A store written before the index was kept (vectors and decisions only) opens by rebuilding
/// the index once, and keeps it from then on.
#[test]
fn a_store_without_its_index_rebuilds_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let tree = open_store(dir.path()).unwrap();
    let mut r = EntityResolver::open(encoder(), 0.8, Some(tree.clone())).unwrap();
    r.resolve_names(&["Barack Obama", "London", "Apollo 11", "Ada Lovelace"]).unwrap();
    let v = r.encoder().embed_vecs(&["Barack H. Obama"]).unwrap().remove(0);
    let before = r.nearest("barack h obama", &v, 5, false);
    drop(r);
    let index_keys: Vec<_> = tree.scan_prefix(b"h\0").keys().chain(tree.scan_prefix(b"s\0").keys()).collect::<Result<_, _>>().unwrap();
    assert_eq!(index_keys.len(), 5, "four nodes and the index state");
    for k in index_keys {
        tree.remove(k).unwrap();
    }
    let r = EntityResolver::open(encoder(), 0.8, Some(tree.clone())).unwrap();
    assert_eq!(r.nearest("barack h obama", &v, 5, false), before);
    assert_eq!(tree.scan_prefix(b"h\0").count(), 4, "the rebuilt index is kept");
    drop(r);
    let r = EntityResolver::open(encoder(), 0.8, Some(tree)).unwrap();
    assert_eq!(r.nearest("barack h obama", &v, 5, false), before);
}
