//! `tessel transcribe` end to end: a WAV file of the golden fixture's audio through the
//! binary, its JSON output against faster-whisper's segments (tests/transcribe/), the summary's
//! allocation count, the other formats (each segment printed as soon as it is final), and
//! failures reported as `tessel: <message>`, the cheap ones before the model loads.
//!
//! The binary runs at the CPU's best ISA level whatever `TESSEL_ISA` the test run has: what
//! is tested here (arguments, formats, streaming, errors) does not depend on the level, and
//! `pipeline/tests/suite/transcribe_golden.rs` proves the same segments at every level.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcribe")
}

fn tessel(args: &[&str]) -> Output {
    binary().args(args).output().expect("run tessel")
}

/// The `tessel` binary at the CPU's best ISA level.
fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessel"));
    command.env_remove("TESSEL_ISA");
    command
}

/// The fixture's long audio (clip.wav, 1.5 s of silence, four times) as a WAV file.
fn long_wav(path: &Path) {
    let clip = std::fs::read(root().join("clip.wav")).unwrap();
    // A canonical 44-byte header: the PCM data follows it.
    assert_eq!(&clip[36..40], b"data");
    let pcm = &clip[44..];
    let mut data = Vec::new();
    for _ in 0..4 {
        data.extend_from_slice(pcm);
        data.extend(std::iter::repeat_n(0u8, 2 * 24_000));
    }
    let mut wav = clip[..44].to_vec();
    wav[4..8].copy_from_slice(&(36 + data.len() as u32).to_le_bytes());
    wav[40..44].copy_from_slice(&(data.len() as u32).to_le_bytes());
    wav.extend_from_slice(&data);
    std::fs::write(path, wav).unwrap();
}

