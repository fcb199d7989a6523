//! The packed weight operand `B` of [`gemm`](super::gemm): packed once at load time.
//!
//! # Layout
//!
//! `B` (`k × n`) is cut into panels of [`PANEL_COLS`] columns; the last panel is padded with
//! zeros up to the full width. The layout is the same at every ISA level (each microkernel reads
//! a panel as whole vectors of its own width), so weights packed once run at any forced level
//! and the levels can be compared on the same packed data.
//!
//! - `f32`: panel `p` occupies `k · PANEL_COLS` consecutive floats, row `kk` of the panel at
//!   `p · k · PANEL_COLS + kk · PANEL_COLS`.
//! - `f16` and `bf16`: rows are interleaved in pairs. A panel occupies
//!   `round_up(k, 2) · PANEL_COLS` elements; its row pair `kk / 2` is `2 · PANEL_COLS` elements
//!   holding, for each column `j`, one native-endian `u32` word: row `kk` even in the low half,
//!   row `kk + 1` in the high half (a zero row pads an odd `k`). So element `(kk, j)` of a panel
//!   is at `(kk / 2) · 2 · PANEL_COLS + 2 · j + kk % 2` on little-endian targets. One vector load
//!   of words yields two rows of columns; a shift and a mask widen them (`bf16`) or set up the
//!   exact integer rebasing (`f16`), with the same code at every level. It is also the operand
//!   layout of AVX-512 BF16's `vdpbf16ps` (see [`PackedB::with_bf16_dot`]).

use crate::error::KernelError;
use crate::gemm::element::Element;
use crate::view::View;
use core::marker::PhantomData;
use half::bf16;

/// Columns per packed panel: two AVX-512 vectors, four AVX2 vectors, eight NEON vectors.
pub const PANEL_COLS: usize = 32;

/// Number of `f32` a packed `k × n` operand occupies: `k · round_up(n, PANEL_COLS)`.
pub fn packed_len(k: usize, n: usize) -> Result<usize, KernelError> {
    packed_len_of::<f32>(k, n)
}

/// Number of `T` elements a packed `k × n` operand of element type `T` occupies:
/// `k · round_up(n, PANEL_COLS)` for `f32`, `round_up(k, 2) · round_up(n, PANEL_COLS)` for
/// `f16` and `bf16`.
pub fn packed_len_of<T: Element>(k: usize, n: usize) -> Result<usize, KernelError> {
    let panels = n.div_ceil(PANEL_COLS);
    panels
        .checked_mul(PANEL_COLS)
        .zip(k.checked_next_multiple_of(T::K_GROUP))
        .and_then(|(cols, rows)| cols.checked_mul(rows))
        .ok_or(KernelError::Overflow("packed b"))
}

/// Rows a packed panel of `T` holds for depth `k`: `k` rounded up to whole row groups (`k` of
/// a validated `PackedB`, whose packed length did not overflow).
pub(crate) const fn padded_k<T: Element>(k: usize) -> usize {
    k.div_ceil(T::K_GROUP) * T::K_GROUP
}

/// Index of element `(kk, j)` (row `kk`, column `j < PANEL_COLS`) inside one packed panel.
fn panel_index<T: Element>(kk: usize, j: usize) -> usize {
    let g = T::K_GROUP;
    // The low half of a word comes first in memory on little-endian targets only.
    let half = if cfg!(target_endian = "little") {
        kk % g
    } else {
        g - 1 - kk % g
    };
    (kk / g) * g * PANEL_COLS + j * g + half
}

/// How the products of a 16-bit weight are computed (see [`PackedB::with_bf16_dot`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum DotMode {
    /// Widen the weights to `f32` and multiply by the `f32` activations (the default).
    #[default]
    Widen,
    /// Round the activations to `bf16` and use AVX-512 BF16 dot products where the CPU has them.
    Bf16Dot,
}

