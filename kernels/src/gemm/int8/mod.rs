//! int8 GEMM: `C = activation(dequant(q_A · q_Wᵀ) + bias) + residual`, with symmetric int8
//! weights (one scale per output channel, [`PackedI8`]), activations quantised per row at run
//! time, exact `i32` accumulation and the `f32` [`Epilogue`] of [`gemm`](super::gemm).
//!
//! # Numbers
//!
//! Weights: `q_W[j][p] ∈ [-127, 127]`, `W[j][p] ≈ q_W[j][p] · d_W[j]` (CTranslate2's layout and
//! convention, `d_W = 1 / weight_scale`; see [`packed`]). Activations: each row `i` of `A` is
//! quantised when the call starts, symmetric, no zero point: `q_A[i][p] = round(A[i][p] / d_A[i])`
//! in `[-127, 127]` with `d_A[i] = max_p |A[i][p]| / 127` (see [`quant`]). Then
//!
//! `C[i][j] = epilogue( f32(S[i][j]) · d_W[j] · d_A[i] )`, `S[i][j] = Σ_p q_A[i][p] · q_W[j][p]`
//!
//! where `S` is computed exactly in `i32` at every level (bit-identical to
//! [`reference::gemm_int8`](crate::reference::gemm_int8); [`gemm_i32`] exposes it) and the
//! three `f32` roundings of the last step add a relative error of at most `3 · 2^-24`. The
//! quantisation error dominates: per product `|a·w - (q_a d_a)(q_w d_w)| <= |a| e_w + |w| e_a +
//! e_a e_w` with `e_a <= amax_A[i] / 254`, `e_w <= amax_W[j] / 254` (each `· (1 + 2^-14)`).
//!
//! # Exactness of the `i32` sums at every level
//!
//! `|q_A|, |q_W| <= 127`, so every product is at most `127² = 16129` in magnitude and
//! `|S| <= k · 16129 < 2^31` for `k <= MAX_K = 2^17`. Every level adds in `i32` with
//! wrap-around, so any intermediate overflow cancels modulo `2^32` and the result is `S`:
//! - scalar and NEON (`sdot`, or `smull` to `i16` — `16129 < 2^15` — and `sadalp`) multiply
//!   `i8 · i8` directly;
//! - AVX-512 BW (`vpmaddubsw`, `u8 × s8` with adjacent pairs summed into a *saturating* `i16`)
//!   uses the sign trick: the unsigned operand is `|q_A| <= 127` and the signed one is
//!   `q_W · sign(q_A)` in `[-127, 127]` (a masked `0 - q_W`), so each pair sum is at most
//!   `2 · 127 · 127 = 32258 < 32767`: the saturation can never trigger. `vpmaddwd` by ones then
//!   adds the pairs into `i32` exactly;
//! - AVX2 (`vpmaddubsw` too) uses the complement trick, which needs no `vpsignb`: the signed
//!   operand is `q_W XOR m` with `m = -1` where `q_A < 0` (else `0`), i.e. `q_W` or
//!   `-q_W - 1 ∈ [-128, 126]`, so each pair sum is at most `2 · 127 · 128 = 32512 < 32767` and
//!   never saturates; each product with `q_A < 0` is `|q_A| (-q_W - 1) = q_A q_W - |q_A|`, so
//!   the row's accumulators start from `Σ_{q_A < 0} |q_A| <= 127 k`, stored with the row;
//! - AVX-VNNI and AVX-512 VNNI (`vpdpbusd`: four `u8 × s8` products added to an `i32` lane
//!   without saturation) use the offset trick: the unsigned operand is `q_A + 128 ∈ [1, 255]`,
//!   and the packed header's channel sum gives the compensation:
//!   `Σ (q_A + 128) q_W - 128 Σ q_W = S` (mod `2^32`, hence exactly).
//!
//! # Kernels and loops
//!
//! [`I8Kernel`] names the primitive: the best the level and CPU have ([`I8Kernel::best`]) or,
//! for tests and benchmarks, any other the machine runs ([`I8Kernel::available`]). The loops
//! (`driver`) sweep column spans that fit L2, blocks of up to 8 (AVX-512) or 4 rows, and
//! register tiles over the whole depth; the epilogue is applied as each tile is stored.
//! Work is split over panels of columns through the host's [`Parallel`] runner; results do not
//! depend on the thread count. The activations are quantised on the calling thread into the
//! caller's scratch ([`gemm_i8_scratch`]); nothing allocates.
//!
//! Measured (`report gemm`, AMD EPYC Zen 5, one thread, ratios to the `f32` weight in the same
//! run): the VNNI primitives run `m >= 4` products at 3.1–3.5× the `f32` GEMM and reach 4.0× the
//! FMA peak in their own peak loop; AVX-512 BW (sign trick) runs them at 1.4–1.7×. At `m = 1` on
//! an L2-resident `512 × 2048` weight, the VNNI primitives run at the speed of reading the int8
//! bytes. The AVX2 primitive's four-instruction sequence peaks at 1.85× the FMA peak on Zen 4
//! (`int8-peak`); its products of 16 to 1500 rows run at 1.35–1.50× the FMA peak there
//! (`gemm_best`), 1.7–1.8× the `f32` GEMM (`report gemm`).
//!
//! # Example
//! ```
//! use tessel_kernels::gemm::int8::{gemm_i8, gemm_i8_scratch, packed_i8_len, PackedI8};
//! use tessel_kernels::gemm::{Epilogue, Sequential};
//! use tessel_kernels::{Isa, View, ViewMut};
//!
//! let (m, k, n) = (1, 4, 2);
//! let weight = [1.0f32, 0.0, 2.0, 0.0, 0.0, 1.0, 0.0, -1.0]; // nn.Linear weight, n × k
//! let mut storage = vec![0i8; packed_i8_len(k, n).unwrap()];
//! let b = PackedI8::quantize_nk(&mut storage[..], &weight, n, k, k).unwrap();
//! let a = [1.0, 2.0, 3.0, 4.0];
//! let mut scratch = vec![0.0; gemm_i8_scratch(m, k).len()];
//! let mut c = [0.0; 2];
//! gemm_i8(Isa::best(), View::new(&a, m, k, k)?, &b, ViewMut::new(&mut c, m, n, n)?,
//!         &Epilogue::NONE, &mut scratch, &Sequential)?;
//! assert!((c[0] - 7.0).abs() < 0.1 && (c[1] + 2.0).abs() < 0.1);
//! # Ok::<(), tessel_kernels::KernelError>(())
//! ```

