//! The search state carved from the arena: the token histories of the live hypotheses (two,
//! swapped each step), their scores, the step's ranked candidates and the finished set.

use crate::plan::SearchParts;

/// The search state carved from the arena, part by part as [`SearchParts`] lays it out.
pub(super) struct State<'a> {
    /// Tokens of the live hypotheses, `beam × tgt`: one history holds this step's, the
    /// other receives the next step's.
    pub(super) history: [&'a mut [u32]; 2],
    /// Tokens of the finished hypotheses, `beam × tgt`.
    pub(super) finished: &'a mut [u32],
    /// Length of each finished hypothesis, its last token included.
    pub(super) finished_len: &'a mut [u32],
    /// Normalised score of each finished hypothesis.
    pub(super) finished_score: &'a mut [f32],
    /// Summed log-probability of each live hypothesis.
    pub(super) beam_score: &'a mut [f32],
    /// The step's candidates, best first: summed log-probability,
    pub(super) cand_score: &'a mut [f32],
    /// the live hypothesis each continues,
    pub(super) cand_beam: &'a mut [u32],
    /// and the token each adds.
    pub(super) cand_token: &'a mut [u32],
}

/// Tokens [`State::offer_row`] tests against the last kept score at once.
const OFFER_BLOCK: usize = 16;

/// One candidate continuation of a beam step.
#[derive(Clone, Copy, Debug)]
pub(super) struct Candidate {
    /// Its log-probability score so far.
    pub(super) score: f32,
    /// The live hypothesis it extends.
    pub(super) from: usize,
    /// Its token.
    pub(super) token: u32,
}

impl<'a> State<'a> {
    pub(super) fn new(search: &'a mut [f32], beam: usize, tgt: usize) -> State<'a> {
        let parts = SearchParts::carve(search, SearchParts::sizes(beam, tgt));
        let u32s = |p: &'a mut [f32]| -> &'a mut [u32] { bytemuck::cast_slice_mut(p) };
        State {
            history: [u32s(parts.history_even), u32s(parts.history_odd)],
            finished: u32s(parts.finished),
            finished_len: u32s(parts.finished_len),
            finished_score: parts.finished_score,
            beam_score: parts.beam_score,
            cand_score: parts.cand_score,
            cand_beam: u32s(parts.cand_beam),
            cand_token: u32s(parts.cand_token),
        }
    }

    /// Candidate `c` of the current step's list.
    pub(super) fn candidate(&self, c: usize) -> Candidate {
        Candidate {
            score: self.cand_score[c],
            from: self.cand_beam[c] as usize,
            token: self.cand_token[c],
        }
    }

    /// Inserts a candidate into the descending top-`k` list of `count` entries (impossible ones,
    /// scored NaN or -inf, never).
    fn offer(&mut self, count: &mut usize, k: usize, score: f32, beam: u32, token: u32) {
        let full = *count == k;
        // NaN never ranks; -inf is a continuation a logits processor ruled out.
        if score.is_nan() || score == f32::NEG_INFINITY || (full && score <= self.cand_score[k - 1])
        {
            return;
        }
        let mut at = (*count).min(k - 1);
        while at > 0 && self.cand_score[at - 1] < score {
            self.cand_score[at] = self.cand_score[at - 1];
            self.cand_beam[at] = self.cand_beam[at - 1];
            self.cand_token[at] = self.cand_token[at - 1];
            at -= 1;
        }
        self.cand_score[at] = score;
        self.cand_beam[at] = beam;
        self.cand_token[at] = token;
        *count = (*count + 1).min(k);
    }

    /// Offers `base + lp` for every token of one beam's row of log-probabilities, in token
    /// order, as [`State::offer`] would one by one. Once the list is full, blocks of
    /// [`OFFER_BLOCK`] tokens none of which beats the last kept score are skipped after one
    /// comparison each, a loop the compiler vectorises: the same `f32` sums are compared, so
    /// exactly the candidates `offer` would take are offered.
    pub(super) fn offer_row(
        &mut self,
        count: &mut usize,
        k: usize,
        base: f32,
        beam: u32,
        row: &[f32],
    ) {
        if k == 0 {
            return;
        }
        let mut token = 0;
        while token < row.len() && *count < k {
            self.offer(count, k, base + row[token], beam, token as u32);
            token += 1;
        }
        let mut blocks = row[token..].chunks_exact(OFFER_BLOCK);
        for block in &mut blocks {
            let last = self.cand_score[k - 1];
            if block
                .iter()
                .fold(false, |any, &lp| any | (base + lp > last))
            {
                for (i, &lp) in block.iter().enumerate() {
                    self.offer(count, k, base + lp, beam, (token + i) as u32);
                }
            }
            token += OFFER_BLOCK;
        }
        for (i, &lp) in blocks.remainder().iter().enumerate() {
            self.offer(count, k, base + lp, beam, (token + i) as u32);
        }
    }

    /// Records a finished hypothesis: `history[cur]` row `beam` up to `len - 1`, then `last`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &mut self,
        slot: usize,
        cur: usize,
        beam: usize,
        len: usize,
        last: u32,
        score: f32,
        tgt: usize,
    ) {
        let (src, dst) = (beam * tgt, slot * tgt);
        self.finished[dst..dst + len - 1].copy_from_slice(&self.history[cur][src..src + len - 1]);
        self.finished[dst + len - 1] = last;
        self.finished_len[slot] = len as u32;
        self.finished_score[slot] = score;
    }

