//! Flash attention against the f64 reference at every ISA level: random shapes (0, 1, primes,
//! non-multiples of every tile), every mask kind and their combinations, random strides, NaN
//! canaries around the output and NaN-filled scratch; plus regressions for huge scores, fully
//! masked rows, `-inf` biases and argument validation.

use half::f16;
use proptest::prelude::*;
use tessel_kernels::attention::{
    attention, attention_parallel, attention_parallel_scratch, attention_parallel_scratch_kv,
    attention_scratch, attention_scratch_kv, attention_split, default_scale, AttentionShape, Bias,
    BiasLayout, Mask, SideBias, Split, MIN_TASK_WORK,
};
use tessel_kernels::attention::{per_unit, UnitCall};
use tessel_kernels::gemm::Parallel;
use tessel_kernels::math::EXP_MAX_RELATIVE_ERROR;
use tessel_kernels::reference::attention as reference;
use tessel_kernels::{Isa, KernelError};
use tessel_kernels::{View, ViewMut};
use tessel_tests::runners::{Faulty, Reversed, Threads};
use tessel_tests::{awkward_dim, canary, cases, dot_tolerance, for_each_isa, CanaryMatrix};

/// How the bias of a case is built.
#[derive(Clone, Copy, Debug)]
enum BiasKind {
    /// One matrix for all heads.
    Shared,
    /// One matrix per head.
    PerHead,
    /// One relative-position (Toeplitz) table for all heads.
    Toeplitz,
    /// One relative-position table per head.
    ToeplitzPerHead,
}

/// LongT5's transient-global layout: the `global_keys` keys are side keys, one per block of
/// `block_size` queries, with their own bias by block distance, and the queries' own keys
/// follow them (`local_origin = global_keys`).
#[derive(Clone, Copy, Debug)]
struct Transient {
    block_size: usize,
    /// One side bias table per head (else one shared).
    per_head: bool,
}

/// One attention call: shape, padding of every stride, mask, scale and the data seed.
#[derive(Clone, Debug)]
struct Case {
    shape: AttentionShape,
    pads: [usize; 5],
    causal_offset: Option<usize>,
    key_len: Option<usize>,
    window: Option<usize>,
    radius: Option<usize>,
    global_keys: usize,
    transient: Option<Transient>,
    bias: Option<BiasKind>,
    /// One in this many bias entries is `-inf` (0: none).
    neg_inf_every: usize,
    scale: Option<f32>,
    magnitude: f32,
    seed: u64,
}

/// Deterministic values in `[-magnitude, magnitude]` (SplitMix64).
fn values(seed: u64, n: usize, magnitude: f32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * magnitude
        })
        .collect()
}

fn strided_len(rows: usize, width: usize, stride: usize) -> usize {
    if rows == 0 || width == 0 {
        0
    } else {
        (rows - 1) * stride + width
    }
}

/// The inputs of a case, built once and shared by the reference and the kernel.
struct Inputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    bias: Vec<f32>,
    /// The side bias of a transient-global case, and its head stride.
    side: (Vec<f32>, usize),
    strides: [usize; 5],
    head_stride: usize,
    /// Rows of Q, K and V.
    rows: [usize; 3],
    /// `heads × d_head`.
    width: usize,
}

impl Inputs {
    /// Q, K or V (`which` = 0, 1, 2) as the kernel takes it.
    fn operand(&self, which: usize) -> View<'_> {
        let data = [&self.q, &self.k, &self.v][which];
        View::new(data, self.rows[which], self.width, self.strides[which]).unwrap()
    }
}

impl Case {
    fn inputs(&self) -> Inputs {
        let s = &self.shape;
        let width = s.heads * s.d_head;
        let strides = [
            width + self.pads[0],
            width + self.pads[1],
            width + self.pads[2],
            width + self.pads[3],
            s.kv_len + self.pads[4],
        ];
        // With side keys, the bias covers the other keys only.
        let bias_keys = match self.transient {
            Some(_) => s.kv_len - self.global_keys,
            None => s.kv_len,
        };
        let per_head = strided_len(s.q_len, bias_keys, strides[4]);
        let table = if s.q_len == 0 || bias_keys == 0 {
            0
        } else {
            s.q_len + bias_keys - 1
        };
        let side = match self.transient {
            None => (Vec::new(), 0),
            Some(t) => {
                let entries = (2 * self.global_keys).saturating_sub(1);
                let stride = if t.per_head { entries + 1 } else { 0 };
                let len = stride * s.heads.saturating_sub(1) + entries;
                let mut side = values(self.seed ^ 5, len, 2.0);
                if self.neg_inf_every > 0 {
                    side.iter_mut()
                        .step_by(self.neg_inf_every + 1)
                        .for_each(|b| *b = f32::NEG_INFINITY);
                }
                (side, stride)
            }
        };
        let (head_stride, bias_len) = match self.bias {
            None => (0, 0),
            Some(BiasKind::Shared) => (0, per_head),
            Some(BiasKind::PerHead) => (per_head + 3, (per_head + 3) * s.heads),
            Some(BiasKind::Toeplitz) => (0, table),
            Some(BiasKind::ToeplitzPerHead) => (table + 2, (table + 2) * s.heads),
        };
        let mut bias = values(self.seed ^ 4, bias_len, 2.0);
        if self.neg_inf_every > 0 {
            for (n, b) in bias.iter_mut().enumerate() {
                if n % self.neg_inf_every == 0 {
                    *b = f32::NEG_INFINITY;
                }
            }
        }
        let m = self.magnitude;
        Inputs {
            q: values(self.seed, strided_len(s.q_len, width, strides[0]), m),
            k: values(self.seed ^ 1, strided_len(s.kv_len, width, strides[1]), m),
            v: values(self.seed ^ 2, strided_len(s.kv_len, width, strides[2]), 1.0),
            bias,
            side,
            strides,
            head_stride,
            rows: [s.q_len, s.kv_len, s.kv_len],
            width,
        }
    }

    fn mask<'a>(&self, inputs: &'a Inputs) -> Mask<'a> {
        Mask {
            causal_offset: self.causal_offset,
            key_len: self.key_len,
            window: self.window,
            radius: self.radius,
            global_keys: self.global_keys,
            local_origin: if self.transient.is_some() {
                self.global_keys
            } else {
                0
            },
            side_bias: self
                .transient
                .map(|t| SideBias::new(&inputs.side.0, inputs.side.1, t.block_size)),
            bias: self.bias.map(|kind| Bias {
                data: &inputs.bias,
                // Not read by a Toeplitz bias.
                row_stride: inputs.strides[4],
                head_stride: inputs.head_stride,
                layout: match kind {
                    BiasKind::Shared | BiasKind::PerHead => BiasLayout::Dense,
                    BiasKind::Toeplitz | BiasKind::ToeplitzPerHead => BiasLayout::Toeplitz,
                },
            }),
        }
    }
}

/// The exact result of a case (rounded to f32), rows of `heads × d_head`.
fn expected(case: &Case, inputs: &Inputs) -> Vec<f32> {
    let s = &case.shape;
    let width = s.heads * s.d_head;
    let mut out = vec![0.0; s.q_len * width];
    let mut acc = vec![0.0f64; s.d_head];
    reference::attention(
        s,
        inputs.operand(0),
        inputs.operand(1),
        inputs.operand(2),
        ViewMut::new(&mut out, s.q_len, width, width).unwrap(),
        &case.mask(inputs),
        case.scale,
        &mut acc,
    )
    .expect("reference accepts every generated case");
    out
}

