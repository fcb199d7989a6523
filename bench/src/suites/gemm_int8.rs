//! The int8 records of the `gemm` suite: int8 weights (per-channel scales, activations
//! quantised per row at run time, see `tessel_kernels::gemm::int8`) against the same weights as
//! `f32`, timed alternately call by call (ratio = f32 time / int8 time), for every int8
//! primitive the level runs (AVX2 and AVX-VNNI at `avx2`, AVX-512 BW and VNNI at `avx512`).
//!
//! - [`INT8_CASES`]: the decoder's `512 × 2048` projection at `m = 1, 4, 16, 64, 256`, and the
//!   `512 × 32000` vocabulary projection at `m = 1`;
//! - at `m = 1`, int8 against a stream read of as many bytes as its packed weight
//!   (`stream-read-8`, GB/s): the floor of a batch-1 product;
//! - `int8-peak`: the core's int8 multiply-add throughput measured with the primitive's own
//!   instruction sequence on register-resident operands (2 operations per multiply-add, so it
//!   reads beside `fma-peak`).
//!
//! Weights and activations live in 64-byte aligned buffers, as the model stores them.

use super::peaks::{fma_peak, stream_read, PEAK_ITERATIONS};
use crate::{median_ns, round_robin_median_ns, Budget, Record, Work};
use tessel_kernels::gemm::int8::{
    gemm_i8_scratch, gemm_i8_with, packed_i8_len, I8Kernel, PackedI8,
};
use tessel_kernels::gemm::{gemm, gemm_scratch, packed_len, Epilogue, PackedB, Sequential};
use tessel_kernels::Isa;
use tessel_kernels::{View, ViewMut};
use tessel_model::aligned::AlignedBuf;

/// The measured int8 shapes, `(m, k, n)`: decoding (beams, and the 8–128 rows of batched
/// sequences), one encoder-sized product, and the output projection of batch 1 and a batch.
pub const INT8_CASES: [(usize, usize, usize); 10] = [
    (1, 512, 2048),
    (4, 512, 2048),
    (8, 512, 2048),
    (16, 512, 2048),
    (32, 512, 2048),
    (64, 512, 2048),
    (128, 512, 2048),
    (256, 512, 2048),
    (1, 512, 32000),
    (32, 512, 32000),
];

/// One `m × k × n` product with the weight packed as `f32` and as int8.
pub struct Int8Case {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Output channels.
    pub n: usize,
    a: AlignedBuf<f32>,
    c: AlignedBuf<f32>,
    f32_weight: PackedB<AlignedBuf<f32>>,
    f32_scratch: Vec<f32>,
    int8_weight: PackedI8<AlignedBuf<i8>>,
    int8_scratch: Vec<f32>,
    /// As many bytes as the packed int8 weight, for the stream-read floor.
    stream: AlignedBuf<f32>,
}

impl Int8Case {
    /// Random-ish inputs; the weight is `n × k` (`nn.Linear`), packed both ways.
    pub fn new(m: usize, k: usize, n: usize) -> Int8Case {
        let fill = |len: usize, seed: usize| -> AlignedBuf<f32> {
            let mut values = AlignedBuf::zeros(len).expect("allocates");
            for (i, v) in values.as_mut_slice().iter_mut().enumerate() {
                *v = ((i * 7919 + seed) % 1999) as f32 / 1999.0 - 0.5;
            }
            values
        };
        let w = fill(n * k, 2);
        let f32_storage = AlignedBuf::zeros(packed_len(k, n).expect("fits")).expect("allocates");
        let f32_weight = PackedB::from_nk(
            f32_storage,
            View::new(w.as_slice(), n, k, k).expect("valid view"),
        )
        .expect("valid shape");
        let int8_len = packed_i8_len(k, n).expect("fits");
        let int8_storage = AlignedBuf::zeros(int8_len).expect("allocates");
        let int8_weight =
            PackedI8::quantize_nk(int8_storage, w.as_slice(), n, k, k).expect("finite weights");
        Int8Case {
            m,
            k,
            n,
            a: fill(m * k, 1),
            c: AlignedBuf::zeros(m * n).expect("allocates"),
            f32_weight,
            f32_scratch: vec![0.0; gemm_scratch(m, k, n, 1).len()],
            int8_weight,
            int8_scratch: vec![0.0; gemm_i8_scratch(m, k).len()],
            stream: AlignedBuf::zeros(int8_len.div_ceil(4)).expect("allocates"),
        }
    }

    /// `m×k×n`.
    pub fn name(&self) -> String {
        format!("{}x{}x{}", self.m, self.k, self.n)
    }

    /// One `f32`-weight product on one thread.
    pub fn run_f32(&mut self, isa: Isa) {
        let (m, k, n) = (self.m, self.k, self.n);
        gemm(
            isa,
            View::new(self.a.as_slice(), m, k, k).expect("valid view"),
            &self.f32_weight,
            ViewMut::new(self.c.as_mut_slice(), m, n, n).expect("valid view"),
            &Epilogue::NONE,
            &mut self.f32_scratch,
            &Sequential,
        )
        .expect("valid arguments");
    }