/// A `k × n` weight matrix in the panel layout the microkernels read (see the module docs),
/// stored as `T`: `f32` (the default), `half::f16` or `half::bf16`.
///
/// Generic over its storage `W` (anything that derefs to `[T]`: `Vec<T>`, `&[T]`, an aligned
/// arena slice), so the allocation-free kernels never own memory. Storage aligned to 64 bytes
/// makes every panel row one cache line, though any alignment is correct.
#[derive(Clone, Debug)]
pub struct PackedB<W, T = f32> {
    data: W,
    k: usize,
    n: usize,
    dot: DotMode,
    element: PhantomData<T>,
}

impl<W: AsRef<[T]>, T: Element> PackedB<W, T> {
    /// Wraps data already in the packed layout (for example a `PackedB` saved earlier).
    ///
    /// Fails unless `data` holds exactly [`packed_len_of`]`::<T>(k, n)` elements. Padding
    /// should be zero; if it is not, only padded (never stored) output columns are affected
    /// (and, for 16-bit types with odd `k`, nothing: the padding row is never multiplied).
    pub fn from_packed(data: W, k: usize, n: usize) -> Result<PackedB<W, T>, KernelError> {
        check_storage::<T>(data.as_ref().len(), k, n)?;
        Ok(PackedB::new(data, k, n))
    }

    fn new(data: W, k: usize, n: usize) -> PackedB<W, T> {
        PackedB {
            data,
            k,
            n,
            dot: DotMode::Widen,
            element: PhantomData,
        }
    }

    /// Reduction length: the rows of `B`, the columns of `A`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output width: the columns of `B` and `C`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The packed elements.
    pub fn as_slice(&self) -> &[T] {
        self.data.as_ref()
    }

    /// The storage.
    pub fn storage(&self) -> &W {
        &self.data
    }

    /// Gives the storage back.
    pub fn into_inner(self) -> W {
        self.data
    }

    /// Element `(kk, j)` of `B` (`kk < k`, `j < n`) as stored, or `None` outside the matrix.
    pub fn get(&self, kk: usize, j: usize) -> Option<T> {
        if kk >= self.k || j >= self.n {
            return None;
        }
        let panel = j / PANEL_COLS * padded_k::<T>(self.k) * PANEL_COLS;
        self.as_slice()
            .get(panel + panel_index::<T>(kk, j % PANEL_COLS))
            .copied()
    }

    pub(crate) fn dot_mode(&self) -> DotMode {
        self.dot
    }
}

impl<W: AsRef<[bf16]>> PackedB<W, bf16> {
    /// Opts in to (or out of) AVX-512 BF16 dot products (`vdpbf16ps`) for this weight.
    ///
    /// They multiply `bf16` by `bf16`, so [`gemm`](super::gemm) then rounds each activation to
    /// `bf16` (nearest, ties to even) before multiplying: every product carries a relative error
    /// up to `2^-8` on top of the weight's own rounding, and the pairs of products are summed in
    /// `f32` (`vdpbf16ps` flushes subnormal inputs and outputs to zero). In exchange the
    /// widening disappears. Levels or CPUs without AVX-512 BF16 ignore the flag and widen as
    /// usual (exact `f32` activations), so results then differ by at most that bound.
    pub fn with_bf16_dot(mut self, enabled: bool) -> PackedB<W, bf16> {
        self.dot = if enabled {
            DotMode::Bf16Dot
        } else {
            DotMode::Widen
        };
        self
    }

    /// Whether [`with_bf16_dot`](PackedB::with_bf16_dot) is on.
    pub fn bf16_dot(&self) -> bool {
        self.dot == DotMode::Bf16Dot
    }
}

