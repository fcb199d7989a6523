//! The packed int8 weight [`PackedI8`]: symmetric per-output-channel int8 with one scale per
//! channel, packed once at load time.
//!
//! # Format
//!
//! A weight `w` (`n × k`, PyTorch's and CTranslate2's `nn.Linear` layout: row `j` is output
//! channel `j`) is stored as `q[j][p]` in `-127..=127` and one scale per channel, CTranslate2's
//! convention: `w[j][p] ≈ q[j][p] / scale[j]`, `scale[j] = 127 / max_p |w[j][p]|` (CTranslate2's
//! `Dequantize` multiplies by `1 / scale`). `-128` is never produced and refused on input: the
//! microkernels' exactness proofs need `|q| <= 127`.
//!
//! Quantising a channel rounds `w · scale` to nearest (ties to even) and clamps to `±127`:
//! `|w - q / scale| <= 0.5 / scale` up to the `f32` rounding of `scale` and of the product,
//! i.e. `|w - q · d| <= amax / 254 · (1 + 2^-14)` with `d = 1 / scale` (the round trip the tests
//! check). A channel whose largest magnitude is below `2^-120` (all zero, say) stores `q = 0`
//! and `d = 0`.
//!
//! # Layout
//!
//! Columns (output channels) are cut into panels of [`PANEL_COLS`] (32); the last is padded
//! with zero channels. A panel is [`HEADER_BYTES`] of per-channel data followed by
//! `round_up(k, 4) / 4` groups of 128 bytes:
//! - header: 32 native-endian `i32` channel sums `Σ_p q[j][p]` (the offset compensation of the
//!   VNNI kernels), then 32 native-endian `f32` dequantisation factors `d[j] = 1 / scale[j]`;
//! - group `g`: for each of the 32 channels `j`, the 4 bytes `q[j][4g..4g + 4]` (zero past `k`).
//!
//! So one 16-byte (NEON), 32-byte (AVX2) or 64-byte (AVX-512) load is 4, 8 or 16 channels × 4
//! depths: exactly the signed operand of `sdot`, `vpmaddubsw` and `vpdpbusd`, each of whose
//! 32-bit lanes sums four products. The layout is the same at every level.

use crate::error::{check_dim, check_view, KernelError};
use crate::gemm::element::Element;
use crate::gemm::PANEL_COLS;

/// Depths per group: the bytes one 32-bit lane of a dot-product instruction multiplies.
pub const K_GROUP: usize = 4;

/// Bytes of the per-panel header: 32 `i32` channel sums and 32 `f32` dequantisation factors.
pub const HEADER_BYTES: usize = 2 * 4 * PANEL_COLS;

/// Bytes of one group of a panel: 32 channels × 4 depths.
pub(crate) const GROUP_BYTES: usize = PANEL_COLS * K_GROUP;

/// Largest reduction length: every `i32` sum the kernels form stays exact up to it (see the
/// module docs of [`int8`](super)).
pub const MAX_K: usize = 1 << 17;

/// Bytes of one packed panel for depth `k`.
pub(crate) const fn panel_bytes(k: usize) -> usize {
    HEADER_BYTES + k.div_ceil(K_GROUP) * GROUP_BYTES
}

/// Bytes a packed `n`-channel, depth-`k` int8 weight occupies:
/// `ceil(n / 32) · (256 + round_up(k, 4) · 32)`.
pub fn packed_i8_len(k: usize, n: usize) -> Result<usize, KernelError> {
    if k > MAX_K {
        return Err(KernelError::InvalidArgument(
            "int8 GEMM depth k above MAX_K (131072)",
        ));
    }
    n.div_ceil(PANEL_COLS)
        .checked_mul(panel_bytes(k))
        .ok_or(KernelError::Overflow("packed int8 weight"))
}

/// A symmetric int8 weight (`k` inputs, `n` output channels, one scale per channel) in the
/// panel layout of the module docs.
///
/// Generic over its storage `W` (anything that derefs to `[i8]`), so the kernels never own
/// memory. Storage aligned to 64 bytes makes every group one pair of cache lines.
#[derive(Clone, Debug)]
pub struct PackedI8<W> {
    data: W,
    k: usize,
    n: usize,
}

