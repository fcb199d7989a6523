//! Session behaviour on seeded random models: determinism, beam reordering against fresh
//! decodes, beam scores against teacher-forced recomputation, refused calls that leave the
//! session intact, and many sessions over one shared model on several threads.

use tessel_model::ops::log_softmax;
use tessel_model::{
    Batch, Config, ConfigError, FfnActivation, Limits, MemoryType, Model, NormPlacement, Positions,
    Request, RunError, SearchOptions, Session, SessionError,
};
use tessel_tests::for_each_isa;

fn small(norm: NormPlacement, positions: Positions) -> Config {
    Config {
        d_model: 40,
        heads: 5,
        encoder_layers: 2,
        decoder_layers: 3,
        d_ff: 72,
        src_vocab: 31,
        tgt_vocab: 37,
        max_src_len: 12,
        max_tgt_len: 10,
        max_beam: 4,
        norm,
        activation: FfnActivation::Relu,
        positions,
        ..Config::transformer_base()
    }
}

const SRC: [u32; 9] = [4, 17, 3, 30, 8, 8, 21, 5, 12];

/// Logits of every step of teacher-forcing `tokens` (BOS first) from a fresh session.
fn teacher_forced(
    model: &Model,
    isa: tessel_kernels::Isa,
    src: &[u32],
    tokens: &[u32],
) -> Vec<Vec<f32>> {
    let mut session = Session::new(model, isa).expect("session");
    session.encode(src).expect("encode");
    tokens
        .iter()
        .map(|&t| session.decode_step(&[t]).expect("step").to_vec())
        .collect()
}

fn assert_rows_close(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

#[test]
fn same_seed_same_model_and_different_seed_differs() {
    let config = small(NormPlacement::Post, Positions::Sinusoidal);
    let isa = tessel_kernels::Isa::scalar();
    let a = teacher_forced(
        &Model::random(config.clone(), 3).unwrap(),
        isa,
        &SRC,
        &[1, 5],
    );
    let b = teacher_forced(
        &Model::random(config.clone(), 3).unwrap(),
        isa,
        &SRC,
        &[1, 5],
    );
    let c = teacher_forced(&Model::random(config, 4).unwrap(), isa, &SRC, &[1, 5]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn reordered_beams_continue_their_parents_history() {
    for norm in [NormPlacement::Post, NormPlacement::Pre] {
        let model = Model::random(small(norm, Positions::Learned), 11).unwrap();
        for_each_isa(|isa| {
            let mut session = Session::new(&model, isa).expect("session");
            session.encode(&SRC).unwrap();
            session.decode_step(&[1]).unwrap();
            session.reorder_beams(&[0, 0, 0]).unwrap();
            session.decode_step(&[7, 9, 11]).unwrap();
            // Beam 0 ← old 2, beam 1 ← old 0, beam 2 ← old 2, beam 3 ← old 1.
            session.reorder_beams(&[2, 0, 2, 1]).unwrap();
            assert_eq!(session.logits().len(), 3 * model.config().tgt_vocab);
            let logits = session.decode_step(&[3, 4, 5, 6]).unwrap().to_vec();
            assert_eq!(session.logits(), logits.as_slice());
            let vocab = model.config().tgt_vocab;
            let histories = [[1, 11, 3], [1, 7, 4], [1, 11, 5], [1, 9, 6]];
            for (b, history) in histories.iter().enumerate() {
                let fresh = teacher_forced(&model, isa, &SRC, history);
                assert_rows_close(
                    &format!("{norm:?} {isa} beam {b}"),
                    &logits[b * vocab..(b + 1) * vocab],
                    &fresh[2],
                );
            }
        });
    }
}

#[test]
fn beam_scores_match_teacher_forced_log_probabilities() {
    let model = Model::random(small(NormPlacement::Pre, Positions::Sinusoidal), 5).unwrap();
    let config = model.config().clone();
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).expect("session");
        session.encode(&SRC).unwrap();
        for (alpha, stop_at_eos) in [(0.0, false), (1.0, true), (0.6, true)] {
            let options = SearchOptions {
                length_penalty: alpha,
                stop_at_eos,
                ..SearchOptions::beam(4, 8)
            };
            let hyps = session.generate(Request::new(options)).unwrap();
            assert!(!hyps.is_empty() && hyps.len() <= 4);
            let found: Vec<(Vec<u32>, f32)> =
                hyps.iter().map(|h| (h.tokens.to_vec(), h.score)).collect();
            for pair in found.windows(2) {
                assert!(pair[0].1 >= pair[1].1, "sorted best first");
            }
            for (tokens, score) in &found {
                let mut inputs = vec![config.bos_id];
                inputs.extend_from_slice(&tokens[..tokens.len() - 1]);
                let steps = teacher_forced(&model, isa, &SRC, &inputs);
                let mut total = 0.0f32;
                for (row, &token) in steps.into_iter().zip(tokens) {
                    let mut row = row;
                    log_softmax(isa, &mut row);
                    total += row[token as usize];
                }
                let expected = total / (tokens.len() as f32).powf(alpha);
                assert!(
                    (expected - score).abs() <= 1e-4 * (1.0 + expected.abs()),
                    "{isa} α={alpha}: {tokens:?} scored {score}, recomputed {expected}"
                );
                if stop_at_eos {
                    let eos_at = tokens.iter().position(|&t| t == config.eos_id);
                    assert!(eos_at.is_none_or(|i| i == tokens.len() - 1));
                } else {
                    assert_eq!(tokens.len(), 8);
                }
            }
        }
    });
}

