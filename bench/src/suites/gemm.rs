//! The `gemm` suite: tessel's packed GEMM against the `gemm` crate (same run, one thread), a
//! naive i-k-j loop, and, for `m = 1`, the time to merely stream-read the packed weight bytes
//! (the bound a batch-1 product cannot beat).
//!
//! First, 16-bit weights ([`HALF_SHAPES`] × [`HALF_ROWS`]): `f16`, `bf16` and, where the CPU
//! has AVX-512 BF16, `bf16-dot` (activations rounded to bf16, `vdpbf16ps`), each timed
//! alternately with the `f32` weight (ratio = f32 time / its time) and with a stream read of
//! as many bytes as its packed weight (`stream-read-16`, GB/s: the floor at small `m`).
//!
//! Records per case (`m×k×n`): `gemm-crate`, `naive`, `stream-read` (GB/s, `m = 1` only), and
//! `tessel` once against each of them (ratio = baseline time / tessel time). Tessel and the
//! `gemm` crate (and tessel and the stream read) are timed alternately, call by call, so both
//! sides of a ratio see the same load on a shared machine. The `gemm-crate` record names the
//! level the crate ran at: it dispatches on its own, so at `TESSEL_ISA=avx2` on an AVX-512 CPU
//! it is AVX-512 unless the bench was built with `--no-default-features`.
//!
//! Tessel's packed weights are 64-byte aligned ([`AlignedBuf`], as the model stores them):
//! every packed row of a panel is then one cache line (unaligned, each vector load of `B`
//! straddles two lines; measured 10–25% slower on 16×2048×512 and 1500×384×1536).

use super::peaks::{fma_peak, stream_read, PEAK_ITERATIONS};
use super::Suite;
use crate::{median_ns, round_robin_median_ns, Budget, Record, Work};
use tessel_kernels::gemm::{
    bf16, f16, gemm, gemm_scratch, packed_len, packed_len_of, Element, Epilogue, PackedB,
    Sequential,
};
use tessel_kernels::Isa;
use tessel_kernels::{View, ViewMut};
use tessel_model::aligned::AlignedBuf;

/// The `gemm` suite.
pub const SUITE: Suite = Suite {
    name: "gemm",
    about: "GEMM (m×k×n): f16/bf16 weights vs f32 and the 16-bit stream; f32 vs gemm crate, naive",
    run,
};

/// The measured shapes, `(m, k, n)`.
pub const CASES: [(usize, usize, usize); 11] = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (64, 512, 512),
    (256, 512, 2048),
    (1500, 384, 1536),
    (1, 512, 512),
    (1, 512, 2048),
    (1, 512, 32000),
    (4, 512, 2048),
    (8, 512, 2048),
    (16, 2048, 512),
];

/// Small `m` against a wide output: beam-sized logits over Whisper's 51864-token vocabulary
/// (`k = 384`, every `m` from 2 to 16) and over a 32000-token one (`k = 512`). Each is timed
/// round-robin with the `gemm` crate and a stream read of its packed weight.
pub const WIDE_CASES: [(usize, usize, usize); 19] = [
    (2, 384, 51864),
    (3, 384, 51864),
    (4, 384, 51864),
    (5, 384, 51864),
    (6, 384, 51864),
    (7, 384, 51864),
    (8, 384, 51864),
    (9, 384, 51864),
    (10, 384, 51864),
    (11, 384, 51864),
    (12, 384, 51864),
    (13, 384, 51864),
    (14, 384, 51864),
    (15, 384, 51864),
    (16, 384, 51864),
    (2, 512, 32000),
    (5, 512, 32000),
    (8, 512, 32000),
    (16, 512, 32000),
];

/// Inputs and outputs of one case, allocated once and reused by every run.
pub struct Case {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
    a: AlignedBuf<f32>,
    b: AlignedBuf<f32>,
    packed: PackedB<AlignedBuf<f32>>,
    c: AlignedBuf<f32>,
    scratch: Vec<f32>,
}

