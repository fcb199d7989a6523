//! Batched transcription: faster-whisper's `BatchedInferencePipeline` on a [`Batch`] of
//! sessions, so that up to `batch_size` chunks of a file decode together and every decoder
//! step reads the weights once for all of them.
//!
//! The algorithm (faster-whisper 1.2.1's batched `transcribe`), for 16 kHz samples:
//! 1. **Chunks** ([`chunks`]): the speech the detector finds (its batched defaults: speech
//!    chunks of at most 30 s, silences from 160 ms), packed in order into pieces of at most
//!    30 s (`collect_chunks`); or the caller's clips; or the whole audio under 30 s.
//! 2. **Features**: each piece's log-mel alone (160 samples of padding, its own maximum,
//!    [`MelFrontEnd::chunk_features`]), zero-padded to 3000 frames.
//! 3. **Language**: given, English for English-only models, or detected once on the first
//!    3000 frames of every piece's features laid end to end (and one column of −1.5).
//! 4. **Decoding**, `batch_size` pieces at a time ([`slots`]): no conditioning on earlier
//!    text, no temperature fallback (beam search or greedy at the first temperature, which
//!    segments report) and no silence thresholds; the prompt is `<|startofprev|>`, the
//!    hotwords and the initial prompt (encoded without a leading space), then the start
//!    sequence and `<|notimestamps|>` unless timestamps are asked for. With `multilingual`,
//!    each piece is prompted with its own most likely language.
//! 5. **Segments** ([`output`]): each piece's tokens split at timestamp pairs from its exact
//!    offset (the unfinished tail dropped), every piece kept; words timed per piece with its
//!    `ceil(duration) · 100` frames; times mapped back to the audio for detected speech.
//!
//! A piece's result does not depend on the pieces it is batched with (each slot computes
//! what a session alone computes).

mod chunks;
mod output;
mod slots;

use std::sync::Arc;
use std::time::Instant;

use tessel_audio::{MelFrontEnd, N_FRAMES};
use tessel_text::whisper::{python_strip, WhisperTokenizer};
use tessel_vad::timestamps::VadOptions;
use tessel_vad::Vad;

use super::decode::{self, Decoder};
use super::fallback::Compressor;
use super::language;
use super::observer::{timed, Observer};
use super::segments::Cut;
use super::types::{Stats, TranscribeError, TranscribeOptions, Transcript};
use super::word_pass::{time_words, WordState};
use super::words::WindowWords;
use chunks::{Chunk, Chunks};
use slots::{Prompting, SlotBuffers, SlotPass, WhisperBatch};

#[cfg(doc)]
use tessel_model::Batch;

/// How a batched transcription cuts and batches the audio (faster-whisper's batched
/// `transcribe` options that the sequential one lacks).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchedOptions {
    /// Chunks decoded together, at most the session's slots (faster-whisper's `batch_size`,
    /// 8).
    pub batch_size: usize,
    /// Prompt each chunk with its own most likely language (multilingual models), even over a
    /// given language.
    pub multilingual: bool,
    /// Cut the audio at the speech the detector finds (default); without it the audio must
    /// be shorter than 30 s or come with clip timestamps.
    pub vad_filter: bool,
    /// The detector's options: faster-whisper's batched defaults (speech chunks of at most
    /// 30 s, silences from 160 ms) by [`BatchedOptions::default`].
    pub vad: VadOptions,
}

impl Default for BatchedOptions {
    fn default() -> BatchedOptions {
        BatchedOptions {
            batch_size: 8,
            multilingual: false,
            vad_filter: true,
            vad: BatchedOptions::default_vad(),
        }
    }
}

impl BatchedOptions {
    /// faster-whisper's batched detector options: `VadOptions(max_speech_duration_s=30,
    /// min_silence_duration_ms=160)`.
    pub fn default_vad() -> VadOptions {
        VadOptions {
            max_speech_duration_s: chunks::CHUNK_SECONDS,
            min_silence_duration_ms: 160,
            ..VadOptions::default()
        }
    }

    /// The detector's options when a caller sets some of them, as faster-whisper builds them
    /// from a `vad_parameters` dict: every other option takes its plain default (not the
    /// batched one), and the longest speech chunk is 30 s.
    pub fn with_vad_parameters(mut self, vad: VadOptions) -> BatchedOptions {
        self.vad = VadOptions {
            max_speech_duration_s: chunks::CHUNK_SECONDS,
            ..vad
        };
        self
    }
}

/// A batched transcription: the transcript and the seconds transcribed.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchedTranscript {
    /// The language, segments and timings ([`Stats::windows`] counts the chunks).
    pub transcript: Transcript,
    /// Seconds of audio transcribed: the speech found, the clips, or the whole audio
    /// (faster-whisper's `duration_after_vad`).
    pub duration_after_vad: f64,
}

