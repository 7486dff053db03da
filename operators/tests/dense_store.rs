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
