//! One user's transcription: the spectrogram of the whole file, then the walk over its 30 s
//! windows (steps 1 to 3 of the algorithm the [module](super) describes): each window cut,
//! encoded and prompted, decoded ([`Decoder`]), split into segments ([`segments`]) and the
//! next window's start chosen.

use std::sync::Arc;
use std::time::Instant;

use tessel_audio::{content_frames, segment, MelFrontEnd, N_FRAMES};
use tessel_text::whisper::{python_strip, WhisperTokenizer};

use super::decode::{Decoder, WhisperSession, WindowDecode};
use super::hallucination::{self, Verdict};
use super::language;
use super::observer::{timed, Observer};
use super::segments::{self, Cut};
use super::types::{Stats, TranscribeError, TranscribeOptions, Transcript};
use super::walk::{Walk, WindowFigures};
use super::word_pass::{time_words, WordState};
use super::words::{self, WindowWords};

/// One user's transcription state (see the [module](super) docs).
pub struct TranscribeSession {
    session: WhisperSession,
    tokenizer: Arc<WhisperTokenizer>,
    multilingual: bool,
    mel: MelFrontEnd,
    n_mels: usize,
    spectrogram: Vec<f32>,
    window: Vec<f32>,
    prompt: Vec<u32>,
    decoder: Decoder,
    cuts: Vec<Cut>,
    /// What word timing needs, in a session made for it.
    words: Option<WordState>,
}

impl std::fmt::Debug for TranscribeSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscribeSession")
            .field("arena_bytes", &self.arena_bytes())
            .finish_non_exhaustive()
    }
}

impl TranscribeSession {
    /// A session on `session` for a model reading `n_mels` mel bins, with every per-window
    /// buffer.
    pub(super) fn new(
        session: WhisperSession,
        tokenizer: Arc<WhisperTokenizer>,
        decoder: Decoder,
        multilingual: bool,
        n_mels: usize,
    ) -> Result<TranscribeSession, TranscribeError> {
        let max_tgt = session.limits().max_tgt_len;
        Ok(TranscribeSession {
            session,
            tokenizer,
            multilingual,
            mel: MelFrontEnd::new(n_mels)?,
            n_mels,
            spectrogram: Vec::new(),
            window: vec![0.0; n_mels * N_FRAMES],
            prompt: Vec::with_capacity(max_tgt),
            decoder,
            cuts: Vec::with_capacity(max_tgt),
            words: None,
        })
    }

    /// The same session timing words with the cross-attention `heads` (the model session
    /// was planned for them), or not for `None`.
    pub(super) fn with_words(mut self, heads: Option<Arc<[(usize, usize)]>>) -> Self {
        let max_tgt = self.session.limits().max_tgt_len;
        let frames = self.session.limits().max_src_len;
        self.words = heads.map(|heads| WordState::new(heads, max_tgt, frames));
        self
    }

    /// Bytes of the model session's arena.
    pub fn arena_bytes(&self) -> usize {
        self.session.plan().total_bytes()
    }

