//! GEMM with a packed weight operand and a fused epilogue:
//! `C[m×n] = activation(A[m×k] · B[k×n] + bias[n]) + residual[m×n]`, `f32` activations and
//! accumulation, the weight stored as `f32`, `f16` or `bf16` ([`Element`]).
//!
//! This is what every linear layer of the model calls. `B` is a weight, packed once at load
//! time into [`PackedB`] (from row-major `k × n` or PyTorch's `n × k` `nn.Linear` layout, from
//! `f32` or from 16-bit elements) in one layout valid at every ISA level; inference never
//! repacks it. `A`, `C` and the residual are row-major strided views ([`View`], [`ViewMut`]).
//!
//! 16-bit weights halve the bytes a decoding step reads. The small-`m` microkernels widen
//! them in registers as they load them (`bf16`: a shift or a mask; `f16`: `vcvtph2ps` on
//! AVX-512 and AVX2 (F16C), an exact integer rebasing elsewhere), with the same generic body at
//! every level, so a decoding step reads each weight byte once. The blocked path widens each
//! `kc × 32` micro-panel of `B` once into a per-task `f32` buffer in scratch and runs the `f32`
//! microkernel on it: every tile of the row block reuses the widened panel, where widening in
//! registers cost each tile the conversion again (and, at AVX2, more than its 16 registers:
//! `bf16` ran at 0.5–0.8 of the `f32` speed at 256×512×2048, measured with `TESSEL_ISA=avx2`).
//! Widening is exact, so every path gives the `f32` result of the widened weight. `bf16`
//! weights can also opt in to AVX-512 BF16 dot products ([`PackedB::with_bf16_dot`]), which
//! round the activations to `bf16`.
//!
//! Two paths, chosen from `m` alone:
//! - `m <= 16` (decoding: batch 1 or a beam): `A` is read in place and the microkernel keeps
//!   all rows' accumulators in registers while it streams each panel of `B` once, so the call
//!   runs at the speed of reading the packed weights.
//! - larger `m`: BLIS-style blocking over the prepacked `B`: a block of rows of `A`
//!   (`mc × kc`, L2-sized) is multiplied against each `kc × 32` micro-panel of `B`, reused by
//!   every tile of the block while it is hot, by a register-tile microkernel (8 × 32 on
//!   AVX-512, 6 × 16 on AVX2 and NEON, 4 × 4 scalar). Tiles read `A` in place (packing it
//!   measured slower here); the `m mod 8` (or 6, 4) rows below the last whole tile go through
//!   the small-`m` tiles while the block of `B` is still in L2. The epilogue is applied in
//!   registers as the last `k` block of a tile is stored.
//!
//! Scratch, sized ahead by [`gemm_scratch`], holds the blocked path's widened micro-panels of
//! a 16-bit `B` (one per task) and the BF16-dot opt-in's rounded copy of `A`. Work is split over blocks of output columns through the host's
//! [`Parallel`] runner; each output element is computed by the same instructions whatever the
//! split, so any thread count gives bit-identical results.
//! Nothing allocates, and every length, stride and shape is validated into a [`KernelError`].
//!
//! # Example
//! ```
//! use tessel_kernels::gemm::{gemm, gemm_scratch, packed_len, Epilogue, PackedB, Sequential};
//! use tessel_kernels::{activation::Activation, Isa, View, ViewMut};
//!
//! let (m, k, n) = (2, 3, 2);
//! let weight = [1.0, 0.0, 2.0, 0.0, 1.0, 0.0]; // nn.Linear weight, n × k
//! let mut storage = vec![0.0; packed_len(k, n).unwrap()];
//! let b = PackedB::from_nk(&mut storage[..], View::new(&weight, n, k, k)?)?;
//! let a = [1.0, 2.0, 3.0, -4.0, 5.0, 6.0];
//! let bias = [0.5, 0.5];
//! let epilogue = Epilogue { bias: Some(&bias), activation: Activation::Relu, residual: None };
//! let mut scratch = vec![0.0; gemm_scratch(m, k, n, 1).len()];
//! let mut c = [0.0; 4];
//! gemm(Isa::best(), View::new(&a, m, k, k)?, &b, ViewMut::new(&mut c, m, n, n)?, &epilogue,
//!      &mut scratch, &Sequential)?;
//! assert_eq!(c, [7.5, 2.5, 8.5, 5.5]);
//! # Ok::<(), tessel_kernels::KernelError>(())
//! ```

mod bf16_dot;
mod driver;
pub(crate) mod element;
#[cfg(target_arch = "x86_64")]
mod f16_pairs;
pub mod int8;
mod packed_b;
pub(crate) mod parallel;
mod tile;

