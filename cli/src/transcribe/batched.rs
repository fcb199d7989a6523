//! `tessel transcribe --batch-size N`: faster-whisper's `BatchedInferencePipeline`. The
//! speech Silero VAD finds (its batched defaults: speech chunks up to 30 s, silences from
//! 160 ms) is packed into chunks of at most 30 s, and N chunks are decoded together, each
//! decoder step reading the weights once for all of them. As in faster-whisper: no
//! conditioning on earlier text, no temperature fallback (the first temperature's decoding is
//! kept) and no timestamps unless `--timestamps`; `--vad` options replace the batched
//! detector defaults by the plain ones, with speech chunks still cut at 30 s. Segment times
//! are the original audio's.

use std::io::Write;
use std::time::Instant;

use clap::Args;
use tessel_audio::{load_wav, ReadOptions};
use tessel_kernels::Isa;
use tessel_model::Limits;
use tessel_pipeline::transcribe::{BatchedOptions, BatchedSession, Transcriber};
use tessel_vad::locate::open_model;

use super::{check_arena, options, transcriber, Summary, TranscribeArgs, VadArgs, Watch};
use crate::bounds::positive;
use crate::error::CliError;

/// The `--batch-size` options.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Batched transcription, N chunks of up to 30 s decoded together (faster-whisper's
    /// `BatchedInferencePipeline`): the speech the detector finds, without conditioning on
    /// earlier text, temperature fallback or silence thresholds, and without timestamps unless
    /// `--timestamps`.
    #[arg(
        long,
        value_name = "N",
        value_parser = positive,
        conflicts_with_all = [
            "prefix",
            "hallucination_silence_threshold",
            "compression_ratio_threshold",
            "logprob_threshold",
            "no_speech_threshold",
        ]
    )]
    pub batch_size: Option<usize>,
    /// With --batch-size: prompt each chunk with its own most likely language (multilingual
    /// models; faster-whisper's `multilingual`), even over --language.
    #[arg(long, requires = "batch_size")]
    pub multilingual: bool,
    /// With --batch-size: no voice activity detection; the audio must be shorter than 30 s.
    #[arg(long, requires = "batch_size", conflicts_with = "vad")]
    pub no_vad: bool,
}

impl VadArgs {
    /// Whether any detector option is set.
    fn any_set(&self) -> bool {
        self.vad_threshold.is_some()
            || self.vad_neg_threshold.is_some()
            || self.vad_min_speech_ms.is_some()
            || self.vad_max_speech_s.is_some()
            || self.vad_min_silence_ms.is_some()
            || self.vad_speech_pad_ms.is_some()
    }
}

/// The batching options the flags set.
fn batched_options(args: &TranscribeArgs, batch_size: usize) -> BatchedOptions {
    let batched = BatchedOptions {
        batch_size,
        multilingual: args.batching.multilingual,
        vad_filter: !args.batching.no_vad,
        ..BatchedOptions::default()
    };
    if args.vad.any_set() {
        // As faster-whisper builds them from a `vad_parameters` dict.
        batched.with_vad_parameters(args.vad.options())
    } else {
        batched
    }
}

/// The transcriber and a batched session of `batch_size` slots whose arena was checked to
/// fit in memory.
fn load(
    args: &TranscribeArgs,
    isa: Isa,
    batch_size: usize,
) -> Result<(Transcriber, BatchedSession), CliError> {
    let transcriber = transcriber(args)?;
    let limits = Limits {
        max_batch: batch_size,
        ..transcriber.limits(args.beam, args.threads)
    };
    check_arena(args, &transcriber, limits)?;
    let shape = (args.beam, batch_size);
    let session = transcriber.batched_session(isa, shape, args.threads, args.word_timestamps)?;
    Ok((transcriber, session))
}

/// Runs `tessel transcribe --batch-size N`.
pub(super) fn transcribe(
    args: &TranscribeArgs,
    isa: Isa,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let batch_size = args.batching.batch_size.unwrap_or(1);
    let started = Instant::now();
    let (transcriber, mut session) = load(args, isa, batch_size)?;
    let loaded = started.elapsed();
    let options = tessel_pipeline::transcribe::TranscribeOptions {
        timestamps: args.timestamps,
        ..options(args)
    };
    let batched = batched_options(args, batch_size);
    let started = Instant::now();
    let audio = load_wav(&args.audio, &ReadOptions::default())?;
    let read = started.elapsed();
    let vad = match batched.vad_filter {
        true => Some(open_model(args.vad.vad_model.as_deref())?),
        false => None,
    };
    let long = audio.samples.len() > tessel_audio::N_SAMPLES;
    let mut watch = Watch::new(args, out, long);
    let done = session.transcribe(&audio.samples, &options, &batched, vad.as_ref(), &mut watch)?;
    let total = started.elapsed();
    let allocations = watch.finish(&done.transcript)?;
    if !args.quiet {
        let times = (loaded, read, total);
        let arena_bytes = session.arena_bytes();
        let summary = Summary::new(isa, &transcriber, times, arena_bytes, allocations);
        let mut err = summary.write(args, &done.transcript);
        // A closed stderr only loses the summary.
        let _ = writeln!(
            err,
            "batched: {} chunk(s) in batches of {batch_size}, {:.2} of {:.2} s transcribed",
            done.transcript.stats.windows,
            done.duration_after_vad,
            done.transcript.stats.audio_seconds,
        );
    }
    Ok(())
}
