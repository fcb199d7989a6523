//! Shared pieces of the tessel fuzz targets: ISA choice, value decoding (finite values and the
//! IEEE specials), exactly-sized buffers whose stride gaps hold canaries, and tolerance helpers.

use tessel_kernels::Isa;

pub use tessel_tests::{canary, dot_tolerance, is_canary};

/// One of the ISA levels this machine runs, chosen by `selector`.
pub fn isa(selector: u8) -> Isa {
    let levels: Vec<Isa> = Isa::supported().collect();
    levels[selector as usize % levels.len()]
}

/// The IEEE values kernels must survive: NaN, infinities, signed zeros, subnormals and the
/// extremes.
pub const SPECIALS: [f32; 10] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    1.0e-40,
    -1.4e-45,
    f32::MIN_POSITIVE,
    f32::MAX,
    -f32::MAX,
];

/// Turns fuzzer bytes into `f32` values: mostly finite values in `[-8, 8)` with 12 fractional
/// bits, and, when `specials` is set, one in eight from [`SPECIALS`].
pub struct Values<'a> {
    codes: &'a [u16],
    next: usize,
    specials: bool,
}

impl<'a> Values<'a> {
    /// A generator over `codes` (cycled; a fixed ramp when empty).
    pub fn new(codes: &'a [u16], specials: bool) -> Values<'a> {
        Values {
            codes,
            next: 0,
            specials,
        }
    }

    /// The next value.
    pub fn next_value(&mut self) -> f32 {
        let i = self.next;
        self.next += 1;
        let code = if self.codes.is_empty() {
            (i as u16).wrapping_mul(40503)
        } else {
            self.codes[i % self.codes.len()]
                .wrapping_add(((i / self.codes.len()) as u16).wrapping_mul(7919))
        };
        if self.specials && code % 8 == 7 {
            return SPECIALS[(code as usize / 8) % SPECIALS.len()];
        }
        (code as i16) as f32 / 4096.0
    }

    /// `n` values.
    pub fn take(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next_value()).collect()
    }
}

/// Elements a `rows × cols` view with row stride `stride` spans (0 when empty; saturating).
pub fn span(rows: usize, cols: usize, stride: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1).saturating_mul(stride).saturating_add(cols)
    }
}

/// A strided matrix in a buffer of exactly `len` elements (so AddressSanitizer sees any access
/// past it), canaries everywhere outside the view.
#[derive(Clone, Debug)]
pub struct Guarded {
    /// The buffer handed to the kernel.
    pub data: Vec<f32>,
    /// Rows of the view.
    pub rows: usize,
    /// Columns of the view.
    pub cols: usize,
    /// Row stride.
    pub stride: usize,
}

impl Guarded {
    /// A buffer of `len` canaries whose in-bounds view elements are `init(r, c)`.
    pub fn new(
        rows: usize,
        cols: usize,
        stride: usize,
        len: usize,
        mut init: impl FnMut(usize, usize) -> f32,
    ) -> Guarded {
        let mut data = vec![canary(); len];
        for r in 0..rows {
            for c in 0..cols {
                if let Some(x) = data.get_mut(r * stride + c) {
                    *x = init(r, c);
                }
            }
        }
        Guarded {
            data,
            rows,
            cols,
            stride,
        }
    }

    /// Whether `index` lies inside the view.
    pub fn in_view(&self, index: usize) -> bool {
        let (r, c) = match (
            index.checked_div(self.stride),
            index.checked_rem(self.stride),
        ) {
            (Some(r), Some(c)) => (r, c),
            _ => (0, index),
        };
        r < self.rows && c < self.cols
    }

    /// Element `(r, c)`.
    pub fn get(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.stride + c]
    }

    /// Panics when an element outside the view is no longer a canary.
    pub fn assert_gaps_intact(&self, what: &str) {
        for (i, &x) in self.data.iter().enumerate() {
            if !self.in_view(i) {
                assert!(
                    is_canary(x),
                    "{what}: element {i} outside the view was written: {x}"
                );
            }
        }
    }

    /// Panics unless every element has the same bits as in `before`.
    pub fn assert_unchanged(&self, before: &Guarded, what: &str) {
        for (i, (a, b)) in self.data.iter().zip(&before.data).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{what}: element {i} written on error"
            );
        }
    }
}