pub use element::Element;
/// The 16-bit weight types (the `half` crate's), re-exported so callers name the same version.
pub use half::{bf16, f16};
pub use packed_b::{packed_len, packed_len_of, PackedB, PANEL_COLS};
pub use parallel::{Parallel, Sequential, MAX_TASKS};

use crate::activation::Activation;
use crate::error::{check_dim, KernelError};
use crate::isa::Isa;
use crate::scratch::{Scratch, ScratchSpec};
use crate::view::{View, ViewMut};
use driver::{Columns, Operands, SMALL_M};
use parallel::Claims;
use tile::Output;

/// What is applied to each element of `A · B` as it is stored, in this order:
/// `+ bias[j]`, then `activation`, then `+ residual[i, j]`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    /// One value per output column (`n` of them), or none.
    pub bias: Option<&'a [f32]>,
    /// Applied after the bias.
    pub activation: Activation,
    /// An `m × n` view added last (a residual connection), or none.
    pub residual: Option<View<'a>>,
}

impl Epilogue<'_> {
    /// Plain `C = A · B`.
    pub const NONE: Epilogue<'static> = Epilogue {
        bias: None,
        activation: Activation::Identity,
        residual: None,
    };
}

/// Scratch [`gemm`] needs for an `m' × k` by `k × n` product, for every `m' <= m`, run by a
/// [`Parallel`] runner with `threads` threads, valid at every ISA level and for every weight
/// type. A `bf16` weight with the BF16-dot opt-in needs `A` rounded to `bf16` pairs
/// (`round_up(m, 8) · ceil(k / 2)` floats, shared by the threads); above `m = 16` the blocked
/// path of a 16-bit weight needs one widened micro-panel of `B` per task
/// (`min(round_up(k, 2), 1024) · 32` floats each). The small-`m` path needs none. Bounding every
/// smaller `m'` too lets a host plan once for its largest batch.
pub fn gemm_scratch(m: usize, k: usize, n: usize, threads: usize) -> ScratchSpec {
    let widen = if m > SMALL_M {
        ScratchSpec::f32s(task_count(threads, n).saturating_mul(driver::widen_len(k)))
    } else {
        ScratchSpec::EMPTY
    };
    bf16_dot::scratch(m, k).or(widen)
}

/// Tasks one call splits into: one per thread, at most one per panel and at most `MAX_TASKS`.
fn task_count(threads: usize, n: usize) -> usize {
    threads
        .clamp(1, MAX_TASKS)
        .min(n.div_ceil(PANEL_COLS).max(1))
}

