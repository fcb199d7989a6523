//! Decoding one window: under Whisper's decoding rules ([`WhisperRules`]), at each fallback
//! temperature in turn until a result is judged fine ([`fallback`]'s rule).
//!
//! At temperature 0 a decoding is beam search (`beam > 1`) or greedy; above 0 it draws
//! `best_of` samples (seeded: `seed`, window, temperature and draw fix each) and keeps the best
//! by length-normalised score. The no-speech probability is the softmax of the logits at the
//! `<|startoftranscript|>` row: the first decoding's step-0 logits when that token ends the
//! prompt, otherwise one prefill of the prompt up to it ([`Decoder::no_speech_prob`]).

use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::processors::whisper::WhisperRules;
use tessel_model::processors::{ban_repeated_ngrams, force, repetition_penalty};
use tessel_model::{Hypotheses, Model, Request, Sampling, SearchOptions, Session, StepLogits};
use tessel_text::whisper::{python_strip, WhisperTokenizer};

use super::fallback::{self, Compressor, Judged};
use super::observer::{timed, Observer};
use super::segments::TIME_PRECISION;
use super::types::{Stats, TranscribeError, TranscribeOptions};

/// The model session a transcription runs on.
pub(super) type WhisperSession = Session<Arc<Model<'static>>>;

/// One decoding of a window.
#[derive(Clone, Debug, Default)]
pub(super) struct Decoded {
    /// Its tokens, up to `<|endoftext|>` (excluded).
    pub(super) tokens: Vec<u32>,
    /// The temperature it is reported at.
    pub(super) temperature: f32,
    judged: Option<Judged>,
    text: String,
}

impl Decoded {
    /// What the fallback rule reads of it; before it is judged, no log-probability and no
    /// compression with the window's `no_speech_prob`.
    pub(super) fn judged_or(&self, no_speech_prob: f64) -> Judged {
        self.judged.unwrap_or(Judged {
            avg_logprob: 0.0,
            compression_ratio: 0.0,
            no_speech_prob,
        })
    }
}

/// The window's decoding settings that do not change with temperature.
pub(super) struct WindowDecode<'a> {
    pub(super) options: &'a TranscribeOptions,
    /// The window's number, counted from 0 (it seeds the samples).
    pub(super) window: usize,
    /// The prompt: previous text, start sequence, `<|notimestamps|>`.
    pub(super) prompt: &'a [u32],
    /// Tokens forced at the start of the decoding (the prefix), part of its tokens.
    pub(super) forced: &'a [u32],
    /// `softmax(logits)[<|nospeech|>]` at the `<|startoftranscript|>` row; `None` until the
    /// first decoding reads it, when that row is the prompt's last (its step-0 logits).
    pub(super) no_speech_prob: Option<f64>,
}

/// The decoding rules' token sets and one decoding per fallback temperature.
pub(super) struct Decoder {
    tokenizer: Arc<WhisperTokenizer>,
    suppress: Arc<[u32]>,
    /// The transcription's own `suppress_tokens`, when they are not the default.
    custom_suppress: Option<Vec<u32>>,
    blank: Arc<[u32]>,
    /// The decodings at each temperature of the current window.
    tried: Vec<Decoded>,
    judged: Vec<Judged>,
    compressor: Compressor,
}

impl Decoder {
    /// A decoder suppressing `suppress` always and `blank` as the first token.
    pub(super) fn new(
        tokenizer: Arc<WhisperTokenizer>,
        suppress: Arc<[u32]>,
        blank: Arc<[u32]>,
    ) -> Decoder {
        Decoder {
            tokenizer,
            suppress,
            custom_suppress: None,
            blank,
            tried: Vec::new(),
            judged: Vec::new(),
            compressor: Compressor::new(),
        }
    }

    /// Room for one decoding per temperature of `temperatures`, each of up to `capacity`
    /// tokens.
    pub(super) fn reserve(&mut self, temperatures: usize, capacity: usize) {
        if self.tried.len() < temperatures {
            self.tried.resize_with(temperatures, || Decoded {
                tokens: Vec::with_capacity(capacity),
                ..Decoded::default()
            });
        }
    }

    /// Suppresses `list` (faster-whisper's `suppress_tokens`: `-1` for the non-speech
    /// symbols, then the special tokens; nothing for an empty list) from now on.
    pub(super) fn suppress_tokens(&mut self, list: &[i64]) -> Result<(), TranscribeError> {
        if list == [-1] {
            self.custom_suppress = None;
            return Ok(());
        }
        let mut ids = Vec::new();
        if !list.is_empty() {
            let tok = &self.tokenizer;
            if list.contains(&-1) {
                ids.extend(tok.non_speech_tokens()?);
            }
            ids.extend(list.iter().filter_map(|&t| u32::try_from(t).ok()));
            ids.extend([
                tok.transcribe(),
                tok.translate(),
                tok.sot(),
                tok.sot_prev(),
                tok.sot_lm(),
                tok.no_speech(),
            ]);
            ids.sort_unstable();
            ids.dedup();
        }
        self.custom_suppress = Some(ids);
        Ok(())
    }

