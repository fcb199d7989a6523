//! A batch of audio sources (Whisper's batched transcription): log-mel features encoded into
//! slots decode as a session decodes each alone (greedy and beam 2, bit for bit), a slot's
//! prefill and forced alignment pass give a session's logits and probabilities, calls on one
//! slot between the steps of another's search leave that search as it was, and misuse is
//! refused with typed errors. On `tests/transcribe/tiny_en_32/model` (a random-weight
//! Whisper at the real 30 s geometry), its `f16` weights loaded as `f32` (one-row `f16`
//! products round apart from batched ones; see the `Batch` documentation).

use std::path::Path;

use tessel_kernels::Isa;
use tessel_model::load::ct2::{self, Ct2Options};
use tessel_model::{
    Batch, Config, Limits, Model, Request, RunError, SearchOptions, Session, WeightType,
};
use tessel_tests::for_each_isa;

/// The (decoder layer, head) pairs aligned: the fixture's alignment heads and one more.
const HEADS: [(usize, usize); 3] = [(1, 0), (0, 1), (1, 1)];
/// Frames of each slot's features: a whole 30 s window and two shorter ones.
const FRAMES: [usize; 3] = [3000, 640, 1200];

/// The fixture model, its linear weights as `f32`, and its special tokens.
fn model() -> (Model<'static>, Tokens) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcribe/tiny_en_32/model");
    let options = Ct2Options {
        max_beam: 2,
        weights: Some(WeightType::F32),
        ..Ct2Options::default()
    };
    let loaded = ct2::load_dir(&dir, options).expect("tiny_en_32");
    let vocab = &loaded.vocab.target;
    let id = |token: &str| vocab.id(token).expect(token);
    let tokens = Tokens {
        sot: id("<|startoftranscript|>"),
        prev: id("<|startofprev|>"),
        no_timestamps: id("<|notimestamps|>"),
    };
    (loaded.model, tokens)
}

/// Special tokens of the prompts.
#[derive(Clone, Copy)]
struct Tokens {
    sot: u32,
    prev: u32,
    no_timestamps: u32,
}

impl Tokens {
    /// A forced start of a window, with or without timestamps.
    fn start(self, timestamps: bool) -> Vec<u32> {
        if timestamps {
            vec![self.sot]
        } else {
            vec![self.sot, self.no_timestamps]
        }
    }

    /// A prompt conditioned on previous text: `<|startofprev|>`, text, `<|startoftranscript|>`,
    /// `<|notimestamps|>` (the no-speech probability is read at the `<|startoftranscript|>`
    /// row, not the last).
    fn prompt(self) -> Vec<u32> {
        vec![self.prev, 40, 7, 211, 90, self.sot, self.no_timestamps]
    }
}

/// Deterministic log-mel-like features, `n_mels × frames`, different for each `seed`.
fn mel(n_mels: usize, frames: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n_mels * frames)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.5 - 1.0
        })
        .collect()
}

fn n_mels(config: &Config) -> usize {
    config.front_end.n_mels().expect("a Whisper model")
}

/// Each slot's features.
fn features(config: &Config) -> Vec<Vec<f32>> {
    let n = n_mels(config);
    (0..3).map(|i| mel(n, FRAMES[i], 7 + i as u64)).collect()
}

/// A best hypothesis: its tokens and its score's bits.
type Best = (Vec<u32>, u32);

fn best(hyps: tessel_model::Hypotheses<'_>) -> Best {
    let best = hyps.best().expect("a hypothesis");
    (best.tokens.to_vec(), best.score.to_bits())
}

/// The search of slot `slot`: greedy, or beam 2 with a longer start.
fn options(slot: usize, beam: usize) -> SearchOptions {
    if beam == 1 {
        SearchOptions::greedy(6 + slot)
    } else {
        SearchOptions::beam(beam, 5 + slot)
    }
}

/// Each slot's forced start: with timestamps in slot 0 (one token, staged for the first
/// batched step), without in the others (prefilled alone).
fn starts(tokens: Tokens) -> Vec<Vec<u32>> {
    (0..3).map(|slot| tokens.start(slot == 0)).collect()
}