/// `needed` shortened by one when `shorten` is set and possible (a buffer the kernel must
/// refuse); returns the length and whether it was shortened.
pub fn maybe_short(needed: usize, shorten: bool) -> (usize, bool) {
    if shorten && needed > 0 {
        (needed - 1, true)
    } else {
        (needed, false)
    }
}

/// Compares `actual` with `expected` within `bound`, naming the case; NaN must match NaN and
/// infinities must match exactly.
pub fn assert_close(what: &str, actual: f32, expected: f64, bound: f64) {
    let ok = if expected.is_nan() {
        actual.is_nan()
    } else if expected.is_infinite() {
        actual as f64 == expected
    } else {
        (actual as f64 - expected).abs() <= bound
    };
    assert!(ok, "{what}: got {actual}, expected {expected} ± {bound}");
}

/// Whether every value is finite and below `1e15` in magnitude (where f32 arithmetic cannot
/// overflow in the fuzzed shapes, so the f64 reference is a meaningful oracle).
pub fn tame(values: &[f32]) -> bool {
    values.iter().all(|v| v.is_finite() && v.abs() < 1.0e15)
}

/// A tiny config (d_model 8, 2 heads, one layer each side, vocabularies of 11) in one of eight
/// variants toggling norm placement, activation, positions, shared/tied embeddings and biases:
/// small enough that a model builds in microseconds, wide enough to cross every code path.
pub fn tiny_config(variant: u8) -> tessel_model::Config {
    use tessel_model::config::{Sizes, SpecialIds};
    use tessel_model::{Biases, Config, FfnActivation, NormPlacement, Positions};
    let bit = |i: u8| variant & (1 << i) != 0;
    let sizes = Sizes {
        d_model: 8,
        heads: 2,
        encoder_layers: 1,
        decoder_layers: 1,
        d_ff: 12,
        src_vocab: 11,
        tgt_vocab: 11,
        max_src_len: 7,
        max_tgt_len: 6,
        max_beam: 3,
    };
    let ids = SpecialIds {
        bos: 1,
        eos: 2,
        pad: 0,
    };
    Config {
        share_embeddings: bit(2),
        tie_output: bit(2),
        norm: if bit(0) {
            NormPlacement::Pre
        } else {
            NormPlacement::Post
        },
        final_norm: !bit(1),
        activation: if bit(1) {
            FfnActivation::Gelu
        } else {
            FfnActivation::Relu
        },
        positions: if bit(0) {
            Positions::Learned
        } else {
            Positions::Sinusoidal
        },
        biases: Biases {
            attention_in: !bit(1),
            ffn: !bit(2),
            generator: !bit(0),
            ..Biases::default()
        },
        ..Config::new(sizes, ids)
    }
}

/// The eight [`tiny_config`] models, built once, each with its linear layers stored as one
/// `WeightType` in turn.
pub fn tiny_models() -> &'static [tessel_model::Model<'static>] {
    use std::sync::OnceLock;
    use tessel_model::{LoadOptions, Model, WeightType};
    static MODELS: OnceLock<Vec<Model<'static>>> = OnceLock::new();
    MODELS.get_or_init(|| {
        (0..8)
            .map(|v| {
                let weights = WeightType::ALL[v as usize % WeightType::ALL.len()];
                let options = LoadOptions::weights(weights);
                Model::random_with(tiny_config(v), 7 + v as u64, &options).expect("tiny model")
            })
            .collect()
    })
}

/// Token ids from fuzz bytes: mostly in the tiny vocabulary of 11, sometimes just past it or
/// far beyond (up to `u32::MAX`).
pub fn token_ids(bytes: &[u8]) -> Vec<u32> {
    bytes
        .iter()
        .map(|&b| match b {
            250..=255 => u32::MAX - (b - 250) as u32,
            _ => b as u32 % 13,
        })
        .collect()
}
