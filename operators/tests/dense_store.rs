//! The persistent dense index with the real all-MiniLM-L6-v2 weights: each passage version is
//! embedded once, vectors and position survive a reopen, updates and deletions are exact, and
//! another encoder's vectors are not trusted.

use std::path::PathBuf;

use candle_core::Device;
use streamrag_glm::SentenceEncoder;
use streamrag_operators::passages::DocSink;
use streamrag_operators::retrieve::DenseIndex;

fn minilm() -> PathBuf {
    let d = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.models/all-MiniLM-L6-v2"));
    assert!(d.join("model.safetensors").exists(), "scripts/fetch-models.sh fetches all-MiniLM-L6-v2 into .models/");
    d
}

fn doc(id: &str, title: &str, text: &str) -> (String, String, String) {
    (id.into(), title.into(), text.into())
}

fn open(dir: &std::path::Path, encoder_id: &str) -> DenseIndex {
    let enc = SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap();
    DenseIndex::open(enc, dir, encoder_id).unwrap()
}

fn ids(ix: &DenseIndex, q: &str, k: usize) -> Vec<String> {
    let qv = ix.embed_questions(&[q]).unwrap();
    ix.nearest(&qv[0], k).into_iter().map(|d| d.id).collect()
}

#[test]
fn passages_are_embedded_once_and_survive_a_reopen_exactly() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ix = open(dir.path(), "minilm");
        assert_eq!(DocSink::position(&ix), Some(Default::default()), "a new store reads the topic from the start");
        let docs = [
            doc("a", "Insulin", "Insulin lowers blood glucose in patients with diabetes."),
            doc("b", "Warsaw", "Warsaw is the capital of Poland, on the Vistula."),
            doc("c", "Jazz", "Jazz is a music genre that originated in New Orleans."),
        ];
        assert_eq!(ix.upsert(&docs).unwrap(), 3);
        assert_eq!(ix.upsert(&docs).unwrap(), 0, "unchanged passages are not embedded again");
        assert_eq!(ids(&ix, "a hormone that treats diabetes", 1), vec!["a"]);
        // an update re-embeds that passage only; a deletion removes it
        assert_eq!(ix.upsert(&[docs[0].clone(), doc("b", "Warsaw", "Warsaw hosts a famous jazz festival every summer.")]).unwrap(), 1);
        ix.remove("c").unwrap();
        DocSink::commit(&ix, &[(0, 7)].into()).unwrap();
        assert_eq!(ix.len(), 2);
        assert_eq!(ids(&ix, "jazz music", 1), vec!["b"]);
    }
    let ix = open(dir.path(), "minilm");
    assert_eq!(DocSink::position(&ix), Some([(0, 7)].into()), "the reader goes on from the commit");
    assert_eq!(ix.len(), 2);
    assert_eq!(ids(&ix, "jazz music", 2), vec!["b", "a"], "the updated vector was kept, the deleted one is gone");
    assert_eq!(ix.upsert(&[doc("a", "Insulin", "Insulin lowers blood glucose in patients with diabetes.")]).unwrap(), 0, "loaded vectors count as embedded");
    drop(ix);
    // vectors another encoder wrote are dropped, with the position: the topic is read again
    let other = open(dir.path(), "another-encoder");
    assert_eq!(other.len(), 0);
    assert_eq!(DocSink::position(&other), Some(Default::default()));
}

#[test]
fn a_question_asked_again_is_not_embedded_again_and_gets_its_own_vector() {
    let enc = SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap();
    let own = |q: &str| enc.embed_vecs(&[q]).unwrap().remove(0);
    let (q1, q2, q3) = ("Who discovered radium?", "Which river flows through Warsaw?", "When was insulin first used?");
    let ix = DenseIndex::new(SentenceEncoder::load(&minilm(), &Device::Cpu).unwrap());
    let first = ix.embed_questions(&[q1, q2, q1]).unwrap();
    assert_eq!(ix.questions_kept(), 2, "a question asked twice in one batch is embedded once");
    assert_eq!(first[0], first[2]);
    let near = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4);
    assert!(near(&first[0], &own(q1)) && near(&first[1], &own(q2)), "each question gets its own vector");
    assert!(!near(&first[0], &first[1]));
    // asked again, with a new one: the kept vectors exactly, the new one embedded
    let again = ix.embed_questions(&[q2, q3, q1]).unwrap();
    assert_eq!(ix.questions_kept(), 3);
    assert_eq!(again[0], first[1]);
    assert_eq!(again[2], first[0]);
    assert!(near(&again[1], &own(q3)));
}