/// What a plain session gives each slot's features and request.
fn alone(
    model: &Model,
    isa: Isa,
    mels: &[Vec<f32>],
    starts: &[Vec<u32>],
    beam: usize,
) -> Vec<Best> {
    let mut session = Session::new(model, isa).expect("session");
    (0..mels.len())
        .map(|slot| {
            session.encode_audio(&mels[slot]).expect("encode");
            let request = Request::new(options(slot, beam)).prefix(&starts[slot]);
            best(session.generate(request).expect("search"))
        })
        .collect()
}

fn limits(model: &Model) -> Limits {
    Limits::of(model.config()).with_batch(3)
}

#[test]
fn audio_slots_decode_as_a_session_alone() {
    let (model, tokens) = model();
    let mels = features(model.config());
    let starts = starts(tokens);
    // On one thread and on three (the slots' attention calls spread over them).
    for_each_isa(|isa| {
        for threads in [1, 3] {
            let limits = limits(&model).with_threads(threads);
            let mut batch = Batch::new(&model, isa, limits).expect("batch");
            // Encoded out of slot order.
            for slot in [2, 0, 1] {
                batch.encode_audio(slot, &mels[slot]).expect("encode");
                assert_eq!(batch.source_len(slot), Some(FRAMES[slot] / 2));
            }
            for beam in [1, 2] {
                let want = alone(&model, isa, &mels, &starts, beam);
                let mut requests: Vec<_> = (0..3)
                    .map(|slot| Request::new(options(slot, beam)).prefix(&starts[slot]))
                    .collect();
                batch.generate(&mut requests).expect("batched search");
                for (slot, want) in want.iter().enumerate() {
                    let got = best(batch.hypotheses(slot).expect("hypotheses"));
                    assert_eq!(
                        &got, want,
                        "{isa}, {threads} threads, beam {beam}, slot {slot}"
                    );
                }
            }
        }
    });
}

/// The staged encode calls back once, between the encoder and the memory projection, and
/// encodes as the plain one does.
#[test]
fn a_staged_audio_encode_calls_back_once() {
    let (model, tokens) = model();
    let mels = features(model.config());
    let isa = Isa::best();
    let mut batch = Batch::new(&model, isa, limits(&model)).expect("batch");
    let mut calls = 0;
    batch
        .encode_audio_staged(1, &mels[1], || calls += 1)
        .expect("encode");
    assert_eq!(calls, 1);
    let prompt = tokens.prompt();
    let got = batch.prefill(1, &prompt).expect("prefill").to_vec();
    let mut session = Session::new(&model, isa).expect("session");
    session.encode_audio(&mels[1]).expect("encode");
    assert_eq!(got, session.prefill(&prompt).expect("prefill"));
}

#[test]
fn a_slot_prefill_gives_the_session_logits() {
    let (model, tokens) = model();
    let mels = features(model.config());
    let prompt = tokens.prompt();
    let at_sot = prompt.iter().position(|&t| t == tokens.sot).unwrap() + 1;
    for_each_isa(|isa| {
        let mut batch = Batch::new(&model, isa, limits(&model)).expect("batch");
        let mut session = Session::new(&model, isa).expect("session");
        for (slot, mel) in mels.iter().enumerate() {
            batch.encode_audio(slot, mel).expect("encode");
        }
        for (slot, mel) in mels.iter().enumerate().rev() {
            session.encode_audio(mel).expect("encode");
            for len in [at_sot, prompt.len(), 1] {
                let want = session.prefill(&prompt[..len]).expect("prefill").to_vec();
                session.reset_decoder();
                // Twice: each call starts the slot's decoder afresh.
                for _ in 0..2 {
                    let got = batch.prefill(slot, &prompt[..len]).expect("prefill");
                    assert_eq!(got.len(), model.config().tgt_vocab);
                    assert_eq!(got, &want[..], "{isa}, slot {slot}, {len} tokens");
                }
            }
        }
    });
}

/// Slot `slot`'s forced pass: its probabilities and every row's logits.
type Aligned = (Vec<f32>, Vec<Vec<f32>>);

