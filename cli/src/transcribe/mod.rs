//! `tessel transcribe`: a WAV file to text with a Whisper model directory (CTranslate2 or
//! Hugging Face), through [`tessel_pipeline::transcribe`].
//!
//! Prints the transcript (`--format txt|srt|vtt|jsonl|json`) on standard output, each segment
//! as soon as it is final (json: the whole document at the end); on standard error a progress
//! line for audio longer than one 30 s window, then a summary: audio seconds, the
//! real-time factor (wall time of read + mel + encode + decode over the audio's length), the
//! encode time, the time per decoded token, the arena's size and the heap allocations counted
//! while the model ran (between the pipeline's inference marks; the output text and segments
//! are made outside them).
//!
//! With `--vad`, faster-whisper's `vad_filter`: Silero VAD ([`tessel_vad`]) finds the speech,
//! only the speech chunks (padded, concatenated) are transcribed, and each segment's (and
//! word's) start and end are mapped back to the original audio (`restore_speech_timestamps`).
//!
//! Before the model loads: the options' bounds (the value parsers of [`crate::bounds`]), the
//! audio file can be read, and the directory holds a Whisper model ([`checks::model_kind`]);
//! before the session is made, its arena fits in the memory available.

use std::io::{StderrLock, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use tessel_audio::{load_wav, ReadOptions};
use tessel_kernels::Isa;
use tessel_model::isa_env::isa_from_env;
use tessel_model::{ArenaPlan, Limits};
use tessel_model::{MemoryType, WeightType};
use tessel_pipeline::transcribe::cues::{CueFormat, CueOptions, Cues};
use tessel_pipeline::transcribe::{
    render, write_header, write_segment, Format, Observer, Segment, Speech, TranscribeOptions,
    TranscribeSession, Transcriber, Transcript, VadOptions,
};
use tessel_text::whisper::Task;
use tessel_vad::locate::open_model;

use crate::bounds::{
    beam, finite_f64, non_negative_float, positive, positive_float, threads, unit_interval,
    weight_type_parser,
};
use crate::checks::{self, Needs};
use crate::counting::allocations;
use crate::error::CliError;

mod batched;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// One line per segment.
    Txt,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
    /// Segments with times, tokens and decoding figures, one document at the end.
    Json,
    /// One JSON object per segment per line (json's segment fields), as each is final.
    Jsonl,
}

/// What the decoder does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TaskArg {
    /// Speech to text in the spoken language.
    Transcribe,
    /// Speech to English text (multilingual models).
    Translate,
}

/// How the encoder memory's cross-attention K/V are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CrossKvArg {
    /// 4 bytes per value, exact.
    F32,
    /// 2 bytes per value: half of what each decoder step reads from the memory.
    F16,
}