#[test]
fn greedy_follows_the_argmax_and_reports_every_step() {
    let model = Model::random(small(NormPlacement::Post, Positions::Sinusoidal), 9).unwrap();
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).expect("session");
        session.encode(&SRC).unwrap();
        let mut steps = Vec::new();
        let options = SearchOptions {
            stop_at_eos: false,
            ..SearchOptions::greedy(10)
        };
        let tokens = session
            .generate(Request::new(options).on_step(|view| {
                assert_eq!(view.beams, 1);
                steps.push(view.logits.to_vec());
            }))
            .unwrap()
            .best()
            .unwrap()
            .tokens
            .to_vec();
        assert_eq!(tokens.len(), 10);
        assert_eq!(steps.len(), 10);
        for (row, &token) in steps.iter().zip(&tokens) {
            let best = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(row[token as usize], best);
        }
    });
}

#[test]
fn refused_calls_change_nothing() {
    let model = Model::random(small(NormPlacement::Post, Positions::Learned), 2).unwrap();
    let config = model.config().clone();
    let isa = tessel_kernels::Isa::best();
    let reference = teacher_forced(&model, isa, &SRC, &[1, 6, 7]);

    let mut session = Session::new(&model, isa).expect("session");
    assert_eq!(session.decode_step(&[1]), Err(RunError::NotEncoded));
    assert!(matches!(
        session.generate(Request::new(SearchOptions::greedy(3))),
        Err(RunError::NotEncoded)
    ));
    assert_eq!(session.reorder_beams(&[0]), Err(RunError::NotEncoded));
    session.encode(&SRC).unwrap();
    session.decode_step(&[1]).unwrap();
    session.decode_step(&[6]).unwrap();

    let too_long = vec![3u32; config.max_src_len + 1];
    let refusals = [
        session.encode(&too_long).err(),
        session.encode(&[]).err(),
        session.encode(&[3, config.src_vocab as u32]).err(),
        session.decode_step(&[config.tgt_vocab as u32]).err(),
        session.decode_step(&[1, 2]).err(),
        session.decode_step(&[1; 5]).err(),
        session.decode_step(&[]).err(),
        session.reorder_beams(&[1]).err(),
        session.reorder_beams(&[0; 5]).err(),
    ];
    let kinds: Vec<String> = refusals
        .iter()
        .map(|e| format!("{:?}", e.as_ref().expect("refused")))
        .collect();
    for (kind, prefix) in kinds.iter().zip([
        "SourceTooLong",
        "EmptySource",
        "TokenOutOfRange",
        "TokenOutOfRange",
        "BeamCountMismatch",
        "BadBeam",
        "BadBeam",
        "BadParent",
        "BadBeam",
    ]) {
        assert!(kind.starts_with(prefix), "{kind} should be {prefix}");
    }
    for bad in [
        SearchOptions::beam(0, 3),
        SearchOptions::beam(5, 3),
        SearchOptions::greedy(0),
        SearchOptions::greedy(config.max_tgt_len + 1),
        SearchOptions {
            length_penalty: f32::NAN,
            ..SearchOptions::greedy(3)
        },
    ] {
        // Refused searches happen before the decoder is reset.
        assert!(session.generate(Request::new(bad)).is_err(), "{bad:?}");
    }
    assert_eq!(session.position(), 2);
    assert_eq!(session.source_len(), Some(SRC.len()));
    let third = session.decode_step(&[7]).unwrap().to_vec();
    assert_rows_close("after refusals", &third, &reference[2]);

    // Filling the target to its maximum, then one more.
    for _ in 3..config.max_tgt_len {
        session.decode_step(&[4]).unwrap();
    }
    assert_eq!(
        session.decode_step(&[4]),
        Err(RunError::TargetTooLong {
            len: config.max_tgt_len + 1,
            max: config.max_tgt_len
        })
    );
    // Still usable: a new source starts over.
    session.encode(&SRC).unwrap();
    for (t, &token) in [1u32, 6, 7].iter().enumerate() {
        let row = session.decode_step(&[token]).unwrap().to_vec();
        assert_rows_close("after re-encode", &row, &reference[t]);
    }
}

