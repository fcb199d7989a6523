//! The session API under arbitrary call sequences on tiny random models: ids out of range,
//! lengths over the limits, beams over the plan, decode before encode, reorders with bad
//! parents, generate with odd options. Every call returns `Ok` or a typed `RunError` (never
//! `RunError::Kernel`, an internal inconsistency), and never panics. A second session that
//! replays only the accepted calls must give bit-identical results and state after every
//! call: a refused call changes nothing. The models' linear layers are stored as every
//! `WeightType` in turn.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{isa, tiny_models, token_ids};
use tessel_model::{Limits, Model, Request, RunError, SearchOptions, Session};

#[derive(Arbitrary, Debug)]
enum Call {
    Encode(Vec<u8>),
    DecodeStep(Vec<u8>),
    Prefill(Vec<u8>),
    Reorder(Vec<u8>),
    Reset,
    Generate {
        beam: u8,
        max_steps: u8,
        length_penalty: i8,
        odd_penalty: bool,
        stop_at_eos: bool,
        /// Patience in eighths, or (with `odd_penalty`) a non-finite or negative one.
        patience: u8,
        prefix: Option<Vec<u8>>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    model: u8,
    isa: u8,
    limits: Option<(u8, u8, u8)>,
    calls: Vec<Call>,
}

/// What one call produced, for comparison between the sessions.
#[derive(Debug, PartialEq)]
enum Outcome {
    Refused(RunError),
    Done,
    Logits(Vec<u32>),
    Hypotheses(Vec<(Vec<u32>, u32)>, usize),
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn apply(session: &mut Session<&Model>, call: &Call) -> Outcome {
    let result = match call {
        Call::Encode(src) => session.encode(&token_ids(src)).map(|()| Outcome::Done),
        Call::DecodeStep(tokens) => session
            .decode_step(&token_ids(tokens))
            .map(|l| Outcome::Logits(bits(l))),
        Call::Prefill(tokens) => session
            .prefill(&token_ids(tokens))
            .map(|l| Outcome::Logits(bits(l))),
        Call::Reorder(parents) => {
            let parents: Vec<u32> = parents.iter().map(|&p| p as u32 % 5).collect();
            session.reorder_beams(&parents).map(|()| Outcome::Done)
        }
        Call::Reset => {
            session.reset_decoder();
            Ok(Outcome::Done)
        }
        Call::Generate {
            beam,
            max_steps,
            length_penalty,
            odd_penalty,
            stop_at_eos,
            patience,
            prefix,
        } => {
            let options = SearchOptions {
                beam: *beam as usize % 5,
                max_steps: *max_steps as usize % 9,
                length_penalty: if *odd_penalty {
                    [f32::NAN, f32::INFINITY, -f32::MAX, 1.0e30][*length_penalty as usize % 4]
                } else {
                    *length_penalty as f32 / 32.0
                },
                stop_at_eos: *stop_at_eos,
                sampling: None,
                patience: if *odd_penalty {
                    [f32::NAN, f32::INFINITY, -1.0, 0.0][*patience as usize % 4]
                } else {
                    f32::from(*patience % 32) / 8.0
                },
            };
            let mut steps = 0;
            let on_step = |view: tessel_model::StepView<'_>| {
                assert_eq!(view.logits.len(), view.beams * view.vocab);
                assert!(view.beams >= 1 && view.beams <= options.beam);
                steps += 1;
            };
            let found = match prefix {
                None => session.generate(Request::new(options).on_step(on_step)),
                Some(p) => {
                    session.generate(Request::new(options).prefix(&token_ids(p)).on_step(on_step))
                }
            };
            found.map(|h| {
                assert!(h.len() <= options.beam.max(1));
                let hyps = h
                    .iter()
                    .map(|x| (x.tokens.to_vec(), x.score.to_bits()))
                    .collect();
                Outcome::Hypotheses(hyps, steps)
            })
        }
    };
    match result {
        Ok(outcome) => outcome,
        Err(e) => {
            assert!(
                !matches!(e, RunError::Kernel(_)),
                "{call:?}: internal error {e}"
            );
            Outcome::Refused(e)
        }
    }
}

fn state(session: &Session<&Model>) -> (Option<usize>, usize, usize, Vec<u32>) {
    (
        session.source_len(),
        session.position(),
        session.active_beams(),
        bits(session.logits()),
    )
}

fuzz_target!(|input: Input| {
    let model = &tiny_models()[input.model as usize % 8];
    let isa = isa(input.isa);
    let open = || match input.limits {
        Some((s, t, b)) => {
            let limits = Limits {
                max_src_len: s as usize % 9,
                max_tgt_len: t as usize % 8,
                max_beam: b as usize % 5,
                max_batch: 1,
                encode_sources: 1,
                // 0 is refused (a typed error); 2 runs the GEMMs on the session's pool.
                threads: (b as usize / 5) % 3,
                // The encoder memory in f32 or f16 (the decode path reads f16 K/V).
                cross_kv: if t & 0x80 == 0 {
                    tessel_model::MemoryType::F32
                } else {
                    tessel_model::MemoryType::F16
                },
            };
            Session::with_limits(model, isa, limits)
        }
        None => Session::new(model, isa),
    };
    let Ok(mut fuzzed) = open() else {
        return;
    };
    let mut replay = open().expect("same limits, same result");
    for call in input.calls.iter().take(24) {
        let got = apply(&mut fuzzed, call);
        if !matches!(got, Outcome::Refused(_)) {
            let want = apply(&mut replay, call);
            assert_eq!(
                got, want,
                "{call:?}: differs from the replay of the accepted calls"
            );
        }
        assert_eq!(state(&fuzzed), state(&replay), "state after {call:?}");
    }
});