/// Error bound of an output element: the scores are f32 dot products of length `d_head` (plus
/// the scale and bias roundings), each score error `δ` perturbs the normalised weights by at
/// most ~`4δ`; the exponentials add `2·EXP_MAX_RELATIVE_ERROR` and the f32 sums over keys and
/// rescales `(kv_len + d_head + 8)·ε`, all relative to `max |v|`. Safety factor 2.
fn bound(case: &Case, inputs: &Inputs) -> f64 {
    let s = &case.shape;
    let max_abs = |x: &[f32]| {
        x.iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, &v| m.max(v.abs() as f64))
    };
    let scale = case.scale.unwrap_or_else(|| default_scale(s.d_head)).abs() as f64;
    let score_abs_sum = scale * s.d_head as f64 * max_abs(&inputs.q) * max_abs(&inputs.k)
        + max_abs(&inputs.bias).max(max_abs(&inputs.side.0));
    let delta = dot_tolerance(s.d_head + 2, score_abs_sum);
    let eps = f32::EPSILON as f64;
    let relative =
        4.0 * delta + 2.0 * EXP_MAX_RELATIVE_ERROR as f64 + (s.kv_len + s.d_head + 8) as f64 * eps;
    2.0 * max_abs(&inputs.v) * relative + 1e-30
}

/// Runs the kernel on `case` at `isa` and compares with the reference.
fn check(isa: Isa, case: &Case) {
    let inputs = case.inputs();
    let want = expected(case, &inputs);
    let got = run(isa, case, &inputs);
    let tolerance = bound(case, &inputs);
    tessel_tests::assert_close(
        &format!("{isa} {case:?}"),
        got,
        want.iter().map(|&x| x as f64),
        |_| tolerance + f32::EPSILON as f64,
    );
}

const D_HEADS: [usize; 6] = [1, 7, 32, 64, 80, 128];

fn case_strategy(max_q: usize, max_kv: usize) -> impl Strategy<Value = Case> {
    case_strategy_with(awkward_dim(max_q), awkward_dim(max_kv), 1..=3)
}

/// Key counts of the beam cases: 0, 1, primes, around the decode path's 128-key blocks and
/// Whisper's 1500 encoder positions, or any up to 1600.
fn beam_keys() -> BoxedStrategy<usize> {
    prop_oneof![
        1 => proptest::sample::select(vec![0, 1, 2, 13, 61, 64, 127, 128, 129, 1499, 1500, 1501]),
        1 => 0usize..=1600,
    ]
    .boxed()
}