#[test]
fn many_sessions_share_one_model_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Model>();
    let model = Model::random(small(NormPlacement::Pre, Positions::Learned), 21).unwrap();
    let isa = tessel_kernels::Isa::best();
    let sources: Vec<Vec<u32>> = (0..4u32)
        .map(|i| SRC.iter().map(|&t| (t + i) % 31).collect())
        .collect();
    let run = |src: &[u32]| -> Vec<u32> {
        let mut session = Session::new(&model, isa).expect("session");
        session.encode(src).unwrap();
        let hyps = session
            .generate(Request::new(SearchOptions::beam(3, 9)))
            .unwrap();
        hyps.best().unwrap().tokens.to_vec()
    };
    let serial: Vec<Vec<u32>> = sources.iter().map(|s| run(s)).collect();
    let parallel: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources.iter().map(|s| scope.spawn(|| run(s))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(serial, parallel);
}

#[test]
fn arena_plan_is_known_up_front_and_consistent() {
    let config = small(NormPlacement::Post, Positions::Sinusoidal);
    let model = Model::random(config.clone(), 1).unwrap();
    let session = Session::new(&model, tessel_kernels::Isa::scalar()).unwrap();
    let plan = session.plan();
    let f = 4;
    let (d, b, t, s, l) = (
        config.d_model,
        config.max_beam,
        config.max_tgt_len,
        config.max_src_len,
        config.decoder_layers,
    );
    assert_eq!(plan.region("k_cache").unwrap().bytes, l * b * t * d * f);
    assert_eq!(plan.region("v_cache").unwrap().bytes, l * b * t * d * f);
    assert_eq!(plan.region("cross_kv").unwrap().bytes, l * s * 2 * d * f);
    assert_eq!(
        plan.region("logits").unwrap().bytes,
        b * config.tgt_vocab * f
    );
    let mut regions = plan.regions().to_vec();
    regions.sort_by_key(|r| r.offset_bytes);
    for r in &regions {
        assert_eq!(r.offset_bytes % 64, 0, "{} aligned", r.name);
        assert!(r.offset_bytes + r.bytes <= plan.total_bytes());
    }
    for pair in regions.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let overlap = a.offset_bytes + a.bytes > b.offset_bytes;
        // The working buffers of the two phases (`wide.*`, `narrow.*`) overlay each other.
        let phase = |name: &'static str| {
            let phase = name.split_once('.').map(|(phase, _)| phase);
            phase.filter(|phase| ["wide", "narrow"].contains(phase))
        };
        let (pa, pb) = (phase(a.name), phase(b.name));
        assert!(
            !overlap || (pa.is_some() && pb.is_some() && pa != pb),
            "{} overlaps {}",
            a.name,
            b.name
        );
    }
    // A wider beam or longer target only grows the plan.
    let wider = tessel_model::ArenaPlan::new(&Config {
        max_beam: 8,
        ..config.clone()
    })
    .unwrap();
    assert!(wider.total_bytes() > plan.total_bytes());
}