#[test]
fn transcribes_a_wav_file_as_faster_whisper_does() {
    let dir = std::env::temp_dir().join(format!("tessel-transcribe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wav = dir.join("long.wav");
    long_wav(&wav);
    let model = root().join("tiny_en_32/model");
    let (model, wav_s) = (model.to_str().unwrap(), wav.to_str().unwrap());
    let out = tessel(&[
        "transcribe",
        "--model",
        model,
        wav_s,
        "--beam",
        "1",
        "--format",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("allocations during inference: 0"),
        "{stderr}"
    );
    assert!(stderr.contains("real-time factor"), "{stderr}");
    assert!(stderr.contains(" ms + cross K/V "), "{stderr}");
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tiny_en_32/expected.json")).unwrap(),
    )
    .unwrap();
    let tokens = |segments: &serde_json::Value| -> Vec<serde_json::Value> {
        segments
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["tokens"].clone())
            .collect()
    };
    assert_eq!(
        tokens(&got["segments"]),
        tokens(&want["runs"]["greedy"]["segments"])
    );
    // The other formats hold the same segments.
    let srt = tessel(&[
        "transcribe",
        "--model",
        model,
        wav_s,
        "--beam",
        "1",
        "--format",
        "srt",
        "-q",
    ]);
    let srt = String::from_utf8(srt.stdout).unwrap();
    let cues = want["runs"]["greedy"]["segments"].as_array().unwrap().len();
    assert_eq!(srt.matches(" --> ").count(), cues);
    assert!(srt.starts_with("1\n00:00:00,100 --> "), "{srt}");
    let vtt = tessel(&[
        "transcribe",
        "--model",
        model,
        wav_s,
        "--beam",
        "1",
        "--format",
        "vtt",
        "-q",
    ]);
    assert!(String::from_utf8(vtt.stdout)
        .unwrap()
        .starts_with("WEBVTT\n\n00:00.100 --> "));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--word-timestamps`: the words of faster-whisper's `word_timestamps=True` in the JSON
/// output (tests/transcribe/tiny_en_32/words.json, greedy, and with
/// `--hallucination-silence-threshold 1`), none without the flag, and still no allocation
/// during inference (the forced pass and the alignment included).
#[test]
fn word_timestamps_are_faster_whispers() {
    let (dir, wav) = long_wav_in("tessel-words");
    let model = root().join("tiny_en_32/model");
    let (model, wav_s) = (model.to_str().unwrap(), wav.to_str().unwrap());
    let args = [
        "transcribe",
        "--model",
        model,
        wav_s,
        "--beam",
        "1",
        "--format",
        "json",
    ];
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tiny_en_32/words.json")).unwrap(),
    )
    .unwrap();
    for (run, extra) in [
        ("greedy", &[][..]),
        (
            "hallucination_greedy_1s",
            &["--hallucination-silence-threshold", "1"][..],
        ),
    ] {
        let mut with_words = args.to_vec();
        with_words.push("--word-timestamps");
        with_words.extend_from_slice(extra);
        let out = tessel(&with_words);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("allocations during inference: 0"),
            "{stderr}"
        );
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        check_words(&got, &want["runs"][run]);
    }
    let plain = tessel(&args);
    assert!(plain.status.success());
    let plain: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    let segments = plain["segments"].as_array().unwrap();
    assert!(segments.iter().all(|s| s.get("words").is_none()));
    std::fs::remove_dir_all(&dir).ok();
}

/// With `--word-timestamps`, SubRip and WebVTT cues are laid out from the words as
/// openai-whisper's writers lay them out, with its word options as flags
/// (tests/transcribe/tiny_en_32/cues.json, tools/make_cues_golden.py).
#[test]
fn word_cues_are_openai_whispers() {
    let (dir, wav) = long_wav_in("tessel-cues");
    let model = root().join("tiny_en_32/model");
    let (model, wav_s) = (model.to_str().unwrap(), wav.to_str().unwrap());
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tiny_en_32/cues.json")).unwrap(),
    )
    .unwrap();
    let runs = [
        ("default.srt", &["--format", "srt"][..]),
        (
            "words_1.vtt",
            &["--format", "vtt", "--max-words-per-line", "1"][..],
        ),
        (
            "width_8_count_2.srt",
            &[
                "--format",
                "srt",
                "--max-line-width",
                "8",
                "--max-line-count",
                "2",
            ][..],
        ),
        (
            "highlight.vtt",
            &["--format", "vtt", "--highlight-words"][..],
        ),
    ];
    for (file, flags) in runs {
        let mut args = vec!["transcribe", "--model", model, wav_s, "--beam", "1"];
        args.push("--word-timestamps");
        args.extend_from_slice(flags);
        let out = tessel(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{file}: {stderr}");
        let got = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            got,
            want["runs"]["greedy"][file].as_str().unwrap(),
            "{file}"
        );
    }
    // The word options need word timestamps.
    let bad = tessel(&[
        "transcribe",
        "--model",
        model,
        wav_s,
        "--max-words-per-line",
        "1",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--word-timestamps"));
    std::fs::remove_dir_all(&dir).ok();
}

/// A JSON transcript's segments and words against a run of words.json.
fn check_words(got: &serde_json::Value, run: &serde_json::Value) {
    let want = run["segments"].as_array().unwrap();
    let got = got["segments"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g["text"], w["text"]);
        let words = g
            .get("words")
            .and_then(|w| w.as_array())
            .cloned()
            .unwrap_or_default();
        let want_words = w["words"].as_array().unwrap();
        assert_eq!(words.len(), want_words.len(), "{g}");
        for (gw, ww) in words.iter().zip(want_words) {
            assert_eq!(gw["word"], ww[0]);
            let (start, end) = (gw["start"].as_f64().unwrap(), gw["end"].as_f64().unwrap());
            assert!(
                (start - ww[1].as_f64().unwrap()).abs() <= 0.01 + 1e-9,
                "{gw} {ww}"
            );
            assert!(
                (end - ww[2].as_f64().unwrap()).abs() <= 0.01 + 1e-9,
                "{gw} {ww}"
            );
            assert!(gw["probability"].as_f64().unwrap() > 0.0);
        }
    }
}

/// A fresh directory named after `tag` holding the long WAV of [`long_wav`], and the WAV's path.
fn long_wav_in(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wav = dir.join("long.wav");
    long_wav(&wav);
    (dir, wav)
}

/// The temperatures of the segments of a JSON transcript, and its tokens.
fn temperatures_and_tokens(out: &Output) -> (Vec<f64>, Vec<serde_json::Value>) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let segments = got["segments"].as_array().unwrap();
    (
        segments
            .iter()
            .map(|s| s["temperature"].as_f64().unwrap())
            .collect(),
        segments.iter().map(|s| s["tokens"].clone()).collect(),
    )
}

#[test]
fn fallback_flags_set_the_temperatures_and_thresholds() {
    let model = root().join("tiny_en_32/model");
    let clip = root().join("clip.wav");
    let base = [
        "transcribe",
        "--model",
        model.to_str().unwrap(),
        clip.to_str().unwrap(),
        "--beam",
        "1",
        "--format",
        "json",
        "-q",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        tessel(&args)
    };
    // At the default thresholds the fixture's clip decodes at temperature 0.
    let (default, tokens) = temperatures_and_tokens(&run(&[]));
    assert!(default.iter().all(|&t| t == 0.0), "{default:?}");
    // Thresholds no decoding passes make every window fall back along the ladder...
    for strict in [
        ["--compression-ratio-threshold", "0.01"],
        ["--logprob-threshold", "0"],
    ] {
        let (fell_back, _) = temperatures_and_tokens(&run(&strict));
        assert!(
            fell_back.iter().any(|&t| t > 0.0),
            "{strict:?}: {fell_back:?}"
        );
        // ...unless the ladder is temperature 0 alone: the same text as by default.
        let zero_only = [strict[0], strict[1], "--temperatures", "0"];
        let (kept, same) = temperatures_and_tokens(&run(&zero_only));
        assert!(kept.iter().all(|&t| t == 0.0), "{kept:?}");
        assert_eq!(same, tokens);
    }
    // Values out of range are refused as the command line is read.
    for (flags, message) in [
        (["--temperatures", "0,-1"], "must not be negative"),
        (["--beam", "0"], "0 is outside 1..=64"),
        (["--beam", "65"], "65 is outside 1..=64"),
        (["--best-of", "0"], "at least 1"),
        (["--patience", "0"], "must be above 0"),
        (["--threads", "100000"], "cores available"),
        (["--no-speech-threshold", "1.5"], "between 0 and 1"),
        (["--logprob-threshold", "nan"], "must be finite"),
    ] {
        let mut args = base[..4].to_vec();
        args.extend_from_slice(&flags);
        let bad = tessel(&args);
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(flags[0]) && stderr.contains(message),
            "{flags:?}: {stderr}"
        );
    }
}

#[test]
fn failures_are_reported_with_their_cause() {
    let dir = std::env::temp_dir().join(format!("tessel-transcribe-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = root().join("tiny_en_32/model");
    let clip = root().join("clip.wav");
    let truncated = dir.join("truncated.wav");
    let bytes = std::fs::read(&clip).unwrap();
    std::fs::write(&truncated, &bytes[..30]).unwrap();
    let bart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/translation/bart/hf");
    let marian_ct2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/translation/marian/ct2");
    let whisper_hf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/whisper/tiny_like_80/hf");
    let truncated_hf = dir.join("truncated_hf");
    std::fs::create_dir_all(&truncated_hf).unwrap();
    for entry in std::fs::read_dir(&whisper_hf).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, truncated_hf.join(path.file_name().unwrap())).unwrap();
    }
    let weights = std::fs::read(whisper_hf.join("model.safetensors")).unwrap();
    std::fs::write(
        truncated_hf.join("model.safetensors"),
        &weights[..weights.len() - 100],
    )
    .unwrap();
    let clip_s = clip.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (
            &["--model", dir.to_str().unwrap(), clip_s],
            "config.json is missing",
        ),
        (
            &["--model", bart.to_str().unwrap(), clip_s],
            "hf is a Hugging Face BART model (translation); `transcribe` needs a Whisper model",
        ),
        (
            &["--model", marian_ct2.to_str().unwrap(), clip_s],
            "ct2 is a CTranslate2 model (translation); `transcribe` needs a Whisper model",
        ),
        (
            &["--model", truncated_hf.to_str().unwrap(), clip_s],
            "truncated_hf/model.safetensors is truncated",
        ),
        // The audio is checked before the model directory.
        (
            &["--model", "/nonexistent/model", "no-such.wav"],
            "cannot read the input file no-such.wav",
        ),
        (
            &[
                "--model",
                model.to_str().unwrap(),
                truncated.to_str().unwrap(),
            ],
            "WAV",
        ),
        (
            &["--model", model.to_str().unwrap(), "no-such.wav"],
            "cannot read",
        ),
        (
            &[
                "--model",
                model.to_str().unwrap(),
                clip.to_str().unwrap(),
                "--task",
                "translate",
            ],
            "cannot translate",
        ),
        (
            &["--model", model.to_str().unwrap(), dir.to_str().unwrap()],
            "it is a directory",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["transcribe"];
        all.extend_from_slice(args);
        let out = tessel(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("tessel: ") && stderr.contains(message),
            "{args:?}: {stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn segments_are_printed_as_soon_as_they_are_final() {
    let dir = std::env::temp_dir().join(format!("tessel-transcribe-jsonl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Over 30 s: two windows, so the first window's segments are final before the second is
    // decoded.
    let wav = dir.join("long.wav");
    long_wav(&wav);
    let model = root().join("tiny_en_32/model");
    let (model, wav_s) = (model.to_str().unwrap(), wav.to_str().unwrap());
    let args = |format: &'static str| {
        [
            "transcribe",
            "--model",
            model,
            wav_s,
            "--beam",
            "1",
            "--format",
            format,
        ]
    };
    let json = tessel(&args("json"));
    assert!(json.status.success());
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let segments = json["segments"].as_array().unwrap();
    assert!(segments.iter().any(|s| s["seek"] == 0), "{json}");
    assert!(segments.iter().any(|s| s["seek"] != 0), "{json}");
    // Standard output and standard error into one file, in the order they were written.
    let log = dir.join("log.txt");
    let file = std::fs::File::create(&log).unwrap();
    let status = binary()
        .args(args("jsonl"))
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    assert!(status.success());
    let log = std::fs::read_to_string(&log).unwrap();
    // The JSON lines are json's segments, one per line.
    let lines: Vec<serde_json::Value> = log
        .split(['\n', '\r'])
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&lines, segments);
    // The first segment came out before the progress line reached the end of the audio.
    let first = log.find("{\"id\":0,").unwrap();
    let total = json_total(&log);
    let done = log
        .find(&format!("transcribing: {total} / {total} s"))
        .unwrap();
    assert!(first < done, "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The audio's length as the progress line writes it (`transcribing: done / total s`).
fn json_total(log: &str) -> &str {
    let line = log
        .split('\r')
        .find(|l| l.starts_with("transcribing: "))
        .unwrap();
    line.trim_end()
        .strip_suffix(" s")
        .and_then(|l| l.rsplit(" / ").next())
        .unwrap()
}

/// A 16 kHz mono 16-bit WAV of `samples` (exact for samples read from one).
fn write_wav(path: &Path, samples: &[f32]) {
    let data: Vec<u8> = samples
        .iter()
        .flat_map(|&s| ((s * 32768.0) as i16).to_le_bytes())
        .collect();
    let mut wav = b"RIFF".to_vec();
    wav.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    for field in [16u32, 1 | (1 << 16), 16_000, 32_000, 2 | (16 << 16)] {
        wav.extend_from_slice(&field.to_le_bytes());
    }
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(data.len() as u32).to_le_bytes());
    wav.extend_from_slice(&data);
    std::fs::write(path, wav).unwrap();
}

/// `--vad` transcribes exactly the speech-only audio (the same segments as a run on it,
/// written out) and maps each segment's times back with faster-whisper's
/// `SpeechTimestampsMap`; the summary names the chunks kept.
#[test]
fn vad_removes_silence_and_maps_times_back() {
    use tessel_vad::timestamps::{
        collect_chunks, speech_timestamps, SpeechTimestampsMap, VadOptions,
    };

    let dir = std::env::temp_dir().join(format!("tessel-transcribe-vad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clip = tessel_audio::load_wav(&root().join("clip.wav"), &Default::default())
        .unwrap()
        .samples;
    // 3 s of silence, the clip, 4 s of silence, the clip, 1 s of silence.
    let mut audio = vec![0.0f32; 48_000];
    audio.extend_from_slice(&clip);
    audio.extend(std::iter::repeat_n(0.0, 64_000));
    audio.extend_from_slice(&clip);
    audio.extend(std::iter::repeat_n(0.0, 16_000));
    let original = dir.join("original.wav");
    write_wav(&original, &audio);

    let vad_model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/silero_vad_v6.onnx");
    let vad = tessel_vad::Vad::open(&vad_model).unwrap();
    let options = VadOptions {
        min_silence_duration_ms: 1000,
        ..VadOptions::default()
    };
    let chunks = speech_timestamps(
        &vad.speech_probabilities(&audio).unwrap(),
        audio.len(),
        &options,
    );
    assert!(chunks.len() >= 2, "{chunks:?}");
    let speech = collect_chunks(&audio, &chunks, f64::INFINITY).0.concat();
    let speech_only = dir.join("speech.wav");
    write_wav(&speech_only, &speech);

    let model = root().join("tiny_en_32/model");
    let model = model.to_str().unwrap();
    let run = |wav: &Path, extra: &[&str]| {
        let mut args = vec!["transcribe", "--model", model, wav.to_str().unwrap()];
        args.extend_from_slice(&["--beam", "1", "--format", "json"]);
        args.extend_from_slice(extra);
        let out = tessel(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (json["segments"].as_array().unwrap().clone(), stderr)
    };
    let (plain, _) = run(&speech_only, &[]);
    let vad_model = vad_model.to_str().unwrap();
    let (mapped, stderr) = run(
        &original,
        &[
            "--vad",
            "--vad-model",
            vad_model,
            "--vad-min-silence-ms",
            "1000",
        ],
    );
    assert!(
        stderr.contains(&format!("vad: {} speech chunk(s)", chunks.len())),
        "{stderr}"
    );
    assert!(
        stderr.contains("allocations during inference: 0"),
        "{stderr}"
    );
    assert!(!plain.is_empty());
    assert_eq!(plain.len(), mapped.len());
    let map = SpeechTimestampsMap::new(&chunks, 2);
    for (p, m) in plain.iter().zip(&mapped) {
        assert_eq!(p["tokens"], m["tokens"]);
        let (start, end) = (p["start"].as_f64().unwrap(), p["end"].as_f64().unwrap());
        assert_eq!(m["start"].as_f64(), map.original_time(start, None, false));
        assert_eq!(m["end"].as_f64(), map.original_time(end, None, true));
    }
    // With word timestamps: each word in the chunk its middle falls in, each segment from its
    // first word to its last (faster-whisper's restore_speech_timestamps).
    let (plain, _) = run(&speech_only, &["--word-timestamps"]);
    let vad_flags = [
        "--vad",
        "--vad-model",
        vad_model,
        "--vad-min-silence-ms",
        "1000",
    ];
    let (mapped, _) = run(
        &original,
        &[&vad_flags[..], &["--word-timestamps"]].concat(),
    );
    assert_eq!(plain.len(), mapped.len());
    let mut words = 0;
    for (p, m) in plain.iter().zip(&mapped) {
        assert_eq!(p["tokens"], m["tokens"]);
        // A segment the words were not dealt to has no `words` key.
        let words_of = |s: &serde_json::Value| s["words"].as_array().cloned().unwrap_or_default();
        let (pw, mw) = (words_of(p), words_of(m));
        assert_eq!(pw.len(), mw.len());
        for (a, b) in pw.iter().zip(&mw) {
            let (start, end) = (a["start"].as_f64().unwrap(), a["end"].as_f64().unwrap());
            let chunk = map.chunk_index((start + end) / 2.0, false);
            assert_eq!(b["start"].as_f64(), map.original_time(start, chunk, false));
            assert_eq!(b["end"].as_f64(), map.original_time(end, chunk, false));
            assert_eq!(a["word"], b["word"]);
            words += 1;
        }
        if let (Some(first), Some(last)) = (mw.first(), mw.last()) {
            assert_eq!(m["start"], first["start"]);
            assert_eq!(m["end"], last["end"]);
        }
    }
    assert!(words > 0, "no words to map");
    // Silence only: no segments.
    let silence = dir.join("silence.wav");
    write_wav(&silence, &vec![0.0; 32_000]);
    let (none, stderr) = run(&silence, &["--vad", "--vad-model", vad_model]);
    assert!(none.is_empty(), "{none:?}");
    assert!(stderr.contains("vad: 0 speech chunk(s)"), "{stderr}");
    // The VAD flags need --vad.
    let out = tessel(&[
        "transcribe",
        "--model",
        model,
        "x.wav",
        "--vad-threshold",
        "0.3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The decoding flags (`--hotwords`, `--prefix`, `--repetition-penalty`, `--no-repeat-ngram-size`,
/// `--max-new-tokens`, `--suppress-tokens`) give faster-whisper's segments for its options
/// (tests/transcribe/tiny_en_32/options.json, tools/make_transcribe_options_golden.py), and no
/// allocation during inference.
#[test]
fn decoding_flags_are_faster_whispers_options() {
    let dir = std::env::temp_dir().join(format!("tessel-options-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wav = dir.join("long.wav");
    long_wav(&wav);
    let model = root().join("tiny_en_32/model");
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tiny_en_32/options.json")).unwrap(),
    )
    .unwrap();
    let mut tried = 0;
    for (name, run) in want["runs"].as_object().unwrap() {
        let options = run["options"].as_object().unwrap();
        let mut args: Vec<String> = ["transcribe", "--format", "json", "--model"]
            .map(String::from)
            .to_vec();
        args.push(model.to_str().unwrap().into());
        args.push(wav.to_str().unwrap().into());
        args.push("--beam".into());
        args.push(options["beam_size"].to_string());
        let flag = |key: &str| match key {
            "hotwords" => Some("--hotwords"),
            "prefix" => Some("--prefix"),
            "repetition_penalty" => Some("--repetition-penalty"),
            "no_repeat_ngram_size" => Some("--no-repeat-ngram-size"),
            "max_new_tokens" => Some("--max-new-tokens"),
            "suppress_tokens" => Some("--suppress-tokens"),
            _ => None,
        };
        let mut has_flag = false;
        if options.get("without_timestamps") == Some(&serde_json::Value::Bool(true)) {
            args.push("--no-timestamps".into());
        }
        for (key, value) in options {
            let Some(flag) = flag(key) else { continue };
            has_flag = true;
            args.push(flag.into());
            args.push(match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(ids) => {
                    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                    ids.join(",")
                }
                other => other.to_string(),
            });
        }
        if !has_flag {
            continue; // initial_prompt as token ids: no flag.
        }
        tried += 1;
        let out = binary().args(&args).output().expect("run tessel");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("allocations during inference: 0"),
            "{name}: {stderr}"
        );
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let tokens = |segments: &serde_json::Value| -> Vec<serde_json::Value> {
            let segments = segments.as_array().unwrap().iter();
            segments.map(|s| s["tokens"].clone()).collect()
        };
        assert_eq!(
            tokens(&got["segments"]),
            tokens(&run["segments"]),
            "{name}: {args:?}"
        );
    }
    assert!(tried >= 12, "{tried} runs with flags");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--batch-size` runs faster-whisper's `BatchedInferencePipeline`: the segments of its
/// fixture (tests/transcribe/tiny_en_32/batched.json, tools/make_batched_golden.py) with words
/// and timestamps, and with detector flags (its `vad_parameters` dict); refusals of what the
/// batched pipeline does not do.
#[test]
fn batched_transcription_is_faster_whispers() {
    let (dir, wav) = long_wav_in("tessel-batched");
    let model = root().join("tiny_en_32/model");
    let (model, wav_s) = (model.to_str().unwrap(), wav.to_str().unwrap());
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tiny_en_32/batched.json")).unwrap(),
    )
    .unwrap();
    let base = ["transcribe", "--model", model, wav_s, "--format", "json"];
    let runs: [(&str, &[&str]); 2] = [
        (
            "words_timestamps",
            &["--batch-size", "8", "--timestamps", "--word-timestamps"],
        ),
        (
            "vad_dict",
            &[
                "--batch-size",
                "3",
                "--max-new-tokens",
                "40",
                "--vad",
                "--vad-threshold",
                "0.5",
            ],
        ),
    ];
    for (run, extra) in runs {
        let out = tessel(&[&base[..], extra].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("allocations during inference: 0"),
            "{stderr}"
        );
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let want = &want["runs"][run];
        let (g, w) = (
            got["segments"].as_array().unwrap(),
            want["segments"].as_array().unwrap(),
        );
        assert_eq!(g.len(), w.len(), "{run}");
        for (g, w) in g.iter().zip(w) {
            assert_eq!(
                (&g["tokens"], &g["start"], &g["end"]),
                (&w["tokens"], &w["start"], &w["end"])
            );
        }
        if run == "words_timestamps" {
            check_words(&got, want);
        }
    }
    let refused: [(&[&str], i32, &str); 4] = [
        (
            &["--batch-size", "2", "--prefix", "So"],
            2,
            "cannot be used with",
        ),
        (&["--multilingual"], 2, "--batch-size"),
        (&["--batch-size", "0"], 2, "at least 1"),
        (&["--batch-size", "2", "--no-vad"], 1, "30 s"),
    ];
    for (extra, code, message) in refused {
        let out = tessel(&[&base[..], extra].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{extra:?}: {stderr}");
        assert!(stderr.contains(message), "{extra:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