mod driver;
#[cfg(target_arch = "aarch64")]
mod neon;
pub mod packed;
pub mod quant;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use packed::{packed_i8_len, PackedI8, HEADER_BYTES, K_GROUP, MAX_K};

use crate::error::{check_dim, check_view, KernelError};
use crate::gemm::driver::Columns;
use crate::gemm::parallel::Claims;
use crate::gemm::tile::Output;
use crate::gemm::{Epilogue, Parallel, MAX_TASKS, PANEL_COLS};
use crate::isa::{Isa, Level};
use crate::scratch::{Scratch, ScratchSpec};
use crate::view::{View, ViewMut};
use core::fmt;
use driver::{F32Sink, I32Sink, Job, Sink};
use quant::AFormat;

/// The int8 primitive a call runs: a proof, like [`Isa`], that this machine runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct I8Kernel {
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Scalar,
    Avx2,
    AvxVnni,
    Avx512Bw,
    Avx512Vnni,
    Neon,
    NeonDot,
}

impl I8Kernel {
    /// Every primitive the level `isa` can run on this CPU, slowest first: scalar only at the
    /// scalar level; AVX2 then AVX-VNNI; AVX-512 BW then AVX-512 VNNI; NEON then NEON `sdot`.
    pub fn available(isa: Isa) -> impl Iterator<Item = I8Kernel> + Clone {
        let (first, second) = match isa.level() {
            Level::Scalar => (Kind::Scalar, None),
            Level::Avx2 => (Kind::Avx2, isa.has_avx_vnni().then_some(Kind::AvxVnni)),
            Level::Avx512 => (
                Kind::Avx512Bw,
                isa.has_avx512_vnni().then_some(Kind::Avx512Vnni),
            ),
            Level::Neon => (Kind::Neon, isa.has_neon_dotprod().then_some(Kind::NeonDot)),
        };
        core::iter::once(first)
            .chain(second)
            .map(|kind| I8Kernel { kind })
    }

