//! The GLM retriever model on the real all-MiniLM-L6-v2 weights: it trains (the loss falls and
//! the positive entity overtakes the others on a toy graph), and a saved checkpoint loads back
//! to the same scores and resumes with the same optimizer state.

use std::path::PathBuf;
use std::time::Instant;

use candle_core::{Device, Tensor};
use streamrag_glm::graph::{Mode, Triplet};
use streamrag_glm::loss::glm_loss;
use streamrag_glm::model::{BackboneKind, GlmConfig, GlmModel, Training};
use streamrag_glm::optim::AdamW;

fn model_dir() -> PathBuf {
    let dir = std::env::var("STREAMRAG_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models/all-MiniLM-L6-v2"));
    assert!(dir.join("model.safetensors").exists(), "no all-MiniLM-L6-v2 at {} (scripts/test.sh fetches it)", dir.display());
    dir
}

fn config() -> GlmConfig {
    GlmConfig {
        backbone: BackboneKind::Bert,
        mode: Mode::Global,
        question_text: true,
        max_hops: 2,
        max_triplets: 600,
        top_entities: 20,
        hidden: 0,
        question_dim: 0,
        training: Training::default(),
    }
}

fn toy() -> (Vec<Triplet>, &'static str) {
    (
        vec![
            Triplet::named("Night Train", "directed by", "Jerzy Kawalerowicz"),
            Triplet::named("Jerzy Kawalerowicz", "born in", "Gwoździec"),
            Triplet::named("Night Train", "released in", "1959"),
            Triplet::named("Gwoździec", "located in", "Ukraine"),
        ],
        "Where was the director of Night Train born?",
    )
}

#[test]
fn trains_saves_loads_and_resumes() {
    let dev = Device::Cpu;
    let dir = model_dir();
    let model = GlmModel::init(&dir, &dir, config(), &dev).unwrap();
    assert_eq!(model.config.backbone, BackboneKind::Bert);
    assert_eq!((model.config.hidden, model.config.question_dim), (384, 384));
    let (triplets, q) = toy();
    let g = model.graph(&triplets, q).unwrap();
    let ents: Vec<String> = g.entities().map(|n| n.id.clone()).collect();
    let target = ents.iter().position(|e| e == "Gwoździec").expect("the entity is in the graph");
    let labels: Vec<f32> = (0..ents.len()).map(|i| if i == target { 1.0 } else { 0.0 }).collect();
    let labels = Tensor::from_vec(labels, (1, ents.len()), &dev).unwrap();
    let mask = Tensor::ones((1, ents.len()), candle_core::DType::F32, &dev).unwrap();
    let qv = model.question.embed(&[q]).unwrap();
    let mut opt = AdamW::new(model.param_groups(5e-4, 1e-4), 0.01, Some(1.0));
    let mut losses = vec![];
    let t0 = Instant::now();
    for _ in 0..12 {
        let (logits, _) = model.logits(&[&g], &qv).unwrap();
        let loss = glm_loss(&logits, &labels, &mask).unwrap();
        losses.push(loss.to_scalar::<f32>().unwrap());
        opt.step(&loss.backward().unwrap()).unwrap();
    }
    eprintln!("12 steps on {} tokens: {:?}; losses {losses:?}", g.len(), t0.elapsed());
    assert!(losses[11] < 0.5 * losses[0], "the loss falls: {losses:?}");
    let scored = model.score(&[&g], &[q]).unwrap();
    assert_eq!(scored[0][0].0, "Gwoździec", "{scored:?}");

    let ckpt = tempfile::tempdir().unwrap();
    model.save(ckpt.path()).unwrap();
    opt.save(&ckpt.path().join("optimizer.safetensors")).unwrap();
    let back = GlmModel::load(ckpt.path(), &dev).unwrap();
    let again = back.score(&[&back.graph(&triplets, q).unwrap()], &[q]).unwrap();
    for (a, b) in scored[0].iter().zip(&again[0]) {
        assert_eq!(a.0, b.0);
        assert!((a.1 - b.1).abs() < 1e-4, "{a:?} vs {b:?}");
    }
    // resume: the reloaded model and optimizer take the same step as the original
    let mut opt2 = AdamW::new(back.param_groups(5e-4, 1e-4), 0.01, Some(1.0));
    opt2.load(&ckpt.path().join("optimizer.safetensors"), &dev).unwrap();
    for (m, o) in [(&model, &mut opt), (&back, &mut opt2)] {
        let (logits, _) = m.logits(&[&g], &qv).unwrap();
        o.step(&glm_loss(&logits, &labels, &mask).unwrap().backward().unwrap()).unwrap();
    }
    let (a, b) = (model.score(&[&g], &[q]).unwrap(), back.score(&[&g], &[q]).unwrap());
    for (x, y) in a[0].iter().zip(&b[0]) {
        assert!((x.1 - y.1).abs() < 1e-4, "{x:?} vs {y:?}");
    }
}
