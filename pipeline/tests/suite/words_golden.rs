//! Word timestamps against faster-whisper's `word_timestamps=True` (fixtures:
//! tools/make_words_golden.py, `tests/transcribe/<name>/words.json`, on the models and audio of
//! tools/make_transcribe_golden.py): the raw alignment of the first window identical to
//! CTranslate2's `Whisper.align` (the DTW path step for step; the text tokens' probabilities
//! within a stated tolerance), then whole transcriptions: every segment's seek, bounds (moved
//! by the word pass), tokens and text identical, every word's text identical and its times
//! within 10 ms. Greedy and beam 5; an English-only model (words split on spaces) and a
//! multilingual one told Chinese (words split on character boundaries) and English; with
//! `hallucination_silence_threshold` (1 s and 2 s), which drops windows and segments there
//! (those runs above the scalar level).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessel_audio::{segment, MelFrontEnd};
use tessel_model::{MemoryType, Session};
use tessel_pipeline::transcribe::alignment::{text_token_probability, Aligner};
use tessel_pipeline::transcribe::{TranscribeOptions, Transcriber};
use tessel_tests::for_each_isa;

use crate::timed::{check_segment, long_audio, prob_close, root, Reference};

#[derive(Debug, Deserialize)]
struct AlignCall {
    start_sequence: Vec<u32>,
    text_tokens: Vec<u32>,
    num_frames: usize,
    alignments: Vec<(usize, usize)>,
    text_token_probs: Vec<f64>,
}