    /// The fastest primitive of `isa` on this CPU.
    pub fn best(isa: Isa) -> I8Kernel {
        I8Kernel::available(isa)
            .last()
            .unwrap_or(I8Kernel { kind: Kind::Scalar })
    }

    /// A short name for reports: `scalar`, `avx2`, `avx-vnni`, `avx512bw`, `avx512-vnni`,
    /// `neon`, `neon-dotprod`.
    pub const fn name(self) -> &'static str {
        match self.kind {
            Kind::Scalar => "scalar",
            Kind::Avx2 => "avx2",
            Kind::AvxVnni => "avx-vnni",
            Kind::Avx512Bw => "avx512bw",
            Kind::Avx512Vnni => "avx512-vnni",
            Kind::Neon => "neon",
            Kind::NeonDot => "neon-dotprod",
        }
    }

    fn format(self) -> AFormat {
        match self.kind {
            Kind::Avx2 | Kind::Avx512Bw => AFormat::MaskAbs,
            Kind::AvxVnni | Kind::Avx512Vnni => AFormat::Offset,
            Kind::Scalar | Kind::Neon | Kind::NeonDot => AFormat::Signed,
        }
    }

    /// Runs one task of a call with this primitive.
    ///
    /// # Safety
    /// As `driver::run`.
    unsafe fn run<K: Sink>(self, job: &Job, sink: &K, cols: Columns) {
        // SAFETY: in every arm, an `I8Kernel` of this kind is only built by `available` after
        // the `Isa` and `cpu_features` proved every feature the primitive's entry enables; the
        // rest is the caller's contract.
        unsafe {
            match self.kind {
                #[cfg(target_arch = "x86_64")]
                Kind::Avx2 => x86::run_avx2(job, sink, cols),
                #[cfg(target_arch = "x86_64")]
                Kind::AvxVnni => x86::run_avx_vnni(job, sink, cols),
                #[cfg(target_arch = "x86_64")]
                Kind::Avx512Bw => x86::run_avx512_bw(job, sink, cols),
                #[cfg(target_arch = "x86_64")]
                Kind::Avx512Vnni => x86::run_avx512_vnni(job, sink, cols),
                #[cfg(target_arch = "aarch64")]
                Kind::Neon => neon::run_neon(job, sink, cols),
                #[cfg(target_arch = "aarch64")]
                Kind::NeonDot => neon::run_neon_dot(job, sink, cols),
                _ => scalar::run_scalar(job, sink, cols),
            }
        }
    }
}

impl fmt::Display for I8Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Scratch [`gemm_i8`] and [`gemm_i32`] need for `m' × k` activations, for every `m' <= m`,
/// at every level and any thread count: the quantised rows (padded to 8, up to `2 ·
/// round_up(k, 4) + 4` bytes each) and one factor per row.
pub fn gemm_i8_scratch(m: usize, k: usize) -> ScratchSpec {
    ScratchSpec::f32s(quant::a_bytes(m, k).div_ceil(4)).and(ScratchSpec::f32s(m))
}

/// `C = activation(dequant(q_A · q_Wᵀ) + bias) + residual` with the best int8 primitive of
/// `isa` (see [`gemm_i8_with`]).
pub fn gemm_i8<W: AsRef<[i8]>>(
    isa: Isa,
    a: View<'_>,
    b: &PackedI8<W>,
    c: ViewMut<'_>,
    epilogue: &Epilogue<'_>,
    scratch: &mut [f32],
    parallel: &dyn Parallel,
) -> Result<(), KernelError> {
    gemm_i8_with(I8Kernel::best(isa), a, b, c, epilogue, scratch, parallel)
}

