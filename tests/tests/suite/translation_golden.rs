//! The BART-derived translation families (Marian, BART, mBART, M2M100) from Hugging Face
//! directories against `transformers` (float64) and CTranslate2, on random-weight models of
//! their real graphs (`tests/translation/*`, made by `tools/make_translation_golden.py`):
//! teacher-forced logits within 1e-4 of the logit scale, greedy and beam-4 tokens identical to
//! both references, at every ISA level. The layouts of published checkpoints that the first
//! fixtures do not have (`tools/make_zoo_golden.py`: untied Marian as `transformers` 5 and 4
//! save it, Marian with separate vocabularies, T5 v1.1 with 6 heads of 16 over a width of 32
//! and its untied, copied and ignored tensors) are held to `transformers` the same way.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tessel_kernels::Isa;
use tessel_model::config::StackKind;
use tessel_model::load::hf::bart::{self, Family};
use tessel_model::load::hf::{led, longt5, t5};
use tessel_model::{
    Batch, Limits, LoadOptions, MemoryType, Model, Request, SearchOptions, Session,
};
use tessel_tests::for_each_isa;
use tessel_tests::golden::{assert_teacher_forced_logits, ids, values};

const FIXTURES: [(&str, Family); 4] = [
    ("marian", Family::Marian),
    ("bart", Family::Bart),
    ("mbart", Family::MBart),
    ("m2m100", Family::M2m100),
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("translation")
        .join(name)
}

/// Fixtures of published layouts: name, family (`None`: T5).
const LAYOUTS: [(&str, Option<Family>); 5] = [
    ("marian_untied", Some(Family::Marian)),
    ("marian_untied_v4", Some(Family::Marian)),
    ("marian_separate", Some(Family::Marian)),
    ("t5_v1_1", None),
    ("pegasus_computed", Some(Family::Pegasus)),
];

struct Expected {
    src: Vec<u32>,
    forced: Vec<u32>,
    logits: Vec<f64>,
    greedy: Vec<u32>,
    beam4: Vec<u32>,
    /// CTranslate2's tokens, where the fixture has a CTranslate2 directory.
    ct2_greedy: Option<Vec<u32>>,
    ct2_beam4: Option<Vec<u32>>,
}

