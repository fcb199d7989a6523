//! Helpers shared by every tessel test: the ISA levels to run, tolerances that scale with the
//! reduction length, NaN-canary buffers that catch out-of-bounds writes and reads of
//! uninitialised output, and proptest strategies for awkward shapes.

pub mod audio;
pub mod counting;
pub mod ct2_bin;
pub mod golden;
pub mod published;
pub mod published_ct2;
pub mod runners;

use proptest::prelude::*;
use tessel_kernels::Isa;

/// The levels a test should run at: every level this machine supports, or only the one named
/// by `TESSEL_ISA` when it is set (an unsupported or unknown name fails loudly).
pub fn isa_levels() -> Vec<Isa> {
    match std::env::var(tessel_model::isa_env::ISA_ENV_VAR) {
        Ok(name) if !name.trim().is_empty() => match Isa::from_name(&name) {
            Ok(isa) => vec![isa],
            Err(err) => panic!("TESSEL_ISA={name}: {err}"),
        },
        _ => Isa::supported().collect(),
    }
}

/// Runs `check` once per level of [`isa_levels`].
pub fn for_each_isa(mut check: impl FnMut(Isa)) {
    for isa in isa_levels() {
        check(isa);
    }
}

/// The bit pattern of canary values: a quiet NaN no arithmetic produces by itself.
pub const CANARY_BITS: u32 = 0x7FC0_CA7E;

/// A canary NaN.
pub fn canary() -> f32 {
    f32::from_bits(CANARY_BITS)
}

/// Whether `value` is exactly the canary.
pub fn is_canary(value: f32) -> bool {
    value.to_bits() == CANARY_BITS
}

/// Bound on the error of a length-`k` f32 dot product whose terms have absolute sum
/// `abs_sum`, computed in any order with or without FMA: `(k + 2) · ε · abs_sum`, with a
/// safety factor of 2 and a tiny absolute floor for results that cancel to zero.
pub fn dot_tolerance(k: usize, abs_sum: f64) -> f64 {
    2.0 * (k as f64 + 2.0) * f32::EPSILON as f64 * abs_sum + 1e-30
}

/// Asserts `|actual - expected| <= bound` element by element (NaN and infinities must match
/// exactly), naming the first offender.
pub fn assert_close(
    what: &str,
    actual: impl IntoIterator<Item = f32>,
    expected: impl IntoIterator<Item = f64>,
    bound: impl Fn(usize) -> f64,
) {
    let mut count = 0;
    for (i, (a, e)) in actual.into_iter().zip(expected).enumerate() {
        count += 1;
        let ok = if e.is_nan() {
            a.is_nan()
        } else if e.is_infinite() {
            a as f64 == e
        } else {
            a.is_finite() && (a as f64 - e).abs() <= bound(i)
        };
        assert!(
            ok,
            "{what}: element {i}: got {a:e}, expected {e:e} (bound {:e})",
            bound(i)
        );
    }
    let _ = count;
}

/// A strided `rows × cols` output surrounded by canaries: before and after the view and in the
/// gap of each row's stride. The view itself starts filled with canaries too, so a kernel that
/// reads its output before writing it produces NaN that the comparison catches.
#[derive(Clone, Debug)]
pub struct CanaryMatrix {
    buffer: Vec<f32>,
    rows: usize,
    cols: usize,
    stride: usize,
}

/// Canaries placed before and after every view.
pub const CANARY_PAD: usize = 19;