impl Case {
    /// Random-ish inputs for `m × k` by `k × n`.
    pub fn new(m: usize, k: usize, n: usize) -> Case {
        // Every matrix of both libraries allocated alike (the model's way: huge pages from
        // 2 MiB), so neither side of a ratio gets different page or cache-line treatment.
        let fill = |len: usize, seed: usize| -> AlignedBuf<f32> {
            let mut values = AlignedBuf::zeros(len).expect("allocates");
            for (i, v) in values.as_mut_slice().iter_mut().enumerate() {
                *v = ((i * 7919 + seed) % 1999) as f32 / 1999.0 - 0.5;
            }
            values
        };
        let a = fill(m * k, 1);
        let b = fill(k * n, 2);
        // 64-byte aligned, as the model stores its weights: every panel row is one cache line.
        let storage =
            AlignedBuf::zeros(packed_len(k, n).expect("bench shapes fit")).expect("allocates");
        let packed = PackedB::from_kn(
            storage,
            View::new(b.as_slice(), k, n, n).expect("valid view"),
        )
        .expect("valid shape");
        Case {
            m,
            k,
            n,
            a,
            b,
            packed,
            c: AlignedBuf::zeros(m * n).expect("allocates"),
            scratch: vec![0.0; gemm_scratch(m, k, n, 1).len()],
        }
    }

    /// `m×k×n`.
    pub fn name(&self) -> String {
        format!("{}x{}x{}", self.m, self.k, self.n)
    }

    /// Floating-point operations of one product.
    pub fn flops(&self) -> f64 {
        2.0 * (self.m * self.k * self.n) as f64
    }

    /// Bytes of the packed weight.
    pub fn packed_bytes(&self) -> usize {
        self.packed.as_slice().len() * 4
    }

    /// One tessel product on one thread.
    pub fn tessel(&mut self, isa: Isa) {
        let (m, k, n) = (self.m, self.k, self.n);
        gemm(
            isa,
            View::new(self.a.as_slice(), m, k, k).expect("valid view"),
            &self.packed,
            ViewMut::new(self.c.as_mut_slice(), m, n, n).expect("valid view"),
            &Epilogue::NONE,
            &mut self.scratch,
            &Sequential,
        )
        .expect("valid arguments");
    }

    /// One product by the `gemm` crate, `Parallelism::None`, `B` row-major `k × n`.
    pub fn gemm_crate(&mut self) {
        let (m, k, n) = (self.m, self.k, self.n);
        // SAFETY: every pointer covers its row-major matrix with the strides given: `c` is
        // `m × n` (row stride n), `a` is `m × k` (row stride k), `b` is `k × n` (row stride n).
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                self.c.as_mut_slice().as_mut_ptr(),
                1,
                n as isize,
                false,
                self.a.as_slice().as_ptr(),
                1,
                k as isize,
                self.b.as_slice().as_ptr(),
                1,
                n as isize,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    }

    /// One product by the plain i-k-j loop.
    pub fn naive(&mut self) {
        let (k, n) = (self.k, self.n);
        let (a, b) = (self.a.as_slice(), self.b.as_slice());
        for (a_row, c_row) in a
            .chunks_exact(k)
            .zip(self.c.as_mut_slice().chunks_exact_mut(n))
        {
            c_row.fill(0.0);
            for (&a, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                for (c, &b) in c_row.iter_mut().zip(b_row) {
                    *c += a * b;
                }
            }
        }
    }

    /// Reads every packed weight byte once: the floor for `m = 1`.
    pub fn stream_read(&self, isa: Isa) -> f32 {
        stream_read(isa, self.packed.as_slice())
    }
}