fn aligned(
    rows: usize,
    vocab: usize,
    pass: impl FnOnce(&mut dyn FnMut(usize, &[f32])) -> Vec<f32>,
) -> Aligned {
    let mut logits = vec![Vec::new(); rows];
    let probs = pass(&mut |first, block| {
        for (i, row) in block.chunks(vocab).enumerate() {
            logits[first + i] = row.to_vec();
        }
    });
    (probs, logits)
}

#[test]
fn a_slot_alignment_gives_the_session_probabilities_and_logits() {
    let (model, tokens) = model();
    let mels = features(model.config());
    let vocab = model.config().tgt_vocab;
    let mut forced = tokens.start(false);
    forced.extend([40, 7, 211, 90, 13, 5, 300, 17]);
    let limits = limits(&model);
    for_each_isa(|isa| {
        let mut batch = Batch::with_alignment(&model, isa, limits, HEADS.len()).expect("batch");
        let mut session = Session::with_alignment(&model, isa, limits.with_batch(1), HEADS.len())
            .expect("session");
        for (slot, mel) in mels.iter().enumerate() {
            batch.encode_audio(slot, mel).expect("encode");
        }
        for slot in [2, 1] {
            let frames = FRAMES[slot] / 2 - 7;
            session.encode_audio(&mels[slot]).expect("encode");
            let want = aligned(forced.len(), vocab, |on_logits| {
                session
                    .align(&forced, &HEADS, frames, on_logits)
                    .expect("align")
                    .to_vec()
            });
            let got = aligned(forced.len(), vocab, |on_logits| {
                batch
                    .align(slot, &forced, &HEADS, frames, on_logits)
                    .expect("align")
                    .to_vec()
            });
            assert_eq!(got.0.len(), HEADS.len() * forced.len() * frames);
            assert!(got.1.iter().all(|row| row.len() == vocab));
            assert_eq!(got, want, "{isa}, slot {slot}");
        }
    });
}

/// Encodes, prefills and forced passes on other slots between the steps of a running search
/// leave it as it was: it ends as it does alone.
#[test]
fn calls_on_other_slots_between_steps_leave_a_search_as_it_was() {
    let (model, tokens) = model();
    let mels = features(model.config());
    let starts = starts(tokens);
    let isa = Isa::best();
    let want = alone(&model, isa, &mels[..1], &starts[..1], 2);
    let limits = limits(&model);
    let mut batch = Batch::with_alignment(&model, isa, limits, HEADS.len()).expect("batch");
    batch.encode_audio(0, &mels[0]).expect("encode");
    batch.encode_audio(1, &mels[1]).expect("encode");
    let mut requests = [
        Some(Request::new(options(0, 2)).prefix(&starts[0])),
        None,
        None,
    ];
    batch
        .admit(0, requests[0].as_mut().unwrap())
        .expect("admit");
    let prompt = tokens.prompt();
    let mut steps = 0;
    while batch.step(&mut requests[..]).expect("step") > 0 {
        steps += 1;
        batch.encode_audio(2, &mels[2 - steps % 2]).expect("encode");
        batch.prefill(1, &prompt).expect("prefill");
        batch
            .align(2, &prompt, &HEADS, 100, |_, _| {})
            .expect("align");
    }
    assert!(steps > 1, "the search ran several steps");
    assert_eq!(best(batch.hypotheses(0).expect("hypotheses")), want[0]);
}