fn case_strategy_with(
    q_lens: impl Strategy<Value = usize>,
    kv_lens: impl Strategy<Value = usize>,
    heads: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Case> {
    (
        (heads, proptest::sample::select(D_HEADS.to_vec())),
        (q_lens, kv_lens),
        proptest::array::uniform5(prop_oneof![3 => Just(0usize), 1 => 1usize..9]),
        (any::<bool>(), any::<bool>(), 0usize..5, any::<u64>()),
        (
            any::<bool>(),
            0usize..4,
            any::<bool>(),
            0usize..5,
            0usize..5,
        ),
    )
        .prop_map(
            |((heads, d_head), (q_len, kv_len), pads, (causal, padded, bias, seed), flags)| {
                let (windowed, neg_inf, custom_scale, local, global) = flags;
                let r = seed >> 8;
                // Decoder-style offsets (queries at the end of the cache) most of the time.
                let causal_offset = causal.then(|| {
                    if r % 3 == 0 {
                        (r as usize / 3) % 300
                    } else {
                        kv_len.saturating_sub(q_len)
                    }
                });
                let window = (causal && windowed).then_some((r as usize / 7) % 70);
                // A symmetric radius (without a causal mask): 0 to 2, up to 69, or at least
                // kv_len (every key).
                let radius = match local {
                    _ if causal => None,
                    0 | 1 => None,
                    2 => Some((r as usize / 13) % 3),
                    3 => Some((r as usize / 13) % 70),
                    _ => Some(kv_len + (r as usize / 17) % 3),
                };
                // Global keys: none, one, a few, or any number up to kv_len (beyond key_len,
                // inside or past the queries' own ranges).
                let global_keys = match global {
                    0 | 1 => 0,
                    2 => 1.min(kv_len),
                    3 => ((r as usize / 19) % 9).min(kv_len),
                    _ => (r as usize / 19) % (kv_len + 1),
                };
                Case {
                    shape: AttentionShape {
                        heads,
                        d_head,
                        q_len,
                        kv_len,
                    },
                    pads,
                    causal_offset,
                    key_len: padded.then(|| (r as usize / 11) % (kv_len + 1)),
                    window,
                    radius,
                    global_keys,
                    transient: None,
                    bias: match bias {
                        0 => None,
                        1 => Some(BiasKind::Shared),
                        2 => Some(BiasKind::PerHead),
                        3 => Some(BiasKind::Toeplitz),
                        _ => Some(BiasKind::ToeplitzPerHead),
                    },
                    neg_inf_every: [0, 0, 7, 2][neg_inf],
                    scale: custom_scale.then(|| 0.5 - (r % 100) as f32 / 50.0),
                    magnitude: 1.0 + (r % 4) as f32,
                    seed,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn matches_the_reference(case in case_strategy(300, 300)) {
        for_each_isa(|isa| check(isa, &case));
    }

    #[test]
    fn decode_matches_the_reference(case in case_strategy(17, 2100)) {
        for_each_isa(|isa| check(isa, &case));
    }

    /// Every beam width (1 to 8 queries, each K and V vector shared by all of them) over key
    /// counts of 0, 1, primes, block edges and 1500, with every mask and bias.
    #[test]
    fn beam_widths_match_the_reference(
        case in case_strategy_with(1usize..=8, beam_keys(), 1..=6)
    ) {
        for_each_isa(|isa| check(isa, &case));
    }
}

/// LongT5's transient-global calls: `n` queries over `n / G` side keys followed by their own
/// `n` keys, a radius centred past the side keys, the side bias by block distance (a short
/// last block joins the one before it), a Toeplitz, dense or no bias on the own keys. `G` is
/// random (1 to 40, and 16 as published); lengths fall on, next to and between multiples of
/// `G` and of the tiles; sources shorter than `G` have no side key.
fn transient_strategy(max_q: usize) -> impl Strategy<Value = Case> {
    (
        (1usize..=3, proptest::sample::select(D_HEADS.to_vec())),
        (
            awkward_dim(max_q),
            prop_oneof![2 => 1usize..=40, 1 => Just(16)],
            0usize..4,
        ),
        proptest::array::uniform5(prop_oneof![3 => Just(0usize), 1 => 1usize..9]),
        (0usize..4, 0usize..4, any::<bool>(), 0usize..4),
        (any::<bool>(), any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |((heads, d_head), (n, block, tweak), pads, kinds, (padded, unit, seed))| {
                let (local, bias, per_head, neg_inf) = kinds;
                let whole = n / block * block;
                let q_len = match tweak {
                    0 => n,
                    1 => whole,
                    2 => whole + 1,
                    _ => whole.saturating_sub(1),
                };
                let g = q_len / block;
                let kv_len = g + q_len;
                let r = seed >> 8;
                let radius = match local {
                    0 => (r as usize / 13) % 3,
                    1 => (r as usize / 13) % 70,
                    2 => q_len + (r as usize / 17) % 3,
                    _ => 127,
                };
                Case {
                    shape: AttentionShape {
                        heads,
                        d_head,
                        q_len,
                        kv_len,
                    },
                    pads,
                    radius: Some(radius),
                    global_keys: g,
                    transient: Some(Transient {
                        block_size: block,
                        per_head,
                    }),
                    key_len: padded.then(|| (r as usize / 11) % (kv_len + 1)),
                    bias: match bias {
                        0 => None,
                        1 => Some(BiasKind::Toeplitz),
                        2 => Some(BiasKind::ToeplitzPerHead),
                        _ => Some(BiasKind::PerHead),
                    },
                    neg_inf_every: [0, 0, 7, 2][neg_inf],
                    // T5 does not scale the scores.
                    scale: unit.then_some(1.0),
                    magnitude: 1.0 + (r % 4) as f32,
                    seed,
                    ..plain_case(heads, d_head, q_len, kv_len)
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn transient_global_matches_the_reference(case in transient_strategy(300)) {
        for_each_isa(|isa| check(isa, &case));
    }

    /// Up to 8 queries (the decode path, at most one side key per query for `G >= 8`).
    #[test]
    fn transient_global_decode_matches_the_reference(case in transient_strategy(8)) {
        for_each_isa(|isa| check(isa, &case));
    }
}

/// Every transient-global field is validated: a block size of 0, a side bias table shorter
/// than `2g - 1` entries per head, a `local_origin` without a radius, a bias covering the side
/// keys' count of keys short by them.
#[test]
fn transient_global_arguments_are_typed_errors() {
    let isa = Isa::best();
    let (q_len, g) = (6, 2);
    let shape = AttentionShape {
        heads: 2,
        d_head: 4,
        q_len,
        kv_len: g + q_len,
    };
    let q = vec![0.5; q_len * 8];
    let kv = vec![0.5; (g + q_len) * 8];
    let side = vec![0.0; 7];
    let toeplitz = vec![0.0; 2 * q_len - 1];
    let mut out = vec![canary(); q_len * 8];
    let mut scratch = vec![0.0; attention_scratch(isa, &shape).len()];
    let mut call = |mask: &Mask<'_>| {
        attention(
            isa,
            &shape,
            View::new(&q, q_len, 8, 8)?,
            View::new(&kv, g + q_len, 8, 8)?,
            View::new(&kv, g + q_len, 8, 8)?,
            ViewMut::new(&mut out, q_len, 8, 8)?,
            mask,
            None,
            &mut scratch,
        )
    };
    let good = Mask {
        radius: Some(2),
        global_keys: g,
        local_origin: g,
        bias: Some(Bias::toeplitz(&toeplitz, 0)),
        side_bias: Some(SideBias::new(&side, 3, 4)),
        ..Mask::NONE
    };
    assert!(matches!(call(&good), Ok(())));
    let zero_block = Mask {
        side_bias: Some(SideBias::new(&side, 3, 0)),
        ..good
    };
    assert!(matches!(
        call(&zero_block),
        Err(KernelError::InvalidArgument(_))
    ));
    let short_side = Mask {
        side_bias: Some(SideBias::new(&side, 5, 4)),
        ..good
    };
    assert!(matches!(
        call(&short_side),
        Err(KernelError::BufferTooSmall {
            what: "side bias",
            needed: 8,
            got: 7
        })
    ));
    let no_radius = Mask {
        radius: None,
        ..good
    };
    assert!(matches!(
        call(&no_radius),
        Err(KernelError::InvalidArgument(_))
    ));
    let short_bias = Mask {
        bias: Some(Bias::toeplitz(&toeplitz[1..], 0)),
        ..good
    };
    assert!(matches!(
        call(&short_bias),
        Err(KernelError::BufferTooSmall { what: "bias", .. })
    ));
    let huge_origin = Mask {
        local_origin: usize::MAX,
        ..good
    };
    assert!(matches!(call(&huge_origin), Err(KernelError::Overflow(_))));
}

/// The queries of a call share every K vector, but a key one query does not see never reaches
/// it: a NaN in the K row of the last query's own position (causal, 2 to 8 queries at the end of
/// 100 keys) leaves every other query, and the last query's other heads, finite and equal to
/// the reference.
#[test]
fn a_nan_key_reaches_only_the_queries_that_see_it() {
    for q_len in 2..=8 {
        let mut case = plain_case(3, 64, q_len, 100);
        case.causal_offset = Some(100 - q_len);
        let mut inputs = case.inputs();
        let width = 3 * 64;
        inputs.k[99 * width + 5] = f32::NAN;
        let want = expected(&case, &inputs);
        let tolerance = bound(&case, &inputs);
        for_each_isa(|isa| {
            let got = run(isa, &case, &inputs);
            for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                // Head 0 of the last query sees the NaN key: its outputs are not compared.
                if n / width == q_len - 1 && n % width < 64 {
                    continue;
                }
                assert!(
                    (*g as f64 - *w as f64).abs() <= tolerance,
                    "{isa} q_len {q_len}: {n}: {g} vs {w}"
                );
            }
        });
    }
}

fn plain_case(heads: usize, d_head: usize, q_len: usize, kv_len: usize) -> Case {
    Case {
        shape: AttentionShape {
            heads,
            d_head,
            q_len,
            kv_len,
        },
        pads: [0; 5],
        causal_offset: None,
        key_len: None,
        window: None,
        radius: None,
        global_keys: 0,
        transient: None,
        bias: None,
        neg_inf_every: 0,
        scale: None,
        magnitude: 1.0,
        seed: 7,
    }
}

/// Runs `case` with explicit inputs and returns the output rows (canaries checked).
fn run(isa: Isa, case: &Case, inputs: &Inputs) -> Vec<f32> {
    let s = &case.shape;
    let width = s.heads * s.d_head;
    let mut out = CanaryMatrix::new(s.q_len, width, inputs.strides[3]);
    let mut scratch = vec![f32::NAN; attention_scratch(isa, s).len()];
    attention(
        isa,
        s,
        inputs.operand(0),
        inputs.operand(1),
        inputs.operand(2),
        ViewMut::new(
            out.view_mut(),
            s.q_len,
            s.heads * s.d_head,
            inputs.strides[3],
        )
        .unwrap(),
        &case.mask(inputs),
        case.scale,
        &mut scratch,
    )
    .unwrap_or_else(|e| panic!("{isa}: {e} for {case:?}"));
    out.assert_padding_intact(&format!("{isa} {case:?}"));
    out.elements().collect()
}

#[test]
fn scores_around_ten_thousand_do_not_overflow() {
    // Scores are exact integers near ±1e4: q = (100, 0, ...), k_j = (±(100 - j % 3), ...).
    for (q_len, kv_len) in [(1, 50), (3, 200), (70, 130)] {
        let mut case = plain_case(2, 32, q_len, kv_len);
        case.scale = Some(1.0);
        let mut inputs = case.inputs();
        let width = 64;
        inputs.q.iter_mut().enumerate().for_each(|(n, x)| {
            *x = if n % 32 == 0 {
                if (n / width) % 2 == 0 {
                    100.0
                } else {
                    -100.0
                }
            } else {
                0.0
            }
        });
        inputs.k.iter_mut().enumerate().for_each(|(n, x)| {
            let j = n / width;
            *x = if n % 32 == 0 {
                let sign = if j % 5 == 0 { 1.0 } else { -1.0 };
                sign * (100.0 - (j % 3) as f32)
            } else {
                0.0
            }
        });
        let want = expected(&case, &inputs);
        for_each_isa(|isa| {
            let got = run(isa, &case, &inputs);
            for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(g.is_finite(), "{isa}: element {n} is {g}");
                assert!((g - w).abs() <= 1e-5, "{isa}: element {n}: {g} vs {w}");
            }
        });
    }
}

#[test]
fn fully_masked_rows_are_zero() {
    let masks: [(Option<usize>, Option<usize>, Option<usize>); 3] = [
        (None, Some(0), None),
        (Some(0), None, Some(0)),
        (Some(5), Some(0), None),
    ];
    for (q_len, kv_len) in [(1, 40), (5, 40), (100, 90)] {
        for (causal_offset, key_len, window) in masks {
            let mut case = plain_case(2, 7, q_len, kv_len);
            case.causal_offset = causal_offset;
            case.key_len = key_len;
            case.window = window;
            let inputs = case.inputs();
            for_each_isa(|isa| {
                let got = run(isa, &case, &inputs);
                assert!(got.iter().all(|&x| x == 0.0), "{isa}: {case:?}");
            });
        }
    }
}

#[test]
fn minus_infinity_bias_hides_keys_and_whole_rows() {
    for (q_len, kv_len) in [(1, 300), (4, 77), (130, 150)] {
        let mut case = plain_case(3, 32, q_len, kv_len);
        case.bias = Some(BiasKind::PerHead);
        let mut inputs = case.inputs();
        // Row 0 of every head fully -inf; elsewhere every third key.
        let (row_stride, head_stride) = (inputs.strides[4], inputs.head_stride);
        for h in 0..3 {
            for i in 0..q_len {
                for j in 0..kv_len {
                    if i == 0 || j % 3 == 0 {
                        inputs.bias[h * head_stride + i * row_stride + j] = f32::NEG_INFINITY;
                    }
                }
            }
        }
        let want = expected(&case, &inputs);
        let tolerance = bound(&case, &inputs);
        for_each_isa(|isa| {
            let got = run(isa, &case, &inputs);
            assert!(
                got[..96].iter().all(|&x| x == 0.0),
                "{isa}: row 0 must be zero"
            );
            for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (*g as f64 - *w as f64).abs() <= tolerance,
                    "{isa}: {n}: {g} vs {w}"
                );
            }
        });
    }
}

#[test]
fn empty_shapes_write_nothing_or_zeros() {
    for (heads, d, q_len, kv_len) in [(2, 8, 0, 5), (2, 8, 3, 0), (0, 8, 3, 3), (2, 0, 3, 3)] {
        let case = plain_case(heads, d, q_len, kv_len);
        let inputs = case.inputs();
        for_each_isa(|isa| {
            let got = run(isa, &case, &inputs);
            assert!(got.iter().all(|&x| x == 0.0), "{isa}: {case:?}");
        });
    }
}

#[test]
fn scratch_does_not_grow_with_sequence_length() {
    for_each_isa(|isa| {
        for d_head in D_HEADS {
            let shape = |q_len, kv_len| AttentionShape {
                heads: 8,
                d_head,
                q_len,
                kv_len,
            };
            let long = attention_scratch(isa, &shape(1 << 20, 1 << 20));
            assert_eq!(attention_scratch(isa, &shape(512, 3)), long);
            let decode = attention_scratch(isa, &shape(1, 1 << 20));
            assert_eq!(attention_scratch(isa, &shape(1, 5)), decode);
            assert!(long.len() < 256 * 1024 && decode.len() < 256 * 1024);
        }
    });
}

#[test]
fn bad_arguments_are_typed_errors() {
    let isa = Isa::best();
    let shape = AttentionShape {
        heads: 2,
        d_head: 4,
        q_len: 3,
        kv_len: 5,
    };
    let q = vec![0.5; 24];
    let kv = vec![0.5; 40];
    let bias = vec![0.0; 15];
    let mut out = vec![canary(); 24];
    let mut scratch = vec![0.0; attention_scratch(isa, &shape).len()];
    let mut call = |q_stride: usize, kv_len_data: usize, mask: &Mask<'_>, scale, scratch_len| {
        attention(
            isa,
            &shape,
            View::new(&q, 3, 8, q_stride)?,
            View::new(&kv[..kv_len_data], 5, 8, 8)?,
            View::new(&kv, 5, 8, 8)?,
            ViewMut::new(&mut out, 3, 8, 8)?,
            mask,
            scale,
            &mut scratch[..scratch_len],
        )
    };
    let full = attention_scratch(isa, &shape).len();
    assert!(matches!(call(8, 40, &Mask::NONE, None, full), Ok(())));
    assert!(matches!(
        call(7, 40, &Mask::NONE, None, full),
        Err(KernelError::BadStride { what: "view", .. })
    ));
    assert!(matches!(
        call(8, 39, &Mask::NONE, None, full),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    assert!(matches!(
        call(8, 40, &Mask::NONE, Some(f32::NAN), full),
        Err(KernelError::InvalidArgument(_))
    ));
    assert!(matches!(
        call(8, 40, &Mask::NONE, None, full - 1),
        Err(KernelError::ScratchTooSmall { .. })
    ));
    let key_len = Mask {
        key_len: Some(6),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &key_len, None, full),
        Err(KernelError::InvalidArgument(_))
    ));
    let window = Mask {
        window: Some(2),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &window, None, full),
        Err(KernelError::InvalidArgument(_))
    ));
    let radius_and_causal = Mask {
        causal_offset: Some(0),
        radius: Some(1),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &radius_and_causal, None, full),
        Err(KernelError::InvalidArgument(_))
    ));
    let too_many_global = Mask {
        global_keys: 6,
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &too_many_global, None, full),
        Err(KernelError::InvalidArgument(_))
    ));
    let overflow = Mask {
        causal_offset: Some(usize::MAX - 1),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &overflow, None, full),
        Err(KernelError::Overflow(_))
    ));
    let short_bias = Mask {
        bias: Some(Bias::dense(&bias[..14], 5, 0)),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &short_bias, None, full),
        Err(KernelError::BufferTooSmall { what: "bias", .. })
    ));
    let per_head = Mask {
        bias: Some(Bias::dense(&bias, 5, 15)),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &per_head, None, full),
        Err(KernelError::BufferTooSmall { what: "bias", .. })
    ));
    // A relative-position table holds q_len + kv_len - 1 = 7 entries per head.
    let toeplitz = |len: usize, head_stride| Mask {
        bias: Some(Bias::toeplitz(&bias[..len], head_stride)),
        ..Mask::NONE
    };
    assert!(matches!(call(8, 40, &toeplitz(7, 0), None, full), Ok(())));
    assert!(matches!(call(8, 40, &toeplitz(14, 7), None, full), Ok(())));
    for (len, head_stride) in [(6, 0), (13, 7), (14, 8)] {
        assert!(matches!(
            call(8, 40, &toeplitz(len, head_stride), None, full),
            Err(KernelError::BufferTooSmall { what: "bias", .. })
        ));
    }
    let huge_stride = Mask {
        bias: Some(Bias::toeplitz(&bias, usize::MAX)),
        ..Mask::NONE
    };
    assert!(matches!(
        call(8, 40, &huge_stride, None, full),
        Err(KernelError::Overflow(_))
    ));
    let huge = AttentionShape {
        heads: usize::MAX,
        d_head: 2,
        q_len: 1,
        kv_len: 1,
    };
    let result = attention(
        isa,
        &huge,
        View::new(&q, 1, 8, 8).unwrap(),
        View::new(&kv, 1, 8, 8).unwrap(),
        View::new(&kv, 1, 8, 8).unwrap(),
        ViewMut::new(&mut out, 1, 8, 8).unwrap(),
        &Mask::NONE,
        None,
        &mut scratch,
    );
    assert!(matches!(result, Err(KernelError::Overflow(_))));
}