    /// One int8 product on one thread with `kernel`.
    pub fn run_int8(&mut self, kernel: I8Kernel) {
        let (m, k, n) = (self.m, self.k, self.n);
        gemm_i8_with(
            kernel,
            View::new(self.a.as_slice(), m, k, k).expect("valid view"),
            &self.int8_weight,
            ViewMut::new(self.c.as_mut_slice(), m, n, n).expect("valid view"),
            &Epilogue::NONE,
            &mut self.int8_scratch,
            &Sequential,
        )
        .expect("valid arguments");
    }

    /// Bytes of the packed int8 weight.
    pub fn int8_bytes(&self) -> usize {
        self.int8_weight.as_slice().len()
    }
}

/// Emits the int8 records at `isa`.
pub fn run(budget: Budget, isa: Isa, emit: &mut dyn FnMut(Record)) {
    let mut flops = 0.0;
    let fma_ns = median_ns(budget, || flops = fma_peak(isa, PEAK_ITERATIONS));
    let fma = Record::new(
        "gemm",
        "fma-peak",
        "fma-peak",
        isa.level().name(),
        1,
        fma_ns,
        Work::flops(flops),
    );
    for kernel in I8Kernel::available(isa) {
        let mut ops = 0.0;
        let ns = median_ns(budget, || ops = int8_peak(kernel, PEAK_ITERATIONS));
        if ops > 0.0 {
            let peak = Record::new(
                "gemm",
                "int8-peak",
                "int8-peak",
                kernel.name(),
                1,
                ns,
                Work::flops(ops),
            );
            // Ratio: int8 operations per second over f32 ones.
            let mut relative = peak.clone();
            relative.ratio = Some(peak.unit_rate / fma.unit_rate);
            relative.baseline = Some("fma-peak".to_owned());
            emit(relative);
        }
    }
    emit(fma);
    for (m, k, n) in INT8_CASES {
        let mut case = Int8Case::new(m, k, n);
        let name = case.name();
        let record = |implementation: &str, isa: &str, ns: f64, work: Work| {
            Record::new("gemm", &name, implementation, isa, 1, ns, work)
        };
        let ops = Work::flops(2.0 * (m * k * n) as f64);
        for kernel in I8Kernel::available(isa) {
            let times = round_robin_median_ns(
                budget,
                &mut case,
                &mut [
                    &mut |c: &mut Int8Case| c.run_int8(kernel),
                    &mut |c: &mut Int8Case| c.run_f32(isa),
                ],
            );
            let baseline = record("f32", isa.level().name(), times[1], ops);
            emit(record("int8", kernel.name(), times[0], ops).against(&baseline));
            emit(baseline);
            if m == 1 {
                let bytes = Work::bytes(case.int8_bytes() as f64);
                let times = round_robin_median_ns(
                    budget,
                    &mut case,
                    &mut [
                        &mut |c: &mut Int8Case| c.run_int8(kernel),
                        &mut |c: &mut Int8Case| {
                            std::hint::black_box(stream_read(isa, c.stream.as_slice()));
                        },
                    ],
                );
                let stream = record("stream-read-8", isa.level().name(), times[1], bytes);
                emit(record("int8", kernel.name(), times[0], bytes).against(&stream));
                emit(stream);
            }
        }
    }
}