/// One user's batched transcriptions: a [`Batch`] of `batch_size` slots and every buffer a
/// batch of chunks needs, sized when it is made.
pub struct BatchedSession {
    batch: WhisperBatch,
    tokenizer: Arc<WhisperTokenizer>,
    multilingual: bool,
    n_mels: usize,
    mel: MelFrontEnd,
    /// One `n_mels × 3000` feature matrix per slot.
    features: Vec<f32>,
    decoder: Decoder,
    prompt: Vec<u32>,
    /// The start sequence of the transcription's language (word timing's forced pass).
    sot_sequence: Vec<u32>,
    buffers: SlotBuffers,
    cuts: Vec<Cut>,
    compressor: Compressor,
    words: Option<WordState>,
}

impl std::fmt::Debug for BatchedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchedSession")
            .field("slots", &self.batch.slots())
            .field("arena_bytes", &self.arena_bytes())
            .finish_non_exhaustive()
    }
}

/// The parts a batched session is made of.
pub(super) struct BatchedParts {
    pub(super) batch: WhisperBatch,
    pub(super) tokenizer: Arc<WhisperTokenizer>,
    pub(super) decoder: Decoder,
    pub(super) multilingual: bool,
    pub(super) n_mels: usize,
    /// The alignment heads, for a session that times words.
    pub(super) heads: Option<Arc<[(usize, usize)]>>,
}

impl BatchedSession {
    /// A session over `parts`, every buffer sized for its batch.
    pub(super) fn new(parts: BatchedParts) -> Result<BatchedSession, TranscribeError> {
        let limits = parts.batch.limits();
        let (slots, max_tgt) = (parts.batch.slots(), limits.max_tgt_len);
        let words = parts
            .heads
            .map(|heads| WordState::new(heads, max_tgt, limits.max_src_len));
        Ok(BatchedSession {
            mel: MelFrontEnd::new(parts.n_mels)?,
            features: vec![0.0; slots * parts.n_mels * N_FRAMES],
            buffers: SlotBuffers::new(slots, max_tgt),
            batch: parts.batch,
            tokenizer: parts.tokenizer,
            multilingual: parts.multilingual,
            n_mels: parts.n_mels,
            decoder: parts.decoder,
            prompt: Vec::with_capacity(max_tgt),
            sot_sequence: Vec::new(),
            cuts: Vec::with_capacity(max_tgt),
            compressor: Compressor::new(),
            words,
        })
    }

    /// Bytes of the batch's arena.
    pub fn arena_bytes(&self) -> usize {
        self.batch.plan().total_bytes()
    }

    /// Chunks it can decode together.
    pub fn slots(&self) -> usize {
        self.batch.slots()
    }

    /// Transcribes 16 kHz mono samples as the [module](self) describes: `vad` finds the
    /// speech when `batched.vad_filter` is on. Of `options`, the sequential walk's own are not
    /// read (as faster-whisper's batched pipeline ignores them): `best_of`, the fallback
    /// temperatures after the first and every threshold, `condition_on_previous_text`,
    /// `prompt_reset_on_temperature`, `prefix`, `hallucination_silence_threshold`.
    ///
    /// The observer hears the language, then `progress(0, duration_after_vad)` before the
    /// first chunk is decoded (so a host can report the seconds to transcribe up front), each
    /// segment as its chunk is done, and `progress(duration_after_vad, duration_after_vad)`
    /// at the end.
    pub fn transcribe(
        &mut self,
        samples: &[f32],
        options: &TranscribeOptions,
        batched: &BatchedOptions,
        vad: Option<&Vad>,
        observer: &mut dyn Observer,
    ) -> Result<BatchedTranscript, TranscribeError> {
        self.check(options, batched)?;
        let mut stats = Stats {
            audio_seconds: samples.len() as f64 / f64::from(tessel_audio::SAMPLE_RATE),
            ..Stats::default()
        };
        let cut = chunks::cut(samples, options, batched, vad)?;
        let chunks: &[Chunk] = if cut.seconds == 0.0 { &[] } else { &cut.chunks };
        self.decoder.suppress_tokens(&options.suppress_tokens)?;
        let (language, probability) = self.language(options, chunks, &mut stats, observer)?;
        observer.language(&language, probability);
        let sot_at = self.prompt(options, &language)?;
        let mut walk = Walked {
            segments: Vec::new(),
            stats,
            language,
            last_speech_timestamp: 0.0,
        };
        let per_chunk = batched.multilingual && self.multilingual;
        // The seconds transcribed: what the first progress report gives as its total.
        let total = if chunks.is_empty() { 0.0 } else { cut.seconds };
        let mut done = 0.0;
        for group in chunks.chunks(batched.batch_size) {
            if observer.stop() {
                return Err(TranscribeError::Stopped);
            }
            observer.progress(done, total);
            self.run_group(
                options,
                group,
                (sot_at, per_chunk),
                &cut,
                &mut walk,
                observer,
            )?;
            done += group.iter().map(|c| c.duration).sum::<f64>();
        }
        observer.progress(total, total);
        Ok(BatchedTranscript {
            transcript: Transcript {
                language: walk.language,
                language_probability: probability,
                segments: walk.segments,
                stats: walk.stats,
            },
            duration_after_vad: cut.seconds,
        })
    }