#[derive(Debug, Deserialize)]
struct RunOptions {
    beam_size: usize,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    hallucination_silence_threshold: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct Run {
    options: RunOptions,
    language: String,
    segments: Vec<Reference>,
    align: AlignCall,
}

#[derive(Debug, Deserialize)]
struct Expected {
    runs: BTreeMap<String, Run>,
}

/// The long audio the scripts build ([`long_audio`]): clip.wav and 1.5 s of zeros, 4 times.
const REPEATS: usize = 4;
const GAP_SAMPLES: usize = 24000;

fn expected(name: &str) -> Expected {
    let text = std::fs::read_to_string(root().join(name).join("words.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn transcriber(name: &str) -> Transcriber {
    Transcriber::load(&root().join(name).join("model"), 5, None)
        .unwrap()
        .with_multilingual(name != "tiny_en_32")
}

fn alignment_matches(name: &str, cross_kv: MemoryType) {
    let e = expected(name);
    let transcriber = transcriber(name).with_cross_kv(cross_kv);
    let heads = transcriber.alignment_heads().to_vec();
    assert_eq!(heads, [(1, 0), (1, 1)]);
    let tokenizer = transcriber.tokenizer();
    let audio = long_audio(REPEATS, GAP_SAMPLES);
    let n_mels = 80;
    let frames = tessel_audio::content_frames(audio.len());
    let mut mel = vec![0.0; n_mels * frames];
    MelFrontEnd::new(n_mels)
        .unwrap()
        .spectrogram(&audio, &mut mel)
        .unwrap();
    for_each_isa(|isa| {
        let limits = transcriber.limits(1, 1);
        let model = std::sync::Arc::clone(transcriber.model());
        let mut session = Session::with_alignment(model, isa, limits, heads.len()).unwrap();
        let mut aligner = Aligner::new(limits.max_tgt_len, limits.max_src_len);
        for (run_name, run) in &e.runs {
            let what = format!("{name} {run_name} {cross_kv:?} {isa:?}");
            let call = &run.align;
            let mut window = vec![0.0; n_mels * 3000];
            segment(&mel, n_mels, 0, call.num_frames, &mut window).unwrap();
            session.encode_audio(&window).unwrap();
            let mut forced = call.start_sequence.clone();
            forced.push(tokenizer.no_timestamps());
            forced.extend_from_slice(&call.text_tokens);
            forced.push(tokenizer.eot());
            let sot = call.start_sequence.len();
            let text = &call.text_tokens;
            let mut probs = vec![0.0f32; text.len()];
            let vocab = transcriber.model().config().tgt_vocab;
            let eot = tokenizer.eot() as usize;
            let attention = session
                .align(&forced, &heads, call.num_frames / 2, |first, logits| {
                    for (i, row) in logits.chunks_exact(vocab).enumerate() {
                        let t = (first + i).wrapping_sub(sot);
                        if t < text.len() {
                            probs[t] = text_token_probability(row, eot, text[t]);
                        }
                    }
                })
                .unwrap();
            let shape = (heads.len(), forced.len(), call.num_frames / 2);
            let path = aligner.align(attention, shape, (sot, text.len())).path;
            assert_eq!(path.len(), call.alignments.len(), "{what}: path length");
            let first_difference = path.iter().zip(&call.alignments).position(|(a, b)| a != b);
            assert_eq!(first_difference, None, "{what}: first step that differs");
            let margin = aligner.decision_margin().unwrap_or(f32::INFINITY);
            eprintln!("{what}: smallest relative DTW decision gap {margin:.2e}");
            let mut worst = 0.0f64;
            for (t, (&g, &w)) in probs.iter().zip(&call.text_token_probs).enumerate() {
                let g = f64::from(g);
                worst = worst.max((g - w).abs() / w.abs().max(1e-30));
                assert!(prob_close(g, w), "{what}: token {t}: {g} vs {w}");
            }
            eprintln!("{what}: worst relative probability difference {worst:.2e}");
        }
    });
}

#[test]
fn alignments_are_ctranslate2s_english() {
    alignment_matches("tiny_en_32", MemoryType::F32);
    alignment_matches("tiny_en_32", MemoryType::F16);
}

#[test]
fn alignments_are_ctranslate2s_multilingual() {
    alignment_matches("tiny_multi_32", MemoryType::F32);
    alignment_matches("tiny_multi_32", MemoryType::F16);
}

fn words_match(name: &str) {
    let e = expected(name);
    let audio = long_audio(REPEATS, GAP_SAMPLES);
    let transcriber = transcriber(name);
    for_each_isa(|isa| {
        let mut session = transcriber.session_with_words(isa, 5, 1).unwrap();
        for (run_name, run) in &e.runs {
            // The hallucination rule is arithmetic on the words, the same at every level: its
            // runs are left out at the scalar level (unless the machine has no other), whose
            // words the other runs already hold to faster-whisper's. CI time.
            let hallucination = run.options.hallucination_silence_threshold.is_some();
            let scalar = tessel_kernels::Isa::scalar();
            if hallucination && isa == scalar && tessel_kernels::Isa::best() != scalar {
                continue;
            }
            let what = format!("{name} {run_name} {isa:?}");
            let options = TranscribeOptions {
                beam: run.options.beam_size,
                language: run.options.language.clone(),
                word_timestamps: true,
                hallucination_silence_threshold: run.options.hallucination_silence_threshold,
                ..TranscribeOptions::default()
            };
            let got = session.transcribe(&audio, &options, &mut ()).unwrap();
            assert_eq!(got.language, run.language, "{what}");
            assert_eq!(got.segments.len(), run.segments.len(), "{what}: segments");
            for (i, (g, w)) in got.segments.iter().zip(&run.segments).enumerate() {
                check_segment(&format!("{what} segment {i}"), g, w, 0.0);
            }
        }
    });
}

#[test]
fn words_are_faster_whispers_english() {
    words_match("tiny_en_32");
}

#[test]
fn words_are_faster_whispers_multilingual() {
    words_match("tiny_multi_32");
}

#[test]
fn word_timestamps_need_a_session_made_for_them() {
    let transcriber = transcriber("tiny_en_32");
    let mut session = transcriber
        .session(tessel_kernels::Isa::best(), 1, 1)
        .unwrap();
    let options = TranscribeOptions {
        word_timestamps: true,
        beam: 1,
        ..TranscribeOptions::default()
    };
    let err = session.transcribe(&[0.0; 1600], &options, &mut ());
    assert!(err.is_err());
}
