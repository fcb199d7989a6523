//! `TranscribeSession::transcribe` against faster-whisper's `transcribe` on random-weight
//! Whisper models with the real 30 s geometry, over espeak-ng speech longer than 30 s
//! (fixtures: tools/make_transcribe_golden.py, tests/transcribe/README.md): every segment's
//! seek, start, end, tokens and text identical; its average log-probability, compression
//! ratio and no-speech probability within stated tolerances; greedy and beam 5, with and
//! without timestamps, conditioned on previous text or not, with an initial prompt, language
//! detection and translation. Then the typed errors of malformed inputs.

use std::sync::Arc;

use serde::Deserialize;
use tessel_audio::{load_wav, ReadOptions};
use tessel_model::load::directory::OpenError;
use tessel_pipeline::transcribe::{TranscribeError, TranscribeOptions, Transcriber};
use tessel_tests::for_each_isa;
use tessel_text::whisper::Task;

use crate::timed::{check_figures, root, Figures, LongRuns};

#[derive(Debug, Deserialize)]
struct RunOptions {
    beam_size: usize,
    #[serde(default)]
    without_timestamps: bool,
    #[serde(default = "yes")]
    condition_on_previous_text: bool,
    #[serde(default)]
    initial_prompt: Option<String>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    language: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct Run {
    language: String,
    segments: Vec<Figures>,
    options: RunOptions,
}

/// The reference's runs.
type Expected = LongRuns<Run>;

fn expected(name: &str) -> Expected {
    let text = std::fs::read_to_string(root().join(name).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn options(run: &RunOptions) -> TranscribeOptions {
    TranscribeOptions {
        beam: run.beam_size,
        timestamps: !run.without_timestamps,
        condition_on_previous_text: run.condition_on_previous_text,
        initial_prompt: run.initial_prompt.clone(),
        task: match run.task.as_deref() {
            Some("translate") => Task::Translate,
            _ => Task::Transcribe,
        },
        language: run.language.clone(),
        ..TranscribeOptions::default()
    }
}

fn golden(name: &str, multilingual: bool) {
    let e = expected(name);
    let audio = e.audio();
    let transcriber = Transcriber::load(&root().join(name).join("model"), 5, None)
        .unwrap()
        .with_multilingual(multilingual);
    assert_eq!(transcriber.is_multilingual(), multilingual);
    for_each_isa(|isa| {
        let mut session = transcriber.session(isa, 5, 1).unwrap();
        for (run_name, run) in &e.runs {
            let what = format!("{name} {run_name} {isa:?}");
            let got = session
                .transcribe(&audio, &options(&run.options), &mut ())
                .unwrap();
            assert_eq!(got.language, run.language, "{what}");
            let seeks: Vec<usize> = got.segments.iter().map(|s| s.seek).collect();
            let want_seeks: Vec<usize> = run.segments.iter().map(|s| s.segment.seek).collect();
            assert_eq!(seeks, want_seeks, "{what}: windows");
            assert!(want_seeks.iter().any(|&s| s > 0), "{what}: seeks past 30 s");
            assert_eq!(got.segments.len(), run.segments.len(), "{what}");
            for (i, (g, w)) in got.segments.iter().zip(&run.segments).enumerate() {
                check_figures(&format!("{what} segment {i}"), g, w, 1e-12);
            }
        }
    });
}

#[test]
fn english_only_model_matches_faster_whisper() {
    golden("tiny_en_32", false);
}

#[test]
fn multilingual_model_matches_faster_whisper() {
    golden("tiny_multi_32", true);
}

#[test]
fn malformed_inputs_get_typed_errors() {
    let dir = root().join("tiny_en_32").join("model");
    let transcriber = Arc::new(Transcriber::load(&dir, 5, None).unwrap());
    let mut session = transcriber
        .session(tessel_kernels::Isa::best(), 2, 1)
        .unwrap();
    let defaults = TranscribeOptions {
        beam: 2,
        ..TranscribeOptions::default()
    };
    // Empty audio and audio shorter than one frame.
    for samples in [&[][..], &[0.1; 100][..]] {
        let err = session.transcribe(samples, &defaults, &mut ()).unwrap_err();
        assert!(matches!(err, TranscribeError::EmptyAudio), "{err:?}");
        assert!(
            err.to_string().contains("fewer than 160 samples (10 ms"),
            "{err}"
        );
    }
    // Non-finite samples.
    let mut bad = vec![0.0; 16000];
    bad[77] = f32::NAN;
    assert!(matches!(
        session.transcribe(&bad, &defaults, &mut ()),
        Err(TranscribeError::Mel(_))
    ));
    // Options out of range (this session holds beams up to 2; `.en` cannot translate).
    for options in [
        TranscribeOptions {
            beam: 3,
            ..defaults.clone()
        },
        TranscribeOptions {
            best_of: 0,
            ..defaults.clone()
        },
        TranscribeOptions {
            temperatures: vec![],
            ..defaults.clone()
        },
        TranscribeOptions {
            temperatures: vec![0.0, f32::NAN],
            ..defaults.clone()
        },
        TranscribeOptions {
            task: Task::Translate,
            ..defaults.clone()
        },
    ] {
        assert!(matches!(
            session.transcribe(&[0.0; 16000], &options, &mut ()),
            Err(TranscribeError::BadOption(_))
        ));
    }
    // A WAV file cut short (16-bit mono, 16 kHz) reads the whole frames it holds, as players
    // read it.
    let wav = std::fs::read(root().join("clip.wav")).unwrap();
    let tmp = std::env::temp_dir().join(format!("tessel-truncated-{}.wav", std::process::id()));
    let cut = wav.len() / 3 + 1;
    std::fs::write(&tmp, &wav[..cut]).unwrap();
    let read = load_wav(&tmp, &ReadOptions::default());
    std::fs::remove_file(&tmp).unwrap();
    let read = read.expect("a WAV file cut short reads to its end");
    let whole = load_wav(&root().join("clip.wav"), &ReadOptions::default()).unwrap();
    assert_eq!(read.samples.len(), (cut - 44) / 2);
    assert_eq!(read.samples[..], whole.samples[..read.samples.len()]);
    // Missing model files.
    let empty = std::env::temp_dir().join(format!("tessel-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    assert!(matches!(
        Transcriber::load(&empty, 5, None),
        Err(TranscribeError::Open(OpenError::MissingFile { .. }))
    ));
    std::fs::copy(dir.join("model.bin"), empty.join("model.bin")).unwrap();
    let missing_vocabulary = Transcriber::load(&empty, 5, None);
    assert!(
        matches!(missing_vocabulary, Err(TranscribeError::Ct2(_))),
        "{missing_vocabulary:?}"
    );
    for f in ["config.json", "vocabulary.json"] {
        std::fs::copy(dir.join(f), empty.join(f)).unwrap();
    }
    // No tokenizer.json.
    assert!(matches!(
        Transcriber::load(&empty, 5, None),
        Err(TranscribeError::ModelDir { .. })
    ));
    std::fs::remove_dir_all(&empty).unwrap();
    assert!(matches!(
        Transcriber::load(&root().join("no-such-model"), 5, None),
        Err(TranscribeError::Open(OpenError::NotFound(_)))
    ));
}