fn expected(name: &str) -> Expected {
    let bytes = std::fs::read(fixture(name).join("expected.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let ids = |n: &str| ids(&file, n);
    Expected {
        src: ids("src_ids"),
        forced: ids("decoder_input_ids"),
        logits: values(&file, "logits"),
        greedy: ids("greedy_tokens"),
        beam4: ids("beam4_tokens"),
        ct2_greedy: file
            .tensor("ct2_greedy_tokens")
            .ok()
            .map(|_| ids("ct2_greedy_tokens")),
        ct2_beam4: file
            .tensor("ct2_beam4_tokens")
            .ok()
            .map(|_| ids("ct2_beam4_tokens")),
    }
}

/// The decoder prompt (start, then the forced BOS where the generation config has one) and the
/// tokens the generation config bans.
fn generation(name: &str) -> (Vec<u32>, Vec<u32>) {
    let path = fixture(name).join("hf").join("generation_config.json");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let id = |key: &str| value[key].as_u64().map(|v| v as u32);
    let mut prompt = vec![id("decoder_start_token_id").unwrap()];
    prompt.extend(id("forced_bos_token_id"));
    let banned = value["bad_words_ids"]
        .as_array()
        .map(|words| {
            words
                .iter()
                .filter_map(|w| w.as_array().filter(|w| w.len() == 1))
                .map(|w| w[0].as_u64().unwrap() as u32)
                .collect()
        })
        .unwrap_or_default();
    (prompt, banned)
}

fn search(
    session: &mut Session<&Model>,
    prompt: &[u32],
    banned: &[u32],
    beam: usize,
    total: usize,
) -> Vec<u32> {
    let steps = total - prompt.len();
    let hyps = session
        .generate(
            Request::new(SearchOptions::beam(beam, steps))
                .prefix(prompt)
                .process(|step| {
                    for b in 0..step.beams {
                        let row = step.row_mut(b);
                        for &t in banned {
                            row[t as usize] = f32::NEG_INFINITY;
                        }
                    }
                }),
        )
        .unwrap();
    let mut tokens = prompt.to_vec();
    tokens.extend_from_slice(hyps.best().unwrap().tokens);
    tokens
}

#[test]
fn hugging_face_bart_family_matches_transformers_and_ctranslate2() {
    for (name, family) in FIXTURES {
        let (loaded, model) =
            bart::load_hf_dir(&fixture(name).join("hf"), 4, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded, family);
        let expected = expected(name);
        assert_eq!(
            Some(&expected.greedy),
            expected.ct2_greedy.as_ref(),
            "{name}: references agree"
        );
        assert_eq!(
            Some(&expected.beam4),
            expected.ct2_beam4.as_ref(),
            "{name}: references agree"
        );
        check(name, &model);
    }
}

/// Teacher-forced logits, greedy and beam-4 tokens of `model` against the fixture's
/// `transformers` references, at every ISA level.
fn check(name: &str, model: &Model) {
    let expected = expected(name);
    let (prompt, banned) = generation(name);
    for_each_isa(|isa| {
        let what = format!("{name} at {isa}");
        let mut session = Session::new(model, isa).unwrap();
        session.encode(&expected.src).unwrap();
        assert_teacher_forced_logits(&mut session, &expected.forced, &expected.logits, &what);
        let total = expected.greedy.len();
        assert_eq!(
            search(&mut session, &prompt, &banned, 1, total),
            expected.greedy,
            "{what}: greedy"
        );
        assert_eq!(
            search(&mut session, &prompt, &banned, 4, total),
            expected.beam4,
            "{what}: beam 4"
        );
    });
}

#[test]
fn published_layouts_read_the_tensors_transformers_reads() {
    for (name, family) in LAYOUTS {
        let dir = fixture(name).join("hf");
        let model = match family {
            Some(family) => {
                let (loaded, model) = bart::load_hf_dir(&dir, 4, &LoadOptions::default())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(loaded, family);
                model
            }
            None => t5::load_hf_dir(&dir, 32, 4, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}")),
        };
        check(name, &model);
    }
}

#[test]
fn hugging_face_t5_matches_transformers_and_ctranslate2() {
    for name in ["t5", "t5_tied"] {
        let model = t5::load_hf_dir(&fixture(name).join("hf"), 32, 4, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = expected(name);
        assert_eq!(
            Some(&expected.greedy),
            expected.ct2_greedy.as_ref(),
            "{name}: references agree"
        );
        check(name, &model);
    }
}

/// LED (`tests/translation/led`, `tools/make_led_golden.py`): Longformer's encoder with windows
/// of 2 and 3 positions on each side over a 23-token source, with global attention on the
/// first token (a session's default, as LED's model cards use it), on none, and on the first 3.
#[test]
fn hugging_face_led_matches_transformers() {
    let dir = fixture("led").join("hf");
    let model = led::load_hf_dir(&dir, 4, &LoadOptions::default()).unwrap();
    check("led", &model);
    let bytes = std::fs::read(fixture("led").join("expected.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let (src, forced) = (ids(&file, "src_ids"), ids(&file, "decoder_input_ids"));
    for global in [0, 3] {
        let logits = values(&file, &format!("logits_global{global}"));
        for_each_isa(|isa| {
            let mut session = Session::new(&model, isa).unwrap();
            assert_eq!(session.global_tokens(), 1, "LED's default");
            session.set_global_tokens(global);
            session.encode(&src).unwrap();
            let what = format!("led, {global} global tokens, at {isa}");
            assert_teacher_forced_logits(&mut session, &forced, &logits, &what);
        });
    }
}

/// LongT5 with local attention (`tests/translation/longt5_local`,
/// `tools/make_longt5_golden.py`): a radius of 3 over a 23-token source, T5's relative bias
/// inside the band, the published checkpoints' untied-but-unscaled output.
#[test]
fn hugging_face_longt5_local_matches_transformers() {
    let dir = fixture("longt5_local").join("hf");
    let model = longt5::load_hf_dir(&dir, 32, 4, &LoadOptions::default()).unwrap();
    check("longt5_local", &model);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let scratch = std::env::temp_dir().join(format!("tessel-longt5-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    // Attention types `transformers` does not have, and a transient-global block of 0
    // positions, are refused, naming what.
    for (kind, block, named) in [
        ("global", 16, "encoder_attention_type `global`"),
        ("transient-global", 0, "global_block_size"),
    ] {
        let mut config = config.clone();
        config["encoder_attention_type"] = kind.into();
        config["global_block_size"] = block.into();
        std::fs::write(scratch.join("config.json"), config.to_string()).unwrap();
        let err = longt5::load_hf_dir(&scratch, 32, 4, &LoadOptions::default()).unwrap_err();
        assert!(err.to_string().contains(named), "{kind}: {err}");
    }
    std::fs::remove_dir_all(&scratch).unwrap();
}

/// LongT5 with transient-global attention (`tests/translation/longt5_tglobal`,
/// `tools/make_longt5_golden.py tglobal`): a radius of 3 and one side key per block of 4
/// positions over a 27-token source (6 blocks, a 3-token tail joining the last), the side bias
/// by block distance, each layer's own aggregate norm; and a 3-token source, shorter than a
/// block (no side key), alone and batched with the long one.
#[test]
fn hugging_face_longt5_tglobal_matches_transformers() {
    let name = "longt5_tglobal";
    let dir = fixture(name).join("hf");
    let model = longt5::load_hf_dir(&dir, 32, 4, &LoadOptions::default()).unwrap();
    assert_eq!(model.config().global_block_size, Some(4));
    check(name, &model);
    let bytes = std::fs::read(fixture(name).join("expected.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let forced = ids(&file, "decoder_input_ids");
    let (short, short_logits) = (ids(&file, "short_src_ids"), values(&file, "short_logits"));
    let (long, long_logits) = (ids(&file, "src_ids"), values(&file, "logits"));
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).unwrap();
        session.encode(&short).unwrap();
        let what = format!("{name}, a source shorter than a block, at {isa}");
        assert_teacher_forced_logits(&mut session, &forced, &short_logits, &what);
        // Encoded in one pass, each source gets the logits it gets alone.
        let limits = Limits::of(model.config())
            .with_batch(2)
            .with_encode_sources(2);
        let mut batch = Batch::new(&model, isa, limits).unwrap();
        batch.encode_all(&[(0, &long), (1, &short)]).unwrap();
        let vocab = model.config().tgt_vocab;
        for (slot, logits) in [(0, &long_logits), (1, &short_logits)] {
            let bound = 1e-4 * logits.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            for step in 0..forced.len() {
                let got = batch.prefill(slot, &forced[..=step]).unwrap();
                let want = &logits[step * vocab..][..vocab];
                for (t, (&g, &w)) in got.iter().zip(want).enumerate() {
                    assert!(
                        (g as f64 - w).abs() <= bound,
                        "{name}, slot {slot} of a batch, at {isa}: step {step} token {t}: \
                         {g} vs {w}"
                    );
                }
            }
        }
    });
}

/// BART whose stacks differ (`tests/translation/bart_stacks`: the encoder's 4 heads and
/// feed-forward width 48, the decoder's 2 heads in self- and cross-attention and width 80;
/// `bart_ffn`: widths 48 and 80 alone, with its CTranslate2 directory) against `transformers`.
#[test]
fn bart_stacks_of_different_heads_and_widths_match_transformers() {
    for (name, (heads, d_ff)) in [
        ("bart_stacks", ((4, 2), (48, 80))),
        ("bart_ffn", ((4, 4), (48, 80))),
    ] {
        let (loaded, model) =
            bart::load_hf_dir(&fixture(name).join("hf"), 4, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded, Family::Bart);
        let config = model.config();
        let widths = |stack| (config.heads_in(stack), config.d_ff_in(stack));
        assert_eq!(
            (widths(StackKind::Encoder), widths(StackKind::Decoder)),
            ((heads.0, d_ff.0), (heads.1, d_ff.1)),
            "{name}"
        );
        let expected = expected(name);
        if let Some(greedy) = &expected.ct2_greedy {
            assert_eq!(greedy, &expected.greedy, "{name}: references agree");
            assert_eq!(expected.ct2_beam4.as_ref(), Some(&expected.beam4), "{name}");
        }
        check(name, &model);
    }
}

/// LED's stacks may differ as BART's do (its decoder is BART's): the config carries each
/// stack's heads and width, and a model of that shape runs.
#[test]
fn led_stacks_of_different_heads_and_widths_load_and_run() {
    let path = fixture("led").join("hf").join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let heads = config["encoder_attention_heads"].as_u64().unwrap() as usize;
    let d_model = config["d_model"].as_u64().unwrap() as usize;
    let decoder_heads = (1..heads)
        .rev()
        .find(|h| d_model.is_multiple_of(*h))
        .unwrap();
    config["decoder_attention_heads"] = decoder_heads.into();
    config["decoder_ffn_dim"] = 40.into();
    let (config, _) = led::config_from_hf(&config.to_string(), 4).unwrap();
    assert_eq!(config.heads_in(StackKind::Decoder), decoder_heads);
    assert_eq!(config.d_ff_in(StackKind::Decoder), 40);
    assert_ne!(config.heads_in(StackKind::Encoder), decoder_heads);
    let model = Model::random(config, 7).unwrap();
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).unwrap();
        session.encode(&[5, 6, 7, 8, 9]).unwrap();
        let hyps = session
            .generate(Request::new(SearchOptions::beam(2, 4)))
            .unwrap();
        assert!(hyps.best().is_some(), "{isa}");
    });
}

#[test]
fn stack_shapes_tessel_cannot_run_are_refused_naming_the_feature() {
    let path = fixture("bart").join("hf").join("config.json");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut moe = base.clone();
    moe["model_type"] = "nllb-moe".into();
    let err = bart::config_from_hf(&moe.to_string(), 4).unwrap_err();
    assert!(err.to_string().contains("nllb-moe"), "{err}");
}

/// Every hypothesis (tokens and score bits) of a search, best first.
type Found = Vec<(Vec<u32>, u32)>;

/// The hypotheses of a search as [`Found`].
fn outcome(hyps: tessel_model::Hypotheses<'_>) -> Found {
    hyps.iter()
        .map(|h| (h.tokens.to_vec(), h.score.to_bits()))
        .collect()
}

/// One sequence of a batch: its source, forced start, beam and length limit.
struct Job {
    src: Vec<u32>,
    prefix: Vec<u32>,
    beam: usize,
    steps: usize,
}

/// Sources of several lengths, forced starts of several lengths (so the sequences of a step sit
/// at different positions), greedy and beam 4, and length limits that end some searches
/// before others.
fn jobs(name: &str) -> Vec<Job> {
    let expected = expected(name);
    let (prompt, _) = generation(name);
    let src = &expected.src;
    let mut longer = prompt.clone();
    longer.extend_from_slice(&expected.greedy[prompt.len()..prompt.len() + 2]);
    let cut = |n: usize| {
        let mut s = src[..n.min(src.len() - 1)].to_vec();
        s.push(src[src.len() - 1]);
        s
    };
    let job = |src: Vec<u32>, prefix: &Vec<u32>, beam, steps| Job {
        src,
        prefix: prefix.clone(),
        beam,
        steps,
    };
    // 24 rows at the first step: the products take the blocked GEMM path (over 16 rows) until
    // the sequences that end early leave them.
    vec![
        job(src.clone(), &prompt, 4, 9),
        job(cut(2), &prompt, 1, 12),
        job(cut(5), &longer, 4, 5),
        job(src.clone(), &longer, 1, 3),
        job(cut(3), &prompt, 2, 12),
        job(cut(4), &longer, 4, 12),
        job(cut(1), &prompt, 4, 7),
        job(cut(6), &prompt, 2, 2),
        job(src.clone(), &prompt, 1, 12),
        job(cut(2), &longer, 1, 12),
    ]
}

/// Each job's hypotheses from `session` alone, and the session.
fn alone<'m>(
    mut session: Session<&'m Model<'m>>,
    jobs: &[Job],
) -> (Vec<Found>, Session<&'m Model<'m>>) {
    let found = jobs
        .iter()
        .map(|job| {
            session.encode(&job.src).unwrap();
            let request =
                Request::new(SearchOptions::beam(job.beam, job.steps)).prefix(&job.prefix);
            outcome(session.generate(request).unwrap())
        })
        .collect();
    (found, session)
}

/// A batch decodes each sequence exactly as a session decodes it alone: the same tokens and
/// the same score bits, greedy and beam, with sequences of different source lengths, positions
/// and length limits ending at different steps, the sources encoded several to a pass; for
/// the BART-style families and T5 (relative position bias per sequence), at every ISA level.
#[test]
fn a_batch_decodes_each_sequence_as_a_session_alone() {
    let models = [
        (
            "marian",
            bart::load_hf_dir(&fixture("marian").join("hf"), 4, &LoadOptions::default())
                .map(|(_, m)| m),
        ),
        (
            "mbart",
            bart::load_hf_dir(&fixture("mbart").join("hf"), 4, &LoadOptions::default())
                .map(|(_, m)| m),
        ),
        (
            "bart_stacks",
            bart::load_hf_dir(
                &fixture("bart_stacks").join("hf"),
                4,
                &LoadOptions::default(),
            )
            .map(|(_, m)| m),
        ),
        (
            "t5_v1_1",
            t5::load_hf_dir(
                &fixture("t5_v1_1").join("hf"),
                32,
                4,
                &LoadOptions::default(),
            ),
        ),
    ];
    for (name, model) in models {
        let model = model.unwrap_or_else(|e| panic!("{name}: {e}"));
        // The encoder memory stored as f16 too (rounded as each slot stores it), for Marian.
        let kinds: &[MemoryType] = match name {
            "marian" => &[MemoryType::F32, MemoryType::F16],
            _ => &[MemoryType::F32],
        };
        for &kind in kinds {
            for_each_isa(|isa| batch_matches_alone((name, &model), isa, kind));
        }
    }
}

/// [`a_batch_decodes_each_sequence_as_a_session_alone`] for one model, level and memory type.
fn batch_matches_alone((name, model): (&str, &Model), isa: Isa, kind: MemoryType) {
    let what = format!("{name} at {isa}, memory {kind:?}");
    let jobs = jobs(name);
    let limits = Limits::of(model.config()).with_cross_kv(kind);
    let session = Session::with_limits(model, isa, limits).unwrap();
    let (alone, session) = alone(session, &jobs);
    // Encoder passes of two longest sources: the sources, packed out of slot order, take
    // several passes of several sources each.
    let longest = jobs.iter().map(|job| job.src.len()).max().unwrap();
    let total: usize = jobs.iter().map(|job| job.src.len()).sum();
    assert!(total > 2 * longest, "{what}: the jobs fit one pass");
    let limits = Limits {
        max_src_len: longest,
        ..session.limits()
    };
    let limits = limits.with_batch(jobs.len() + 1).with_encode_sources(2);
    let mut batch = Batch::new(model, isa, limits).unwrap();
    // Slots filled out of order; the last slot stays unused.
    let sources: Vec<_> = (jobs.iter().enumerate().rev())
        .map(|(slot, job)| (slot, &job.src[..]))
        .collect();
    batch.encode_all(&sources).unwrap();
    let mut requests: Vec<_> = jobs
        .iter()
        .map(|job| Request::new(SearchOptions::beam(job.beam, job.steps)).prefix(&job.prefix))
        .collect();
    batch.generate(&mut requests).unwrap();
    for (slot, want) in alone.iter().enumerate() {
        let got = outcome(batch.hypotheses(slot).unwrap());
        assert_eq!(&got, want, "{what}: slot {slot}");
    }
}

/// Requests admitted into free slots between the steps of the others (continuous batching)
/// decode as a session decodes each alone, on the same fixtures and levels.
#[test]
fn requests_admitted_between_steps_decode_as_alone() {
    let (_, model) =
        bart::load_hf_dir(&fixture("marian").join("hf"), 4, &LoadOptions::default()).unwrap();
    let jobs = jobs("marian");
    for_each_isa(|isa| {
        let session = Session::new(&model, isa).unwrap();
        let (alone, session) = alone(session, &jobs);
        // Three slots serve the ten jobs: each job waits for a free slot, is encoded and
        // admitted there, and joins the next step of the running ones.
        let limits = session.limits().with_batch(3);
        let mut batch = Batch::new(&model, isa, limits).unwrap();
        let mut requests: Vec<Option<Request<'_>>> = vec![None, None, None];
        let mut held: [Option<usize>; 3] = [None; 3];
        let mut got = vec![None; jobs.len()];
        let mut next = 0;
        loop {
            for slot in 0..3 {
                if batch.running(slot) {
                    continue;
                }
                if let Some(job) = held[slot].take() {
                    got[job] = Some(outcome(batch.hypotheses(slot).unwrap()));
                }
                if next < jobs.len() {
                    let job = &jobs[next];
                    batch.encode(slot, &job.src).unwrap();
                    let request = requests[slot].insert(
                        Request::new(SearchOptions::beam(job.beam, job.steps)).prefix(&job.prefix),
                    );
                    batch.admit(slot, request).unwrap();
                    held[slot] = Some(next);
                    next += 1;
                }
            }
            let running = batch.step(&mut requests[..]).unwrap();
            if running == 0 && next == jobs.len() && held.iter().all(Option::is_none) {
                break;
            }
        }
        let got: Vec<_> = got.into_iter().map(Option::unwrap).collect();
        assert_eq!(got, alone, "marian at {isa}");
    });
}