#[test]
fn a_session_within_smaller_limits_has_a_smaller_arena_and_the_same_results() {
    let model = Model::random(small(NormPlacement::Pre, Positions::Learned), 13).unwrap();
    let isa = tessel_kernels::Isa::best();
    let limits = Limits {
        max_src_len: SRC.len(),
        max_tgt_len: 6,
        max_beam: 2,
        max_batch: 1,
        encode_sources: 1,
        // Worker threads too: the GEMMs split their columns over them, bit-identically.
        threads: 3,
        cross_kv: tessel_model::MemoryType::F32,
    };
    let mut full = Session::new(&model, isa).unwrap();
    let mut small_session = Session::with_limits(&model, isa, limits).unwrap();
    assert_eq!(small_session.limits(), limits);
    // Against the full limits on as many threads (scratch is planned per thread).
    let full_limits = Limits::of(model.config()).with_threads(limits.threads);
    let full_plan = tessel_model::ArenaPlan::with_limits(model.config(), full_limits).unwrap();
    assert!(small_session.plan().total_bytes() < full_plan.total_bytes());
    full.encode(&SRC).unwrap();
    small_session.encode(&SRC).unwrap();
    let options = SearchOptions::beam(2, 6);
    let best = |session: &mut Session<&Model>| -> Vec<u32> {
        let hyps = session.generate(Request::new(options)).unwrap();
        hyps.best().unwrap().tokens.to_vec()
    };
    assert_eq!(best(&mut full), best(&mut small_session));
    assert!(matches!(
        small_session.generate(Request::new(SearchOptions::beam(3, 6))),
        Err(RunError::BadBeam { beam: 3, max: 2 })
    ));
    assert!(matches!(
        small_session.encode(&[3; 10]),
        Err(RunError::SourceTooLong { len: 10, max: 9 })
    ));
    let too_big = Limits {
        max_beam: 5,
        ..limits
    };
    assert!(matches!(
        Session::with_limits(&model, isa, too_big),
        Err(SessionError::Limits(ConfigError::LimitAboveConfig {
            what: "max_beam",
            value: 5,
            max: 4
        }))
    ));
}

/// One call on a session, with arguments that may be invalid.
#[derive(Clone, Debug)]
enum Call {
    Encode(Vec<u32>),
    Step(Vec<u32>),
    Prefill(Vec<u32>),
    Reorder(Vec<u32>),
    Generate {
        beam: usize,
        steps: usize,
        eos: bool,
    },
    Reset,
}

fn call() -> impl proptest::strategy::Strategy<Value = Call> {
    use proptest::prelude::*;
    prop_oneof![
        proptest::collection::vec(0u32..34, 0..15).prop_map(Call::Encode),
        proptest::collection::vec(0u32..40, 0..6).prop_map(Call::Step),
        proptest::collection::vec(0u32..40, 0..14).prop_map(Call::Prefill),
        proptest::collection::vec(0u32..6, 0..6).prop_map(Call::Reorder),
        (0usize..6, 0usize..12, any::<bool>()).prop_map(|(beam, steps, eos)| Call::Generate {
            beam,
            steps,
            eos
        }),
        Just(Call::Reset),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(tessel_tests::cases(48)))]

    /// Any sequence of calls, valid or not, never panics, returns typed errors, and leaves a
    /// session that then computes exactly what a fresh one does.
    #[test]
    fn any_call_sequence_leaves_a_usable_session(calls in proptest::collection::vec(call(), 1..25)) {
        use std::sync::OnceLock;
        static MODEL: OnceLock<Model> = OnceLock::new();
        let model = MODEL.get_or_init(|| {
            Model::random(small(NormPlacement::Pre, Positions::Sinusoidal), 17).unwrap()
        });
        let isa = tessel_kernels::Isa::best();
        let mut session = Session::new(model, isa).unwrap();
        for c in &calls {
            let vocab = model.config().tgt_vocab;
            match c {
                Call::Encode(src) => {
                    let _ = session.encode(src);
                }
                Call::Step(tokens) => {
                    if let Ok(logits) = session.decode_step(tokens) {
                        proptest::prop_assert_eq!(logits.len(), tokens.len() * vocab);
                        proptest::prop_assert!(logits.iter().all(|v| v.is_finite()));
                    }
                }
                Call::Prefill(tokens) => {
                    if let Ok(logits) = session.prefill(tokens) {
                        proptest::prop_assert_eq!(logits.len(), vocab);
                        proptest::prop_assert!(logits.iter().all(|v| v.is_finite()));
                    }
                }
                Call::Reorder(parents) => {
                    let _ = session.reorder_beams(parents);
                }
                Call::Generate { beam, steps, eos } => {
                    let options = SearchOptions { beam: *beam, max_steps: *steps, length_penalty: 1.0, stop_at_eos: *eos, sampling: None, patience: 1.0 };
                    if let Ok(hyps) = session.generate(Request::new(options)) {
                        proptest::prop_assert!(!hyps.is_empty() && hyps.len() <= *beam);
                        for h in hyps.iter() {
                            proptest::prop_assert!(!h.tokens.is_empty() && h.tokens.len() <= *steps);
                            proptest::prop_assert!(h.tokens.iter().all(|&t| (t as usize) < vocab));
                        }
                    }
                }
                Call::Reset => session.reset_decoder(),
            }
            proptest::prop_assert!(session.active_beams() <= 4);
            proptest::prop_assert!(session.position() <= model.config().max_tgt_len);
        }
        let mut fresh = Session::new(model, isa).unwrap();
        let options = SearchOptions::beam(3, 7);
        session.encode(&SRC).unwrap();
        fresh.encode(&SRC).unwrap();
        let a: Vec<(Vec<u32>, f32)> = session.generate(Request::new(options)).unwrap().iter().map(|h| (h.tokens.to_vec(), h.score)).collect();
        let b: Vec<(Vec<u32>, f32)> = fresh.generate(Request::new(options)).unwrap().iter().map(|h| (h.tokens.to_vec(), h.score)).collect();
        proptest::prop_assert_eq!(a, b);
    }
}