#[test]
fn empty_heads_are_accepted_by_kernel_and_reference() {
    // d_head = 0 with several queries and a non-zero stride (a fuzzer finding: the reference
    // sliced past its empty views).
    let shape = AttentionShape {
        heads: 2,
        d_head: 0,
        q_len: 3,
        kv_len: 4,
    };
    let queries = View::new(&[], 3, 0, 5).unwrap();
    let keys = View::new(&[], 4, 0, 5).unwrap();
    let mut acc = [0.0f64; 0];
    let mut out: [f32; 0] = [];
    let out_view = || ViewMut::new(&mut [], 3, 0, 5).unwrap();
    assert!(reference::attention(
        &shape,
        queries,
        keys,
        keys,
        out_view(),
        &Mask::NONE,
        None,
        &mut acc
    )
    .is_ok());
    for_each_isa(|isa| {
        let mut scratch = vec![0.0; attention_scratch(isa, &shape).len()];
        let out = ViewMut::new(&mut out, 3, 0, 5).unwrap();
        assert!(attention(
            isa,
            &shape,
            queries,
            keys,
            keys,
            out,
            &Mask::NONE,
            None,
            &mut scratch
        )
        .is_ok());
    });
}

/// The prefill path splits key tiles on a band edge (the causal diagonal, window edges, key
/// padding) into segments computed only for the query vectors that see them: query and key
/// lengths around every tile size, with offsets that put the diagonal mid-vector, and every mask
/// combined with biases.
#[test]
fn band_edges_at_awkward_lengths() {
    for (q_len, kv_len, past) in [
        (47, 47, 0),
        (49, 60, 11),
        (97, 97, 0),
        (150, 211, 61),
        (193, 200, 7),
        (257, 257, 0),
    ] {
        for (window, key_len, bias) in [
            (None, None, None),
            (Some(37), None, Some(BiasKind::Shared)),
            (None, Some(kv_len - 5), Some(BiasKind::PerHead)),
            (Some(70), Some(kv_len / 2), None),
        ] {
            let mut case = plain_case(2, 19, q_len, kv_len);
            case.causal_offset = Some(past);
            case.window = window;
            case.key_len = key_len;
            case.bias = bias;
            case.neg_inf_every = if bias.is_some() { 13 } else { 0 };
            case.seed = (q_len * 1000 + kv_len) as u64;
            for_each_isa(|isa| check(isa, &case));
        }
    }
}