/// [`gemm_i8`] with the primitive `kernel`.
///
/// - `a`: `m × k` `f32`, quantised per row into `scratch`; `b`: the packed weight (`k` inputs,
///   `n` channels); `c`: `m × n`, only written (NaN on entry is fine), nothing outside its view
///   is touched.
/// - `scratch`: at least [`gemm_i8_scratch`]`(m, k)` floats.
///
/// Errors (nothing written when refused): `ShapeMismatch` and `ScratchTooSmall` as for
/// [`gemm`](super::gemm); `BadStride` when rows of `a` overlap (a [`View::overlapping`]);
/// `InvalidArgument` when the runner skipped a task (then `C` is partly written).
pub fn gemm_i8_with<W: AsRef<[i8]>>(
    kernel: I8Kernel,
    a: View<'_>,
    b: &PackedI8<W>,
    c: ViewMut<'_>,
    epilogue: &Epilogue<'_>,
    scratch: &mut [f32],
    parallel: &dyn Parallel,
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, b.k(), b.n());
    check_dim("a.cols (k)", k, a.cols)?;
    check_dim("c.rows (m)", m, c.rows)?;
    check_dim("c.cols (n)", n, c.cols)?;
    check_disjoint(&a)?;
    if let Some(bias) = epilogue.bias {
        check_dim("bias length (n)", n, bias.len())?;
    }
    if let Some(residual) = epilogue.residual {
        check_dim("residual.rows (m)", m, residual.rows)?;
        check_dim("residual.cols (n)", n, residual.cols)?;
    }
    let mut scratch = Scratch::new(scratch, gemm_i8_scratch(m, k))?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let format = kernel.format();
    let bytes = as_bytes(scratch.take(quant::a_bytes(m, k).div_ceil(4))?);
    let a_dequant = scratch.take(m)?;
    quantize_at(kernel, a, format, bytes, a_dequant);
    let job = Job {
        a: bytes.as_ptr(),
        a_stride: format.row_bytes(k),
        kp: AFormat::Signed.row_bytes(k),
        b: b.as_slice().as_ptr(),
        format,
        m,
        k,
        n,
    };
    let sink = F32Sink {
        out: Output {
            c: c.data.as_mut_ptr(),
            ldc: c.stride,
            bias: epilogue.bias,
            activation: epilogue.activation,
            residual: epilogue.residual,
        },
        a_dequant,
    };
    run_tasks(kernel, &job, &sink, parallel)
}

/// The exact sums `C[i][j] = Σ_p a[i][p] · q_W[j][p]` in `i32`, with the primitive `kernel`, on
/// the calling thread: the integer core of [`gemm_i8`], exposed so tests compare every level
/// with the reference bit for bit.
///
/// `a` is `m × k` already quantised (every value in `[-127, 127]`); `scratch` holds at least
/// [`gemm_i8_scratch`]`(m, k)` floats. Errors: `InvalidArgument` for a `-128` in `a`, and the
/// shape and scratch errors of [`gemm_i8_with`].
pub fn gemm_i32<W: AsRef<[i8]>>(
    kernel: I8Kernel,
    a: View<'_, i8>,
    b: &PackedI8<W>,
    c: ViewMut<'_, i32>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, b.k(), b.n());
    check_dim("a.cols (k)", k, a.cols)?;
    check_dim("c.rows (m)", m, c.rows)?;
    check_dim("c.cols (n)", n, c.cols)?;
    check_disjoint(&a)?;
    if a.iter_rows().any(|row| row.contains(&i8::MIN)) {
        return Err(KernelError::InvalidArgument("quantised activation -128"));
    }
    let mut scratch = Scratch::new(scratch, gemm_i8_scratch(m, k))?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let format = kernel.format();
    let bytes = as_bytes(scratch.take(quant::a_bytes(m, k).div_ceil(4))?);
    quant::store_quantized(a.data, m, k, a.stride, format, bytes);
    let job = Job {
        a: bytes.as_ptr(),
        a_stride: format.row_bytes(k),
        kp: AFormat::Signed.row_bytes(k),
        b: b.as_slice().as_ptr(),
        format,
        m,
        k,
        n,
    };
    let sink = I32Sink {
        c: c.data.as_mut_ptr(),
        ldc: c.stride,
    };
    run_tasks(kernel, &job, &sink, &crate::gemm::Sequential)
}

