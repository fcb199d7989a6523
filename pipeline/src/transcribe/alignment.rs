//! Word alignment of one window's text tokens: CTranslate2's `Whisper.align` (what
//! faster-whisper's `find_alignment` calls) after the model's forced pass.
//!
//! The forced pass (`Session::align`) runs `sot_sequence + <|notimestamps|> + text + <|endoftext|>`
//! over the window's encoder output and reports, for each alignment head `(layer, head)`, the
//! cross-attention probabilities of every row over the first `frames / 2` encoder positions
//! (the softmax over exactly those positions, as CTranslate2 takes it after cutting the scores),
//! and every row's logits. From them, as CTranslate2 computes them in `f32`:
//!
//! 1. **Normalisation** across tokens: for each head and frame, over every row of the pass,
//!    `(x − mean) / sqrt(max(mean(x²) − mean², 0))` (its `LayerNorm` on axis −2 without
//!    ε, scale or shift; sums taken in row order).
//! 2. **Median filter** of width 7 along the frames of each row, the window reflected at both
//!    ends (`|j + k|`, and `2·depth − 2 − i` past the end); rows of at most 3 frames are left as
//!    they are.
//! 3. **Mean over heads** (a sum in head order, divided by the count).
//! 4. **DTW** on the negated matrix of rows `sot_len ..= sot_len + text_len` (the rows whose
//!    queries predict each text token and `<|endoftext|>`): `cost[i][j] = −x[i−1][j−1] +
//!    min(diagonal, up, left)`, the diagonal taken only when strictly below both others, then
//!    up only when strictly below both, else left; the path traced back from the last cell
//!    with the first row going left and the first column going up.
//! 5. **Text-token probabilities**: at row `sot_len + t`, `softmax(logits[..eot])[text[t]]`.
//!
//! The path is a list of `(token index, time index)` pairs (time in encoder positions, 20 ms
//! each) from `(0, 0)` to `(text_len, frames/2 − 1)`.
//!
//! Every buffer is sized once ([`Aligner::new`]) for the longest pass and the most frames; an
//! alignment then allocates nothing.

/// Width of the median filter faster-whisper asks for.
pub const MEDIAN_FILTER_WIDTH: usize = 7;

/// The buffers of an alignment, sized once for the largest.
#[derive(Clone, Debug, Default)]
pub struct Aligner {
    /// Normalised, then filtered, probabilities of one head: `rows × frames`.
    normed: Vec<f32>,
    /// The mean over heads of the text rows: `(text_len + 1) × frames`.
    matrix: Vec<f32>,
    /// DTW costs, `(n + 1) × (m + 1)`.
    cost: Vec<f32>,
    /// DTW steps, `(n + 1) × (m + 1)`: 0 diagonal, 1 up, 2 left.
    trace: Vec<u8>,
    /// The path, `(token, time)`.
    path: Vec<(usize, usize)>,
    /// A row of the median filter's window.
    row: Vec<f32>,
    /// Each frame's mean over the rows (normalisation).
    mean: Vec<f32>,
    /// Each frame's reciprocal standard deviation over the rows.
    rstd: Vec<f32>,
}

/// One alignment: the DTW path and the text tokens' probabilities.
#[derive(Clone, Copy, Debug)]
pub struct Aligned<'a> {
    /// `(token index, time index)` pairs, in order.
    pub path: &'a [(usize, usize)],
}

impl Aligner {
    /// Buffers for passes of up to `rows` rows over up to `frames` encoder positions.
    pub fn new(rows: usize, frames: usize) -> Aligner {
        let cells = (rows + 1) * (frames + 1);
        Aligner {
            normed: Vec::with_capacity(rows * frames),
            matrix: Vec::with_capacity(rows * frames),
            cost: Vec::with_capacity(cells),
            trace: Vec::with_capacity(cells),
            path: Vec::with_capacity(rows + frames),
            row: Vec::with_capacity(frames),
            mean: Vec::with_capacity(frames),
            rstd: Vec::with_capacity(frames),
        }
    }