/// A symmetric radius: every query's range starts and ends mid-tile and slides one key per
/// query, on both sides of the diagonal; radius 0 (the query's own key), radii around the key
/// tile (64) and at least `kv_len` (every key); more queries than keys (the last ones see
/// nothing), key padding and biases; one thread and a split over 3 give the same bits.
#[test]
fn radius_bands_at_awkward_lengths() {
    for (q_len, kv_len) in [(1, 1), (5, 40), (47, 47), (97, 130), (150, 61), (257, 257)] {
        for radius in [0, 1, 7, 63, 64, 65, kv_len] {
            for (key_len, bias) in [
                (None, None),
                (Some(kv_len - kv_len / 3), Some(BiasKind::PerHead)),
                (None, Some(BiasKind::Shared)),
            ] {
                let mut case = plain_case(2, 19, q_len, kv_len);
                case.radius = Some(radius);
                case.key_len = key_len;
                case.bias = bias;
                case.neg_inf_every = if bias.is_some() { 13 } else { 0 };
                case.seed = (q_len * 1000 + kv_len * 7 + radius) as u64;
                for_each_isa(|isa| {
                    check(isa, &case);
                    check_parallel(isa, &case, 3, 1);
                });
            }
        }
    }
}

/// Global keys with a radius (Longformer, LED) and with a causal window (attention sinks):
/// none, one, a few, around a key tile (63, 64, 65) and every key; rows whose own range overlaps
/// the global keys, touches them (`i - r = g`) or lies past them, and rows that see nothing of
/// their own (past `key_len`); biases, key padding below `g`, the decode path (up to 8 queries)
/// and the prefill path; one thread and a split over 3 give the same bits.
#[test]
fn global_keys_with_local_ranges() {
    for (q_len, kv_len) in [(1, 9), (7, 200), (47, 47), (97, 130), (150, 61), (257, 257)] {
        for (radius, window) in [
            (Some(0), None),
            (Some(5), None),
            (Some(40), None),
            (None, Some(9)),
        ] {
            for global_keys in [1, 3, 63, 64, 65, kv_len] {
                let global_keys = global_keys.min(kv_len);
                for (key_len, bias) in [
                    (None, None),
                    (Some(kv_len / 2), Some(BiasKind::PerHead)),
                    (None, Some(BiasKind::Shared)),
                ] {
                    let mut case = plain_case(2, 19, q_len, kv_len);
                    case.radius = radius;
                    case.window = window;
                    case.causal_offset = window.map(|_| kv_len.saturating_sub(q_len));
                    case.global_keys = global_keys;
                    case.key_len = key_len;
                    case.bias = bias;
                    case.neg_inf_every = if bias.is_some() { 17 } else { 0 };
                    case.seed = (q_len * 1000 + kv_len * 7 + global_keys) as u64;
                    for_each_isa(|isa| {
                        check(isa, &case);
                        check_parallel(isa, &case, 3, 1);
                    });
                }
            }
        }
    }
}

/// A NaN in the V row of a key neither global nor in a query's own range (between the global
/// keys and the radius) never reaches that query: the kernel skips the key tiles between the
/// two ranges instead of masking them.
#[test]
fn keys_between_the_global_keys_and_the_band_are_not_read() {
    for q_len in [1, 5, 700] {
        let mut case = plain_case(2, 16, q_len, 700);
        case.radius = Some(20);
        case.global_keys = 10;
        let mut inputs = case.inputs();
        // Keys 128..256: past the global keys, and before the band of every query block that
        // holds a query from 480 on (a block is at most 192 queries, AVX-512's); the decode
        // path's queries (below 8) see keys up to 28 only.
        let width = 2 * 16;
        for j in 128..256 {
            inputs.v[j * width..(j + 1) * width].fill(f32::NAN);
        }
        let want = expected(&case, &inputs);
        let tolerance = bound(&case, &inputs);
        for_each_isa(|isa| {
            let got = run(isa, &case, &inputs);
            for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                if q_len > 8 && n / width < 480 {
                    continue;
                }
                assert!(
                    (*g as f64 - *w as f64).abs() <= tolerance,
                    "{isa} q_len {q_len}: {n}: {g} vs {w}"
                );
            }
        });
    }
}