#[test]
fn prefill_in_chunks_matches_step_by_step_decoding() {
    for norm in [NormPlacement::Post, NormPlacement::Pre] {
        let model = Model::random(small(norm, Positions::Learned), 23).unwrap();
        let vocab = model.config().tgt_vocab;
        let prefix = [1u32, 8, 30, 2, 17, 5, 5, 11];
        for_each_isa(|isa| {
            // One pass of 8 rows, and chunks of 3 + 3 + 2 rows (max_src_len 3 bounds a chunk).
            for (src, max_src_len) in [(&SRC[..], 12), (&SRC[..3], 3)] {
                let steps = teacher_forced(&model, isa, src, &prefix);
                let limits = Limits {
                    max_src_len,
                    max_tgt_len: 10,
                    max_beam: 4,
                    max_batch: 1,
                    encode_sources: 1,
                    threads: 1,
                    cross_kv: tessel_model::MemoryType::F32,
                };
                let mut session = Session::with_limits(&model, isa, limits).unwrap();
                session.encode(src).unwrap();
                let last = session.prefill(&prefix).unwrap().to_vec();
                assert_rows_close(&format!("{norm:?} {isa} prefill"), &last, &steps[7]);
                assert_eq!(session.position(), prefix.len());
                // Decoding continues from the prefilled cache.
                let next = session.decode_step(&[9]).unwrap().to_vec();
                let mut longer = prefix.to_vec();
                longer.push(9);
                let fresh = teacher_forced(&model, isa, src, &longer);
                assert_rows_close("after prefill", &next, &fresh[8]);
                assert_eq!(next.len(), vocab);
            }
            let steps = teacher_forced(&model, isa, &SRC, &prefix);
            // Prefix in two calls, the first ending mid-way.
            let mut session = Session::new(&model, isa).unwrap();
            session.encode(&SRC).unwrap();
            session.prefill(&prefix[..3]).unwrap();
            let last = session.prefill(&prefix[3..]).unwrap().to_vec();
            assert_rows_close("two prefills", &last, &steps[7]);
        });
    }
}