    /// The tokens suppressed at every step: the transcription's `suppress_tokens`, or the
    /// default set.
    pub(super) fn suppressed(&self) -> &[u32] {
        self.custom_suppress.as_deref().unwrap_or(&self.suppress)
    }

    /// The tokens suppressed as the first one (with `suppress_blank`).
    pub(super) fn blank(&self) -> &[u32] {
        &self.blank
    }

    /// `softmax(logits)[<|nospeech|>]` at the last row of `prompt` (the prompt up to its
    /// `<|startoftranscript|>`).
    pub(super) fn no_speech_prob(
        &self,
        session: &mut WhisperSession,
        prompt: &[u32],
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<f64, TranscribeError> {
        let logits = timed(observer, &mut stats.decode, || {
            session.reset_decoder();
            session.prefill(prompt)
        });
        Ok(softmax_at(logits?, self.tokenizer.no_speech()))
    }

    /// Decodes the window at each temperature until one is judged fine; returns the decoding
    /// kept.
    pub(super) fn decode_with_fallback(
        &mut self,
        session: &mut WhisperSession,
        window: &mut WindowDecode<'_>,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<&Decoded, TranscribeError> {
        let options = window.options;
        let temperatures = &options.temperatures;
        for (i, &temperature) in temperatures.iter().enumerate() {
            self.decode_at(session, i, temperature, window, stats, observer)?;
            let judged = self.tried[i].judged_or(window.no_speech_prob.unwrap_or(0.0));
            if !options.thresholds.needs_fallback(&judged) {
                return Ok(&self.tried[i]);
            }
        }
        self.judged.clear();
        let tried = self.tried[..temperatures.len()].iter();
        self.judged.extend(tried.filter_map(|d| d.judged));
        let best = fallback::pick_after_failures(&options.thresholds, &self.judged).unwrap_or(0);
        // Reported at the last temperature tried, as the reference does.
        let last = temperatures[temperatures.len() - 1];
        self.tried[best].temperature = last;
        Ok(&self.tried[best])
    }

    /// One decoding at `temperature` into `tried[slot]`: the best of its runs (one, or
    /// `best_of` samples above 0), judged.
    fn decode_at(
        &mut self,
        session: &mut WhisperSession,
        slot: usize,
        temperature: f32,
        window: &mut WindowDecode<'_>,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        let options = window.options;
        let (prompt, forced) = (window.prompt, window.forced);
        let tok = Arc::clone(&self.tokenizer);
        let max_steps = max_steps(options, session.limits().max_tgt_len, prompt, forced)?;
        let suppress = self.custom_suppress.as_deref().unwrap_or(&self.suppress);
        let rules = rules(&tok, options, &self.blank, suppress);
        let (penalty, ngram) = (options.repetition_penalty, options.no_repeat_ngram_size);
        let isa = session.isa();
        let runs = if temperature > 0.0 {
            options.best_of
        } else {
            1
        };
        let decoded = &mut self.tried[slot];
        decoded.tokens.clear();
        decoded.temperature = temperature;
        let mut best_score = f32::NEG_INFINITY;
        let mut best_sum = 0.0f64;
        for run in 0..runs {
            let seed = options
                .seed
                .wrapping_add((window.window as u64) << 32)
                .wrapping_add((slot as u64) << 16)
                .wrapping_add(run as u64);
            let search = search(options, temperature, seed, max_steps);
            let no_speech = &mut window.no_speech_prob;
            let settings = StepRules {
                rules: &rules,
                isa,
                forced,
                penalties: (penalty, ngram),
                no_speech: tok.no_speech(),
            };
            let hyps = timed(observer, &mut stats.decode, || {
                let process = settings.process(no_speech);
                session.generate(Request::new(search).prefix(prompt).process(process))
            });
            let hyps: Hypotheses<'_> = hyps?;
            let Some(best) = hyps.best() else { continue };
            stats.tokens += best.tokens.len();
            if run == 0 || best.score > best_score {
                best_score = best.score;
                let len = best.tokens.len();
                best_sum =
                    f64::from(best.score) * (len as f64).powf(f64::from(search.length_penalty));
                decoded.tokens.clear();
                let end = best
                    .tokens
                    .iter()
                    .position(|&t| t == tok.eot())
                    .unwrap_or(len);
                decoded.tokens.extend_from_slice(&best.tokens[..end]);
            }
        }
        decoded.text = tok.decode(&decoded.tokens)?;
        let n = decoded.tokens.len();
        decoded.judged = Some(Judged {
            avg_logprob: best_sum / (n as f64 + 1.0),
            compression_ratio: self.compressor.ratio(python_strip(&decoded.text)),
            no_speech_prob: window.no_speech_prob.unwrap_or(0.0),
        });
        Ok(())
    }
}

/// What a window's decoding does to each step's logits: CTranslate2's repetition penalty and
/// n-gram ban, Whisper's rules after the forced tokens, then the forced tokens.
#[derive(Clone, Copy)]
pub(super) struct StepRules<'a> {
    pub(super) rules: &'a WhisperRules<'a>,
    pub(super) isa: Isa,
    /// Tokens forced at the start of the decoding (the prefix).
    pub(super) forced: &'a [u32],
    /// The repetition penalty and the banned n-gram size (1 and 0: off).
    pub(super) penalties: (f32, usize),
    /// `<|nospeech|>`.
    pub(super) no_speech: u32,
}