/// `tessel transcribe` options.
#[derive(Debug, Args)]
pub struct TranscribeArgs {
    /// The WAV file: PCM 8/16/24/32-bit or 32/64-bit float (WAVE_FORMAT_EXTENSIBLE too), any
    /// channel count, 4000 to 384000 Hz, 10 ms to one hour; streamed WAVs read to the end.
    pub audio: PathBuf,
    /// Whisper model directory: CTranslate2 (model.bin) or Hugging Face (model.safetensors),
    /// with its tokenizer.json.
    #[arg(long)]
    pub model: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Txt)]
    pub format: FormatArg,
    /// Beam width at temperature 0 (1: greedy), 1 to 64.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = beam)]
    pub beam: usize,
    /// Samples per window at fallback temperatures, at least 1.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = positive)]
    pub best_of: usize,
    /// Beam search patience above 0: a window's search goes on until round(beam × patience)
    /// hypotheses have finished (faster-whisper's `patience`; default 1).
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = positive_float)]
    pub patience: f32,
    /// Spoken language (code or English name); detected by multilingual models if absent.
    #[arg(long)]
    pub language: Option<String>,
    /// Transcribe, or translate to English.
    #[arg(long, value_enum, default_value_t = TaskArg::Transcribe)]
    pub task: TaskArg,
    /// Threads the model runs on, at most 4 × the cores available.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = threads)]
    pub threads: usize,
    /// Predict timestamps (timed segments within each window; the default).
    #[arg(long, overrides_with = "no_timestamps")]
    pub timestamps: bool,
    /// Do not predict timestamps (one segment per window).
    #[arg(long)]
    pub no_timestamps: bool,
    /// Time every word (faster-whisper's `word_timestamps`): each segment's words with their
    /// start, end and probability, in `json` and `jsonl` output; segment bounds and the next
    /// window's start follow the words, as in faster-whisper.
    #[arg(long)]
    pub word_timestamps: bool,
    /// With --word-timestamps: skip silences longer than this many seconds around a likely
    /// hallucination (improbable, very short or very long words), as faster-whisper's
    /// `hallucination_silence_threshold` does (default: off).
    #[arg(long, value_name = "SECONDS", value_parser = positive_float, requires = "word_timestamps")]
    pub hallucination_silence_threshold: Option<f32>,
    /// With --word-timestamps in srt or vtt: at most N characters a line (openai-whisper's
    /// `--max_line_width`; by default each segment is one cue built from its words).
    #[arg(long, value_name = "N", value_parser = positive, requires = "word_timestamps")]
    pub max_line_width: Option<usize>,
    /// With --max-line-width: at most N lines a cue; lines then flow across segments and a
    /// pause over 3 s starts a cue (openai-whisper's `--max_line_count`).
    #[arg(long, value_name = "N", value_parser = positive, requires = "max_line_width")]
    pub max_line_count: Option<usize>,
    /// With --word-timestamps in srt or vtt: at most N words a cue within a segment (N = 1: one
    /// cue per word; openai-whisper's `--max_words_per_line`).
    #[arg(long, value_name = "N", value_parser = positive, requires = "word_timestamps")]
    pub max_words_per_line: Option<usize>,
    /// With --word-timestamps in srt or vtt: a cue per word with that word underlined
    /// (`<u>…</u>`), as openai-whisper's `--highlight_words`.
    #[arg(long, requires = "word_timestamps")]
    pub highlight_words: bool,
    /// Text that conditions the first window (names, spelling, style).
    #[arg(long)]
    pub initial_prompt: Option<String>,
    /// Hint phrases that condition every window: each prompt starts with them, before the
    /// text so far (faster-whisper's `hotwords`).
    #[arg(long, value_name = "TEXT")]
    pub hotwords: Option<String>,
    /// Text the first window's transcript starts with, forced (after `<|0.00|>` with
    /// timestamps); the hotwords do not prompt that window (faster-whisper's `prefix`).
    #[arg(long, value_name = "TEXT")]
    pub prefix: Option<String>,
    /// Penalise tokens a window's decoding has already produced: their logits divided by
    /// this when positive, multiplied when negative (CTranslate2's; default 1: off), above 0.
    #[arg(long, value_name = "PENALTY", value_parser = positive_float)]
    pub repetition_penalty: Option<f32>,
    /// Never repeat an n-gram of this many tokens within a window's decoding (default 0:
    /// off).
    #[arg(long, value_name = "N")]
    pub no_repeat_ngram_size: Option<usize>,
    /// Tokens a window's decoding may add to its prompt, as faster-whisper's
    /// `max_new_tokens` (CTranslate2 then decodes at most half of prompt plus this).
    #[arg(long, value_name = "N")]
    pub max_new_tokens: Option<usize>,
    /// Token ids never generated, comma-separated, as faster-whisper's `suppress_tokens`:
    /// -1 stands for the model's non-speech symbols, and a list also suppresses the special
    /// tokens (default -1).
    #[arg(
        long,
        value_name = "ID,...",
        value_delimiter = ',',
        allow_negative_numbers = true
    )]
    pub suppress_tokens: Option<Vec<i64>>,
    /// Do not prompt each window with the text so far.
    #[arg(long)]
    pub no_condition_on_previous_text: bool,
    /// Linear layers stored as this type (default: as the files store them).
    #[arg(long, value_name = "TYPE", value_parser = weight_type_parser())]
    pub weights: Option<WeightType>,
    /// How the cross-attention keys and values of the encoded audio are stored (default: f32
    /// with f32 weights, f16 with 16-bit or int8 weights).
    #[arg(long, value_name = "TYPE", value_enum)]
    pub cross_kv: Option<CrossKvArg>,
    /// Seed of the sampling at fallback temperatures.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Temperatures tried in turn while a window's decoding falls back, comma-separated,
    /// each finite and ≥ 0 (default 0,0.2,0.4,0.6,0.8,1; `0` alone never falls back).
    #[arg(
        long,
        value_name = "T,...",
        value_delimiter = ',',
        value_parser = non_negative_float,
        allow_negative_numbers = true
    )]
    pub temperatures: Option<Vec<f32>>,
    /// Fall back when a window's text compresses (gzip) by more than this ratio, a finite
    /// number (default 2.4).
    #[arg(long, value_name = "RATIO", value_parser = finite_f64, allow_negative_numbers = true)]
    pub compression_ratio_threshold: Option<f64>,
    /// Fall back when a window's average log-probability is below this, a finite number
    /// (default -1).
    #[arg(long, value_name = "LOGPROB", value_parser = finite_f64, allow_negative_numbers = true)]
    pub logprob_threshold: Option<f64>,
    /// A window is silence when its no-speech probability is above this (in [0, 1]) and its
    /// average log-probability below the log-probability threshold (default 0.6).
    #[arg(long, value_name = "P", value_parser = unit_interval, allow_negative_numbers = true)]
    pub no_speech_threshold: Option<f64>,
    /// No progress line and no summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Voice activity detection (faster-whisper's `vad_filter`).
    #[command(flatten)]
    pub vad: VadArgs,
    /// Batched transcription (faster-whisper's `BatchedInferencePipeline`).
    #[command(flatten)]
    pub batching: batched::BatchArgs,
}