impl<W: AsRef<[i8]>> PackedI8<W> {
    /// Wraps data already in the packed layout (for example a `PackedI8` saved earlier).
    ///
    /// Fails unless `data` holds exactly [`packed_i8_len`]`(k, n)` bytes, or if a weight byte
    /// is `-128`. Headers are trusted as they are: wrong channel sums give wrong results at the
    /// VNNI levels only, never undefined behaviour.
    pub fn from_packed(data: W, k: usize, n: usize) -> Result<PackedI8<W>, KernelError> {
        check_storage(data.as_ref().len(), k, n)?;
        let panel = panel_bytes(k);
        for block in data.as_ref().chunks_exact(panel.max(1)) {
            if block[HEADER_BYTES.min(block.len())..].contains(&i8::MIN) {
                return Err(KernelError::InvalidArgument("int8 weight byte -128"));
            }
        }
        Ok(PackedI8 { data, k, n })
    }

    /// Reduction length: the inputs of each channel, the columns of `A`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output channels: the columns of `C`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The packed bytes.
    pub fn as_slice(&self) -> &[i8] {
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

    /// The quantised weight `q[j][p]` (channel `j < n`, input `p < k`), or `None` outside.
    pub fn get(&self, j: usize, p: usize) -> Option<i8> {
        if j >= self.n || p >= self.k {
            return None;
        }
        let at = (j / PANEL_COLS) * panel_bytes(self.k)
            + HEADER_BYTES
            + (p / K_GROUP) * GROUP_BYTES
            + (j % PANEL_COLS) * K_GROUP
            + p % K_GROUP;
        self.as_slice().get(at).copied()
    }

    /// Channel `j`'s dequantisation factor `d[j] = 1 / scale[j]` (`w ≈ q · d`), or `None`.
    pub fn dequant(&self, j: usize) -> Option<f32> {
        self.header_word(j, PANEL_COLS).map(f32::from_bits)
    }

    /// Channel `j`'s sum of quantised weights `Σ_p q[j][p]`, or `None`.
    pub fn channel_sum(&self, j: usize) -> Option<i32> {
        self.header_word(j, 0).map(|w| w as i32)
    }

    fn header_word(&self, j: usize, first: usize) -> Option<u32> {
        if j >= self.n {
            return None;
        }
        let at = (j / PANEL_COLS) * panel_bytes(self.k) + 4 * (first + j % PANEL_COLS);
        let bytes = self.as_slice().get(at..at + 4)?;
        Some(u32::from_ne_bytes(core::array::from_fn(|b| bytes[b] as u8)))
    }
}

impl<W: AsRef<[i8]> + AsMut<[i8]>> PackedI8<W> {
    /// Quantises and packs a row-major `n × k` weight of any [`Element`] type (`f32`, `f16`,
    /// `bf16`; row stride `stride`): each channel (row) gets `scale = 127 / max |w|`, its values
    /// `round(w · scale)` clamped to `±127` (see the module docs for the bound).
    ///
    /// `storage` must hold exactly [`packed_i8_len`]`(k, n)` bytes. Errors: a non-finite weight
    /// (`InvalidArgument`), bad views or storage, `k > MAX_K`.
    pub fn quantize_nk<S: Element>(
        mut storage: W,
        data: &[S],
        n: usize,
        k: usize,
        stride: usize,
    ) -> Result<PackedI8<W>, KernelError> {
        check_view("w", data.len(), n, k, stride)?;
        check_storage(storage.as_ref().len(), k, n)?;
        let row = |j: usize| &data[j * stride..j * stride + k];
        if (0..n).any(|j| row(j).iter().any(|x| !x.to_f32().is_finite())) {
            return Err(KernelError::InvalidArgument(
                "int8 quantisation of a non-finite weight",
            ));
        }
        fill(storage.as_mut(), k, n, |j, put| {
            let amax = row(j).iter().fold(0.0f32, |m, x| m.max(x.to_f32().abs()));
            if amax < TINY {
                return 0.0;
            }
            let scale = 127.0 / amax;
            for (p, x) in row(j).iter().enumerate() {
                put(p, round_clamp(x.to_f32() * scale));
            }
            1.0 / scale
        });
        Ok(PackedI8 {
            data: storage,
            k,
            n,
        })
    }