/// LongT5's local attention: a radius with a relative-position (Toeplitz) bias per head, and
/// with global keys; the same table read as a dense matrix (entry `(i, j)` at `i * row_stride +
/// j` with the table laid out so) gives the same bits, and a split over 3 threads too.
#[test]
fn toeplitz_bias_matches_the_dense_matrix_it_stands_for() {
    for (q_len, kv_len) in [
        (1, 1),
        (3, 70),
        (8, 8),
        (47, 47),
        (97, 130),
        (150, 61),
        (257, 257),
    ] {
        for (radius, global_keys) in [(None, 0), (Some(0), 0), (Some(12), 0), (Some(30), 5)] {
            let mut case = plain_case(3, 24, q_len, kv_len);
            case.radius = radius;
            case.global_keys = global_keys.min(kv_len);
            case.bias = Some(BiasKind::ToeplitzPerHead);
            case.neg_inf_every = 11;
            case.seed = (q_len * 1000 + kv_len) as u64;
            let inputs = case.inputs();
            // The dense matrices of the tables.
            let (heads, table) = (3, q_len + kv_len - 1);
            let mut dense = vec![0.0; heads * q_len * kv_len];
            for h in 0..heads {
                for i in 0..q_len {
                    for j in 0..kv_len {
                        dense[(h * q_len + i) * kv_len + j] =
                            inputs.bias[h * (table + 2) + j + q_len - 1 - i];
                    }
                }
            }
            let mut as_dense = case.clone();
            as_dense.bias = Some(BiasKind::PerHead);
            let mut dense_inputs = as_dense.inputs();
            let per_head = dense_inputs.head_stride;
            let row_stride = dense_inputs.strides[4];
            for h in 0..heads {
                for i in 0..q_len {
                    for j in 0..kv_len {
                        dense_inputs.bias[h * per_head + i * row_stride + j] =
                            dense[(h * q_len + i) * kv_len + j];
                    }
                }
            }
            for_each_isa(|isa| {
                check(isa, &case);
                let got = run(isa, &case, &inputs);
                let want = run(isa, &as_dense, &dense_inputs);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{isa} {case:?}: differs from the dense bias"
                );
                check_parallel(isa, &case, 3, 1);
            });
        }
    }
}

/// The decode path scores keys a vector's lanes at a time (16 on AVX-512) and reduces them with
/// one transpose-and-add tree: key counts around every chunk and block size, seen ranges that
/// start and end mid-chunk (window, padding, causal offset), biases, and head sizes that are
/// and are not whole vectors.
#[test]
fn decode_chunks_at_awkward_lengths() {
    for (q_len, kv_len) in [
        (1, 1),
        (1, 15),
        (1, 17),
        (2, 63),
        (1, 65),
        (3, 130),
        (1, 1001),
    ] {
        for d_head in [7, 16, 64, 80] {
            for (window, key_len, bias) in [
                (None, None, None),
                (Some(19), None, Some(BiasKind::Shared)),
                (None, Some(kv_len - kv_len / 3), Some(BiasKind::PerHead)),
                (Some(70), Some(kv_len - 1), None),
            ] {
                let mut case = plain_case(3, d_head, q_len, kv_len);
                case.causal_offset = Some(kv_len - kv_len.min(q_len));
                case.window = window;
                case.key_len = key_len;
                case.bias = bias;
                case.neg_inf_every = if bias.is_some() { 11 } else { 0 };
                case.seed = (kv_len * 131 + d_head) as u64;
                for_each_isa(|isa| check(isa, &case));
            }
        }
    }
}

/// Every beam width up to 8 takes the few-query decode path at every level (its scratch, which
/// does not depend on `q_len`, is the single query's, not the prefill path's) and matches the
/// reference, NaN canaries intact around the output: Whisper's cross-attention shape (6 heads
/// of 64 over 1500 keys), head sizes that are not whole vectors, key counts around the chunk
/// and block sizes, a causal offset, key padding and biases.
#[test]
fn beams_of_up_to_eight_queries_take_the_decode_path() {
    for_each_isa(|isa| {
        let shape = |q_len| AttentionShape {
            heads: 6,
            d_head: 64,
            q_len,
            kv_len: 1500,
        };
        let single = attention_scratch(isa, &shape(1));
        assert_ne!(attention_scratch(isa, &shape(9)), single, "{isa}");
        for q_len in 1..=8 {
            assert_eq!(
                attention_scratch(isa, &shape(q_len)),
                single,
                "{isa} q_len {q_len}"
            );
        }
    });
    for q_len in 1..=8 {
        for (heads, d_head, kv_len) in [(6, 64, 1500), (2, 7, 65), (3, 80, 129), (1, 16, 1)] {
            for (causal, key_len, bias) in [
                (false, None, None),
                (true, Some(kv_len - kv_len / 4), Some(BiasKind::PerHead)),
                (false, None, Some(BiasKind::Shared)),
            ] {
                let mut case = plain_case(heads, d_head, q_len, kv_len);
                case.causal_offset = causal.then(|| kv_len.saturating_sub(q_len));
                case.key_len = key_len;
                case.bias = bias;
                case.neg_inf_every = if bias.is_some() { 5 } else { 0 };
                case.pads = [q_len % 3, 1, 0, 2, q_len % 2];
                case.seed = (q_len * 7919 + kv_len * 31 + d_head) as u64;
                for_each_isa(|isa| check(isa, &case));
            }
        }
    }
}

/// Runs `case` through [`attention_split`] on `runner`, splitting down to `min_task_work`
/// multiply-adds per task, with canaries around the output and a NaN-filled scratch.
fn run_parallel(
    isa: Isa,
    case: &Case,
    inputs: &Inputs,
    runner: &dyn Parallel,
    min_task_work: usize,
) -> Result<Vec<f32>, KernelError> {
    let s = &case.shape;
    let mut out = CanaryMatrix::new(s.q_len, s.heads * s.d_head, inputs.strides[3]);
    let spec = attention_parallel_scratch(isa, s, runner.threads());
    let mut scratch = vec![f32::NAN; spec.len()];
    let split = Split {
        parallel: runner,
        min_task_work,
    };
    attention_split(
        isa,
        split,
        s,
        inputs.operand(0),
        inputs.operand(1),
        inputs.operand(2),
        ViewMut::new(
            out.view_mut(),
            s.q_len,
            s.heads * s.d_head,
            inputs.strides[3],
        )
        .unwrap(),
        &case.mask(inputs),
        case.scale,
        &mut scratch,
    )?;
    out.assert_padding_intact(&format!("{isa} {case:?} on {} threads", runner.threads()));
    Ok(out.elements().collect())
}

