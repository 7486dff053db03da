//! Property tests (proptest) over every wire decoder, the LLM response parsers and the
//! built-in extractor: arbitrary and
//! mutated input gives an error or a value, never a panic; what a stage accepts goes through
//! the whole in-process path (validate -> extract -> resolve -> apply) without panicking, and
//! the built-in extractor only reports names it found in the text.
//! More cases: PROPTEST_CASES=100000 cargo test -p streamrag-operators --test fuzz_props --release

use proptest::prelude::*;
use streamrag_operators::graph::{Dirty, GraphState};
use streamrag_operators::openie::{extraction_of, validate, Extractor};
use streamrag_operators::{query, retrieve, Limits};
use streamrag_schemas::{decode, Answer, DeadLetter, Document, Extraction, GraphChange, GraphDelta, Query, SourceRef};

/// Valid LLM responses (entities, triples), to mutate.
const LLM_SEEDS: &[&str] = &[
    r#"{"named_entities": ["Marie Curie", "Warsaw", "1867"]}"#,
    r#"```json
{"triples": [["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "Nobel Prize"]]}
```"#,
    r#"Sure! {"triples": [["A", "r", "B"], ["A", "r"], 3, ["x", "", "y"]]} Hope this helps."#,
];

/// Valid messages of every type, to mutate.
const SEEDS: &[&str] = &[
    r#"{"schema_version":1,"id":"d1","title":"Night Train","text":"Night Train is a 1959 film directed by Jerzy Kawalerowicz."}"#,
    r#"{"schema_version":1,"op":"delete","id":"d1"}"#,
    r#"{"schema_version":1,"id":"d2","title":"T","text":"x","triples":[["a","r","b"]],"metadata":{"k":[1,2]}}"#,
    r#"{"schema_version":1,"query_id":"q1","question":"Where was he born?","top_k":3}"#,
    r#"{"schema_version":1,"doc_id":"d1","title":"T","entities":[{"name":"A","kind":"name"}],"triples":[{"subject":"A","relation":"r","object":"B"}],"extractor":"builtin","source":{"topic":"t","partition":0,"offset":1}}"#,
];

fn mutate(seed: &str, cut: usize, insert: &str) -> String {
    let mut s: Vec<char> = seed.chars().collect();
    let at = cut % (s.len() + 1);
    let end = (at + insert.chars().count() % 4).min(s.len());
    s.splice(at..end, insert.chars());
    s.into_iter().collect()
}

fn decode_all(bytes: &[u8]) {
    let _ = decode::<Document>(bytes);
    let _ = decode::<Extraction>(bytes);
    let _ = decode::<GraphDelta>(bytes);
    let _ = decode::<GraphChange>(bytes);
    let _ = decode::<Query>(bytes);
    let _ = decode::<Answer>(bytes);
    let _ = decode::<DeadLetter>(bytes);
}

/// The openie -> resolve -> kg-writer path of one accepted document, in process.
fn through_the_pipeline(doc: &Document) {
    let limits = Limits::default();
    if validate(doc, &limits).is_err() {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let source = SourceRef { topic: "docs".into(), partition: 0, offset: 0, timestamp_ms: None };
    if let Ok(ex) = rt.block_on(extraction_of(doc, source, &Extractor::Builtin)) {
        let delta = streamrag_operators::resolve::resolve(&ex);
        let mut g = GraphState::new();
        g.apply(&delta.doc_id, GraphState::entry_of(&delta).as_ref(), &mut Dirty::default());
        let _ = g.stats();
        let _ = retrieve::Retriever::Ppr(Default::default()).retrieve(&g, &doc.title, 5);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes);
    }

    #[test]
    fn mutated_messages_never_panic_a_decoder_or_the_pipeline(seed in 0..SEEDS.len(), cut in 0usize..400, insert in "\\PC{0,12}") {
        let text = mutate(SEEDS[seed], cut, &insert);
        decode_all(text.as_bytes());
        if let Ok(doc) = decode::<Document>(text.as_bytes()) {
            through_the_pipeline(&doc);
        }
        if let Ok(q) = decode::<Query>(text.as_bytes()) {
            let _ = query::validate(&q, &Limits::default());
        }
    }

    /// Ids around the 512-byte bound, with any control character or none, through the wire
    /// decoder and the validators: accepted exactly when within the bounds; the error names
    /// the field.
    #[test]
    fn ids_and_titles_are_accepted_exactly_within_their_bounds(
        len in 505usize..520,
        wide in any::<bool>(),
        ctl in proptest::option::of(prop_oneof![0u32..0x20, Just(0x7f), 0x80u32..0xa0]),
        at in 0usize..600,
        title_len in 1015usize..1030,
    ) {
        // ASCII or two-byte characters, so the bound falls inside a character too
        let unit = if wide { "é" } else { "a" };
        let mut id: String = unit.repeat(len / unit.len());
        if let Some(c) = ctl {
            let mut at = at.min(id.len());
            while !id.is_char_boundary(at) { at -= 1; }
            id.insert(at, char::from_u32(c).unwrap());
        }
        let title = "t".repeat(title_len);
        let doc = serde_json::json!({"schema_version": 1, "id": id, "title": title, "text": "Some text."}).to_string();
        let q = serde_json::json!({"schema_version": 1, "query_id": id, "question": "Where?", "top_k": 3}).to_string();
        let limits = Limits::default();
        let id_ok = id.len() <= 512 && ctl.is_none();
        let doc = decode::<Document>(doc.as_bytes()).expect("valid JSON decodes");
        match validate(&doc, &limits) {
            Ok(()) => prop_assert!(id_ok && title_len <= 1024),
            Err(e) => {
                prop_assert!(!id_ok || title_len > 1024);
                prop_assert!(e.message.contains(if id_ok { "title" } else { "document id" }), "{}", e.message);
            }
        }
        let q = decode::<Query>(q.as_bytes()).expect("valid JSON decodes");
        prop_assert_eq!(query::validate(&q, &limits).is_ok(), id_ok);
    }

    #[test]
    fn llm_responses_never_panic_the_parsers(seed in 0..LLM_SEEDS.len(), cut in 0usize..200, insert in "\\PC{0,12}", raw in "\\PC{0,200}") {
        use streamrag_operators::llm_extract::{parse_entities, parse_triples};
        for text in [mutate(LLM_SEEDS[seed], cut, &insert), raw] {
            if let Ok(names) = parse_entities(&text) {
                prop_assert!(names.iter().all(|n| !n.trim().is_empty()));
            }
            if let Ok(ts) = parse_triples(&text) {
                for t in ts.into_iter().flatten() {
                    prop_assert!(t.iter().all(|x| !x.trim().is_empty()), "{:?}", t);
                }
            }
            let _ = streamrag_operators::answer::final_answer(&text);
        }
    }

    #[test]
    fn the_extractor_takes_any_text_and_reports_only_names_it_saw(title in "\\PC{0,40}", text in "(\\PC{0,30}[.!?]? ){0,12}") {
        let got = streamrag_operators::extract::extract(&title, &text);
        // names are taken as written (the title) or with runs of whitespace made one space
        let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let (ft, fx) = (flat(&title), flat(&text));
        for m in &got.entities {
            prop_assert!(!m.name.trim().is_empty());
            let seen = [&title, &text, &ft, &fx].iter().any(|s| s.contains(&m.name));
            prop_assert!(seen, "{:?} is in neither {:?} nor {:?}", m.name, title, text);
        }
        for t in &got.triples {
            for part in [&t.subject, &t.relation, &t.object] {
                prop_assert!(!part.trim().is_empty(), "empty element in {:?}", t);
            }
        }
        through_the_pipeline(&Document::upsert("d", title, text));
    }
}
