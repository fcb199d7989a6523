//! Scoring a given translation: the log-probability the model gives each token of a target,
//! teacher-forced, as CTranslate2's `score_batch` computes it. The decoder reads the decoder
//! start token and then the target; position `t` predicts target token `t`, and the last
//! predicts the end token, so a target of `n` tokens gets `n + 1` log-probabilities. Each is
//! `logit[token] − ln Σ exp(logits)` of the model's raw logits: no decoding rule (banned
//! words, forced tokens, penalties) applies, as none does in CTranslate2's scoring. The target
//! runs through the decoder in one teacher-forced pass ([`Session::align`] with no heads),
//! as CTranslate2 scores it, or, when longer than a pass may be, one step per token.

use tessel_model::ops::logsumexp;
use tessel_model::{Arena, ModelRef, RunError, Session};

/// Scores `target` after `source` on `session` (beam 1 is enough): `out` receives the
/// log-probability of each target token and then of the end token. An empty source scores
/// every token 0, as CTranslate2 does for an empty example. The session's target limit
/// bounds `target.len() + 1`.
pub fn score_ids<M: ModelRef, A: Arena>(
    session: &mut Session<M, A>,
    source: &[u32],
    target: &[u32],
    out: &mut Vec<f32>,
) -> Result<(), RunError> {
    out.clear();
    if source.is_empty() {
        out.resize(target.len() + 1, 0.0);
        return Ok(());
    }
    let config = session.model().config();
    let (start, eos, vocab) = (config.bos_id, config.eos_id, config.tgt_vocab);
    let isa = session.isa();
    session.encode(source)?;
    let limits = session.limits();
    if target.len() < limits.max_tgt_len.min(limits.max_src_len) {
        // One teacher-forced pass over the start token and the target: every row's logits.
        let mut forced = Vec::with_capacity(target.len() + 1);
        forced.push(start);
        forced.extend_from_slice(target);
        let mut past_vocabulary = false;
        session.align(&forced, &[], 1, |first, logits| {
            for (i, row) in logits.chunks_exact(vocab).enumerate() {
                let next = target.get(first + i).copied().unwrap_or(eos);
                match row.get(next as usize) {
                    Some(&logit) => out.push(logit - logsumexp(isa, row)),
                    None => past_vocabulary = true,
                }
            }
        })?;
        if past_vocabulary {
            return Err(RunError::BadOption("a target token past the vocabulary"));
        }
        return Ok(());
    }
    // A target longer than one forced pass takes: one decoder step per token.
    let mut input = start;
    for &next in target.iter().chain(std::iter::once(&eos)) {
        let logits = session.decode_step(&[input])?;
        let row = logits
            .get(next as usize)
            .ok_or(RunError::BadOption("a target token past the vocabulary"))?;
        out.push(row - logsumexp(isa, logits));
        input = next;
    }
    Ok(())
}