    /// Continues hypothesis `from` of `history[cur]` with `token` as live hypothesis `slot` of
    /// the other history, scored `score`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn keep(
        &mut self,
        cur: usize,
        step: usize,
        slot: usize,
        from: usize,
        token: u32,
        score: f32,
        tgt: usize,
    ) {
        let (src, dst) = (from * tgt, slot * tgt);
        let [a, b] = &mut self.history;
        let (old, new) = if cur == 0 { (&*a, b) } else { (&*b, a) };
        new[dst..dst + step].copy_from_slice(&old[src..src + step]);
        new[dst + step] = token;
        self.beam_score[slot] = score;
    }

    /// Offers a finished hypothesis to the set of the best `beam` (`count` so far): it takes a
    /// free slot, else replaces the worst when it scores better.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn offer_finished(
        &mut self,
        count: &mut usize,
        beam: usize,
        cur: usize,
        from: usize,
        len: usize,
        last: u32,
        score: f32,
        tgt: usize,
    ) {
        let slot = if *count < beam {
            *count += 1;
            *count - 1
        } else {
            let worst = self.worst_finished(beam);
            if score <= self.finished_score[worst] {
                return;
            }
            worst
        };
        self.finish(slot, cur, from, len, last, score, tgt);
    }

    /// The slot of the lowest score among the first `count` finished hypotheses (`count` > 0).
    pub(super) fn worst_finished(&self, count: usize) -> usize {
        (1..count).fold(0, |worst, i| {
            if self.finished_score[i] < self.finished_score[worst] {
                i
            } else {
                worst
            }
        })
    }

    /// Sorts the first `count` finished hypotheses by score, best first (insertion sort).
    pub(super) fn sort_finished(&mut self, count: usize, tgt: usize) {
        for i in 1..count {
            let mut j = i;
            while j > 0 && self.finished_score[j - 1] < self.finished_score[j] {
                self.finished_score.swap(j - 1, j);
                self.finished_len.swap(j - 1, j);
                let (a, b) = self.finished.split_at_mut(j * tgt);
                a[(j - 1) * tgt..].swap_with_slice(&mut b[..tgt]);
                j -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The candidate list after offering `rows` (one per beam, scores `base[b] + lp`), either
    /// token by token through `offer` or row by row through `offer_row`.
    fn candidates(rows: &[Vec<f32>], base: &[f32], k: usize, by_row: bool) -> Vec<(u32, u32, u32)> {
        let vocab = rows[0].len();
        // Room for `2 · beams >= k` candidates, as the search plans it.
        let beams = rows.len().max(k);
        let mut buffer = vec![0.0f32; SearchParts::sizes(beams, vocab).total()];
        let mut st = State::new(&mut buffer, beams, vocab);
        let mut count = 0;
        for (b, row) in rows.iter().enumerate() {
            if by_row {
                st.offer_row(&mut count, k, base[b], b as u32, row);
            } else {
                for (token, &lp) in row.iter().enumerate() {
                    st.offer(&mut count, k, base[b] + lp, b as u32, token as u32);
                }
            }
        }
        (0..count)
            .map(|i| {
                (
                    st.cand_score[i].to_bits(),
                    st.cand_beam[i],
                    st.cand_token[i],
                )
            })
            .collect()
    }

    #[test]
    fn offering_a_row_keeps_what_offering_each_token_keeps() {
        // A small generator of rows with ties, NaN and -inf at awkward lengths.
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for vocab in [1, 2, 15, 16, 17, 33, 100, 517] {
            for k in [1, 2, 4, 10] {
                let rows: Vec<Vec<f32>> = (0..3)
                    .map(|_| {
                        (0..vocab)
                            .map(|_| match next() % 20 {
                                0 => f32::NAN,
                                1 => f32::NEG_INFINITY,
                                // Few distinct values: many ties.
                                r => -((r % 7) as f32) * 0.5,
                            })
                            .collect()
                    })
                    .collect();
                let base = [0.0, -0.5, -1.0];
                assert_eq!(
                    candidates(&rows, &base, k, true),
                    candidates(&rows, &base, k, false),
                    "vocab {vocab}, k {k}"
                );
            }
        }
    }
}