/// The `--vad` options: faster-whisper's `VadOptions`, same defaults.
#[derive(Debug, Args)]
pub struct VadArgs {
    /// Transcribe only the speech Silero VAD finds (silences removed before encoding; segment
    /// times mapped back to the original audio).
    #[arg(long)]
    pub vad: bool,
    /// A Silero VAD v6 model file (silero_vad_v6.onnx; default: the built-in copy of the one
    /// the `faster-whisper` Python package ships).
    #[arg(long, value_name = "PATH", requires = "vad")]
    pub vad_model: Option<PathBuf>,
    /// A 32 ms window is speech when its probability is at least this, in [0, 1] (default 0.5).
    #[arg(long, value_name = "P", value_parser = unit_interval, requires = "vad")]
    pub vad_threshold: Option<f64>,
    /// Windows below this end speech, in [0, 1] (default: threshold - 0.15, at least 0.01).
    #[arg(long, value_name = "P", value_parser = unit_interval, requires = "vad")]
    pub vad_neg_threshold: Option<f64>,
    /// Speech chunks this short or shorter are dropped (default 0).
    #[arg(long, value_name = "MS", requires = "vad")]
    pub vad_min_speech_ms: Option<u64>,
    /// Longer speech chunks are split, in seconds, above 0 (default: no limit).
    #[arg(long, value_name = "S", value_parser = positive_float, requires = "vad")]
    pub vad_max_speech_s: Option<f32>,
    /// Silence that ends a speech chunk (default 2000).
    #[arg(long, value_name = "MS", requires = "vad")]
    pub vad_min_silence_ms: Option<u64>,
    /// Padding added on each side of a speech chunk (default 400).
    #[arg(long, value_name = "MS", requires = "vad")]
    pub vad_speech_pad_ms: Option<u64>,
}

impl VadArgs {
    /// The options the flags set over faster-whisper's defaults.
    pub fn options(&self) -> VadOptions {
        let mut options = VadOptions::default();
        if let Some(v) = self.vad_threshold {
            options.threshold = v;
        }
        options.neg_threshold = self.vad_neg_threshold;
        if let Some(v) = self.vad_min_speech_ms {
            options.min_speech_duration_ms = v;
        }
        if let Some(v) = self.vad_max_speech_s {
            options.max_speech_duration_s = f64::from(v);
        }
        if let Some(v) = self.vad_min_silence_ms {
            options.min_silence_duration_ms = v;
        }
        if let Some(v) = self.vad_speech_pad_ms {
            options.speech_pad_ms = v;
        }
        options
    }
}

/// Runs the VAD over `samples` (16 kHz) and keeps the speech, as faster-whisper's
/// `transcribe(vad_filter=True)` does; with the seconds it took.
fn find_speech(args: &VadArgs, samples: &[f32]) -> Result<(Speech, f64), CliError> {
    let started = Instant::now();
    let vad = open_model(args.vad_model.as_deref())?;
    let speech = Speech::find(&vad, samples, &args.options())?;
    Ok((speech, started.elapsed().as_secs_f64()))
}

