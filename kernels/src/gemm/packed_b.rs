//! The packed weight operand `B` of [`gemm`](super::gemm): packed once at load time.
//!
//! # Layout
//!
//! `B` (`k × n`) is cut into panels of [`PANEL_COLS`] columns; the last panel is padded with
//! zeros up to the full width. Panel `p` occupies `k · PANEL_COLS` consecutive floats, row `kk`
//! of the panel at `p · k · PANEL_COLS + kk · PANEL_COLS`. The layout is the same at every ISA
//! level (each microkernel reads a panel as whole vectors of its own width), so weights packed
//! once run at any forced level and the levels can be compared on the same packed data.

use crate::error::{check_view, KernelError};
use crate::gemm::MatRef;

/// Columns per packed panel: two AVX-512 vectors, four AVX2 vectors, eight NEON vectors.
pub const PANEL_COLS: usize = 32;

/// Number of `f32` a packed `k × n` operand occupies: `k · round_up(n, PANEL_COLS)`.
pub fn packed_len(k: usize, n: usize) -> Result<usize, KernelError> {
    let panels = n.div_ceil(PANEL_COLS);
    panels
        .checked_mul(PANEL_COLS)
        .and_then(|cols| cols.checked_mul(k))
        .ok_or(KernelError::Overflow("packed b"))
}

/// A `k × n` weight matrix in the panel layout the microkernels read (see the module docs).
///
/// Generic over its storage `W` (anything that derefs to `[f32]`: `Vec<f32>`, `&[f32]`, an
/// aligned arena slice), so the allocation-free kernels never own memory. Storage aligned to 64
/// bytes makes every panel row one cache line, though any alignment is correct.
#[derive(Clone, Debug)]
pub struct PackedB<W> {
    data: W,
    k: usize,
    n: usize,
}

impl<W: AsRef<[f32]>> PackedB<W> {
    /// Wraps data already in the packed layout (for example a `PackedB` saved earlier).
    ///
    /// Fails unless `data` holds exactly [`packed_len`]`(k, n)` floats. Padding columns should
    /// be zero; if they are not, only padded (never stored) output columns are affected.
    pub fn from_packed(data: W, k: usize, n: usize) -> Result<PackedB<W>, KernelError> {
        check_storage(data.as_ref().len(), k, n)?;
        Ok(PackedB { data, k, n })
    }

    /// Reduction length: the rows of `B`, the columns of `A`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output width: the columns of `B` and `C`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The packed floats.
    pub fn as_slice(&self) -> &[f32] {
        self.data.as_ref()
    }

    /// Gives the storage back.
    pub fn into_inner(self) -> W {
        self.data
    }
}

impl<W: AsRef<[f32]> + AsMut<[f32]>> PackedB<W> {
    /// Packs a row-major `k × n` matrix (`b.rows = k`, `b.cols = n`) into `storage`, which must
    /// hold exactly [`packed_len`]`(k, n)` floats.
    pub fn from_kn(mut storage: W, b: MatRef<'_>) -> Result<PackedB<W>, KernelError> {
        let (k, n) = (b.rows, b.cols);
        check_view("b", b.data.len(), k, n, b.stride)?;
        check_storage(storage.as_ref().len(), k, n)?;
        let dst = storage.as_mut();
        // `k == 0` packs nothing (and must not ask for chunks of length 0).
        for (panel, block) in dst.chunks_exact_mut((k * PANEL_COLS).max(1)).enumerate() {
            let col0 = panel * PANEL_COLS;
            let width = PANEL_COLS.min(n - col0);
            for (kk, row) in block.chunks_exact_mut(PANEL_COLS).enumerate() {
                let src = &b.data[kk * b.stride + col0..][..width];
                row[..width].copy_from_slice(src);
                row[width..].fill(0.0);
            }
        }
        Ok(PackedB {
            data: storage,
            k,
            n,
        })
    }

    /// Packs PyTorch's `nn.Linear` weight layout: a row-major `n × k` matrix (`w.rows = n`
    /// output features, `w.cols = k` input features), used as `B = wᵀ`. `storage` must hold
    /// exactly [`packed_len`]`(k, n)` floats.
    pub fn from_nk(mut storage: W, w: MatRef<'_>) -> Result<PackedB<W>, KernelError> {
        let (n, k) = (w.rows, w.cols);
        check_view("w", w.data.len(), n, k, w.stride)?;
        check_storage(storage.as_ref().len(), k, n)?;
        let dst = storage.as_mut();
        // `k == 0` packs nothing (and must not ask for chunks of length 0).
        for (panel, block) in dst.chunks_exact_mut((k * PANEL_COLS).max(1)).enumerate() {
            let col0 = panel * PANEL_COLS;
            for j in 0..PANEL_COLS {
                let col = col0 + j;
                if col < n {
                    let src = &w.data[col * w.stride..][..k];
                    for (kk, &x) in src.iter().enumerate() {
                        block[kk * PANEL_COLS + j] = x;
                    }
                } else {
                    for kk in 0..k {
                        block[kk * PANEL_COLS + j] = 0.0;
                    }
                }
            }
        }
        Ok(PackedB {
            data: storage,
            k,
            n,
        })
    }
}

fn check_storage(len: usize, k: usize, n: usize) -> Result<(), KernelError> {
    let needed = packed_len(k, n)?;
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
        let p1 = PackedB::from_kn(&mut s1[..], MatRef::new(&kn, k, n, n)).unwrap();
        let p2 = PackedB::from_nk(&mut s2[..], MatRef::new(&nk, n, k, k)).unwrap();
        assert_eq!(p1.as_slice(), p2.as_slice());
        let packed = p1.as_slice();
        // Element (kk, col) lives in panel col / 32 at row kk.
        assert_eq!(packed[2 * PANEL_COLS + 5], kn[2 * n + 5]);
        assert_eq!(packed[k * PANEL_COLS + PANEL_COLS + 4], kn[n + 36]);
        assert_eq!(packed[k * PANEL_COLS + PANEL_COLS + 5], 0.0);
    }

    #[test]
    fn storage_must_match_exactly() {
        let b = [1.0f32; 6];
        let mut short = [0.0f32; 63];
        let mut long = [0.0f32; 65];
        assert!(matches!(
            PackedB::from_kn(&mut short[..], MatRef::new(&b, 2, 3, 3)),
            Err(KernelError::BufferTooSmall { .. })
        ));
        assert!(matches!(
            PackedB::from_kn(&mut long[..], MatRef::new(&b, 2, 3, 3)),
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