    /// Transcribes 16 kHz mono samples.
    pub fn transcribe(
        &mut self,
        samples: &[f32],
        options: &TranscribeOptions,
        observer: &mut dyn Observer,
    ) -> Result<Transcript, TranscribeError> {
        let max_beam = self.session.limits().max_beam;
        options.check(max_beam, self.multilingual, &self.tokenizer)?;
        if options.word_timestamps && self.words.is_none() {
            return Err(TranscribeError::BadOption(
                "word timestamps need a session made for them (session_with_words)".into(),
            ));
        }
        let frames = content_frames(samples.len());
        if frames == 0 {
            return Err(TranscribeError::EmptyAudio);
        }
        let mut walk = self.start(samples, frames, options)?;
        let (language, language_probability) =
            self.language(options, frames, &mut walk.stats, observer)?;
        observer.language(&language, language_probability);
        walk.language.clone_from(&language);
        walk.sot_sequence = if self.multilingual {
            self.tokenizer
                .sot_sequence(Some(&language), Some(options.task))?
        } else {
            self.tokenizer.sot_sequence(None, None)?
        };
        // faster-whisper's walk over the clips: a window starts at its clip's start at the
        // earliest and ends at its clip's end at the latest.
        let clips = clips(&options.clip_timestamps, frames);
        let mut clip = 0;
        let mut seek = clips.first().map_or(0, |c| c.0);
        while let Some(&(start, end)) = clips.get(clip) {
            let end = end.min(frames);
            seek = seek.max(start);
            if seek >= end {
                clip += 1;
                if let Some(next) = clips.get(clip) {
                    seek = next.0;
                }
                continue;
            }
            if observer.stop() {
                return Err(TranscribeError::Stopped);
            }
            observer.progress(
                seek as f64 * segments::SECONDS_PER_FRAME,
                frames as f64 * 0.01,
            );
            let size = N_FRAMES.min(frames - seek).min(end - seek);
            seek = self.transcribe_window(&mut walk, seek, size, observer)?;
        }
        observer.progress(frames as f64 * 0.01, frames as f64 * 0.01);
        Ok(Transcript {
            language,
            language_probability,
            segments: walk.segments,
            stats: walk.stats,
        })
    }