/// The `m×k×n` cases named in `GEMM_SHAPES` (comma-separated, e.g.
/// `GEMM_SHAPES=512x512x512,1500x384x1536`), or every case of [`CASES`] and [`WIDE_CASES`]
/// when it is unset. Setting it also skips the 16-bit records.
pub fn selected_cases() -> Vec<(usize, usize, usize)> {
    let names = std::env::var("GEMM_SHAPES").unwrap_or_default();
    CASES
        .into_iter()
        .chain(WIDE_CASES)
        .filter(|&(m, k, n)| {
            names.is_empty()
                || names
                    .split(',')
                    .any(|name| name.trim() == format!("{m}x{k}x{n}"))
        })
        .collect()
}

/// `(k, n)` of the 16-bit weight comparison: the decoder's projections and its vocabulary.
pub const HALF_SHAPES: [(usize, usize); 3] = [(512, 2048), (2048, 512), (512, 32000)];

/// Rows `m` of the 16-bit weight comparison: decoding (beams, and the 16–128 rows of batched
/// sequences) and one encoder-sized batch.
pub const HALF_ROWS: [usize; 8] = [1, 4, 8, 16, 32, 64, 128, 256];

/// The weight variants of the 16-bit comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// `f32` (the baseline).
    F32,
    /// `f16`, widened in registers.
    F16,
    /// `bf16`, widened in registers.
    Bf16,
    /// `bf16` with activations rounded to bf16 and AVX-512 BF16 dot products.
    Bf16Dot,
}

impl Weights {
    /// The name used as `impl` in the records.
    pub fn name(self) -> &'static str {
        match self {
            Weights::F32 => "f32",
            Weights::F16 => "f16",
            Weights::Bf16 => "bf16",
            Weights::Bf16Dot => "bf16-dot",
        }
    }
}

/// One `m × k × n` product with the same weight packed as `f32`, `f16` and `bf16`.
pub struct HalfCase {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
    a: AlignedBuf<f32>,
    c: AlignedBuf<f32>,
    scratch: Vec<f32>,
    f32: PackedB<AlignedBuf<f32>>,
    f16: PackedB<AlignedBuf<f16>, f16>,
    bf16: PackedB<AlignedBuf<bf16>, bf16>,
    bf16_dot: PackedB<AlignedBuf<bf16>, bf16>,
    /// As many bytes as a 16-bit packed weight, for the stream-read floor.
    stream: AlignedBuf<f32>,
}

impl HalfCase {
    /// Random-ish inputs for `m × k` by `k × n`.
    pub fn new(m: usize, k: usize, n: usize) -> HalfCase {
        let base = Case::new(m, k, n);
        let b = View::new(base.b.as_slice(), k, n, n).expect("valid view");
        let bf16 = pack::<bf16>(b);
        HalfCase {
            m,
            k,
            n,
            f16: pack(b),
            bf16_dot: bf16.clone().with_bf16_dot(true),
            bf16,
            stream: AlignedBuf::zeros(packed_len_of::<f16>(k, n).expect("bench shapes fit") / 2)
                .expect("allocates"),
            f32: base.packed,
            a: base.a,
            c: base.c,
            scratch: base.scratch,
        }
    }

    /// `m×k×n`.
    pub fn name(&self) -> String {
        format!("{}x{}x{}", self.m, self.k, self.n)
    }

    /// One tessel product on one thread with the weight stored as `weights`.
    pub fn run(&mut self, isa: Isa, weights: Weights) {
        let (m, k, n) = (self.m, self.k, self.n);
        let a = View::new(self.a.as_slice(), m, k, k).expect("valid view");
        let c = ViewMut::new(self.c.as_mut_slice(), m, n, n).expect("valid view");
        let (epilogue, scratch) = (&Epilogue::NONE, &mut self.scratch[..]);
        match weights {
            Weights::F32 => gemm(isa, a, &self.f32, c, epilogue, scratch, &Sequential),
            Weights::F16 => gemm(isa, a, &self.f16, c, epilogue, scratch, &Sequential),
            Weights::Bf16 => gemm(isa, a, &self.bf16, c, epilogue, scratch, &Sequential),
            Weights::Bf16Dot => gemm(isa, a, &self.bf16_dot, c, epilogue, scratch, &Sequential),
        }
        .expect("valid arguments");
    }