/// Runs `iterations` steps of independent chains of `kernel`'s multiply-add sequence on
/// registers and returns the operations done (2 per multiply-add), or 0 where this build has
/// no such measurement (scalar, NEON).
pub fn int8_peak(kernel: I8Kernel, iterations: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `I8Kernel::available` lists a primitive only where the CPU and OS run every
        // instruction its peak loop uses (the same as the primitive's).
        unsafe {
            match kernel.name() {
                "avx512-vnni" => return x86::vnni512(iterations),
                "avx-vnni" => return x86::vnni256(iterations),
                "avx512bw" => return x86::bw512(iterations),
                "avx2" => return x86::complement256(iterations),
                _ => {}
            }
        }
    }
    let _ = (kernel, iterations);
    0.0
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;
    use std::hint::black_box;

    /// Chains of the VNNI peaks (enough to cover `vpdpbusd`'s latency on both pipes).
    const CHAINS: usize = 12;

    /// `vpdpbusd` on 512 bits: 64 multiply-adds per instruction.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and VNNI.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn vnni512(iterations: usize) -> f64 {
        let (a, b) = (
            _mm512_set1_epi8(black_box(3)),
            _mm512_set1_epi8(black_box(-5)),
        );
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for _ in 0..black_box(iterations) {
            for chain in &mut acc {
                *chain = _mm512_dpbusd_epi32(*chain, a, b);
            }
        }
        let total = acc
            .iter()
            .fold(_mm512_setzero_si512(), |s, &v| _mm512_add_epi32(s, v));
        black_box(_mm512_reduce_add_epi32(total));
        (iterations * CHAINS * 64 * 2) as f64
    }

    /// `vpdpbusd` on 256 bits (AVX-VNNI): 32 multiply-adds per instruction.
    ///
    /// # Safety
    /// The CPU has AVX2 and AVX-VNNI.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn vnni256(iterations: usize) -> f64 {
        let (a, b) = (
            _mm256_set1_epi8(black_box(3)),
            _mm256_set1_epi8(black_box(-5)),
        );
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        for _ in 0..black_box(iterations) {
            for chain in &mut acc {
                *chain = _mm256_dpbusd_avx_epi32(*chain, a, b);
            }
        }
        let total = acc
            .iter()
            .fold(_mm256_setzero_si256(), |s, &v| _mm256_add_epi32(s, v));
        black_box(total);
        (iterations * CHAINS * 32 * 2) as f64
    }

    /// The AVX2 complement-trick sequence (`vpxor`, `vpmaddubsw`, `vpmaddwd`, `vpaddd`): 32
    /// multiply-adds per sequence. The weights vector changes every step (a running `vpaddb`)
    /// so nothing can be hoisted out of the loop. Three rows keep every operand in the 16
    /// vector registers (four spill, and measured 1.41–1.78× `fma-peak` on Zen 4 against 1.85×).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn complement256(iterations: usize) -> f64 {
        const ROWS: usize = 3;
        let ones = _mm256_set1_epi16(1);
        let step = _mm256_set1_epi8(black_box(1));
        let mut b = _mm256_set1_epi8(black_box(-5));
        let a: [__m256i; ROWS] = core::array::from_fn(|i| _mm256_set1_epi8(black_box(i as i8 - 2)));
        let abs: [__m256i; ROWS] = core::array::from_fn(|i| _mm256_abs_epi8(a[i]));
        let mask: [__m256i; ROWS] =
            core::array::from_fn(|i| _mm256_cmpgt_epi8(_mm256_setzero_si256(), a[i]));
        let mut acc = [[_mm256_setzero_si256(); 2]; ROWS];
        for _ in 0..black_box(iterations) {
            let bs = [b, _mm256_add_epi8(b, step)];
            for (i, row) in acc.iter_mut().enumerate() {
                for (chain, &bv) in row.iter_mut().zip(&bs) {
                    let pairs = _mm256_maddubs_epi16(abs[i], _mm256_xor_si256(bv, mask[i]));
                    *chain = _mm256_add_epi32(*chain, _mm256_madd_epi16(pairs, ones));
                }
            }
            b = _mm256_add_epi8(bs[1], step);
        }
        let total = acc
            .iter()
            .flatten()
            .fold(_mm256_setzero_si256(), |s, &v| _mm256_add_epi32(s, v));
        black_box(total);
        (iterations * ROWS * 2 * 32 * 2) as f64
    }

    /// The AVX-512 BW sequence (masked `vpsubb`, `vpmaddubsw`, `vpmaddwd`, `vpaddd`): 64
    /// multiply-adds per sequence, weights changing every step as in [`sign256`].
    ///
    /// # Safety
    /// The CPU has AVX-512 F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn bw512(iterations: usize) -> f64 {
        const ROWS: usize = 8;
        let ones = _mm512_set1_epi16(1);
        let zero = _mm512_setzero_si512();
        let step = _mm512_set1_epi8(black_box(1));
        let mut b = _mm512_set1_epi8(black_box(-5));
        let a: [__m512i; ROWS] = core::array::from_fn(|i| _mm512_set1_epi8(black_box(i as i8 - 4)));
        let abs: [__m512i; ROWS] = core::array::from_fn(|i| _mm512_abs_epi8(a[i]));
        let negative: [__mmask64; ROWS] = core::array::from_fn(|i| _mm512_movepi8_mask(a[i]));
        let mut acc = [[_mm512_setzero_si512(); 2]; ROWS];
        for _ in 0..black_box(iterations) {
            let bs = [b, _mm512_add_epi8(b, step)];
            for (i, row) in acc.iter_mut().enumerate() {
                for (chain, &bv) in row.iter_mut().zip(&bs) {
                    let signed = _mm512_mask_sub_epi8(bv, negative[i], zero, bv);
                    let pairs = _mm512_maddubs_epi16(abs[i], signed);
                    *chain = _mm512_add_epi32(*chain, _mm512_madd_epi16(pairs, ones));
                }
            }
            b = _mm512_add_epi8(bs[1], step);
        }
        let total = acc
            .iter()
            .flatten()
            .fold(_mm512_setzero_si512(), |s, &v| _mm512_add_epi32(s, v));
        black_box(_mm512_reduce_add_epi32(total));
        (iterations * ROWS * 2 * 64 * 2) as f64
    }
}