impl<'a> StepRules<'a> {
    /// The logits processor: the rules, reading `softmax(logits)[<|nospeech|>]` into
    /// `no_speech_prob` at step 0 when it is `None` (the prompt ends with
    /// `<|startoftranscript|>`).
    pub(super) fn process<'n>(
        self,
        no_speech_prob: &'n mut Option<f64>,
    ) -> impl FnMut(&mut StepLogits<'_>) + use<'a, 'n> {
        let StepRules {
            rules,
            isa,
            forced,
            penalties: (penalty, ngram),
            no_speech,
        } = self;
        move |step| {
            if step.step == 0 && no_speech_prob.is_none() {
                *no_speech_prob = Some(softmax_at(step.row_mut(0), no_speech));
            }
            if penalty != 1.0 || ngram > 0 {
                // CTranslate2's context: the tokens generated so far (forced ones
                // included), not the start token.
                for beam in 0..step.beams {
                    let (tokens, row) = step.tokens_and_row_mut(beam);
                    repetition_penalty(row, None, tokens, penalty);
                    ban_repeated_ngrams(row, None, tokens, ngram);
                }
            }
            rules.apply_from(isa, step, forced.len());
            if let Some(&token) = forced.get(step.step) {
                // CTranslate2's prefix: the token, adding 0 to the score.
                for beam in 0..step.beams {
                    force(step.row_mut(beam), token);
                }
            }
        }
    }
}

/// The most tokens a window's decoding generates (forced ones included), as CTranslate2's
/// `generate` gets them from faster-whisper: `sample_len` (224) and the positions the prompt
/// leaves; with `max_new_tokens`, at most half of `total = prompt + forced + max_new_tokens`
/// and `total - (prompt - 1)`, `total` within the model's positions.
pub(super) fn max_steps(
    options: &TranscribeOptions,
    max_tgt: usize,
    prompt: &[u32],
    forced: &[u32],
) -> Result<usize, TranscribeError> {
    let mut steps = options
        .sample_len
        .min((max_tgt + 1).saturating_sub(prompt.len()));
    if let Some(new) = options.max_new_tokens {
        let total = prompt.len() + forced.len() + new;
        if total > max_tgt {
            return Err(TranscribeError::BadOption(format!(
                "the prompt ({} tokens) and max_new_tokens ({new}) pass the model's {max_tgt} \
                 target positions",
                prompt.len() + forced.len()
            )));
        }
        steps = steps
            .min(total / 2)
            .min((total + 1).saturating_sub(prompt.len()));
    }
    if steps == 0 {
        return Err(TranscribeError::BadOption(
            "the prompt fills the decoder's positions".into(),
        ));
    }
    if forced.len() > steps {
        return Err(TranscribeError::BadOption(format!(
            "the prefix ({} tokens) is longer than a window's decoding ({steps})",
            forced.len()
        )));
    }
    Ok(steps)
}

/// Whisper's decoding rules for `options`: `suppress` always, `blank` as the first token when
/// `options.suppress_blank`.
pub(super) fn rules<'a>(
    tok: &WhisperTokenizer,
    options: &TranscribeOptions,
    blank: &'a [u32],
    suppress: &'a [u32],
) -> WhisperRules<'a> {
    // round(max_initial_timestamp / 0.02) steps, as the reference converts it.
    let max_initial = (options.max_initial_timestamp / TIME_PRECISION)
        .round()
        .clamp(0.0, f64::from(u32::MAX));
    WhisperRules {
        eot: tok.eot(),
        no_timestamps: tok.no_timestamps(),
        timestamp_begin: tok.timestamp_begin(),
        blank: if options.suppress_blank { blank } else { &[] },
        suppress,
        timestamps: options.timestamps,
        max_initial_timestamp_index: Some(max_initial as u32),
    }
}

/// One run's search: seeded sampling at `temperature` above 0, otherwise beam search (greedy
/// for a beam of 1), at most `max_steps` tokens.
pub(super) fn search(
    options: &TranscribeOptions,
    temperature: f32,
    seed: u64,
    max_steps: usize,
) -> SearchOptions {
    if temperature > 0.0 {
        SearchOptions {
            length_penalty: options.length_penalty,
            ..SearchOptions::sample(Sampling::temperature(temperature, seed), max_steps)
        }
    } else {
        SearchOptions {
            length_penalty: options.length_penalty,
            patience: options.patience,
            ..SearchOptions::beam(options.beam, max_steps)
        }
    }
}

/// `softmax(logits)[token]` in `f64` (0 when `token` is out of range).
pub(super) fn softmax_at(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let total: f64 = logits
        .iter()
        .map(|&v| (f64::from(v) - f64::from(max)).exp())
        .sum();
    let target = logits
        .get(token as usize)
        .map_or(f64::NEG_INFINITY, |&v| f64::from(v) - f64::from(max));
    target.exp() / total
}