    /// The spectrogram of the file, every buffer sized for it before the first window, and
    /// the conditioning text of the initial prompt.
    fn start<'a>(
        &mut self,
        samples: &[f32],
        frames: usize,
        options: &'a TranscribeOptions,
    ) -> Result<Walk<'a>, TranscribeError> {
        let mut stats = Stats {
            audio_seconds: samples.len() as f64 / f64::from(tessel_audio::SAMPLE_RATE),
            ..Stats::default()
        };
        let started = Instant::now();
        self.spectrogram.clear();
        self.spectrogram.resize(self.n_mels * frames, 0.0);
        self.mel.spectrogram(samples, &mut self.spectrogram)?;
        stats.mel = started.elapsed();
        let capacity = self.session.limits().max_tgt_len;
        self.decoder.reserve(options.temperatures.len(), capacity);
        self.decoder.suppress_tokens(&options.suppress_tokens)?;
        let mut all_tokens: Vec<u32> = Vec::new();
        if let Some(prompt) = &options.initial_prompt {
            let text = format!(" {}", python_strip(prompt));
            all_tokens.extend(self.tokenizer.encode(&text)?);
        }
        all_tokens.extend(options.initial_prompt_tokens.iter().flatten());
        // faster-whisper's `get_prompt`: " " + the stripped text, at most 223 tokens (half
        // of the 448 positions, less one).
        let half = (self.session.limits().max_tgt_len / 2).saturating_sub(1);
        let words = |text: &Option<String>| -> Result<Vec<u32>, TranscribeError> {
            match text.as_deref().filter(|t| !t.is_empty()) {
                Some(text) => {
                    let mut tokens = self.tokenizer.encode(&format!(" {}", python_strip(text)))?;
                    tokens.truncate(half);
                    Ok(tokens)
                }
                None => Ok(Vec::new()),
            }
        };
        let hotwords = words(&options.hotwords)?;
        let mut prefix = words(&options.prefix)?;
        if !prefix.is_empty() && options.timestamps {
            prefix.insert(0, self.tokenizer.timestamp_begin());
        }
        Ok(Walk {
            options,
            sot_sequence: Vec::new(),
            all_tokens,
            hotwords,
            prefix,
            reset_since: 0,
            segments: Vec::new(),
            stats,
            language: String::new(),
            last_speech_timestamp: 0.0,
        })
    }

    /// Transcribes the window of `size` frames at `seek`; returns where the next one starts.
    fn transcribe_window(
        &mut self,
        walk: &mut Walk<'_>,
        seek: usize,
        size: usize,
        observer: &mut dyn Observer,
    ) -> Result<usize, TranscribeError> {
        let options = walk.options;
        segment(&self.spectrogram, self.n_mels, seek, size, &mut self.window)?;
        self.encode(&mut walk.stats, observer)?;
        // faster-whisper's prefix applies to the window at 0 alone; hotwords to the others.
        let forced: &[u32] = if seek == 0 { &walk.prefix } else { &[] };
        let sot_at = self.prompt(walk, !forced.is_empty());
        let no_speech_prob = if sot_at + 1 == self.prompt.len() {
            None
        } else {
            let prompt = &self.prompt[..=sot_at];
            let stats = &mut walk.stats;
            Some(
                self.decoder
                    .no_speech_prob(&mut self.session, prompt, stats, observer)?,
            )
        };
        let mut window = WindowDecode {
            options,
            window: walk.stats.windows,
            prompt: &self.prompt,
            forced,
            no_speech_prob,
        };
        walk.stats.windows += 1;
        let best = self.decoder.decode_with_fallback(
            &mut self.session,
            &mut window,
            &mut walk.stats,
            observer,
        )?;
        let no_speech_prob = window.no_speech_prob.unwrap_or(0.0);
        let judged = best.judged_or(no_speech_prob);
        if options.thresholds.no_speech.is_some() && options.thresholds.is_silence(&judged) {
            return Ok(seek + size);
        }
        let timestamp_begin = self.tokenizer.timestamp_begin();
        let split = segments::split(&best.tokens, timestamp_begin, seek, size, &mut self.cuts);
        let figures = WindowFigures {
            seek,
            temperature: best.temperature,
            avg_logprob: judged.avg_logprob,
            compression_ratio: judged.compression_ratio,
            no_speech_prob,
        };
        let mut next_seek = split.next_seek;
        let mut kept = split.count;
        let mut no_words = Vec::new();
        let words = match self.words.as_mut() {
            Some(state) if options.word_timestamps => {
                let cuts = &mut self.cuts[..split.count];
                let tokens = &best.tokens;
                let window = WindowWords {
                    seek,
                    language: &walk.language,
                    prepend: &options.prepend_punctuations,
                    append: &options.append_punctuations,
                };
                let session = &mut self.session;
                let (sot, last) = (&walk.sot_sequence, walk.last_speech_timestamp);
                let timing = (&*self.tokenizer, &window, &sot[..], size);
                let watch: (&mut Stats, &mut dyn Observer) = (&mut walk.stats, &mut *observer);
                walk.last_speech_timestamp =
                    time_words(session, state, timing, (tokens, cuts), last, watch)?;
                let n = tokens.len();
                let single_ending =
                    n >= 2 && tokens[n - 2] < timestamp_begin && tokens[n - 1] >= timestamp_begin;
                let end = words::last_end(cuts, &state.words);
                let time_offset = seek as f64 * segments::SECONDS_PER_FRAME;
                if let Some(end) = end.filter(|&end| !single_ending && end > time_offset) {
                    next_seek = (end * 100.0).round_ties_even().max(0.0) as usize;
                }
                if let Some(threshold) = options.hallucination_silence_threshold {
                    let at = hallucination::Window {
                        seek,
                        size,
                        content_frames: self.spectrogram.len() / self.n_mels,
                        last_speech: last,
                    };
                    match hallucination::judge(threshold, cuts, &state.words, at) {
                        Verdict::Keep => {}
                        // The window is dropped whole: nothing kept, no prompt reset, the
                        // last speech as it was.
                        Verdict::Skip(seek) => {
                            walk.last_speech_timestamp = last;
                            return Ok(seek);
                        }
                        Verdict::Truncate { keep, seek } => {
                            kept = keep;
                            next_seek = seek;
                        }
                    }
                }
                let end =
                    words::last_end(&cuts[..kept], &state.words[..kept.min(state.words.len())]);
                if let Some(end) = end {
                    walk.last_speech_timestamp = end;
                }
                &mut state.words[..]
            }
            _ => &mut no_words[..],
        };
        let cuts = &self.cuts[..kept];
        walk.keep(&self.tokenizer, best, (cuts, words), &figures, observer)?;
        if !options.condition_on_previous_text
            || best.temperature > options.prompt_reset_on_temperature
        {
            walk.reset_since = walk.all_tokens.len();
        }
        Ok(next_seek)
    }

    /// Writes the window's prompt: `<|startofprev|>`, the hotwords (unless the window has a
    /// prefix) and the last of the conditioning text, the start sequence, `<|notimestamps|>`
    /// without timestamps. Returns where `<|startoftranscript|>` is in it.
    fn prompt(&mut self, walk: &Walk<'_>, has_prefix: bool) -> usize {
        let max_previous = (self.session.limits().max_tgt_len / 2).saturating_sub(1);
        self.prompt.clear();
        let previous = &walk.all_tokens[walk.reset_since..];
        let hotwords = if has_prefix { &[][..] } else { &walk.hotwords };
        if !previous.is_empty() || !hotwords.is_empty() {
            self.prompt.push(self.tokenizer.sot_prev());
            self.prompt.extend_from_slice(hotwords);
            self.prompt
                .extend_from_slice(&previous[previous.len().saturating_sub(max_previous)..]);
        }
        let sot_at = self.prompt.len();
        self.prompt.extend_from_slice(&walk.sot_sequence);
        if !walk.options.timestamps {
            self.prompt.push(self.tokenizer.no_timestamps());
        }
        sot_at
    }

    /// Runs the encoder over the current window.
    fn encode(
        &mut self,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        let started = Instant::now();
        let mut encoded = None;
        observer.inference(true);
        let done = self
            .session
            .encode_audio_staged(&self.window, || encoded = Some(Instant::now()));
        observer.inference(false);
        let ended = Instant::now();
        let encoded = encoded.unwrap_or(ended);
        stats.encode += encoded - started;
        stats.cross_kv += ended - encoded;
        Ok(done?)
    }

    /// The language and its probability: the option's, `en` for English-only models (both
    /// with probability 1), or detected on the first window (the most likely language token
    /// after `<|startoftranscript|>`, [`language_probability`]).
    fn language(
        &mut self,
        options: &TranscribeOptions,
        frames: usize,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<(String, f64), TranscribeError> {
        let language = options.language.as_deref();
        if let Some(given) = language::given(&self.tokenizer, self.multilingual, language)? {
            return Ok(given);
        }
        // At the first clip's start (truncated to a frame), when it is inside the audio.
        let first = options.clip_timestamps.first().map_or(0.0, |&t| t * 100.0);
        let start = if first < frames as f64 {
            first as usize
        } else {
            0
        };
        let size = N_FRAMES.min(frames - start);
        segment(
            &self.spectrogram,
            self.n_mels,
            start,
            size,
            &mut self.window,
        )?;
        self.encode(stats, observer)?;
        let sot = [self.tokenizer.sot()];
        let logits = timed(observer, &mut stats.decode, || self.session.prefill(&sot))?;
        Ok(language::detect(&self.tokenizer, logits))
    }
}