    /// Refuses options the session cannot run.
    fn check(
        &self,
        options: &TranscribeOptions,
        batched: &BatchedOptions,
    ) -> Result<(), TranscribeError> {
        options.check(
            self.batch.limits().max_beam,
            self.multilingual,
            &self.tokenizer,
        )?;
        let slots = self.batch.slots();
        if batched.batch_size == 0 || batched.batch_size > slots {
            return Err(TranscribeError::BadOption(format!(
                "batch size {} outside 1..={slots} (the session's slots)",
                batched.batch_size
            )));
        }
        if options.word_timestamps && self.words.is_none() {
            return Err(TranscribeError::BadOption(
                "word timestamps need a session made for them".into(),
            ));
        }
        if options.initial_prompt_tokens.is_some() {
            return Err(TranscribeError::BadOption(
                "batched transcription takes the initial prompt as text".into(),
            ));
        }
        batched
            .vad
            .check()
            .map_err(|e| TranscribeError::BadOption(e.to_string()))
    }

    /// Decodes one group of chunks together and appends their segments.
    fn run_group(
        &mut self,
        options: &TranscribeOptions,
        group: &[Chunk],
        (sot_at, per_chunk_language): (usize, bool),
        cut: &Chunks,
        walk: &mut Walked,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        let size = self.n_mels * N_FRAMES;
        let started = Instant::now();
        for (chunk, out) in group.iter().zip(self.features.chunks_exact_mut(size)) {
            self.mel.chunk_features(&chunk.samples, out)?;
        }
        walk.stats.mel += started.elapsed();
        walk.stats.windows += group.len();
        let features: Vec<&[f32]> = self.features.chunks_exact(size).take(group.len()).collect();
        slots::encode(&mut self.batch, &features, &mut walk.stats, observer)?;
        let rules = decode::rules(
            &self.tokenizer,
            options,
            self.decoder.blank(),
            self.decoder.suppressed(),
        );
        let prompting = Prompting {
            options,
            tokenizer: &self.tokenizer,
            rules: &rules,
            prompt: &self.prompt,
            sot_at,
            per_chunk_language,
        };
        let watch: (&mut Stats, &mut dyn Observer) = (&mut walk.stats, &mut *observer);
        slots::decode(
            &mut self.batch,
            group.len(),
            &prompting,
            &mut self.buffers,
            watch,
        )?;
        for (slot, chunk) in group.iter().enumerate() {
            self.chunk_segments(options, (slot, chunk), cut, walk, observer)?;
        }
        Ok(())
    }

    /// Slot `slot`'s decoding of `chunk` as segments (words timed when asked), appended to
    /// `walk` and shown to the observer.
    fn chunk_segments(
        &mut self,
        options: &TranscribeOptions,
        (slot, chunk): (usize, &Chunk),
        cut: &Chunks,
        walk: &mut Walked,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        let decoded = &self.buffers.decoded[slot];
        let timestamp_begin = self.tokenizer.timestamp_begin();
        output::split(decoded, chunk, timestamp_begin, &mut self.cuts);
        let mut no_words = Vec::new();
        let words = match self.words.as_mut() {
            Some(state) if options.word_timestamps => {
                let window = WindowWords {
                    seek: output::seek_of(chunk),
                    language: &walk.language,
                    prepend: &options.prepend_punctuations,
                    append: &options.append_punctuations,
                };
                let size = output::size_of(chunk).min(N_FRAMES);
                let mut pass = SlotPass {
                    batch: &mut self.batch,
                    slot,
                };
                let timing = (&*self.tokenizer, &window, &self.sot_sequence[..], size);
                let watch: (&mut Stats, &mut dyn Observer) = (&mut walk.stats, &mut *observer);
                let cuts = (&decoded.tokens[..], &mut self.cuts[..]);
                let last = walk.last_speech_timestamp;
                walk.last_speech_timestamp =
                    time_words(&mut pass, state, timing, cuts, last, watch)?;
                &mut state.words[..]
            }
            _ => &mut no_words[..],
        };
        let reporting = output::Reporting {
            tokenizer: &self.tokenizer,
            temperature: options.temperatures[0],
            map: cut.map.as_ref(),
        };
        let first = walk.segments.len();
        let pieces = (&self.cuts[..], words);
        let compressor = &mut self.compressor;
        output::push_segments(
            &reporting,
            (chunk, decoded),
            pieces,
            compressor,
            &mut walk.segments,
        )?;
        for segment in &walk.segments[first..] {
            observer.segment(segment);
        }
        Ok(())
    }