impl<W: AsRef<[T]> + AsMut<[T]>, T: Element> PackedB<W, T> {
    /// Packs a row-major `k × n` matrix (`b.rows = k`, `b.cols = n`) of any [`Element`] type
    /// `S` (for example `bf16` tensors read straight from a file) into `storage`, which must
    /// hold exactly [`packed_len_of`]`::<T>(k, n)` elements. Values are converted exactly when
    /// `S` converts exactly to `T`, else rounded to nearest (ties to even).
    pub fn from_kn<S: Element>(
        mut storage: W,
        b: View<'_, S>,
    ) -> Result<PackedB<W, T>, KernelError> {
        let (k, n) = (b.rows, b.cols);
        check_storage::<T>(storage.as_ref().len(), k, n)?;
        pack(storage.as_mut(), k, n, |block, col0, width| {
            for kk in 0..k {
                let src = &b.data[kk * b.stride + col0..][..width];
                for (j, &x) in src.iter().enumerate() {
                    block[panel_index::<T>(kk, j)] = convert(x);
                }
            }
        });
        Ok(PackedB::new(storage, k, n))
    }

    /// Packs PyTorch's `nn.Linear` weight layout: a row-major `n × k` matrix (`w.rows = n`
    /// output features, `w.cols = k` input features) of any [`Element`] type `S`, used as
    /// `B = wᵀ`, converted as by [`from_kn`](PackedB::from_kn). `storage` must hold exactly
    /// [`packed_len_of`]`::<T>(k, n)` elements.
    pub fn from_nk<S: Element>(
        mut storage: W,
        w: View<'_, S>,
    ) -> Result<PackedB<W, T>, KernelError> {
        let (n, k) = (w.rows, w.cols);
        check_storage::<T>(storage.as_ref().len(), k, n)?;
        pack(storage.as_mut(), k, n, |block, col0, width| {
            for j in 0..width {
                let src = &w.data[(col0 + j) * w.stride..][..k];
                for (kk, &x) in src.iter().enumerate() {
                    block[panel_index::<T>(kk, j)] = convert(x);
                }
            }
        });
        Ok(PackedB::new(storage, k, n))
    }
}

/// Converts between element types through `f32` (exact for every widening, one rounding for
/// every narrowing); a value of the type it is stored as is copied as it is.
fn convert<S: Element, T: Element>(x: S) -> T {
    if core::any::TypeId::of::<S>() == core::any::TypeId::of::<T>() {
        // SAFETY: `S` and `T` are the same type (same type id), so the copy is the identity
        // the round trip through `f32` would be, without its software rounding.
        return unsafe { core::mem::transmute_copy::<S, T>(&x) };
    }
    T::from_f32(x.to_f32())
}

/// Lets `fill(block, col0, width)` write the `width` valid columns from `col0` of each panel's
/// block, zeroing first the blocks that hold padding: the last panel when `n` is not a
/// multiple of [`PANEL_COLS`], and every panel when `k` is not a multiple of the row group
/// (`fill` writes every valid element, so a full block needs no zeroing). Each element is
/// written once or twice, instead of every element twice.
fn pack<T: Element>(
    dst: &mut [T],
    k: usize,
    n: usize,
    mut fill: impl FnMut(&mut [T], usize, usize),
) {
    // `k == 0` packs nothing (and must not ask for chunks of length 0).
    let panel_len = (padded_k::<T>(k) * PANEL_COLS).max(1);
    let padded_rows = padded_k::<T>(k) != k;
    for (panel, block) in dst.chunks_exact_mut(panel_len).enumerate() {
        let col0 = panel * PANEL_COLS;
        let width = PANEL_COLS.min(n - col0);
        if padded_rows || width < PANEL_COLS {
            block.fill(T::ZERO);
        }
        fill(block, col0, width);
    }
}