    /// Reads as many bytes as a 16-bit packed weight once.
    pub fn stream_read(&self, isa: Isa) -> f32 {
        stream_read(isa, self.stream.as_slice())
    }

    /// Bytes of a 16-bit packed weight.
    pub fn half_bytes(&self) -> usize {
        self.stream.len() * 4
    }
}

fn pack<T: Element + bytemuck::Pod>(b: View<'_>) -> PackedB<AlignedBuf<T>, T> {
    let len = packed_len_of::<T>(b.rows(), b.cols()).expect("bench shapes fit");
    let storage = AlignedBuf::zeros(len).expect("allocates");
    PackedB::from_kn(storage, b).expect("valid shape")
}

/// The 16-bit weight records of [`HALF_SHAPES`] × [`HALF_ROWS`].
fn run_half(budget: Budget, isa: Isa, emit: &mut dyn FnMut(Record)) {
    let mut variants = vec![Weights::F16, Weights::Bf16];
    if isa.has_avx512_bf16() {
        variants.push(Weights::Bf16Dot);
    }
    for (k, n) in HALF_SHAPES {
        for m in HALF_ROWS {
            let mut case = HalfCase::new(m, k, n);
            let name = case.name();
            let flops = Work::flops(2.0 * (m * k * n) as f64);
            let record = |implementation: &str, ns: f64, work: Work| {
                Record::new(
                    "gemm",
                    &name,
                    implementation,
                    isa.level().name(),
                    1,
                    ns,
                    work,
                )
            };
            for &weights in &variants {
                let (ns, f32_ns) = paired_median_ns(
                    budget,
                    &mut case,
                    |c| c.run(isa, weights),
                    |c| c.run(isa, Weights::F32),
                );
                let baseline = record(Weights::F32.name(), f32_ns, flops);
                emit(record(weights.name(), ns, flops).against(&baseline));
                emit(baseline);
            }
            for weights in [Weights::F16, Weights::Bf16].into_iter().filter(|_| m <= 8) {
                let bytes = Work::bytes(case.half_bytes() as f64);
                let (ns, stream_ns) = paired_median_ns(
                    budget,
                    &mut case,
                    |c| c.run(isa, weights),
                    |c| {
                        std::hint::black_box(c.stream_read(isa));
                    },
                );
                let stream = record("stream-read-16", stream_ns, bytes);
                emit(record(weights.name(), ns, bytes).against(&stream));
                emit(stream);
            }
        }
    }
}