#[test]
fn prefill_refusals_change_nothing() {
    let model = Model::random(small(NormPlacement::Post, Positions::Sinusoidal), 29).unwrap();
    let isa = tessel_kernels::Isa::best();
    let mut session = Session::new(&model, isa).unwrap();
    assert_eq!(session.prefill(&[1]), Err(RunError::NotEncoded));
    session.encode(&SRC).unwrap();
    assert!(matches!(session.prefill(&[]), Err(RunError::BadOption(_))));
    assert!(matches!(
        session.prefill(&[1; 11]),
        Err(RunError::TargetTooLong { len: 11, max: 10 })
    ));
    assert!(matches!(
        session.prefill(&[1, 99]),
        Err(RunError::TokenOutOfRange { token: 99, .. })
    ));
    session.decode_step(&[1]).unwrap();
    session.reorder_beams(&[0, 0]).unwrap();
    assert!(matches!(
        session.prefill(&[4]),
        Err(RunError::BeamCountMismatch {
            expected: 2,
            got: 1
        })
    ));
    assert_eq!(session.position(), 1);
    session.reorder_beams(&[1]).unwrap();
    let got = session.prefill(&[4, 6]).unwrap().to_vec();
    let want = teacher_forced(&model, isa, &SRC, &[1, 4, 6]);
    assert_rows_close("prefill after refusals", &got, &want[2]);
}

#[test]
fn search_from_a_forced_prefix_continues_it() {
    let model = Model::random(small(NormPlacement::Post, Positions::Learned), 31).unwrap();
    let config = model.config().clone();
    let prefix = [config.bos_id, 7, 12];
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).unwrap();
        session.encode(&SRC).unwrap();
        let options = SearchOptions {
            stop_at_eos: false,
            ..SearchOptions::greedy(5)
        };
        let greedy: Vec<u32> = session
            .generate(Request::new(options).prefix(&prefix))
            .unwrap()
            .best()
            .unwrap()
            .tokens
            .to_vec();
        assert_eq!(greedy.len(), 5);
        // The argmax chain, by hand.
        let mut inputs = prefix.to_vec();
        for &token in &greedy {
            let rows = teacher_forced(&model, isa, &SRC, &inputs);
            let last = rows.last().unwrap();
            let best = last.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(last[token as usize], best, "{isa}: greedy after prefix");
            inputs.push(token);
        }
        // Beam scores are the log-probabilities of the continuation given the prefix.
        let beam = SearchOptions {
            length_penalty: 0.0,
            ..SearchOptions::beam(3, 4)
        };
        let found: Vec<(Vec<u32>, f32)> = session
            .generate(Request::new(beam).prefix(&prefix))
            .unwrap()
            .iter()
            .map(|h| (h.tokens.to_vec(), h.score))
            .collect();
        for (tokens, score) in found {
            let mut inputs = prefix.to_vec();
            inputs.extend_from_slice(&tokens[..tokens.len() - 1]);
            let rows = teacher_forced(&model, isa, &SRC, &inputs);
            let mut total = 0.0f32;
            for (row, &token) in rows[prefix.len() - 1..].iter().zip(&tokens) {
                let mut row = row.clone();
                log_softmax(isa, &mut row);
                total += row[token as usize];
            }
            assert!(
                (total - score).abs() <= 1e-4 * (1.0 + total.abs()),
                "{isa}: {tokens:?}"
            );
        }
        assert!(matches!(
            session.generate(Request::new(options).prefix(&[])),
            Err(RunError::BadOption(_))
        ));
        assert!(matches!(
            session.generate(Request::new(SearchOptions::greedy(9)).prefix(&prefix)),
            Err(RunError::TargetTooLong { len: 11, max: 10 })
        ));
        assert!(matches!(
            session.generate(Request::new(options).prefix(&[1, 99])),
            Err(RunError::TokenOutOfRange { token: 99, .. })
        ));
    });
}

#[test]
fn threaded_sessions_give_bit_identical_logits() {
    // A source longer than the GEMM's small-m path, so the packed path splits over threads too;
    // d_ff and the vocabulary span several 32-column panels.
    let gemm_split = Config {
        max_src_len: 40,
        d_ff: 200,
        tgt_vocab: 101,
        ..small(NormPlacement::Pre, Positions::Sinusoidal)
    };
    // Attention large enough to split too: the encoder's queries by rows, three beams'
    // cross-attention over 1100 positions by heads.
    let attention_split = Config {
        d_model: 256,
        heads: 4,
        encoder_layers: 1,
        decoder_layers: 1,
        max_src_len: 1100,
        max_beam: 3,
        ..gemm_split.clone()
    };
    for (config, seed) in [(gemm_split, 21), (attention_split, 22)] {
        let model = Model::random(config, seed).unwrap();
        let len = model.config().max_src_len - 3;
        let src: Vec<u32> = (0..len as u32).map(|i| (i * 7 + 3) % 31).collect();
        assert_threads_do_not_change_bits(&model, &src, model.config().max_beam.min(3));
    }
}

