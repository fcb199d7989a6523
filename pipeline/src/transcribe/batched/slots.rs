//! Decoding a batch of chunks together: each chunk's features encoded into a slot of the
//! [`Batch`], its prompt (with the chunk's own language when asked), its no-speech
//! probability, then one beam search over every slot at once, each under Whisper's rules.

use std::sync::Arc;
use std::time::Instant;

use tessel_model::processors::whisper::WhisperRules;
use tessel_model::{Batch, Model, Request, RunError};
use tessel_text::whisper::WhisperTokenizer;

use crate::transcribe::decode::{self, softmax_at, StepRules};
use crate::transcribe::language;
use crate::transcribe::observer::{timed, Observer};
use crate::transcribe::types::{Stats, TranscribeError, TranscribeOptions};
use crate::transcribe::word_pass::ForcedPass;

/// The batch a batched transcription runs on.
pub(super) type WhisperBatch = Batch<Arc<Model<'static>>>;

/// One slot's decoding.
#[derive(Clone, Debug, Default)]
pub(super) struct Decoded {
    /// Its tokens, up to `<|endoftext|>` (excluded).
    pub(super) tokens: Vec<u32>,
    /// `score · len^penalty / (len + 1)`, as faster-whisper reports it.
    pub(super) avg_logprob: f64,
    /// `softmax(logits)[<|nospeech|>]` at the `<|startoftranscript|>` row.
    pub(super) no_speech_prob: f64,
}

/// What every chunk's decoding shares.
pub(super) struct Prompting<'a> {
    pub(super) options: &'a TranscribeOptions,
    pub(super) tokenizer: &'a WhisperTokenizer,
    pub(super) rules: &'a WhisperRules<'a>,
    /// The prompt: previous-text tokens, the start sequence, `<|notimestamps|>`.
    pub(super) prompt: &'a [u32],
    /// Where `<|startoftranscript|>` is in it.
    pub(super) sot_at: usize,
    /// Replace the prompt's language token by each chunk's own (faster-whisper's
    /// `multilingual`).
    pub(super) per_chunk_language: bool,
}

/// The per-slot buffers of a batch's decoding, sized once.
pub(super) struct SlotBuffers {
    prompts: Vec<Vec<u32>>,
    no_speech: Vec<Option<f64>>,
    pub(super) decoded: Vec<Decoded>,
}

impl SlotBuffers {
    /// Buffers for `slots` slots of prompts up to `max_tgt` tokens.
    pub(super) fn new(slots: usize, max_tgt: usize) -> SlotBuffers {
        let decoded = Decoded {
            tokens: Vec::with_capacity(max_tgt),
            ..Decoded::default()
        };
        SlotBuffers {
            prompts: vec![Vec::with_capacity(max_tgt); slots],
            no_speech: vec![None; slots],
            decoded: vec![decoded; slots],
        }
    }
}

/// Encodes `features[k]` (`n_mels × 3000` each) into slot `k`, timed as the stats' encode.
pub(super) fn encode(
    batch: &mut WhisperBatch,
    features: &[&[f32]],
    stats: &mut Stats,
    observer: &mut dyn Observer,
) -> Result<(), TranscribeError> {
    for (slot, mel) in features.iter().enumerate() {
        let started = Instant::now();
        observer.inference(true);
        let done = batch.encode_audio(slot, mel);
        observer.inference(false);
        stats.encode += started.elapsed();
        done?;
    }
    Ok(())
}

/// Decodes the `count` chunks encoded in slots `0..count` into `buffers.decoded`.
pub(super) fn decode(
    batch: &mut WhisperBatch,
    count: usize,
    prompting: &Prompting<'_>,
    buffers: &mut SlotBuffers,
    (stats, observer): (&mut Stats, &mut dyn Observer),
) -> Result<(), TranscribeError> {
    let (options, tok) = (prompting.options, prompting.tokenizer);
    for slot in 0..count {
        let prompt = &mut buffers.prompts[slot];
        prompt.clear();
        prompt.extend_from_slice(prompting.prompt);
        if prompting.per_chunk_language {
            let logits = timed(observer, &mut stats.decode, || {
                batch.prefill(slot, &[tok.sot()])
            })?;
            let (code, _) = language::detect(tok, logits);
            prompt[prompting.sot_at + 1] = tok.language_token(&code)?;
        }
        buffers.no_speech[slot] = if prompting.sot_at + 1 == prompt.len() {
            None
        } else {
            let to_sot = &prompt[..=prompting.sot_at];
            let logits = timed(observer, &mut stats.decode, || batch.prefill(slot, to_sot))?;
            Some(softmax_at(logits, tok.no_speech()))
        };
    }
    let max_tgt = batch.limits().max_tgt_len;
    let max_steps = decode::max_steps(options, max_tgt, prompting.prompt, &[])?;
    let search = decode::search(options, 0.0, options.seed, max_steps);
    let settings = StepRules {
        rules: prompting.rules,
        isa: batch.isa(),
        forced: &[],
        penalties: (options.repetition_penalty, options.no_repeat_ngram_size),
        no_speech: tok.no_speech(),
    };
    let prompts = &buffers.prompts;
    let mut requests: Vec<_> = buffers.no_speech[..count]
        .iter_mut()
        .zip(prompts)
        .map(|(no_speech, prompt)| {
            Request::new(search)
                .prefix(prompt)
                .process(settings.process(no_speech))
        })
        .collect();
    timed(observer, &mut stats.decode, || {
        batch.generate(&mut requests)
    })?;
    drop(requests);
    for slot in 0..count {
        let no_speech = buffers.no_speech[slot].unwrap_or(0.0);
        read_best(
            batch,
            slot,
            tok.eot(),
            search.length_penalty,
            no_speech,
            buffers,
        )?;
        stats.tokens += buffers.decoded[slot].tokens.len();
    }
    Ok(())
}

/// Slot `slot`'s best hypothesis into `buffers.decoded[slot]`.
fn read_best(
    batch: &mut WhisperBatch,
    slot: usize,
    eot: u32,
    length_penalty: f32,
    no_speech_prob: f64,
    buffers: &mut SlotBuffers,
) -> Result<(), TranscribeError> {
    let hyps = batch.hypotheses(slot)?;
    let out = &mut buffers.decoded[slot];
    out.tokens.clear();
    out.no_speech_prob = no_speech_prob;
    out.avg_logprob = 0.0;
    let Some(best) = hyps.best() else {
        return Ok(());
    };
    let len = best.tokens.len();
    let sum = f64::from(best.score) * (len as f64).powf(f64::from(length_penalty));
    let end = best.tokens.iter().position(|&t| t == eot).unwrap_or(len);
    out.tokens.extend_from_slice(&best.tokens[..end]);
    out.avg_logprob = sum / (end as f64 + 1.0);
    Ok(())
}

/// The forced pass of word timing over one slot's encoder output.
pub(super) struct SlotPass<'a> {
    pub(super) batch: &'a mut WhisperBatch,
    pub(super) slot: usize,
}

impl ForcedPass for SlotPass<'_> {
    fn vocab(&self) -> usize {
        self.batch.model().config().tgt_vocab
    }

    fn forced_pass(
        &mut self,
        tokens: &[u32],
        heads: &[(usize, usize)],
        frames: usize,
        on_logits: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<&[f32], RunError> {
        self.batch
            .align(self.slot, tokens, heads, frames, on_logits)
    }
}