/// Counts allocations between the pipeline's inference marks, shows progress, and prints
/// each segment as it becomes final.
struct Watch<'o, 's> {
    since: usize,
    during: usize,
    progress: bool,
    /// Characters of the progress line on screen, to erase before a segment is printed.
    shown: usize,
    out: &'o mut dyn Write,
    /// The format segments are printed in as they come (`None`: at the end).
    streaming: Option<Format>,
    format: Format,
    segments: usize,
    text: String,
    /// The first failure to write a segment (reported once the transcription ends).
    failed: Option<std::io::Error>,
    /// With `--vad`: the speech, whose map takes segment times back to the original audio.
    speech: Option<&'s Speech>,
    /// With word timestamps in SubRip or WebVTT: cues laid out from the words.
    cues: Option<Cues>,
}

impl Watch<'_, '_> {
    /// Writes `text` and flushes it, keeping the first failure.
    fn emit(&mut self) {
        if self.failed.is_none() {
            let written = self.out.write_all(self.text.as_bytes());
            if let Err(e) = written.and_then(|()| self.out.flush()) {
                self.failed = Some(e);
            }
        }
        self.text.clear();
    }
}

impl Observer for Watch<'_, '_> {
    fn inference(&mut self, running: bool) {
        if running {
            self.since = allocations();
        } else {
            self.during += allocations() - self.since;
        }
    }

    fn progress(&mut self, done: f64, total: f64) {
        if self.progress {
            let line = format!("transcribing: {done:.1} / {total:.1} s");
            self.shown = line.len();
            // A closed stderr only loses the progress line.
            let _ = write!(std::io::stderr(), "\r{line}");
        }
    }

    fn segment(&mut self, segment: &Segment) {
        let Some(format) = self.streaming else { return };
        if self.shown > 0 {
            let _ = write!(std::io::stderr(), "\r{:1$}\r", "", self.shown);
            self.shown = 0;
        }
        if self.segments == 0 {
            write_header(&mut self.text, format);
        }
        let restored = self.speech.map(|speech| speech.restore(segment));
        let segment = restored.as_ref().unwrap_or(segment);
        match self.cues.as_mut() {
            Some(cues) => cues.push(&mut self.text, segment),
            None => write_segment(&mut self.text, format, self.segments, segment),
        }
        self.segments += 1;
        self.emit();
    }
}

/// The cue writer of a SubRip or WebVTT transcript with word timestamps: cues laid out from
/// the words as openai-whisper's writers lay them out.
fn cues(args: &TranscribeArgs, format: Format) -> Option<Cues> {
    let format = match format {
        Format::Srt => CueFormat::Srt,
        Format::Vtt => CueFormat::Vtt,
        _ => return None,
    };
    let options = CueOptions {
        max_line_width: args.max_line_width,
        max_line_count: args.max_line_count,
        highlight_words: args.highlight_words,
        max_words_per_line: args.max_words_per_line,
    };
    args.word_timestamps.then(|| Cues::new(options, format))
}

/// `options` with the temperature ladder and the thresholds the flags set.
fn with_fallback_flags(args: &TranscribeArgs, mut options: TranscribeOptions) -> TranscribeOptions {
    if let Some(temperatures) = &args.temperatures {
        options.temperatures = temperatures.clone();
    }
    let thresholds = &mut options.thresholds;
    let flags = [
        (
            &mut thresholds.compression_ratio,
            args.compression_ratio_threshold,
        ),
        (&mut thresholds.logprob, args.logprob_threshold),
        (&mut thresholds.no_speech, args.no_speech_threshold),
    ];
    for (threshold, flag) in flags {
        if flag.is_some() {
            *threshold = flag;
        }
    }
    options
}

/// The output format of `arg`.
fn format_of(arg: FormatArg) -> Format {
    match arg {
        FormatArg::Txt => Format::Txt,
        FormatArg::Srt => Format::Srt,
        FormatArg::Vtt => Format::Vtt,
        FormatArg::Json => Format::Json,
        FormatArg::Jsonl => Format::Jsonl,
    }
}

/// The transcriber of `args.model`, its cross-attention memory as `--cross-kv` says.
fn transcriber(args: &TranscribeArgs) -> Result<Transcriber, CliError> {
    let transcriber = Transcriber::load(&args.model, args.beam.max(5), args.weights)?;
    Ok(match args.cross_kv {
        Some(kind) => transcriber.with_cross_kv(match kind {
            CrossKvArg::F32 => MemoryType::F32,
            CrossKvArg::F16 => MemoryType::F16,
        }),
        None => transcriber,
    })
}

