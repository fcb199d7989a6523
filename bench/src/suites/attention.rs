//! The `attention` suite: tessel's flash attention against a naive attention measured in the same
//! run (scores materialised, `softmax(QKᵀ)V` in f32 with plain vectorisable loops), and, for the
//! decode cases, against a streaming read of the same K and V bytes.
//!
//! Heads 8, `d_head` 64: self-attention n = 128..2048 with and without the causal mask,
//! Whisper-like cross-attention 32 × 1500, decode 1 × 32 (the Transformer-base step's
//! cross-attention, where a call's fixed costs show), 1 × 1024 and 1 × 4096, and a causal
//! sliding window of 256 over 4096 positions. GFLOP/s count the visible query-key pairs only
//! (`4 · heads · d_head` per pair), so causal and windowed cases are not credited for skipped work.
//!
//! Beam-width decode ([`BEAM_QUERIES`] queries against [`BEAM_KEYS`] keys, Whisper's 6 heads of
//! 64, no mask): each case is timed round-robin with the 1-query call of the same keys
//! (`tessel-1q`, ratio = its time / this time: 5 queries at 0.625 cost 1.6× one query) and with
//! a streaming read of K and V, and its GFLOP/s are also given against the same run's
//! `fma-peak` record (the gemm suite's multiply-add chains), as are the other cases'. The same
//! call with K and V stored as `f16` (`tessel-f16kv`, ratio = the `f32` call's time / its time)
//! is timed in the same rounds.
//! `ATTENTION_CASES` (comma-separated parts of case names, e.g. `beam,self-512`) selects cases.

use super::Suite;
use crate::{median_ns, round_robin_median_ns, Budget, Record, Work};
use half::f16;
use tessel_kernels::attention::{
    attention, attention_scratch, attention_scratch_kv, default_scale, AttentionShape, KvElement,
    Mask,
};
use tessel_kernels::reference::attention::sees;
use tessel_kernels::{Isa, View, ViewMut};

/// The `attention` suite.
pub const SUITE: Suite = Suite {
    name: "attention",
    about: "flash attention vs naive materialised softmax(QK^T)V; decode vs streaming K/V read",
    run,
};

/// Heads of every case.
pub const HEADS: usize = 8;
/// Head size of every case.
pub const D_HEAD: usize = 64;

/// One benchmark case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Name in the report.
    pub name: &'static str,
    /// Queries.
    pub q_len: usize,
    /// Keys and values.
    pub kv_len: usize,
    /// Causal mask with the queries at the end of the keys.
    pub causal: bool,
    /// Sliding window (with `causal`).
    pub window: Option<usize>,
    /// Heads (of `D_HEAD` each).
    pub heads: usize,
}

const fn case(name: &'static str, q_len: usize, kv_len: usize, causal: bool) -> Case {
    Case {
        name,
        q_len,
        kv_len,
        causal,
        window: None,
        heads: HEADS,
    }
}

/// Heads of the beam cases: Whisper tiny's cross-attention (6 heads of 64).
pub const BEAM_HEADS: usize = 6;
/// Queries (beam widths) of the beam cases.
pub const BEAM_QUERIES: [usize; 5] = [1, 2, 4, 5, 8];
/// Keys of the beam cases: Whisper's 1500 encoder positions and a long 4096-position cache.
pub const BEAM_KEYS: [usize; 2] = [1500, 4096];

/// Every case of the suite, in report order.
pub const CASES: &[Case] = &[
    case("self-128", 128, 128, false),
    case("self-128-causal", 128, 128, true),
    case("self-512", 512, 512, false),
    case("self-512-causal", 512, 512, true),
    case("self-1024", 1024, 1024, false),
    case("self-1024-causal", 1024, 1024, true),
    case("self-2048", 2048, 2048, false),
    case("self-2048-causal", 2048, 2048, true),
    case("cross-32x1500", 32, 1500, false),
    // The Transformer-base step's cross-attention (a 32-token source): the call's fixed costs.
    case("decode-1x32", 1, 32, false),
    case("decode-1x1024", 1, 1024, true),
    case("decode-1x4096", 1, 4096, true),
    Case {
        name: "window-4096-w256",
        q_len: 4096,
        kv_len: 4096,
        causal: true,
        window: Some(256),
        heads: HEADS,
    },
];

impl Case {
    /// The shape of the call.
    pub fn shape(&self) -> AttentionShape {
        AttentionShape {
            heads: self.heads,
            d_head: D_HEAD,
            q_len: self.q_len,
            kv_len: self.kv_len,
        }
    }

    /// The mask of the call.
    pub fn mask(&self) -> Mask<'static> {
        Mask {
            causal_offset: self
                .causal
                .then_some(self.kv_len.saturating_sub(self.q_len)),
            window: self.window,
            ..Mask::NONE
        }
    }

    /// Floating-point operations of the visible query-key pairs.
    pub fn flops(&self) -> f64 {
        let mask = self.mask();
        let pairs: usize = (0..self.q_len)
            .map(|i| {
                (0..self.kv_len)
                    .filter(|&j| sees(&mask, self.kv_len, i, j))
                    .count()
            })
            .sum();
        4.0 * (self.heads * D_HEAD) as f64 * pairs as f64
    }
}