impl CanaryMatrix {
    /// A view of `rows × cols` with row stride `stride >= cols`.
    pub fn new(rows: usize, cols: usize, stride: usize) -> CanaryMatrix {
        assert!(stride >= cols || rows <= 1);
        let view = if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * stride + cols
        };
        CanaryMatrix {
            buffer: vec![canary(); view + 2 * CANARY_PAD],
            rows,
            cols,
            stride,
        }
    }

    /// A view whose elements start as `init(row, col)` (for inputs that are also outputs, such
    /// as a residual or an accumulator); padding and gaps stay canaries.
    pub fn filled(
        rows: usize,
        cols: usize,
        stride: usize,
        mut init: impl FnMut(usize, usize) -> f32,
    ) -> CanaryMatrix {
        let mut m = CanaryMatrix::new(rows, cols, stride);
        for r in 0..rows {
            for c in 0..cols {
                m.buffer[CANARY_PAD + r * stride + c] = init(r, c);
            }
        }
        m
    }

    /// The slice to hand to the kernel: exactly the strided view's span.
    pub fn view_mut(&mut self) -> &mut [f32] {
        let end = self.buffer.len() - CANARY_PAD;
        &mut self.buffer[CANARY_PAD..end]
    }

    /// The view as the kernel sees it, read-only.
    pub fn view(&self) -> &[f32] {
        &self.buffer[CANARY_PAD..self.buffer.len() - CANARY_PAD]
    }

    /// Row stride.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Element `(row, col)` of the view.
    pub fn get(&self, row: usize, col: usize) -> f32 {
        self.buffer[CANARY_PAD + row * self.stride + col]
    }

    /// The view's elements in row-major order.
    pub fn elements(&self) -> impl Iterator<Item = f32> + '_ {
        (0..self.rows).flat_map(move |r| (0..self.cols).map(move |c| self.get(r, c)))
    }

    /// Panics unless every element outside the view is still a canary.
    pub fn assert_padding_intact(&self, what: &str) {
        let in_view = |i: usize| {
            if i < CANARY_PAD || self.rows == 0 || self.cols == 0 {
                return false;
            }
            let offset = i - CANARY_PAD;
            let (row, col) = (offset / self.stride.max(1), offset % self.stride.max(1));
            row < self.rows && col < self.cols
        };
        for (i, v) in self.buffer.iter().enumerate() {
            if !in_view(i) {
                assert!(
                    is_canary(*v),
                    "{what}: element {i} outside the view was overwritten with {v:e}"
                );
            }
        }
    }
}

/// Small primes used as awkward dimensions: no tile width divides them.
pub const PRIMES: [usize; 12] = [2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 257, 509];

/// A dimension up to `max` that is often 0, 1, a prime or one off a power of two, and
/// otherwise uniform.
pub fn awkward_dim(max: usize) -> BoxedStrategy<usize> {
    let specials: Vec<usize> = [0, 1]
        .into_iter()
        .chain(PRIMES)
        .chain([15, 17, 33, 63, 65, 95, 129, 255])
        .filter(|&d| d <= max)
        .collect();
    prop_oneof![
        1 => proptest::sample::select(specials),
        2 => 0..=max,
    ]
    .boxed()
}

/// Number of proptest cases: `PROPTEST_CASES` when set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_matrix_detects_writes_outside_the_view() {
        let mut m = CanaryMatrix::new(3, 4, 6);
        for r in 0..3 {
            for c in 0..4 {
                m.view_mut()[r * 6 + c] = 1.0;
            }
        }
        m.assert_padding_intact("clean");
        assert_eq!(m.elements().count(), 12);
        let gap = m.clone();
        let result = std::panic::catch_unwind(move || {
            let mut gap = gap;
            gap.view_mut()[4] = 0.0;
            gap.assert_padding_intact("gap");
        });
        assert!(result.is_err(), "a write into a stride gap must be caught");
    }

    #[test]
    fn tolerance_grows_with_k() {
        assert!(dot_tolerance(1000, 1.0) > dot_tolerance(10, 1.0));
        assert!(dot_tolerance(0, 0.0) > 0.0);
    }

    #[test]
    fn levels_include_scalar_unless_forced() {
        let levels = isa_levels();
        assert!(!levels.is_empty());
        if std::env::var("TESSEL_ISA").map_or(true, |v| v.trim().is_empty()) {
            assert_eq!(levels[0], Isa::scalar());
        }
    }
}