/// Checks that the arena of a session of `limits` (with the alignment heads when timing
/// words) fits in the memory available.
fn check_arena(
    args: &TranscribeArgs,
    transcriber: &Transcriber,
    limits: Limits,
) -> Result<(), CliError> {
    let heads = if args.word_timestamps {
        transcriber.alignment_heads().len()
    } else {
        0
    };
    let plan = ArenaPlan::with_alignment(transcriber.model().config(), limits, heads)
        .map_err(CliError::Plan)?;
    checks::fits_in_memory(plan.total_bytes(), 1)
}

/// The transcriber of `args.model`, and a session whose arena was checked to fit in memory
/// (made while the tokenizer is parsed).
fn load(args: &TranscribeArgs, isa: Isa) -> Result<(Transcriber, TranscribeSession), CliError> {
    let cross_kv = args.cross_kv.map(|kind| match kind {
        CrossKvArg::F32 => MemoryType::F32,
        CrossKvArg::F16 => MemoryType::F16,
    });
    Transcriber::load_with_session(
        (&args.model, args.beam.max(5), args.weights),
        cross_kv,
        (isa, args.beam, args.threads, args.word_timestamps),
        |plan| checks::fits_in_memory(plan.total_bytes(), 1),
    )
}

/// Runs `tessel transcribe`.
pub fn transcribe(args: &TranscribeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let isa = isa_from_env()?;
    checks::readable_file(&args.audio)?;
    checks::model_kind(&args.model, "transcribe", Needs::Speech)?;
    if args.batching.batch_size.is_some() {
        return batched::transcribe(args, isa, out);
    }
    let started = Instant::now();
    let (transcriber, mut session) = load(args, isa)?;
    let loaded = started.elapsed();
    let options = options(args);
    let started = Instant::now();
    let audio = load_wav(&args.audio, &ReadOptions::default())?;
    let read = started.elapsed();
    let speech = if args.vad.vad {
        Some(find_speech(&args.vad, &audio.samples)?)
    } else {
        None
    };
    let samples = speech
        .as_ref()
        .map_or(&audio.samples[..], |(s, _)| &s.samples[..]);
    let long = samples.len() > tessel_audio::N_SAMPLES;
    let mut watch = Watch::new(args, out, long);
    watch.speech = speech.as_ref().map(|(speech, _)| speech);
    let mut transcript = if samples.is_empty() {
        // No speech: no segments, as faster-whisper gives.
        Transcript {
            language: options.language.clone().unwrap_or_default(),
            language_probability: 1.0,
            segments: Vec::new(),
            stats: Default::default(),
        }
    } else {
        session.transcribe(samples, &options, &mut watch)?
    };
    if let Some(speech) = watch.speech {
        for segment in &mut transcript.segments {
            *segment = speech.restore(segment);
        }
    }
    let total = started.elapsed();
    let allocations = watch.finish(&transcript)?;
    if !args.quiet {
        let times = (loaded, read, total);
        let arena_bytes = session.arena_bytes();
        let summary = Summary::new(isa, &transcriber, times, arena_bytes, allocations);
        let mut err = summary.write(args, &transcript);
        if let Some((speech, seconds)) = &speech {
            // A closed stderr only loses the summary.
            let _ = writeln!(
                err,
                "vad: {} speech chunk(s), {:.2} of {:.2} s kept, {:.1} ms",
                speech.chunks,
                speech.seconds(),
                audio.samples.len() as f64 / 16_000.0,
                seconds * 1e3
            );
        }
    }
    Ok(())
}

/// The transcription options the flags set.
fn options(args: &TranscribeArgs) -> TranscribeOptions {
    let options = TranscribeOptions {
        task: match args.task {
            TaskArg::Transcribe => Task::Transcribe,
            TaskArg::Translate => Task::Translate,
        },
        language: args.language.clone(),
        beam: args.beam,
        best_of: args.best_of,
        patience: args.patience,
        condition_on_previous_text: !args.no_condition_on_previous_text,
        initial_prompt: args.initial_prompt.clone(),
        hotwords: args.hotwords.clone(),
        prefix: args.prefix.clone(),
        repetition_penalty: args.repetition_penalty.unwrap_or(1.0),
        no_repeat_ngram_size: args.no_repeat_ngram_size.unwrap_or(0),
        max_new_tokens: args.max_new_tokens,
        suppress_tokens: args.suppress_tokens.clone().unwrap_or_else(|| vec![-1]),
        timestamps: !args.no_timestamps,
        seed: args.seed,
        word_timestamps: args.word_timestamps,
        hallucination_silence_threshold: args.hallucination_silence_threshold.map(f64::from),
        ..TranscribeOptions::default()
    };
    with_fallback_flags(args, options)
}