    /// Writes the prompt every chunk starts from (faster-whisper's batched `get_prompt`):
    /// `<|startofprev|>`, the hotwords and the initial prompt's tokens when there are any,
    /// the start sequence, `<|notimestamps|>` without timestamps. Returns where
    /// `<|startoftranscript|>` is in it.
    fn prompt(
        &mut self,
        options: &TranscribeOptions,
        language: &str,
    ) -> Result<usize, TranscribeError> {
        let tok = &self.tokenizer;
        let half = (self.batch.limits().max_tgt_len / 2).saturating_sub(1);
        let mut hotwords = match options.hotwords.as_deref().filter(|h| !h.is_empty()) {
            Some(text) => tok.encode(&format!(" {}", python_strip(text)))?,
            None => Vec::new(),
        };
        hotwords.truncate(half);
        // Encoded as given: no leading space, unlike the sequential walk's.
        let initial = match options.initial_prompt.as_deref() {
            Some(text) => tok.encode(text)?,
            None => Vec::new(),
        };
        self.prompt.clear();
        if !initial.is_empty() || !hotwords.is_empty() {
            self.prompt.push(tok.sot_prev());
            self.prompt.extend_from_slice(&hotwords);
            self.prompt
                .extend_from_slice(&initial[initial.len().saturating_sub(half)..]);
        }
        let sot_at = self.prompt.len();
        self.sot_sequence = if self.multilingual {
            tok.sot_sequence(Some(language), Some(options.task))?
        } else {
            tok.sot_sequence(None, None)?
        };
        self.prompt.extend_from_slice(&self.sot_sequence);
        if !options.timestamps {
            self.prompt.push(tok.no_timestamps());
        }
        Ok(sot_at)
    }

    /// The language and its probability: the option's, English for English-only models, or
    /// detected on the first 3000 frames of the chunks' features laid end to end.
    fn language(
        &mut self,
        options: &TranscribeOptions,
        chunks: &[Chunk],
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<(String, f64), TranscribeError> {
        let language = options.language.as_deref();
        if let Some(given) = language::given(&self.tokenizer, self.multilingual, language)? {
            return Ok(given);
        }
        self.detection_window(chunks)?;
        let window = &self.features[..self.n_mels * N_FRAMES];
        slots::encode(&mut self.batch, &[window], stats, observer)?;
        let sot = [self.tokenizer.sot()];
        let logits = timed(observer, &mut stats.decode, || self.batch.prefill(0, &sot))?;
        Ok(language::detect(&self.tokenizer, logits))
    }

    /// Slot 0's features: the first 3000 frames of every chunk's content frames laid end to
    /// end, then one column of −1.5, zero-padded (faster-whisper's batched detection input).
    fn detection_window(&mut self, chunks: &[Chunk]) -> Result<(), TranscribeError> {
        let size = self.n_mels * N_FRAMES;
        let (window, scratch) = self.features.split_at_mut(size);
        window.fill(0.0);
        let mut filled = 0;
        for chunk in chunks {
            if filled == N_FRAMES {
                break;
            }
            // A slot's buffer as scratch: a batch needs one only when it has two slots.
            let mut own = Vec::new();
            let scratch = if scratch.len() >= size {
                &mut scratch[..size]
            } else {
                own.resize(size, 0.0);
                &mut own[..]
            };
            let frames = self.mel.chunk_features(&chunk.samples, scratch)?;
            let take = frames.min(N_FRAMES - filled);
            for (dst, src) in window
                .chunks_exact_mut(N_FRAMES)
                .zip(scratch.chunks_exact(N_FRAMES))
            {
                dst[filled..filled + take].copy_from_slice(&src[..take]);
            }
            filled += take;
        }
        if filled < N_FRAMES {
            for row in window.chunks_exact_mut(N_FRAMES) {
                row[filled] = -1.5;
            }
        }
        Ok(())
    }
}

/// What a batched transcription carries from chunk to chunk.
struct Walked {
    segments: Vec<super::Segment>,
    stats: Stats,
    language: String,
    last_speech_timestamp: f64,
}