/// Asserts that `case` gives the single-threaded call's bits on `threads` threads, run at once
/// and in reverse order, split down to `min_task_work` multiply-adds per task; returns how many
/// tasks the threaded run was cut into.
fn check_parallel(isa: Isa, case: &Case, threads: usize, min_task_work: usize) -> usize {
    let inputs = case.inputs();
    let one = run(isa, case, &inputs);
    let runner = Threads::new(threads);
    let what = format!("{isa} {case:?} on {threads} threads");
    for got in [
        run_parallel(isa, case, &inputs, &runner, min_task_work),
        run_parallel(isa, case, &inputs, &Reversed(threads), min_task_work),
    ] {
        let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
        let same = got
            .iter()
            .zip(&one)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same && got.len() == one.len(),
            "{what}: differs from one thread"
        );
    }
    runner.last_tasks()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(32)))]

    /// Any split, of rows (many queries) or heads (a beam's queries), gives the bits of one
    /// thread, under every mask and bias; every call is split as far as it goes.
    #[test]
    fn threads_give_the_bits_of_one_thread(
        case in case_strategy_with(awkward_dim(160), 0usize..=700, 1..=7),
        threads in 2usize..=5,
    ) {
        for_each_isa(|isa| {
            check_parallel(isa, &case, threads, 1);
        });
    }

    /// The same for transient-global calls: a part's queries keep their blocks' side bias.
    #[test]
    fn transient_global_threads_give_the_bits_of_one_thread(
        case in transient_strategy(160),
        threads in 2usize..=5,
    ) {
        for_each_isa(|isa| {
            check_parallel(isa, &case, threads, 1);
        });
    }
}

/// Whisper-sized calls are split at the default threshold (the encoder's 1500 queries by rows, a beam's queries
/// over 1500 encoder positions by heads, a causal prefix with a per-head bias and a window) and
/// give the bits of one thread.
#[test]
fn large_calls_are_split_and_exact() {
    let whisper = |q_len: usize, kv_len: usize| Case {
        causal_offset: None,
        ..plain_case(6, 64, q_len, kv_len)
    };
    let causal = Case {
        causal_offset: Some(7),
        window: Some(150),
        bias: Some(BiasKind::PerHead),
        key_len: Some(290),
        ..plain_case(8, 40, 283, 300)
    };
    for_each_isa(|isa| {
        for (case, threads) in [
            (whisper(1500, 1500), 2),
            (whisper(203, 1500), 3),
            (whisper(5, 1500), 2),
            (whisper(1, 1500), 4),
            (causal.clone(), 7),
        ] {
            let tasks = check_parallel(isa, &case, threads, MIN_TASK_WORK);
            assert!(
                tasks > 1,
                "{isa} {:?}: not split over {threads} threads",
                case.shape
            );
        }
    });
}

/// A runner that skips a task is an error; one that repeats a task changes nothing; a scratch
/// smaller than [`attention_parallel_scratch`] is an error before anything runs.
#[test]
fn broken_runners_and_short_scratch_are_detected() {
    let isa = Isa::best();
    for case in [plain_case(6, 64, 200, 900), plain_case(6, 64, 3, 1500)] {
        let inputs = case.inputs();
        let one = run(isa, &case, &inputs);
        let skip = Faulty {
            skip_last: true,
            threads: 3,
        };
        assert!(matches!(
            run_parallel(isa, &case, &inputs, &skip, MIN_TASK_WORK),
            Err(KernelError::InvalidArgument(_))
        ));
        let twice = Faulty {
            skip_last: false,
            threads: 3,
        };
        let got = run_parallel(isa, &case, &inputs, &twice, MIN_TASK_WORK).unwrap();
        assert!(got
            .iter()
            .zip(&one)
            .all(|(x, y)| x.to_bits() == y.to_bits()));
        let spec = attention_parallel_scratch(isa, &case.shape, 3);
        let mut scratch = vec![0.0; spec.len() - 1];
        let mut out = vec![0.0; case.shape.q_len * 6 * 64];
        let result = attention_parallel(
            isa,
            &Threads::new(3),
            &case.shape,
            inputs.operand(0),
            inputs.operand(1),
            inputs.operand(2),
            ViewMut::new(&mut out, case.shape.q_len, 6 * 64, 6 * 64).unwrap(),
            &Mask::NONE,
            None,
            &mut scratch,
        );
        assert!(matches!(result, Err(KernelError::ScratchTooSmall { .. })));
    }
}

/// K and V of `inputs` rounded to `f16`: the kernel's `f16` operands, and the same values as
/// `f32` for the reference.
struct HalfKv {
    k: Vec<f16>,
    v: Vec<f16>,
    exact: Inputs,
}

impl HalfKv {
    fn of(inputs: Inputs) -> HalfKv {
        let round = |x: &[f32]| -> Vec<f16> { x.iter().map(|&x| f16::from_f32(x)).collect() };
        let (k, v) = (round(&inputs.k), round(&inputs.v));
        let widen = |x: &[f16]| -> Vec<f32> { x.iter().map(|x| x.to_f32()).collect() };
        let exact = Inputs {
            k: widen(&k),
            v: widen(&v),
            ..inputs
        };
        HalfKv { k, v, exact }
    }

    fn operand(&self, which: usize) -> View<'_, f16> {
        let data = [&self.k, &self.v][which - 1];
        let (rows, width) = (self.exact.rows[which], self.exact.width);
        View::new(data, rows, width, self.exact.strides[which]).unwrap()
    }
}

/// Runs `case` with `f16` K and V through [`attention_split`] on `runner` (one thread: the plain
/// call), canaries around the output and a NaN-filled scratch.
fn run_half(isa: Isa, case: &Case, half: &HalfKv, runner: &dyn Parallel) -> Vec<f32> {
    let s = &case.shape;
    let inputs = &half.exact;
    let mut out = CanaryMatrix::new(s.q_len, s.heads * s.d_head, inputs.strides[3]);
    let what = format!("{isa} {case:?} f16 K/V on {} threads", runner.threads());
    let out_view = ViewMut::new(
        out.view_mut(),
        s.q_len,
        s.heads * s.d_head,
        inputs.strides[3],
    )
    .unwrap();
    let (q, k, v, mask) = (
        inputs.operand(0),
        half.operand(1),
        half.operand(2),
        case.mask(inputs),
    );
    let result = if runner.threads() == 1 {
        let mut scratch = vec![f32::NAN; attention_scratch_kv::<f16>(isa, s).len()];
        attention(isa, s, q, k, v, out_view, &mask, case.scale, &mut scratch)
    } else {
        let spec = attention_parallel_scratch_kv::<f16>(isa, s, runner.threads());
        let mut scratch = vec![f32::NAN; spec.len()];
        let split = Split {
            parallel: runner,
            min_task_work: 1,
        };
        attention_split(
            isa,
            split,
            s,
            q,
            k,
            v,
            out_view,
            &mask,
            case.scale,
            &mut scratch,
        )
    };
    result.unwrap_or_else(|e| panic!("{what}: {e}"));
    out.assert_padding_intact(&what);
    out.elements().collect()
}