fn run(budget: Budget, emit: &mut dyn FnMut(Record)) {
    let isa = tessel_model::isa_env::isa_from_env().unwrap_or_else(|_| Isa::best());
    let shapes = std::env::var("GEMM_SHAPES").ok();
    // `GEMM_SHAPES=half` runs only the 16-bit records.
    if shapes.as_deref().is_none_or(|s| s.trim() == "half") {
        run_half(budget, isa, emit);
    }
    if shapes.as_deref().is_some_and(|s| s.trim() == "half") {
        return;
    }
    // The int8 records (see `gemm_int8`); `GEMM_SHAPES=int8` runs only them.
    if shapes.as_deref().is_none_or(|s| s.trim() == "int8") {
        super::gemm_int8::run(budget, isa, emit);
    }
    let quick = budget.min_samples < Budget::FULL.min_samples;
    let mut flops = 0.0;
    let peak_ns = median_ns(budget, || flops = fma_peak(isa, PEAK_ITERATIONS));
    let peak = Record::new(
        "gemm",
        "fma-peak",
        "fma-peak",
        isa.level().name(),
        1,
        peak_ns,
        Work::flops(flops),
    );
    emit(peak.clone());
    for (m, k, n) in selected_cases() {
        let mut case = Case::new(m, k, n);
        let name = case.name();
        let record = |implementation: &str, isa: &str, ns: f64, work: Work| {
            Record::new("gemm", &name, implementation, isa, 1, ns, work)
        };
        let flops = Work::flops(case.flops());
        if WIDE_CASES.contains(&(m, k, n)) {
            emit_wide(budget, isa, &mut case, &peak, emit);
            continue;
        }
        // Interleaved, so both see the same load on this shared machine.
        let (tessel_ns, crate_ns) =
            paired_median_ns(budget, &mut case, |c| c.tessel(isa), |c| c.gemm_crate());
        let tessel = record("tessel", isa.level().name(), tessel_ns, flops);
        let peer = record("gemm-crate", gemm_crate_level(), crate_ns, flops);
        emit(tessel.clone().against(&peer));
        emit(tessel.clone().against_rate(&peak));
        emit(peer);
        // The naive loop takes seconds on the largest shapes: skipped by --quick.
        if !quick || case.flops() < 1e9 {
            let naive = record("naive", "auto", median_ns(budget, || case.naive()), flops);
            emit(tessel.clone().against(&naive));
            emit(naive);
        }
        if m == 1 {
            let bytes = Work::bytes(case.packed_bytes() as f64);
            let (tessel_ns, stream_ns) = paired_median_ns(
                budget,
                &mut case,
                |c| c.tessel(isa),
                |c| {
                    std::hint::black_box(c.stream_read(isa));
                },
            );
            let tessel = record("tessel", isa.level().name(), tessel_ns, flops);
            let stream = record("stream-read", isa.level().name(), stream_ns, bytes);
            emit(tessel.against(&stream));
            emit(stream);
        }
    }
}

/// The level the `gemm` crate's kernels run at: it picks its own, AVX-512 where this build
/// enabled its AVX-512 kernels (the `gemm-avx512` feature, on by default) and the CPU has them.
/// `TESSEL_ISA=avx2` on an AVX-512 machine is compared with the crate's AVX2 kernels only in a
/// build without that feature.
fn gemm_crate_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if cfg!(feature = "gemm-avx512") && std::arch::is_x86_feature_detected!("avx512f") {
            "avx512"
        } else if std::arch::is_x86_feature_detected!("fma") {
            "avx2"
        } else {
            "scalar"
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "auto"
    }
}

/// The records of one of [`WIDE_CASES`]: tessel timed round-robin with the `gemm` crate and a
/// stream read of the packed weight, and against the same run's `peak`.
fn emit_wide(
    budget: Budget,
    isa: Isa,
    case: &mut Case,
    peak: &Record,
    emit: &mut dyn FnMut(Record),
) {
    let name = case.name();
    let level = isa.level().name();
    let times = round_robin_median_ns(
        budget,
        case,
        &mut [
            &mut |c: &mut Case| c.tessel(isa),
            &mut |c: &mut Case| c.gemm_crate(),
            &mut |c: &mut Case| {
                std::hint::black_box(c.stream_read(isa));
            },
        ],
    );
    let record = |implementation: &str, isa: &str, ns: f64, work: Work| {
        Record::new("gemm", &name, implementation, isa, 1, ns, work)
    };
    let flops = Work::flops(case.flops());
    let bytes = Work::bytes(case.packed_bytes() as f64);
    let peer = record("gemm-crate", gemm_crate_level(), times[1], flops);
    let stream = record("stream-read", level, times[2], bytes);
    emit(record("tessel", level, times[0], flops).against(&peer));
    emit(record("tessel", level, times[0], flops).against_rate(peak));
    emit(record("tessel", level, times[0], bytes).against(&stream));
    emit(peer);
    emit(stream);
}

/// Median times of `first` and `second` measured alternately (see
/// [`round_robin_median_ns`]).
fn paired_median_ns<C>(
    budget: Budget,
    case: &mut C,
    mut first: impl FnMut(&mut C),
    mut second: impl FnMut(&mut C),
) -> (f64, f64) {
    let times = round_robin_median_ns(budget, case, &mut [&mut first, &mut second]);
    (times[0], times[1])
}