    /// Aligns `text_len` text tokens from the forced pass's probabilities `probs`
    /// (`heads × rows × frames`, as `Session::align` returns them) whose text rows start at
    /// `sot_len` (the length of the start sequence): steps 1 to 4 of the module. Empty when
    /// there are no frames.
    pub fn align(
        &mut self,
        probs: &[f32],
        (heads, rows, frames): (usize, usize, usize),
        (sot_len, text_len): (usize, usize),
    ) -> Aligned<'_> {
        self.path.clear();
        let n = text_len + 1;
        if frames == 0 || heads == 0 || sot_len + n > rows || probs.len() < heads * rows * frames {
            return Aligned { path: &self.path };
        }
        self.matrix.clear();
        self.matrix.resize(n * frames, 0.0);
        for head in probs.chunks_exact(rows * frames).take(heads) {
            self.normed.clear();
            self.normed.extend_from_slice(head);
            let columns = (&mut self.mean, &mut self.rstd);
            normalise_columns(&mut self.normed, (rows, frames), columns);
            for (t, acc) in self.matrix.chunks_exact_mut(frames).enumerate() {
                let at = (sot_len + t) * frames;
                median_filter(
                    &self.normed[at..at + frames],
                    MEDIAN_FILTER_WIDTH,
                    &mut self.row,
                );
                for (a, &v) in acc.iter_mut().zip(&self.row) {
                    *a += v;
                }
            }
        }
        let count = heads as f32;
        for v in &mut self.matrix {
            *v /= count;
        }
        negative_dtw(
            &self.matrix,
            (n, frames),
            (&mut self.cost, &mut self.trace),
            &mut self.path,
        );
        Aligned { path: &self.path }
    }
}

impl Aligner {
    /// How far the last alignment's path was from another: over the cells the path went
    /// through (past the first row and column), the smallest gap between the cost of the step
    /// taken and that of the cheapest other, relative to the larger in magnitude; exact ties
    /// (which the rule settles the same way in any arithmetic) are skipped. `None` without
    /// such a cell.
    pub fn decision_margin(&self) -> Option<f32> {
        let width = self.path.last().map(|&(_, j)| j + 2)?;
        let cost = |i: usize, j: usize| self.cost[i * width + j];
        let mut margin: Option<f32> = None;
        for &(i, j) in &self.path {
            let (i, j) = (i + 1, j + 1);
            if i < 2 || j < 2 {
                continue;
            }
            let c = [cost(i - 1, j - 1), cost(i - 1, j), cost(i, j - 1)];
            let taken = usize::from(self.trace[i * width + j]).min(2);
            for (k, &other) in c.iter().enumerate() {
                let gap = (other - c[taken]).abs();
                if k != taken && gap > 0.0 && gap.is_finite() {
                    let relative = gap / c[taken].abs().max(other.abs());
                    margin = Some(margin.map_or(relative, |m| m.min(relative)));
                }
            }
        }
        margin
    }

    /// The first `len` steps of the last alignment's path (all of it for its length; none
    /// when nothing was aligned since).
    pub fn path(&self, len: usize) -> Aligned<'_> {
        Aligned {
            path: &self.path[..len.min(self.path.len())],
        }
    }
}

/// Step 1: each column of the `rows × frames` matrix `x` normalised over its rows, read row
/// by row (each column's sums still taken in row order); `mean` and `rstd` are the columns'
/// figures (cleared first).
pub fn normalise_columns(
    x: &mut [f32],
    (rows, frames): (usize, usize),
    (mean, rstd): (&mut Vec<f32>, &mut Vec<f32>),
) {
    mean.clear();
    mean.resize(frames, 0.0);
    rstd.clear();
    rstd.resize(frames, 0.0);
    for row in x.chunks_exact(frames.max(1)).take(rows) {
        for ((sum, squares), &v) in mean.iter_mut().zip(rstd.iter_mut()).zip(row) {
            *sum += v;
            *squares += v * v;
        }
    }
    for (sum, squares) in mean.iter_mut().zip(rstd.iter_mut()) {
        let m = *sum / rows as f32;
        let variance = (*squares / rows as f32 - m * m).max(0.0);
        *sum = m;
        *squares = 1.0 / variance.sqrt();
    }
    for row in x.chunks_exact_mut(frames.max(1)).take(rows) {
        for ((v, &m), &r) in row.iter_mut().zip(mean.iter()).zip(rstd.iter()) {
            *v = (*v - m) * r;
        }
    }
}

/// Step 2: the median filter of odd `width` over `input`, into `out` (cleared first), with
/// reflected ends; an input of at most `width / 2` values is copied.
pub fn median_filter(input: &[f32], width: usize, out: &mut Vec<f32>) {
    out.clear();
    let depth = input.len() as isize;
    let rank = (width / 2) as isize;
    if depth <= rank {
        out.extend_from_slice(input);
        return;
    }
    let mut window = [0.0f32; 64];
    let window = &mut window[..width.min(64)];
    for j in 0..depth {
        for (slot, k) in window.iter_mut().zip(-rank..=rank) {
            let mut read = (j + k).abs();
            if read >= depth {
                read = depth - (read - depth) - 2;
            }
            *slot = input[read.clamp(0, depth - 1) as usize];
        }
        window.sort_unstable_by(f32::total_cmp);
        out.push(window[rank as usize]);
    }
}