/// `f16` K and V against the f64 reference on the same (widened) values, within the `f32`
/// bound, and, split over `threads` threads, the bits of one thread.
fn check_half(isa: Isa, case: &Case, threads: usize) {
    let half = HalfKv::of(case.inputs());
    let want = expected(case, &half.exact);
    let got = run_half(isa, case, &half, &Threads::new(1));
    let tolerance = bound(case, &half.exact);
    tessel_tests::assert_close(
        &format!("{isa} {case:?} f16 K/V"),
        got.iter().copied(),
        want.iter().map(|&x| x as f64),
        |_| tolerance + f32::EPSILON as f64,
    );
    let split = run_half(isa, case, &half, &Threads::new(threads));
    assert!(
        split.len() == got.len()
            && split
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
        "{isa} {case:?} f16 K/V on {threads} threads: differs from one thread"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(32)))]

    /// `f16` K and V: beam widths over long keys (the decode path), and more queries (the
    /// decode path in runs of 8, across a causal band and biases), on one and several threads.
    #[test]
    fn half_keys_and_values_match_the_reference(
        case in case_strategy_with(awkward_dim(40), 0usize..=700, 1..=6),
        threads in 2usize..=5,
    ) {
        for_each_isa(|isa| check_half(isa, &case, threads));
    }

    #[test]
    fn half_beams_over_long_keys_match_the_reference(
        case in case_strategy_with(1usize..=8, beam_keys(), 1..=6),
    ) {
        for_each_isa(|isa| check_half(isa, &case, 3));
    }
}

/// A NaN stored in an `f16` K row reaches the queries that see it, as with `f32` (the widening
/// keeps NaN), and the Whisper cross-attention shape (6 heads × 64, 1500 keys) matches.
#[test]
fn half_whisper_shapes_and_nan_keys() {
    for q_len in [1, 5, 9, 24] {
        let case = plain_case(6, 64, q_len, 1500);
        for_each_isa(|isa| check_half(isa, &case, 2));
        let mut half = HalfKv::of(case.inputs());
        half.k[7 * half.exact.strides[1]] = f16::NAN;
        for_each_isa(|isa| {
            let got = run_half(isa, &case, &half, &Threads::new(1));
            let width = 6 * 64;
            for row in got.chunks(width) {
                assert!(
                    row[..64].iter().all(|x| x.is_nan()),
                    "{isa}: head 0 sees key 7"
                );
                assert!(
                    row[64..].iter().all(|x| x.is_finite()),
                    "{isa}: other heads"
                );
            }
        });
    }
}

/// A causal call one row longer than two query blocks, on 2–5 threads: the row cuts leave an
/// empty run before the one-row last run, which must still join the run before it (alone it
/// would take the decode path and give other bits). 97 rows are two NEON blocks and one, 257
/// two AVX2 blocks and one, 385 two AVX-512 blocks and one (found by the NEON proptest).
#[test]
fn a_short_last_run_joins_the_run_before_empty_ones() {
    for q_len in [97, 257, 385] {
        let case = Case {
            pads: [1, 0, 0, 0, 0],
            causal_offset: Some(3),
            bias: Some(BiasKind::Shared),
            neg_inf_every: 7,
            scale: Some(0.32),
            magnitude: 2.0,
            seed: 15828678987834933670,
            ..plain_case(1, 1, q_len, q_len + 83)
        };
        for_each_isa(|isa| {
            for threads in 2..=5 {
                check_parallel(isa, &case, threads, 1);
            }
        });
    }
}

/// `per_unit` over units of 0–3 rows in a strided output: each unit is called once with its
/// own rows, each task with its own part of the scratch, whatever the runner.
#[test]
fn per_unit_gives_each_unit_its_rows_and_each_task_its_scratch() {
    let sizes = [2usize, 0, 3, 1, 1, 0, 2, 3, 1];
    let first_row = |unit: usize| sizes[..unit].iter().sum::<usize>();
    let (rows, cols, stride, part) = (first_row(sizes.len()), 3, 5, 4);
    let run = |parallel: &dyn Parallel, scratch_parts: usize| {
        let mut out = vec![f32::NAN; rows * stride];
        let mut scratch = vec![0.0f32; scratch_parts * part];
        let view = ViewMut::new(&mut out, rows, cols, stride).unwrap();
        per_unit(
            parallel,
            (sizes.len(), &first_row),
            view,
            (&mut scratch, part),
            &|unit, mut rows, own| {
                assert_eq!(rows.rows(), sizes[unit]);
                own[0] += 1.0;
                for r in 0..rows.rows() {
                    rows.row_mut(r).unwrap().fill(unit as f32);
                }
                Ok(())
            },
        )
        .unwrap();
        (out, scratch)
    };
    for (parallel, parts) in [
        (&Threads::new(3) as &dyn Parallel, 3),
        (&Threads::new(4), 2),
        (&Reversed(2), 8),
        (
            &Faulty {
                skip_last: false,
                threads: 3,
            },
            3,
        ),
    ] {
        let (out, scratch) = run(parallel, parts);
        for (unit, &size) in sizes.iter().enumerate() {
            for r in first_row(unit)..first_row(unit) + size {
                assert!(out[r * stride..r * stride + cols]
                    .iter()
                    .all(|&x| x == unit as f32));
                assert!(out[r * stride + cols..(r + 1) * stride]
                    .iter()
                    .all(|x| x.is_nan()));
            }
        }
        // Every unit ran once, each in one task's part.
        let calls: f32 = scratch.chunks(part).map(|p| p[0]).sum();
        assert_eq!(calls, sizes.iter().filter(|&&s| s > 0).count() as f32);
    }
}

/// `per_unit` refuses units that do not cover the output in order, a scratch without one part,
/// a runner that skips a task, and reports a failing call.
#[test]
fn per_unit_refuses_bad_units_and_reports_failures() {
    let mut out = vec![0.0f32; 12];
    let mut scratch = vec![0.0f32; 8];
    let threads = Threads::new(2);
    let ok = |_: usize, _: ViewMut<'_>, _: &mut [f32]| Ok(());
    let mut call = |units: (usize, &(dyn Fn(usize) -> usize + Sync)),
                    parallel: &dyn Parallel,
                    scratch: &mut [f32],
                    each: &UnitCall<'_>| {
        let view = ViewMut::new(&mut out, 4, 3, 3).unwrap();
        per_unit(parallel, units, view, (scratch, 4), each)
    };
    let short = |u: usize| u.min(3);
    let backwards = |u: usize| [0, 3, 1, 4][u];
    assert!(call((3, &short), &threads, &mut scratch, &ok).is_err());
    assert!(call((3, &backwards), &threads, &mut scratch, &ok).is_err());
    let even = |u: usize| 2 * u;
    assert!(matches!(
        call((2, &even), &threads, &mut scratch[..3], &ok),
        Err(KernelError::ScratchTooSmall { needed: 4, got: 3 })
    ));
    let skip = Faulty {
        skip_last: true,
        threads: 2,
    };
    assert!(call((2, &even), &skip, &mut scratch, &ok).is_err());
    let fail = |u: usize, _: ViewMut<'_>, _: &mut [f32]| {
        if u == 1 {
            Err(KernelError::InvalidArgument("unit 1"))
        } else {
            Ok(())
        }
    };
    assert!(call((2, &even), &threads, &mut scratch, &fail).is_err());
    assert!(call((2, &even), &threads, &mut scratch, &ok).is_ok());
}
