//! Whisper transcription, sequential and batched, on arbitrary audio and options: the
//! committed random-weight fixture model (`tests/transcribe/tiny_en_32`, d_model 32) over a few
//! seconds of fuzzed samples (NaN and infinities included), with or without the built-in Silero
//! VAD, clip timestamps in any order, odd beams, batch sizes past the session's slots, token
//! budgets, prompts and hotwords of any bytes, suppressed token lists, word timestamps.
//! Oracle: `Ok` or a typed `TranscribeError`, never a panic; an `Ok` transcript has finite
//! times, text tokens inside the vocabulary and each segment's words inside the audio in
//! order; a refused call leaves the session able to transcribe again.
#![no_main]

use std::cell::RefCell;
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::isa;
use tessel_kernels::Isa;
use tessel_pipeline::transcribe::{
    BatchedOptions, BatchedSession, TranscribeOptions, TranscribeSession, Transcriber,
    Transcript, Vad,
};

#[derive(Arbitrary, Debug)]
struct Input {
    isa: u8,
    batched: Option<Batched>,
    /// Samples as 16-bit PCM; a code of `i16::MIN` stands for a NaN, `i16::MAX` for +∞.
    samples: Vec<i16>,
    /// Zeros appended, in 10 ms steps (long silences for the detector).
    silence: u16,
    beam: u8,
    timestamps: bool,
    words: bool,
    vad: bool,
    /// Clip bounds in 10 ms steps.
    clips: Vec<u16>,
    max_new_tokens: Option<u8>,
    initial_prompt: Option<String>,
    hotwords: Option<String>,
    suppress: Option<Vec<i16>>,
    /// The first temperature, in tenths.
    temperature: u8,
}

#[derive(Arbitrary, Debug)]
struct Batched {
    batch_size: u8,
    multilingual: bool,
}

/// The slots of the batched session.
const SLOTS: usize = 3;

fn transcriber() -> &'static Transcriber {
    static TRANSCRIBER: OnceLock<Transcriber> = OnceLock::new();
    TRANSCRIBER.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/transcribe/tiny_en_32/model");
        Transcriber::load(std::path::Path::new(dir), 2, None).expect("the fixture model loads")
    })
}

fn vad() -> &'static Vad {
    static VAD: OnceLock<Vad> = OnceLock::new();
    VAD.get_or_init(|| tessel_pipeline::transcribe::open_vad(None).expect("built-in VAD"))
}

thread_local! {
    /// The sessions of each level, kept across inputs: a call that failed must leave them
    /// usable.
    static SESSIONS: RefCell<Vec<(Isa, BatchedSession, TranscribeSession)>> =
        const { RefCell::new(Vec::new()) };
}

/// Runs `run` on the batched and the sequential session of `isa`.
fn with_sessions(isa: Isa, run: impl FnOnce(&mut BatchedSession, &mut TranscribeSession)) {
    SESSIONS.with_borrow_mut(|sessions| {
        let index = match sessions.iter().position(|(level, ..)| *level == isa) {
            Some(index) => index,
            None => {
                let t = transcriber();
                let batched = t.batched_session(isa, (2, SLOTS), 1, true).expect("session");
                let plain = t.session_with_words(isa, 2, 1).expect("session");
                sessions.push((isa, batched, plain));
                sessions.len() - 1
            }
        };
        let (_, batched, plain) = &mut sessions[index];
        run(batched, plain);
    });
}

fn samples(input: &Input) -> Vec<f32> {
    let mut out: Vec<f32> = input
        .samples
        .iter()
        .take(16_000 * 3)
        .map(|&s| match s {
            i16::MIN => f32::NAN,
            i16::MAX => f32::INFINITY,
            s => f32::from(s) / 32768.0,
        })
        .collect();
    out.resize(out.len() + usize::from(input.silence % 600) * 160, 0.0);
    out
}

fn options(input: &Input) -> TranscribeOptions {
    TranscribeOptions {
        beam: usize::from(input.beam % 4),
        timestamps: input.timestamps,
        word_timestamps: input.words,
        clip_timestamps: input.clips.iter().map(|&c| f64::from(c) / 100.0).collect(),
        max_new_tokens: input.max_new_tokens.map(usize::from),
        initial_prompt: input.initial_prompt.clone(),
        hotwords: input.hotwords.clone(),
        suppress_tokens: input
            .suppress
            .as_ref()
            .map_or(vec![-1], |s| s.iter().map(|&t| i64::from(t)).collect()),
        temperatures: vec![f32::from(input.temperature % 12) / 10.0],
        sample_len: 24,
        ..TranscribeOptions::default()
    }
}

/// Finite, ordered times; text tokens in the vocabulary; words inside their audio.
fn check(transcript: &Transcript, seconds: f64) {
    let vocab = transcriber().tokenizer().vocab_size() as u32;
    for segment in &transcript.segments {
        assert!(segment.start.is_finite() && segment.end.is_finite(), "{segment:?}");
        assert!(segment.tokens.iter().all(|&t| t < vocab), "{segment:?}");
        for word in &segment.words {
            assert!(word.start <= word.end, "{word:?}");
            assert!(word.start >= 0.0 && word.end <= seconds + 30.0, "{word:?}");
        }
    }
}

fuzz_target!(|input: Input| {
    let samples = samples(&input);
    let seconds = samples.len() as f64 / 16_000.0;
    let options = options(&input);
    with_sessions(isa(input.isa), |batched_session, session| match &input.batched {
        Some(batched) => {
            let mut run = BatchedOptions {
                batch_size: usize::from(batched.batch_size % (SLOTS as u8 + 2)),
                multilingual: batched.multilingual,
                vad_filter: input.vad,
                ..BatchedOptions::default()
            };
            let vad = input.vad.then(vad);
            let done = batched_session.transcribe(&samples, &options, &run, vad, &mut ());
            if let Ok(done) = done {
                check(&done.transcript, seconds);
            }
            // Whatever happened, the session transcribes a plain short call.
            run.batch_size = 1;
            run.vad_filter = false;
            let plain = TranscribeOptions {
                beam: 1,
                sample_len: 4,
                ..TranscribeOptions::default()
            };
            let again = batched_session.transcribe(&[0.0; 1600], &plain, &run, None, &mut ());
            assert!(again.is_ok(), "{again:?}");
        }
        None => {
            let mut options = options;
            options.temperatures.push(0.0);
            if let Ok(transcript) = session.transcribe(&samples, &options, &mut ()) {
                check(&transcript, seconds);
            }
        }
    });
});