/// `C = activation(A · B + bias) + residual` (see [`Epilogue`]), at the level `isa`.
///
/// - `a`: `m × k`, only read, so its rows may overlap ([`View::overlapping`]: a convolution's
///   sliding windows over its time-major input are such a view); `b`: the packed `k × n`
///   weight; `c`: `m × n`, only written (it may hold anything, NaN included, on entry), and
///   nothing outside its view is touched.
/// - `scratch`: at least [`gemm_scratch`]`(m, k, n, parallel.threads())` floats.
/// - `parallel`: runs the column blocks; results are identical for any thread count.
///
/// Errors (nothing is written when the arguments are refused): `ShapeMismatch` when `a.cols`
/// differs from `b.k()`, `c` is not `a.rows × b.n()`, the residual not `m × n` or the bias
/// length not `n`; `ScratchTooSmall`; `InvalidArgument` when the runner did not run every task
/// (then `C` is partly written). The views were checked against their slices when made.
pub fn gemm<W: AsRef<[T]>, T: Element>(
    isa: Isa,
    a: View<'_>,
    b: &PackedB<W, T>,
    c: ViewMut<'_>,
    epilogue: &Epilogue<'_>,
    scratch: &mut [f32],
    parallel: &dyn Parallel,
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, b.k(), b.n());
    check_dim("a.cols (k)", k, a.cols)?;
    check_dim("c.rows (m)", m, c.rows)?;
    check_dim("c.cols (n)", n, c.cols)?;
    if let Some(bias) = epilogue.bias {
        check_dim("bias length (n)", n, bias.len())?;
    }
    if let Some(residual) = epilogue.residual {
        check_dim("residual.rows (m)", m, residual.rows)?;
        check_dim("residual.cols (n)", n, residual.cols)?;
    }
    let threads = parallel.threads();
    let dot = uses_bf16_dot(isa, b);
    // One rule for every call: the scratch must hold `gemm_scratch`, whichever path runs.
    let mut scratch = Scratch::new(scratch, gemm_scratch(m, k, n, threads))?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (a_words, b_bits): (&[f32], &[u16]) = if dot {
        let part = scratch.take(bf16_dot::a_len(m, k))?;
        bf16_dot::pack_a(a, part);
        let packed = b.as_slice();
        // SAFETY: `uses_bf16_dot` checked that `T` is `bf16`, a transparent `u16`.
        let bits =
            unsafe { core::slice::from_raw_parts(packed.as_ptr() as *const u16, packed.len()) };
        (part, bits)
    } else {
        (&[], &[])
    };

    let tasks = task_count(threads, n);
    let panels = n.div_ceil(PANEL_COLS);
    let small = m <= SMALL_M;
    let buffers = if !dot && !small && T::K_GROUP == 2 {
        let len = driver::widen_len(k);
        TaskBuffers {
            base: scratch.take(tasks * len)?.as_mut_ptr(),
            len,
            tasks,
            scratch: core::marker::PhantomData,
        }
    } else {
        TaskBuffers {
            base: core::ptr::null_mut(),
            len: 0,
            tasks,
            scratch: core::marker::PhantomData,
        }
    };
    let ops = Operands {
        a,
        b: b.as_slice(),
        k,
        n,
    };
    let out = Output {
        c: c.data.as_mut_ptr(),
        ldc: c.stride,
        bias: epilogue.bias,
        activation: epilogue.activation,
        residual: epilogue.residual,
    };
    let claims = Claims::new();
    let task = |t: usize| {
        if t >= tasks || !claims.claim(t) {
            return;
        }
        let cols = Columns {
            panel0: t * panels / tasks,
            panel1: (t + 1) * panels / tasks,
        };
        if dot {
            let ops = bf16_dot::DotOperands {
                a_words,
                b: b_bits,
                m,
                k,
                n,
            };
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `uses_bf16_dot` found AVX-512 BF16 on this `Isa` (at `Avx512`) and `T`
            // is `bf16`; `a_words` was packed above for `m × k`; `b` is the validated packed
            // weight; `out` and `cols` are as for `Task`.
            unsafe {
                bf16_dot::run(ops, &out, cols)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = ops;
        } else {
            // SAFETY: task `t` was claimed just above, once per call.
            let wide = unsafe { buffers.get(t) };
            isa.dispatch(Task {
                ops,
                out: &out,
                cols,
                small,
                wide,
            });
        }
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

/// Whether this call takes the BF16-dot path: opted in on a `bf16` weight, at a level and on a
/// CPU with AVX-512 BF16.
fn uses_bf16_dot<W: AsRef<[T]>, T: Element>(isa: Isa, b: &PackedB<W, T>) -> bool {
    cfg!(target_arch = "x86_64")
        && b.dot_mode() == packed_b::DotMode::Bf16Dot
        && core::any::TypeId::of::<T>() == core::any::TypeId::of::<bf16>()
        && isa.has_avx512_bf16()
}

/// The per-task widening buffers carved from the scratch: task `t` owns the floats
/// `[t · len, (t + 1) · len)` from `base` (none when `len` is 0).
struct TaskBuffers<'a> {
    base: *mut f32,
    len: usize,
    tasks: usize,
    /// The scratch the buffers are carved from, borrowed for the call.
    scratch: core::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: the tasks of one call share `TaskBuffers` only to reach their own disjoint buffer
// (see `get`); the scratch it points into outlives the call.
unsafe impl Sync for TaskBuffers<'_> {}

impl<'a> TaskBuffers<'a> {
    /// Task `t`'s buffer (empty without buffers).
    ///
    /// # Safety
    /// Called at most once per task `t` during the call (its claim), so no two live slices
    /// overlap.
    unsafe fn get(&self, t: usize) -> &'a mut [f32] {
        if self.len == 0 || t >= self.tasks {
            return &mut [];
        }
        // SAFETY: `base` holds `tasks · len` floats of the exclusively borrowed scratch and
        // `t < tasks`; the caller guarantees no other slice of part `t` is alive.
        unsafe { core::slice::from_raw_parts_mut(self.base.add(t * self.len), self.len) }
    }
}

/// One task at one ISA level.
struct Task<'a, 'o, 'w, T: Element> {
    ops: Operands<'a, T>,
    out: &'o Output<'a>,
    cols: Columns,
    small: bool,
    /// The task's widening buffer (see `driver::blocked_path`), possibly empty.
    wide: &'w mut [f32],
}

impl<T: Element> pulp::WithSimd for Task<'_, '_, '_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Task {
            ops,
            out,
            cols,
            small,
            wide,
        } = self;
        // SAFETY: `gemm` validated every view against `m × k × n`; `cols` is this task's own
        // panel range inside `0..panels`, claimed once, so its columns of C are written by no
        // other thread.
        unsafe {
            if small {
                driver::small_path(simd, ops, out, cols);
            } else {
                driver::blocked_path(simd, ops, out, cols, wide);
            }
        }
    }
}