fn check_storage<T: Element>(len: usize, k: usize, n: usize) -> Result<(), KernelError> {
    let needed = packed_len_of::<T>(k, n)?;
    if len < needed {
        return Err(KernelError::BufferTooSmall {
            what: "packed b storage",
            needed,
            got: len,
        });
    }
    if len > needed {
        return Err(KernelError::ShapeMismatch {
            what: "packed b storage length",
            expected: needed,
            got: len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sources_pack_to_the_same_layout() {
        let (k, n) = (3, 37);
        let kn: [f32; 3 * 37] = core::array::from_fn(|i| i as f32 + 1.0);
        let nk: [f32; 3 * 37] = core::array::from_fn(|i| kn[(i % k) * n + i / k]);
        let mut s1 = [f32::NAN; 3 * 64];
        let mut s2 = [f32::NAN; 3 * 64];
        let p1 = PackedB::from_kn(&mut s1[..], View::new(&kn, k, n, n).unwrap()).unwrap();
        let p2 = PackedB::from_nk(&mut s2[..], View::new(&nk, n, k, k).unwrap()).unwrap();
        assert_eq!(p1.as_slice(), p2.as_slice());
        let packed = p1.as_slice();
        // Element (kk, col) lives in panel col / 32 at row kk.
        assert_eq!(packed[2 * PANEL_COLS + 5], kn[2 * n + 5]);
        assert_eq!(packed[k * PANEL_COLS + PANEL_COLS + 4], kn[n + 36]);
        assert_eq!(packed[k * PANEL_COLS + PANEL_COLS + 5], 0.0);
    }

    /// Storage that held other values packs to exactly what zeroed storage packs to: every
    /// padding element (the last panel's missing columns, a 16-bit odd `k`'s missing row) is
    /// zeroed, every other one written.
    #[test]
    fn padding_is_zeroed_whatever_the_storage_held() {
        const MAX: usize = 384;
        let w: [f32; MAX] = core::array::from_fn(|i| i as f32 + 1.0);
        for (k, n) in [(3, 37), (4, 64), (5, 32), (1, 1), (6, 33)] {
            let view = View::new(&w[..n * k], n, k, k).unwrap();
            let len = packed_len_of::<f32>(k, n).unwrap();
            let (mut dirty, mut clean) = ([f32::NAN; MAX], [0.0f32; MAX]);
            let a = PackedB::<_, f32>::from_nk(&mut dirty[..len], view).unwrap();
            let b = PackedB::<_, f32>::from_nk(&mut clean[..len], view).unwrap();
            assert_eq!(a.as_slice(), b.as_slice(), "f32 k={k} n={n}");
            let len = packed_len_of::<bf16>(k, n).unwrap();
            let nan = bf16::from_f32(f32::NAN);
            let (mut dirty, mut clean) = ([nan; MAX], [bf16::ZERO; MAX]);
            let a = PackedB::<_, bf16>::from_nk(&mut dirty[..len], view).unwrap();
            let b = PackedB::<_, bf16>::from_nk(&mut clean[..len], view).unwrap();
            let same = |p: &[bf16]| -> bool {
                p.iter()
                    .zip(b.as_slice())
                    .all(|(x, y)| x.to_bits() == y.to_bits())
            };
            assert!(same(a.as_slice()), "bf16 k={k} n={n}");
        }
    }

    #[test]
    fn storage_must_match_exactly() {
        let b = [1.0f32; 6];
        let mut short = [0.0f32; 63];
        let mut long = [0.0f32; 65];
        assert!(matches!(
            PackedB::from_kn(&mut short[..], View::new(&b, 2, 3, 3).unwrap()),
            Err(KernelError::BufferTooSmall { .. })
        ));
        assert!(matches!(
            PackedB::from_kn(&mut long[..], View::new(&b, 2, 3, 3).unwrap()),
            Err(KernelError::ShapeMismatch { .. })
        ));
        assert!(PackedB::from_packed(&short[..], 2, 3).is_err());
        assert_eq!(packed_len(0, 5), Ok(0));
        assert_eq!(
            packed_len(usize::MAX, 5),
            Err(KernelError::Overflow("packed b"))
        );
    }
}