/// The clips of `clip_timestamps` (seconds) as `(start, end)` frames, as faster-whisper makes
/// them: each time rounded to a frame (half to even), an odd count's last clip ending at
/// `frames`, none given the whole audio.
fn clips(clip_timestamps: &[f64], frames: usize) -> Vec<(usize, usize)> {
    let mut points: Vec<usize> = clip_timestamps
        .iter()
        .map(|t| (t * 100.0).round_ties_even() as usize)
        .collect();
    if points.is_empty() {
        points.push(0);
    }
    if points.len() % 2 == 1 {
        points.push(frames);
    }
    points.chunks_exact(2).map(|c| (c[0], c[1])).collect()
}

#[cfg(test)]
mod tests {
    use super::clips;

    #[test]
    fn clips_pair_the_timestamps_as_faster_whisper_does() {
        assert_eq!(clips(&[], 900), [(0, 900)]);
        assert_eq!(clips(&[0.0], 900), [(0, 900)]);
        assert_eq!(clips(&[3.0, 12.5], 900), [(300, 1250)]);
        assert_eq!(clips(&[5.0, 20.0, 31.0], 4000), [(500, 2000), (3100, 4000)]);
        // 8.005 s is 800.5000000000001 frames in f64, as in Python; 0.125 s is 12.5, to even.
        assert_eq!(clips(&[8.005, 0.125], 900), [(801, 12)]);
    }
}