/// The int8 GEMM quantises whole rows of `A`, which must not overlap (`BadStride` otherwise).
fn check_disjoint<E>(a: &View<'_, E>) -> Result<(), KernelError> {
    if a.rows > 1 && a.stride < a.cols {
        return Err(KernelError::BadStride {
            what: "a",
            min: a.cols,
            got: a.stride,
        });
    }
    Ok(())
}

/// Quantises the rows of `a` (`m × k`) as [`gemm_i8`] does: `q` receives them row-major
/// (`m × k`, dense) and `dequant` the `m` factors `d_A[i]` (see [`quant`]).
pub fn quantize_activations(
    a: View<'_>,
    q: &mut [i8],
    dequant: &mut [f32],
) -> Result<(), KernelError> {
    let (m, k) = (a.rows, a.cols);
    check_disjoint(&a)?;
    check_view("q", q.len(), m, k, k)?;
    check_dim("dequant length (m)", m, dequant.len())?;
    if k == 0 {
        // No values (and the view may hold no row at all): every row's factor is 0.
        dequant.fill(0.0);
        return Ok(());
    }
    for i in 0..m {
        dequant[i] = quant::quantize_row(
            &a.data[i * a.stride..i * a.stride + k],
            &mut q[i * k..i * k + k],
        );
    }
    Ok(())
}

/// Quantises `a` into `bytes` at the vector width of `kernel`'s level (the loops vectorise).
fn quantize_at(
    kernel: I8Kernel,
    a: View<'_>,
    format: AFormat,
    bytes: &mut [i8],
    dequant: &mut [f32],
) {
    struct Quantize<'a, 'b> {
        a: View<'a>,
        format: AFormat,
        bytes: &'b mut [i8],
        dequant: &'b mut [f32],
    }
    impl pulp::WithSimd for Quantize<'_, '_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _simd: S) {
            quant::quantize_a(self.a, self.format, self.bytes, self.dequant);
        }
    }
    let level = match kernel.kind {
        Kind::Scalar => Level::Scalar,
        Kind::Avx2 | Kind::AvxVnni => Level::Avx2,
        Kind::Avx512Bw | Kind::Avx512Vnni => Level::Avx512,
        Kind::Neon | Kind::NeonDot => Level::Neon,
    };
    let isa = Isa::new(level).unwrap_or(Isa::scalar());
    isa.dispatch(Quantize {
        a,
        format,
        bytes,
        dequant,
    });
}

/// Splits the columns over the runner's tasks and runs them.
fn run_tasks<K: Sink>(
    kernel: I8Kernel,
    job: &Job,
    sink: &K,
    parallel: &dyn Parallel,
) -> Result<(), KernelError> {
    let panels = job.n.div_ceil(PANEL_COLS);
    let tasks = parallel.threads().clamp(1, MAX_TASKS).min(panels.max(1));
    let claims = Claims::new();
    let task = |t: usize| {
        if t >= tasks || !claims.claim(t) {
            return;
        }
        let cols = Columns {
            panel0: t * panels / tasks,
            panel1: (t + 1) * panels / tasks,
        };
        // SAFETY: the caller validated every view for `m × k × n`, quantised `A` in the
        // kernel's format for the padded rows, and `b` is a validated `PackedI8`; `cols` is
        // this task's own panel range, claimed once, so no other task writes its columns.
        unsafe { kernel.run(job, sink, cols) };
    };
    parallel.run(tasks, &task);
    if claims.all_claimed(tasks) {
        Ok(())
    } else {
        Err(KernelError::InvalidArgument(
            "the Parallel runner did not run every task",
        ))
    }
}

/// The bytes of an `f32` scratch part.
fn as_bytes(part: &mut [f32]) -> &mut [i8] {
    // SAFETY: `i8` has no invalid bit patterns and a weaker alignment than `f32`; the byte view
    // covers exactly the part's memory and borrows it mutably for as long.
    unsafe { core::slice::from_raw_parts_mut(part.as_mut_ptr() as *mut i8, part.len() * 4) }
}