/// The operands of one case, allocated once.
pub struct Workload {
    /// The case.
    pub case: Case,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    /// K and V rounded to `f16`.
    k16: Vec<f16>,
    v16: Vec<f16>,
    out: Vec<f32>,
    scratch: Vec<f32>,
}

fn filled(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

impl Workload {
    /// Random operands for `case`, scratch sized for `isa`.
    pub fn new(case: Case, isa: Isa) -> Workload {
        let width = case.heads * D_HEAD;
        let (k, v) = (
            filled(case.kv_len * width, 2),
            filled(case.kv_len * width, 3),
        );
        let half = |x: &[f32]| x.iter().map(|&x| f16::from_f32(x)).collect();
        let shape = case.shape();
        let scratch = attention_scratch(isa, &shape).or(attention_scratch_kv::<f16>(isa, &shape));
        Workload {
            case,
            q: filled(case.q_len * width, 1),
            k16: half(&k),
            v16: half(&v),
            k,
            v,
            out: vec![0.0; case.q_len * width],
            scratch: vec![0.0; scratch.len()],
        }
    }

    /// One call of tessel's kernel.
    pub fn run_tessel(&mut self, isa: Isa) {
        let (k, v) = (std::mem::take(&mut self.k), std::mem::take(&mut self.v));
        self.call(isa, &k, &v);
        (self.k, self.v) = (k, v);
    }

    /// One call of tessel's kernel with K and V stored as `f16`.
    pub fn run_tessel_f16(&mut self, isa: Isa) {
        let (k, v) = (std::mem::take(&mut self.k16), std::mem::take(&mut self.v16));
        self.call(isa, &k, &v);
        (self.k16, self.v16) = (k, v);
    }

    fn call<E: KvElement>(&mut self, isa: Isa, k: &[E], v: &[E]) {
        let width = self.case.heads * D_HEAD;
        let shape = self.case.shape();
        let (q_len, kv_len) = (shape.q_len, shape.kv_len);
        let result = attention(
            isa,
            &self.case.shape(),
            View::new(&self.q, q_len, width, width).expect("valid view"),
            View::new(k, kv_len, width, width).expect("valid view"),
            View::new(v, kv_len, width, width).expect("valid view"),
            ViewMut::new(&mut self.out, q_len, width, width).expect("valid view"),
            &self.case.mask(),
            None,
            &mut self.scratch,
        );
        assert!(result.is_ok(), "benchmark case rejected: {result:?}");
    }

    /// One call of the naive attention.
    pub fn run_naive(&mut self) {
        naive_attention(
            &self.case,
            &self.q,
            &self.k,
            &self.v,
            &mut self.out,
            default_scale(D_HEAD),
        );
    }

    /// Reads every byte of K and V once (the decode lower bound); returns their sum.
    pub fn stream_kv(&self) -> f32 {
        stream_sum(&self.k) + stream_sum(&self.v)
    }

    /// Bytes of K and V.
    pub fn kv_bytes(&self) -> f64 {
        ((self.k.len() + self.v.len()) * std::mem::size_of::<f32>()) as f64
    }

    /// The output of the last run.
    pub fn output(&self) -> &[f32] {
        &self.out
    }
}

/// Sum of `values` with 32 independent accumulators, so it runs at memory speed.
fn stream_sum(values: &[f32]) -> f32 {
    let mut acc = [0.0f32; 32];
    let mut chunks = values.chunks_exact(32);
    for chunk in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// Naive multi-head attention: per head, the full `q_len × kv_len` score matrix in f32
/// (`S = Q Kᵀ` with K transposed first so the loops vectorise), masked entries set to `-inf`,
/// row softmax, then `O = P V`. Allocates its temporaries.
pub fn naive_attention(case: &Case, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], scale: f32) {
    let (n, m, d, width) = (case.q_len, case.kv_len, D_HEAD, case.heads * D_HEAD);
    let mask = case.mask();
    let mut k_t = vec![0.0f32; d * m];
    let mut scores = vec![0.0f32; n * m];
    for h in 0..case.heads {
        for j in 0..m {
            for c in 0..d {
                k_t[c * m + j] = k[j * width + h * d + c];
            }
        }
        for i in 0..n {
            let row = &mut scores[i * m..(i + 1) * m];
            row.fill(0.0);
            for c in 0..d {
                let x = q[i * width + h * d + c] * scale;
                for (s, &kt) in row.iter_mut().zip(&k_t[c * m..(c + 1) * m]) {
                    *s += x * kt;
                }
            }
            for (j, s) in row.iter_mut().enumerate() {
                if !sees(&mask, m, i, j) {
                    *s = f32::NEG_INFINITY;
                }
            }
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut total = 0.0;
            for s in row.iter_mut() {
                *s = if max == f32::NEG_INFINITY {
                    0.0
                } else {
                    (*s - max).exp()
                };
                total += *s;
            }
            let o = &mut out[i * width + h * d..i * width + (h + 1) * d];
            o.fill(0.0);
            for (j, &p) in row.iter().enumerate() {
                let p = if total > 0.0 { p / total } else { 0.0 };
                for (y, &x) in o.iter_mut().zip(&v[j * width + h * d..][..d]) {
                    *y += p * x;
                }
            }
        }
    }
}

fn run(budget: Budget, emit: &mut dyn FnMut(Record)) {
    let isa = match tessel_model::isa_env::isa_from_env() {
        Ok(isa) => isa,
        Err(err) => {
            eprintln!("attention suite: TESSEL_ISA: {err}");
            return;
        }
    };
    let peak = fma_peak_record(budget, isa);
    emit(peak.clone());
    if selected("beam") {
        run_beams(budget, isa, &peak, emit);
    }
    for case in CASES.iter().filter(|case| selected(case.name)) {
        let mut work = Workload::new(*case, isa);
        let flops = Work::flops(case.flops());
        let naive_ns = median_ns(budget, || work.run_naive());
        let naive = Record::new("attention", case.name, "naive", "auto", 1, naive_ns, flops);
        emit(naive.clone());
        let tessel_ns = median_ns(budget, || work.run_tessel(isa));
        let tessel = Record::new(
            "attention",
            case.name,
            "tessel",
            isa.level().name(),
            1,
            tessel_ns,
            flops,
        );
        emit(tessel.clone().against(&naive));
        emit(tessel.clone().against_rate(&peak));
        if case.q_len == 1 {
            let mut sink = 0.0;
            let stream_ns = median_ns(budget, || sink += work.stream_kv());
            std::hint::black_box(sink);
            let bytes = Work::bytes(work.kv_bytes());
            let stream = Record::new(
                "attention",
                case.name,
                "stream-read-kv",
                "auto",
                1,
                stream_ns,
                bytes,
            );
            emit(stream.clone());
            let tessel_bytes = Record::new(
                "attention",
                case.name,
                "tessel",
                isa.level().name(),
                1,
                tessel_ns,
                bytes,
            );
            emit(tessel_bytes.against(&stream));
        }
    }
}

/// Whether the cases named `name` run: `ATTENTION_CASES` unset, or one of its comma-separated
/// words is part of `name` (e.g. `ATTENTION_CASES=beam,self-512`).
fn selected(name: &str) -> bool {
    let words = std::env::var("ATTENTION_CASES").unwrap_or_default();
    words.is_empty() || words.split(',').any(|word| name.contains(word.trim()))
}

/// The same-run `fma-peak` record at `isa` (see [`super::peaks::fma_peak`]).
fn fma_peak_record(budget: Budget, isa: Isa) -> Record {
    let mut flops = 0.0;
    let ns = median_ns(budget, || {
        flops = super::peaks::fma_peak(isa, super::peaks::PEAK_ITERATIONS)
    });
    Record::new(
        "attention",
        "fma-peak",
        "fma-peak",
        isa.level().name(),
        1,
        ns,
        Work::flops(flops),
    )
}

/// The beam-width decode cases: each against the 1-query call, the K/V stream read and `peak`.
fn run_beams(budget: Budget, isa: Isa, peak: &Record, emit: &mut dyn FnMut(Record)) {
    for kv_len in BEAM_KEYS {
        let one = Case {
            name: "beam",
            q_len: 1,
            kv_len,
            causal: false,
            window: None,
            heads: BEAM_HEADS,
        };
        for q_len in BEAM_QUERIES {
            let case = Case { q_len, ..one };
            let name = format!("beam-{q_len}x{kv_len}");
            let mut pair = (Workload::new(case, isa), Workload::new(one, isa));
            let mut sink = 0.0;
            let times = round_robin_median_ns(
                budget,
                &mut pair,
                &mut [
                    &mut |(work, _): &mut (Workload, Workload)| work.run_tessel(isa),
                    &mut |(_, one): &mut (Workload, Workload)| one.run_tessel(isa),
                    &mut |(work, _): &mut (Workload, Workload)| sink += work.stream_kv(),
                    &mut |(work, _): &mut (Workload, Workload)| work.run_tessel_f16(isa),
                ],
            );
            std::hint::black_box(sink);
            let record = |implementation: &str, ns: f64, work: Work| {
                Record::new(
                    "attention",
                    &name,
                    implementation,
                    isa.level().name(),
                    1,
                    ns,
                    work,
                )
            };
            let flops = Work::flops(case.flops());
            let bytes = Work::bytes(pair.0.kv_bytes());
            let single = record("tessel-1q", times[1], Work::flops(one.flops()));
            let stream = record("stream-read-kv", times[2], bytes);
            let tessel = record("tessel", times[0], flops);
            emit(record("tessel-f16kv", times[3], flops).against(&tessel));
            emit(tessel.against(&single));
            emit(record("tessel", times[0], bytes).against(&stream));
            emit(record("tessel", times[0], flops).against_rate(peak));
            emit(single);
            emit(stream);
        }
    }
}