/// Encodes `src` and decodes a few steps of `beams` beams on 1, 2 and 3 threads; every logit
/// must have the same bits.
fn assert_threads_do_not_change_bits(model: &Model, src: &[u32], beams: usize) {
    let bits = |logits: &[f32]| logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for_each_isa(|isa| {
        let mut one = Session::new(model, isa).unwrap();
        for threads in [2, 3] {
            let limits = Limits::of(model.config()).with_threads(threads);
            let mut many = Session::with_limits(model, isa, limits).unwrap();
            one.encode(src).unwrap();
            many.encode(src).unwrap();
            for token in [1u32, 9, 33, 2] {
                let tokens = vec![token; beams];
                let expected = bits(one.decode_step(&tokens).unwrap());
                assert_eq!(
                    bits(many.decode_step(&tokens).unwrap()),
                    expected,
                    "{isa} x{threads}"
                );
            }
        }
    });
}

#[test]
fn f16_encoder_memory_fits_any_source_limit_and_ffn_width() {
    // An FFN narrower than one K|V row (2 · d_model): encode stages the f16 memory projection
    // in the FFN buffer, which the plan must size for at least one row even at one position.
    let narrow_ffn = Config {
        d_ff: 24,
        ..small(NormPlacement::Pre, Positions::Sinusoidal)
    };
    let model = Model::random(narrow_ffn, 31).unwrap();
    for_each_isa(|isa| {
        for src_len in [1, 2, 3, SRC.len()] {
            let src = &SRC[..src_len];
            let limits = |kind| Limits {
                max_src_len: src_len,
                ..Limits::of(model.config()).with_cross_kv(kind)
            };
            let mut exact = Session::with_limits(&model, isa, limits(MemoryType::F32)).unwrap();
            let mut half = Session::with_limits(&model, isa, limits(MemoryType::F16)).unwrap();
            exact.encode(src).unwrap();
            half.encode(src)
                .expect("f16 memory at a one-row FFN buffer");
            for token in [1u32, 9, 33] {
                let want = exact.decode_step(&[token]).unwrap().to_vec();
                let got = half.decode_step(&[token]).unwrap();
                // Each key and value rounded once to f16 (relative 2^-11).
                for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (x - y).abs() <= 2e-3 * (1.0 + y.abs()),
                        "{isa} src {src_len} token {token} logit {i}: {x} vs {y}"
                    );
                }
            }
        }
    });
}