/// Step 4: the DTW path through the `n × m` matrix `x` (row-major) minimising the summed
/// `−x`, with CTranslate2's tie-breaking, into `path` (cleared first).
pub fn negative_dtw(
    x: &[f32],
    (n, m): (usize, usize),
    (cost, trace): (&mut Vec<f32>, &mut Vec<u8>),
    path: &mut Vec<(usize, usize)>,
) {
    path.clear();
    let width = m + 1;
    cost.clear();
    cost.resize((n + 1) * width, f32::INFINITY);
    trace.clear();
    trace.resize((n + 1) * width, u8::MAX);
    cost[0] = 0.0;
    for j in 1..=m {
        for i in 1..=n {
            let c0 = cost[(i - 1) * width + j - 1];
            let c1 = cost[(i - 1) * width + j];
            let c2 = cost[i * width + j - 1];
            let (c, t) = if c0 < c1 && c0 < c2 {
                (c0, 0)
            } else if c1 < c0 && c1 < c2 {
                (c1, 1)
            } else {
                (c2, 2)
            };
            cost[i * width + j] = -x[(i - 1) * m + (j - 1)] + c;
            trace[i * width + j] = t;
        }
    }
    trace[..=m].fill(2);
    for k in 0..=n {
        trace[k * width] = 1;
    }
    let (mut i, mut j) = (n, m);
    while i > 0 || j > 0 {
        // The first row and column step towards (0, 0), so `i` and `j` are positive where
        // they are decremented; a pair below 0 is never pushed past that cell.
        path.push((i.wrapping_sub(1), j.wrapping_sub(1)));
        match trace[i * width + j] {
            0 => {
                i -= 1;
                j -= 1;
            }
            1 => i -= 1,
            _ => j -= 1,
        }
    }
    path.reverse();
}

/// Step 5: `softmax(logits[..eot])[token]` in `f32`; 0 for a token at or past `eot`.
pub fn text_token_probability(logits: &[f32], eot: usize, token: u32) -> f32 {
    let text = &logits[..eot.min(logits.len())];
    let Some(&x) = text.get(token as usize) else {
        return 0.0;
    };
    let max = text.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let sum: f32 = text.iter().map(|&v| (v - max).exp()).sum();
    (x - max).exp() / sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_filter_reflects_at_both_ends() {
        let mut out = Vec::new();
        // width 3: [1, 5, 2, 8, 3] → reflected window at 0 is (5, 1, 5) → 5; at 4 (8, 3, 8) → 8.
        median_filter(&[1.0, 5.0, 2.0, 8.0, 3.0], 3, &mut out);
        assert_eq!(out, [5.0, 2.0, 5.0, 3.0, 8.0]);
        // width 7 over 5 values: the reflection reaches back past the start and the end.
        // j = 0 reads 3 2 1 0 1 2 3 → (8, 2, 5, 1, 5, 2, 8) → 5.
        median_filter(&[1.0, 5.0, 2.0, 8.0, 3.0], 7, &mut out);
        assert_eq!(out[0], 5.0);
        // At most width / 2 values are copied.
        median_filter(&[3.0, 1.0, 2.0], 7, &mut out);
        assert_eq!(out, [3.0, 1.0, 2.0]);
    }

    #[test]
    fn dtw_follows_the_largest_values_and_breaks_ties_left() {
        let (mut cost, mut trace, mut path) = (Vec::new(), Vec::new(), Vec::new());
        // Two tokens over four frames, token 0 strongest on frames 0-1: the cells (1, 1)
        // (diagonal -1, up -2, left -1) step up, (2, 3) (all -2) ties and goes left.
        let x = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        negative_dtw(&x, (2, 4), (&mut cost, &mut trace), &mut path);
        assert_eq!(path, [(0, 0), (0, 1), (1, 1), (1, 2), (1, 3)]);
        // An identity: the diagonal is never strictly cheaper than both neighbours after the
        // first cell, so the path is a staircase of ties taken left and steps up.
        let x = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        negative_dtw(&x, (3, 3), (&mut cost, &mut trace), &mut path);
        assert_eq!(path, [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2)]);
        // All equal: from the last cell every tie goes left until the first column's step up.
        let x = [0.0; 6];
        negative_dtw(&x, (2, 3), (&mut cost, &mut trace), &mut path);
        assert_eq!(path, [(0, 0), (1, 0), (1, 1), (1, 2)]);
        negative_dtw(&[], (0, 0), (&mut cost, &mut trace), &mut path);
        assert!(path.is_empty());
    }

    #[test]
    fn columns_are_normalised_over_rows() {
        let mut x = [1.0, 2.0, 3.0, 6.0];
        normalise_columns(&mut x, (2, 2), (&mut Vec::new(), &mut Vec::new()));
        assert_eq!(x, [-1.0, -1.0, 1.0, 1.0]);
    }

    #[test]
    fn text_probabilities_leave_out_the_special_tokens() {
        let logits = [0.0, 3f32.ln(), 100.0];
        let p = text_token_probability(&logits, 2, 1);
        assert!((p - 0.75).abs() < 1e-6);
        assert_eq!(text_token_probability(&logits, 2, 2), 0.0);
    }
}