#[test]
fn an_audio_batch_refuses_misuse_with_typed_errors() {
    let (model, tokens) = model();
    let mels = features(model.config());
    let n = n_mels(model.config());
    let isa = Isa::scalar();
    let limits = limits(&model);
    let mut batch = Batch::new(&model, isa, limits).expect("batch");
    let prompt = tokens.prompt();
    // Nothing encoded yet.
    let not_encoded = Some(RunError::NotEncoded);
    assert_eq!(batch.prefill(0, &prompt).err(), not_encoded);
    let aligned = batch.align(0, &prompt, &[], 1, |_, _| {});
    assert_eq!(aligned.err(), not_encoded);
    // Slots out of range.
    let bad_slot = Some(RunError::BadSlot { slot: 3, max: 3 });
    assert_eq!(batch.encode_audio(3, &mels[0]).err(), bad_slot);
    assert_eq!(batch.prefill(3, &prompt).err(), bad_slot);
    let aligned = batch.align(3, &prompt, &[], 1, |_, _| {});
    assert_eq!(aligned.err(), bad_slot);
    // Tokens to an audio model.
    assert!(matches!(
        batch.encode(0, &[1, 2, 3]),
        Err(RunError::WrongInput { .. })
    ));
    // Features that are not n_mels × an even number of frames up to 3000.
    batch.encode_audio(1, &mels[1]).expect("encode");
    for len in [0, n * 3, n * 2 + 1, n * 3002] {
        assert!(
            matches!(
                batch.encode_audio(1, &vec![0.5; len]),
                Err(RunError::BadFrames { .. })
            ),
            "{len} values"
        );
        assert_eq!(batch.source_len(1), Some(FRAMES[1] / 2), "{len} values");
    }
    // Prefills the session refuses.
    let vocab = model.config().tgt_vocab as u32;
    let long = vec![tokens.sot; limits.max_tgt_len + 1];
    assert!(matches!(batch.prefill(1, &[]), Err(RunError::BadOption(_))));
    assert!(matches!(
        batch.prefill(1, &long),
        Err(RunError::TargetTooLong { .. })
    ));
    assert!(matches!(
        batch.prefill(1, &[tokens.sot, vocab]),
        Err(RunError::TokenOutOfRange { .. })
    ));
    // A forced pass without planned room, or outside the source.
    assert!(batch.plan().region("align_probs").is_none());
    assert!(matches!(
        batch.align(1, &prompt, &HEADS[..1], 10, |_, _| {}),
        Err(RunError::BadOption(_))
    ));
    let mut roomy = Batch::with_alignment(&model, isa, limits, 2).expect("batch");
    roomy.encode_audio(1, &mels[1]).expect("encode");
    let frames = FRAMES[1] / 2;
    for (heads, frames) in [
        (&HEADS[..], 10),
        (&[(2, 0)][..], 10),
        (&[(0, 2)][..], 10),
        (&HEADS[..2], 0),
        (&HEADS[..2], frames + 1),
    ] {
        assert!(
            matches!(
                roomy.align(1, &prompt, heads, frames, |_, _| {}),
                Err(RunError::BadOption(_))
            ),
            "{heads:?} over {frames} frames"
        );
    }
    roomy
        .align(1, &prompt, &HEADS[..2], frames, |_, _| {})
        .expect("align");
    // Calls on a slot whose search is running.
    let start = tokens.start(false);
    let mut request = Request::new(SearchOptions::greedy(8)).prefix(&start);
    roomy.admit(1, &mut request).expect("admit");
    assert!(roomy.running(1));
    let busy = Some(RunError::BadOption("the slot's search is still running"));
    assert_eq!(roomy.encode_audio(1, &mels[1]).err(), busy);
    assert_eq!(roomy.prefill(1, &prompt).err(), busy);
    let aligned = roomy.align(1, &prompt, &HEADS[..2], 10, |_, _| {});
    assert_eq!(aligned.err(), busy);
    assert_eq!(roomy.source_len(1), Some(frames));
}

/// A model that reads tokens refuses features.
#[test]
fn a_token_batch_refuses_audio() {
    let config = Config {
        d_model: 16,
        heads: 2,
        encoder_layers: 1,
        decoder_layers: 1,
        d_ff: 24,
        src_vocab: 20,
        tgt_vocab: 21,
        max_src_len: 8,
        max_tgt_len: 8,
        max_beam: 1,
        ..Config::transformer_base()
    };
    let model = Model::random(config, 3).expect("model");
    let limits = Limits::of(model.config()).with_batch(2);
    let mut batch = Batch::new(&model, Isa::scalar(), limits).expect("batch");
    assert!(matches!(
        batch.encode_audio(0, &[0.0; 80 * 2]),
        Err(RunError::WrongInput { .. })
    ));
    assert_eq!(batch.source_len(0), None);
}
