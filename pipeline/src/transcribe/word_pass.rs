//! Timing a window's words: the forced decoder pass over its text, the alignment of the heads'
//! cross-attention, then faster-whisper's `add_word_timestamps`, in buffers sized when the
//! session is made.

use std::sync::Arc;

use tessel_text::whisper::WhisperTokenizer;

use super::alignment::{text_token_probability, Aligner};
use super::decode::WhisperSession;
use super::observer::{timed, Observer};
use super::segments::Cut;
use super::types::{Stats, TranscribeError};
use super::words::{self, WindowWords, Word};
use tessel_model::RunError;

/// The buffers of word timing, sized when the session is made.
pub(super) struct WordState {
    /// The alignment heads, in the order the forced pass reports them.
    pub(super) heads: Arc<[(usize, usize)]>,
    pub(super) aligner: Aligner,
    /// The window's text tokens.
    pub(super) text: Vec<u32>,
    /// The forced pass: start sequence, `<|notimestamps|>`, text, `<|endoftext|>`.
    pub(super) forced: Vec<u32>,
    /// The text tokens' probabilities.
    pub(super) probs: Vec<f32>,
    /// Each segment's words.
    pub(super) words: Vec<Vec<Word>>,
}

impl WordState {
    /// The buffers for `heads` over at most `max_tgt` tokens and `frames` encoder frames.
    pub(super) fn new(heads: Arc<[(usize, usize)]>, max_tgt: usize, frames: usize) -> WordState {
        WordState {
            heads,
            aligner: Aligner::new(max_tgt, frames),
            text: Vec::with_capacity(max_tgt),
            forced: Vec::with_capacity(max_tgt),
            probs: Vec::with_capacity(max_tgt),
            words: Vec::with_capacity(max_tgt),
        }
    }
}

/// The forced decoder pass word timing runs over a window's encoder output: a session's
/// ([`Session::align`](tessel_model::Session::align)) or one slot of a batch's.
pub(super) trait ForcedPass {
    /// The target vocabulary (a logits row's length).
    fn vocab(&self) -> usize;
    /// The forced pass over `tokens`, reporting every row's logits to `on_logits` and
    /// returning the `heads`' cross-attention probabilities over the first `frames` frames.
    fn forced_pass(
        &mut self,
        tokens: &[u32],
        heads: &[(usize, usize)],
        frames: usize,
        on_logits: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<&[f32], RunError>;
}

impl ForcedPass for WhisperSession {
    fn vocab(&self) -> usize {
        self.model().config().tgt_vocab
    }

    fn forced_pass(
        &mut self,
        tokens: &[u32],
        heads: &[(usize, usize)],
        frames: usize,
        on_logits: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<&[f32], RunError> {
        self.align(tokens, heads, frames, on_logits)
    }
}

/// Times the words of a window's segments (`cuts` of the decoded `tokens`; their bounds may
/// move) into `state.words`: the forced pass over the window's text, its alignment, then
/// faster-whisper's `add_word_timestamps`. `timing` is the tokenizer, the window, the start
/// sequence and the window's frames. Returns the new `last_speech_timestamp`. The forced pass
/// and the alignment run between the observer's inference marks (they allocate nothing), timed
/// as [`Stats::align`].
pub(super) fn time_words(
    session: &mut dyn ForcedPass,
    state: &mut WordState,
    (tokenizer, window, sot_sequence, size): (&WhisperTokenizer, &WindowWords<'_>, &[u32], usize),
    (tokens, cuts): (&[u32], &mut [Cut]),
    last_speech_timestamp: f64,
    (stats, observer): (&mut Stats, &mut dyn Observer),
) -> Result<f64, TranscribeError> {
    let eot = tokenizer.eot();
    state.text.clear();
    for cut in cuts.iter() {
        let text = tokens[cut.tokens.clone()].iter().filter(|&&t| t < eot);
        state.text.extend(text);
    }
    let frames = size / 2;
    state.probs.clear();
    let mut path_len = 0;
    if !state.text.is_empty() && frames > 0 {
        state.forced.clear();
        state.forced.extend_from_slice(sot_sequence);
        state.forced.push(tokenizer.no_timestamps());
        state.forced.extend_from_slice(&state.text);
        state.forced.push(eot);
        let (sot_len, text) = (sot_sequence.len(), &state.text);
        state.probs.resize(text.len(), 0.0);
        let vocab = session.vocab();
        let (probs, aligner, forced) = (&mut state.probs, &mut state.aligner, &state.forced);
        let heads = &state.heads;
        path_len = timed(observer, &mut stats.align, || {
            let attention = session.forced_pass(forced, heads, frames, &mut |first, logits| {
                for (i, row) in logits.chunks_exact(vocab).enumerate() {
                    let t = (first + i).wrapping_sub(sot_len);
                    if let (Some(&token), Some(p)) = (text.get(t), probs.get_mut(t)) {
                        *p = text_token_probability(row, eot as usize, token);
                    }
                }
            })?;
            let shape = (heads.len(), forced.len(), frames);
            let aligned = aligner.align(attention, shape, (sot_len, text.len()));
            Ok::<_, TranscribeError>(aligned.path.len())
        })?;
    }
    let aligned = state.aligner.path(path_len);
    Ok(words::add_word_timestamps(
        tokenizer,
        window,
        (tokens, cuts),
        &state.text,
        (aligned, &state.probs),
        &mut state.words,
        last_speech_timestamp,
    )?)
}
