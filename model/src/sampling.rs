//! Random sampling of one token from a step's logits, without allocating.
//!
//! Given a row of logits `l` (after the logits processors ran; `-inf` marks a removed token)
//! and [`Sampling`] `{ temperature T, top_k, top_p, seed }`:
//!
//! 1. **Top-k** (`top_k > 0`): only tokens whose logit is at least the `top_k`-th largest
//!    remain (on ties at that value, all of them: possibly more than `top_k`).
//! 2. **Top-p** (`top_p < 1`): of those, the smallest set of the most likely tokens whose
//!    tempered probability mass reaches `top_p` (again whole ties at the cut).
//! 3. The token is drawn with probability `exp((l_i − max)/T) / Σ exp((l_j − max)/T)` over the
//!    kept tokens: one uniform `u ∈ [0, 1)` from the session's PRNG, scaled by the total,
//!    walked along the cumulative sum (accumulated in `f64`, so rounding shifts the boundary
//!    between two tokens by at most ~1e-16 of the total mass).
//!
//! The cuts of steps 1 and 2 are found by bisection over the logit values (their `f32` bit
//! order, 32 halvings, each one pass over the row), so no sorted copy of the vocabulary is
//! needed. `T = 0` is greedy (argmax, the first on ties), as openai-whisper treats it.
//!
//! The generator is ChaCha8 ([`rand_chacha`]) seeded from `seed` at the start of every search:
//! the same seed, logits and options give the same tokens on every machine and ISA level
//! (given bit-identical logits).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::ops::argmax;
use tessel_kernels::Isa;

/// Sampling instead of argmax in a one-beam search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Divides the logits before the softmax; 0 is greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep only the most likely tokens whose mass reaches `top_p` (1: all).
    pub top_p: f32,
    /// Seed of the generator, set at the start of each search.
    pub seed: u64,
}

impl Sampling {
    /// Plain sampling at `temperature` (no top-k or top-p cut).
    pub fn temperature(temperature: f32, seed: u64) -> Sampling {
        Sampling {
            temperature,
            top_k: 0,
            top_p: 1.0,
            seed,
        }
    }

    /// Why these options cannot be used, if they cannot.
    pub fn check(&self) -> Result<(), &'static str> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err("sampling temperature must be finite and not negative");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err("top_p must be in (0, 1]");
        }
        Ok(())
    }

    /// The generator a search starts with.
    pub fn rng(&self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed)
    }
}

/// Maps an `f32` to a `u32` whose unsigned order is the float's total order (NaN excluded).
fn ordered(v: f32) -> u32 {
    let bits = v.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

fn from_ordered(key: u32) -> f32 {
    if key >> 31 == 1 {
        f32::from_bits(key & !(1 << 31))
    } else {
        f32::from_bits(!key)
    }
}

/// The largest value `τ` (among `f32`s, found by bisection on their order) such that
/// `keep(τ)` holds, where `keep` is monotone (true for small `τ`, false for large).
fn largest_threshold(mut keep: impl FnMut(f32) -> bool) -> f32 {
    let (mut lo, mut hi) = (ordered(f32::NEG_INFINITY), ordered(f32::INFINITY));
    // Invariant: keep(from_ordered(lo)), and every key above hi fails.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if keep(from_ordered(mid)) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    from_ordered(lo)
}

/// The smallest logit a token needs to stay after the top-k and top-p cuts (`-inf` keeps
/// every finite one).
fn cut(row: &[f32], max: f32, options: &Sampling) -> f32 {
    let inv_t = 1.0 / f64::from(options.temperature);
    let weight = |v: f32| libm::exp((f64::from(v) - f64::from(max)) * inv_t);
    let mut floor = f32::NEG_INFINITY;
    if options.top_k > 0 {
        // The largest τ with at least k values ≥ τ is the k-th largest value.
        let k = options.top_k;
        if row.iter().filter(|v| **v > f32::NEG_INFINITY).count() > k {
            floor = largest_threshold(|t| row.iter().filter(|&&v| v >= t).count() >= k);
        }
    }
    if options.top_p < 1.0 {
        let kept = |t: f32| -> f64 { row.iter().filter(|&&v| v >= t).map(|&v| weight(v)).sum() };
        let total = kept(floor);
        let want = f64::from(options.top_p) * total;
        // The largest τ whose tokens (v ≥ τ) still hold `top_p` of the mass.
        let nucleus = largest_threshold(|t| t <= floor || kept(t) >= want);
        floor = floor.max(nucleus);
    }
    floor
}

/// Draws one token from `row` as the module describes; `None` when every logit is `-inf` or
/// NaN. The row is not changed.
pub fn sample(isa: Isa, row: &[f32], options: &Sampling, rng: &mut impl Rng) -> Option<u32> {
    let (best, max) = argmax(isa, row)?;
    if max == f32::NEG_INFINITY {
        return None;
    }
    if options.temperature == 0.0 || max == f32::INFINITY {
        return Some(best as u32);
    }
    let floor = cut(row, max, options);
    let inv_t = 1.0 / f64::from(options.temperature);
    let weight = |v: f32| libm::exp((f64::from(v) - f64::from(max)) * inv_t);
    let live = |v: f32| v >= floor && v > f32::NEG_INFINITY;
    let total: f64 = row.iter().filter(|&&v| live(v)).map(|&v| weight(v)).sum();
    let target = rng.gen::<f64>() * total;
    let mut sum = 0.0;
    let mut last = best;
    for (i, &v) in row.iter().enumerate() {
        if live(v) {
            sum += weight(v);
            last = i;
            if sum > target {
                return Some(i as u32);
            }
        }
    }
    // Rounding left the target past the sum: the last kept token.
    Some(last as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_keys_keep_the_float_order() {
        let values = [
            f32::NEG_INFINITY,
            -3.5,
            -0.0,
            0.0,
            1e-30,
            2.0,
            f32::INFINITY,
        ];
        for pair in values.windows(2) {
            assert!(ordered(pair[0]) <= ordered(pair[1]), "{pair:?}");
        }
        for v in values {
            assert_eq!(from_ordered(ordered(v)).to_bits(), v.to_bits());
        }
    }
}
