//! Strided batches of rows: the shape and the views every row-wise kernel (norms, softmax,
//! bias + activation) takes.

use super::sweep::Prefetch;
use crate::error::{check_dim, check_view, KernelError};

/// `rows` rows of `width` elements each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RowShape {
    /// Number of rows.
    pub rows: usize,
    /// Elements per row (the normalised dimension).
    pub width: usize,
}

impl RowShape {
    /// `rows × width`.
    pub const fn new(rows: usize, width: usize) -> RowShape {
        RowShape { rows, width }
    }

    /// Whether there is nothing to compute.
    pub const fn is_empty(self) -> bool {
        self.rows == 0 || self.width == 0
    }

    /// Distance between row starts when iterating: `stride`, or anything positive when there
    /// is at most one row (its stride is then never used and may be any value).
    pub(crate) const fn step(self, stride: usize) -> usize {
        let step = if self.rows <= 1 { self.width } else { stride };
        if step == 0 {
            1
        } else {
            step
        }
    }
}

/// A read-only strided batch: row `r` is `data[r * stride..][..width]`.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    /// The elements; must span `(rows - 1) * stride + width`.
    pub data: &'a [f32],
    /// Elements between the starts of consecutive rows (`>= width` when `rows > 1`).
    pub stride: usize,
}

impl<'a> Rows<'a> {
    /// Rows of `data` starting every `stride` elements.
    pub const fn new(data: &'a [f32], stride: usize) -> Rows<'a> {
        Rows { data, stride }
    }

    /// Checks that the view covers `shape`.
    pub(crate) fn check(&self, what: &'static str, shape: RowShape) -> Result<(), KernelError> {
        check_view(what, self.data.len(), shape.rows, shape.width, self.stride)
    }

    /// The rows, each exactly `width` long. The caller has run [`Rows::check`] and knows the
    /// shape is not empty, so the slicing cannot fail.
    pub(crate) fn iter(self, shape: RowShape) -> impl Iterator<Item = &'a [f32]> {
        let step = shape.step(self.stride);
        debug_assert!(self.check("rows", shape).is_ok() && !shape.is_empty());
        self.data
            .chunks(step)
            .take(shape.rows)
            .map(move |row| &row[..shape.width])
    }
}

/// A writable strided batch: row `r` is `data[r * stride..][..width]`; elements between rows
/// are never touched.
#[derive(Debug)]
pub struct RowsMut<'a> {
    /// The elements; must span `(rows - 1) * stride + width`.
    pub data: &'a mut [f32],
    /// Elements between the starts of consecutive rows (`>= width` when `rows > 1`).
    pub stride: usize,
}

impl<'a> RowsMut<'a> {
    /// Rows of `data` starting every `stride` elements.
    pub fn new(data: &'a mut [f32], stride: usize) -> RowsMut<'a> {
        RowsMut { data, stride }
    }

    /// Checks that the view covers `shape`.
    pub(crate) fn check(&self, what: &'static str, shape: RowShape) -> Result<(), KernelError> {
        check_view(what, self.data.len(), shape.rows, shape.width, self.stride)
    }

    /// Where the rows start, for prefetching.
    pub(crate) fn ahead(&self, shape: RowShape) -> Ahead {
        Ahead::new(self.data.as_ptr(), self.stride, shape)
    }

    /// The rows, each exactly `width` long (see [`Rows::iter`] for the caller's duties).
    pub(crate) fn iter(self, shape: RowShape) -> impl Iterator<Item = &'a mut [f32]> {
        let step = shape.step(self.stride);
        debug_assert!(self.check("rows", shape).is_ok() && !shape.is_empty());
        self.data
            .chunks_mut(step)
            .take(shape.rows)
            .map(move |row| &mut row[..shape.width])
    }
}

/// Checks that a per-column vector (gamma, beta, bias) has exactly `width` elements.
pub(crate) fn check_vector(
    what: &'static str,
    vector: &[f32],
    shape: RowShape,
) -> Result<(), KernelError> {
    check_dim(what, shape.width, vector.len())
}

/// The starts of a view's rows, to prefetch row `r + 1` while row `r` is processed.
#[derive(Clone, Copy)]
pub(crate) struct Ahead {
    base: *const f32,
    step: usize,
    shape: RowShape,
}

impl Ahead {
    /// The rows of a view starting at `base` every `stride` elements.
    pub(crate) fn new(base: *const f32, stride: usize, shape: RowShape) -> Ahead {
        Ahead {
            base,
            step: shape.step(stride),
            shape,
        }
    }

    /// The row after row `r`, or nothing for the last row and for rows too short to gain.
    #[inline(always)]
    pub(crate) fn after(&self, r: usize) -> Prefetch {
        if r + 1 < self.shape.rows && self.shape.width >= Prefetch::MIN_LEN {
            Prefetch::new(
                self.base.wrapping_add((r + 1) * self.step),
                self.shape.width,
            )
        } else {
            Prefetch::NONE
        }
    }
}