    /// Packs CTranslate2's int8 variables as they are (no dequantising): `weight`, row-major
    /// `n × k` `int8`, and `weight_scale`, `n` values with `w ≈ q / scale`.
    ///
    /// Errors: a scale that is not finite and positive or a weight `-128` (`InvalidArgument`;
    /// CTranslate2's quantiser produces neither), bad lengths or storage, `k > MAX_K`.
    pub fn from_ct2(
        mut storage: W,
        weight: &[i8],
        weight_scale: &[f32],
        n: usize,
        k: usize,
    ) -> Result<PackedI8<W>, KernelError> {
        check_view("weight", weight.len(), n, k, k)?;
        check_dim("weight_scale length (n)", n, weight_scale.len())?;
        check_storage(storage.as_ref().len(), k, n)?;
        if weight_scale.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(KernelError::InvalidArgument(
                "int8 weight_scale must be finite and positive",
            ));
        }
        if weight[..n * k].contains(&i8::MIN) {
            return Err(KernelError::InvalidArgument("int8 weight byte -128"));
        }
        fill(storage.as_mut(), k, n, |j, put| {
            for (p, &q) in weight[j * k..j * k + k].iter().enumerate() {
                put(p, q);
            }
            1.0 / weight_scale[j]
        });
        Ok(PackedI8 {
            data: storage,
            k,
            n,
        })
    }
}

/// Channels (and activation rows) whose largest magnitude is below this (`2^-120`) are stored
/// as zero with `d = 0`: `127 / amax` would overflow `f32` near `2^-126`.
pub(crate) const TINY: f32 = 7.523_164e-37;

/// Rounds to nearest (ties to even) and clamps to `±127`.
#[inline(always)]
pub(crate) fn round_clamp(y: f32) -> i8 {
    // Adding 1.5 · 2^23 rounds any |y| < 2^22 to an integer, ties to even, in the default
    // rounding mode, and leaves the sum in [2^23, 2^24), where one unit is one step of the
    // bit pattern: the bits minus those of 1.5 · 2^23 are the integer. The clamp comes first
    // (as compares and selects, which vectorise), so |y| <= 127 there (callers never pass NaN).
    const MAGIC: f32 = 12_582_912.0;
    let y = if y > 127.0 { 127.0 } else { y };
    let y = if y < -127.0 { -127.0 } else { y };
    ((y + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32) as i8
}

/// Zeroes `dst` (the padding) and packs each channel: `channel(j, put)` calls `put(p, q)` for
/// each of the `k` values of channel `j` and returns its dequantisation factor; the channel sum
/// and the factor go into the panel header.
fn fill(
    dst: &mut [i8],
    k: usize,
    n: usize,
    mut channel: impl FnMut(usize, &mut dyn FnMut(usize, i8)) -> f32,
) {
    dst.fill(0);
    let panel = panel_bytes(k);
    for j in 0..n {
        let block = &mut dst[(j / PANEL_COLS) * panel..][..panel];
        let c = j % PANEL_COLS;
        let mut sum = 0i32;
        let d = channel(j, &mut |p, v| {
            block[HEADER_BYTES + (p / K_GROUP) * GROUP_BYTES + c * K_GROUP + p % K_GROUP] = v;
            // |sum| <= 127 · MAX_K < 2^31.
            sum += i32::from(v);
        });
        write_word(block, c, sum as u32);
        write_word(block, PANEL_COLS + c, d.to_bits());
    }
}

/// Writes word `index` of a panel header in native byte order.
fn write_word(block: &mut [i8], index: usize, word: u32) {
    for (b, byte) in word.to_ne_bytes().into_iter().enumerate() {
        block[4 * index + b] = byte as i8;
    }
}

fn check_storage(len: usize, k: usize, n: usize) -> Result<(), KernelError> {
    let needed = packed_i8_len(k, n)?;
    if len < needed {
        return Err(KernelError::BufferTooSmall {
            what: "packed int8 storage",
            needed,
            got: len,
        });
    }
    if len > needed {
        return Err(KernelError::ShapeMismatch {
            what: "packed int8 storage length",
            expected: needed,
            got: len,
        });
    }
    Ok(())
}