impl<'o> Watch<'o, '_> {
    /// A watch printing to `out` in the format of `args`, with a progress line for `long`
    /// audio unless `--quiet`.
    fn new(args: &TranscribeArgs, out: &'o mut dyn Write, long: bool) -> Self {
        let format = format_of(args.format);
        Watch {
            since: 0,
            during: 0,
            progress: long && !args.quiet,
            shown: 0,
            out,
            streaming: format.streams().then_some(format),
            format,
            segments: 0,
            text: String::new(),
            failed: None,
            speech: None,
            cues: cues(args, format),
        }
    }

    /// Ends the output once `transcript` is done (the json document, the last cues); returns
    /// the allocations counted during inference.
    fn finish(mut self, transcript: &Transcript) -> Result<usize, CliError> {
        if self.progress {
            let _ = writeln!(std::io::stderr());
        }
        let format = self.format;
        if format.streams() {
            if self.segments == 0 {
                write_header(&mut self.text, format);
            }
            if let Some(cues) = self.cues.as_mut() {
                cues.finish(&mut self.text);
            }
            self.emit();
        } else {
            self.text = render(transcript, format);
            self.emit();
        }
        match self.failed {
            Some(e) => Err(CliError::Write(e)),
            None => Ok(self.during),
        }
    }
}

/// What the summary line reports besides the transcript's own figures.
struct Summary {
    isa: Isa,
    cross_kv: MemoryType,
    /// Loading the model, reading the audio, and the whole transcription from the read on.
    times: (Duration, Duration, Duration),
    arena_bytes: usize,
    allocations: usize,
}

impl Summary {
    /// The summary of a run of `transcriber` at `isa` that took `times`, in an arena of
    /// `arena_bytes` and with `allocations` during inference.
    fn new(
        isa: Isa,
        transcriber: &Transcriber,
        times: (Duration, Duration, Duration),
        arena_bytes: usize,
        allocations: usize,
    ) -> Summary {
        Summary {
            isa,
            cross_kv: transcriber.cross_kv(),
            times,
            arena_bytes,
            allocations,
        }
    }

    /// Writes the summary of `transcript` to stderr (a closed stderr only loses it), and
    /// returns stderr, locked, for the lines that follow.
    fn write(&self, args: &TranscribeArgs, transcript: &Transcript) -> StderrLock<'static> {
        let mut err = std::io::stderr().lock();
        let s = &transcript.stats;
        let (loaded, read, total) = self.times;
        let per_token = if s.tokens > 0 {
            s.decode.as_secs_f64() * 1e3 / s.tokens as f64
        } else {
            0.0
        };
        let _ = writeln!(
            err,
            "isa {}, {} thread(s), cross K/V {:?}, language {}, load {:.0} ms\n\
             audio {:.2} s, real-time factor {:.4} (read {:.1} ms, mel {:.1} ms, encode {:.1} ms \
             + cross K/V {:.1} ms over {} windows, decode {:.1} ms: {:.3} ms per token over {} tokens)\n\
             {}arena {} bytes, allocations during inference: {}",
            self.isa,
            args.threads,
            self.cross_kv,
            transcript.language,
            loaded.as_secs_f64() * 1e3,
            s.audio_seconds,
            total.as_secs_f64() / s.audio_seconds.max(1e-9),
            read.as_secs_f64() * 1e3,
            s.mel.as_secs_f64() * 1e3,
            s.encode.as_secs_f64() * 1e3,
            s.cross_kv.as_secs_f64() * 1e3,
            s.windows,
            s.decode.as_secs_f64() * 1e3,
            per_token,
            s.tokens,
            if args.word_timestamps {
                format!("word alignment {:.1} ms, ", s.align.as_secs_f64() * 1e3)
            } else {
                String::new()
            },
            self.arena_bytes,
            self.allocations,
        );
        err
    }
}