#[test]
fn sessions_that_own_their_model_through_an_arc_match_borrowed_ones() {
    let model = std::sync::Arc::new(
        Model::random(small(NormPlacement::Pre, Positions::Learned), 5).unwrap(),
    );
    let isa = tessel_kernels::Isa::best();
    let options = SearchOptions::beam(2, 6);
    let mut borrowed = Session::new(&*model, isa).unwrap();
    borrowed.encode(&SRC).unwrap();
    let expected = borrowed
        .generate(Request::new(options))
        .unwrap()
        .best()
        .unwrap()
        .tokens
        .to_vec();
    // Each thread's session holds the model by Arc: no lifetime ties it to this frame.
    let handles: Vec<std::thread::JoinHandle<Vec<u32>>> = (0..2)
        .map(|_| {
            let mut session = Session::new(std::sync::Arc::clone(&model), isa).unwrap();
            std::thread::spawn(move || {
                session.encode(&SRC).unwrap();
                let hyps = session.generate(Request::new(options)).unwrap();
                hyps.best().unwrap().tokens.to_vec()
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), expected);
    }
    assert_eq!(std::sync::Arc::strong_count(&model), 1);
}

#[test]
fn a_logits_processor_steers_greedy_and_beam_search() {
    let model = Model::random(small(NormPlacement::Pre, Positions::Learned), 8).unwrap();
    let isa = tessel_kernels::Isa::best();
    let forced: [u32; 5] = [7, 3, 3, 11, 2];
    for beam in [1, 3] {
        let mut session = Session::new(&model, isa).unwrap();
        session.encode(&SRC).unwrap();
        let bos = model.config().bos_id;
        let mut seen = Vec::new();
        // Force `forced`, one token a step, by masking every other token; check that each
        // hypothesis's history is what was forced so far (masked continuations are never
        // kept, so beam search holds one hypothesis).
        let hyps = session
            .generate(
                Request::new(SearchOptions::beam(beam, 6))
                    .prefix(&[bos])
                    .process(|step| {
                        assert_eq!(step.beams, 1);
                        for b in 0..step.beams {
                            assert_eq!(step.tokens(b), &forced[..step.step], "beam {b}");
                            let want = forced[step.step] as usize;
                            for (t, v) in step.row_mut(b).iter_mut().enumerate() {
                                if t != want {
                                    *v = f32::NEG_INFINITY;
                                }
                            }
                        }
                        seen.push(step.step);
                    }),
            )
            .unwrap();
        // EOS (id 2) ends the search after the fifth token.
        assert_eq!(hyps.best().unwrap().tokens, &forced[..], "beam {beam}");
        assert_eq!(seen, vec![0, 1, 2, 3, 4], "beam {beam}");
    }
}

/// A batch refuses what it cannot run with a typed error, before running anything, and a
/// refused encode leaves the slots it named as they were.
#[test]
fn a_batch_refuses_misuse_with_typed_errors() {
    let model = Model::random(small(NormPlacement::Pre, Positions::Learned), 5).unwrap();
    let isa = tessel_kernels::Isa::best();
    let limits = Limits::of(model.config()).with_batch(3);
    for bad in [limits.with_encode_sources(0), limits.with_batch(0)] {
        assert!(matches!(
            Batch::new(&model, isa, bad),
            Err(SessionError::Limits(ConfigError::Zero(_)))
        ));
    }
    let mut batch = Batch::new(&model, isa, limits.with_encode_sources(2)).unwrap();
    batch.encode(1, &SRC).unwrap();
    let long = [3u32; 13];
    // Sources given to `encode_all`, and the error they get.
    type Refusal<'a> = (&'a [(usize, &'a [u32])], fn(&RunError) -> bool);
    let refused: [Refusal; 4] = [
        (&[(0, &SRC), (3, &SRC)], |e| {
            matches!(e, RunError::BadSlot { slot: 3, max: 3 })
        }),
        (&[(0, &SRC), (0, &SRC[..2])], |e| {
            matches!(e, RunError::BadOption(_))
        }),
        (&[(1, &SRC[..2]), (2, &[])], |e| {
            matches!(e, RunError::EmptySource)
        }),
        (&[(1, &SRC[..2]), (2, &long)], |e| {
            matches!(e, RunError::SourceTooLong { len: 13, max: 12 })
        }),
    ];
    for (sources, expected) in refused {
        let error = batch.encode_all(sources).unwrap_err();
        assert!(expected(&error), "{sources:?}: {error}");
        assert_eq!(batch.source_len(1), Some(SRC.len()), "{sources:?}");
    }
    let mut requests: Vec<_> = (0..4)
        .map(|_| Request::new(SearchOptions::greedy(4)))
        .collect();
    assert!(matches!(
        batch.generate(&mut requests),
        Err(RunError::BatchTooLarge {
            requests: 4,
            max: 3
        })
    ));
    assert!(matches!(
        batch.hypotheses(3),
        Err(RunError::BadSlot { slot: 3, max: 3 })
    ));
    let mut request = Request::new(SearchOptions::greedy(4));
    batch.admit(1, &mut request).unwrap();
    assert!(matches!(
        batch.admit(1, &mut request),
        Err(RunError::BadOption(_))
    ));
}

/// Packing sources into encoder passes costs arena only when asked for: one source a pass
/// plans what a batch always planned, two plans wider working buffers.
#[test]
fn encoder_passes_of_several_sources_are_planned_up_front() {
    let config = small(NormPlacement::Pre, Positions::Learned);
    let one = Limits::of(&config).with_batch(4);
    let plan = |limits| tessel_model::ArenaPlan::with_limits(&config, limits).unwrap();
    assert_eq!(one.encode_rows(), 12);
    assert_eq!(one.with_encode_rows(30).encode_sources, 2);
    assert_eq!(one.with_encode_rows(1000).encode_sources, 4);
    assert_eq!(one.with_encode_rows(5).encode_sources, 1);
    assert!(plan(one.with_encode_sources(2)).total_bytes() > plan(one).total_bytes());
}
