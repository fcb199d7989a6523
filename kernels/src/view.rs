//! The one matrix view every kernel takes: `rows × cols` elements, row `r` starting at
//! `data[r · stride]`, read-only ([`View`]) or written ([`ViewMut`]).
//!
//! A GEMM operand, an attention operand (positions × `heads · d_head`), a batch of rows for a
//! norm, a softmax or an activation are all such views; the element type is `f32` unless a
//! kernel reads another (`f16` keys and values, `i8` quantised activations, `i32` sums).
//!
//! The constructors validate the view against its slice and return a [`KernelError`] (named
//! `"view"`) instead of a view a kernel could read past: the slice must hold
//! `(rows - 1) · stride + cols` elements, and rows of a [`ViewMut`] (and of a [`View`] made
//! with [`View::new`]) must not overlap (`stride >= cols` when there are two rows or more).
//! Kernels then check only that the views' dimensions agree with each other.

use crate::error::{check_dim, check_view, KernelError};

/// The name the constructors' errors carry.
const WHAT: &str = "view";

/// Checks that `len` elements cover a `rows × cols` view with row stride `stride`. With
/// `disjoint`, a stride below `cols` (overlapping rows) is refused when `rows > 1`.
fn check(
    len: usize,
    rows: usize,
    cols: usize,
    stride: usize,
    disjoint: bool,
) -> Result<(), KernelError> {
    if disjoint {
        return check_view(WHAT, len, rows, cols, stride);
    }
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let needed = (rows - 1)
        .checked_mul(stride)
        .and_then(|n| n.checked_add(cols))
        .ok_or(KernelError::Overflow(WHAT))?;
    if len < needed {
        return Err(KernelError::BufferTooSmall {
            what: WHAT,
            needed,
            got: len,
        });
    }
    Ok(())
}

/// Distance between row starts when iterating: `stride`, or `cols` when there is at most one
/// row (its stride is never used and may be any value).
const fn step(rows: usize, cols: usize, stride: usize) -> usize {
    if rows <= 1 {
        cols
    } else {
        stride
    }
}

/// The methods [`View`] and [`ViewMut`] share: the shape, and the row and column slices (each
/// type re-slices its data in its own `at`).
macro_rules! shape_and_slices {
    ($view:ident) => {
        /// Rows.
        pub fn rows(&self) -> usize {
            self.rows
        }

        /// Columns.
        pub fn cols(&self) -> usize {
            self.cols
        }

        /// Elements between the starts of consecutive rows.
        pub fn stride(&self) -> usize {
            self.stride
        }

        /// `(rows, cols)`.
        pub fn shape(&self) -> (usize, usize) {
            (self.rows, self.cols)
        }

        /// Rows `first..first + count`, or `BufferTooSmall` when they pass the last row.
        pub fn slice_rows(self, first: usize, count: usize) -> Result<$view<'a, E>, KernelError> {
            let offset = row_offset(self.rows, self.stride, first, count)?;
            let cols = self.cols;
            Ok(self.at(offset, count, cols))
        }

        /// Columns `first..first + count` of every row, or `BufferTooSmall` when they pass the
        /// last column.
        pub fn slice_cols(self, first: usize, count: usize) -> Result<$view<'a, E>, KernelError> {
            check_range(self.cols, first, count)?;
            let offset = if self.rows == 0 { 0 } else { first };
            let rows = self.rows;
            Ok(self.at(offset, rows, count))
        }
    };
}

/// A read-only strided matrix: element `(i, j)` is `data[i · stride + j]`.
#[derive(Debug)]
pub struct View<'a, E = f32> {
    pub(crate) data: &'a [E],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) stride: usize,
}

impl<E> Clone for View<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for View<'_, E> {}

impl<'a, E> View<'a, E> {
    /// `rows × cols` elements of `data`, row `r` starting at `r · stride`. Errors: `BadStride`
    /// when rows overlap (`stride < cols` with two rows or more), `BufferTooSmall` when `data`
    /// is shorter than `(rows - 1) · stride + cols`, `Overflow` when that overflows.
    pub fn new(
        data: &'a [E],
        rows: usize,
        cols: usize,
        stride: usize,
    ) -> Result<View<'a, E>, KernelError> {
        check(data.len(), rows, cols, stride, true)?;
        Ok(View {
            data,
            rows,
            cols,
            stride,
        })
    }

    /// [`View::new`] without the stride check: consecutive rows may overlap (`stride < cols`,
    /// even 0), as the sliding windows of a convolution over its input do.
    pub fn overlapping(
        data: &'a [E],
        rows: usize,
        cols: usize,
        stride: usize,
    ) -> Result<View<'a, E>, KernelError> {
        check(data.len(), rows, cols, stride, false)?;
        Ok(View {
            data,
            rows,
            cols,
            stride,
        })
    }

    /// `rows × cols` elements stored densely (`stride = cols`).
    pub fn dense(data: &'a [E], rows: usize, cols: usize) -> Result<View<'a, E>, KernelError> {
        View::new(data, rows, cols, cols)
    }

    /// A view whose shape was checked against `data` already (a [`ViewMut`]'s).
    fn from_checked(data: &'a [E], rows: usize, cols: usize, stride: usize) -> View<'a, E> {
        View {
            data,
            rows,
            cols,
            stride,
        }
    }

    /// The elements the view was made from (from row 0 on).
    pub fn data(&self) -> &'a [E] {
        self.data
    }

    /// Row `r` (`cols` elements), or `None` past the last row.
    pub fn row(&self, r: usize) -> Option<&'a [E]> {
        if r >= self.rows {
            return None;
        }
        self.data.get(r * self.stride..)?.get(..self.cols)
    }

    /// The rows, each exactly `cols` long.
    pub fn iter_rows(self) -> impl Iterator<Item = &'a [E]> {
        (0..self.rows).filter_map(move |r| self.row(r))
    }

    shape_and_slices!(View);

    /// The `rows × cols` view from element `offset` on, which the slice functions checked.
    fn at(self, offset: usize, rows: usize, cols: usize) -> View<'a, E> {
        View {
            data: self.data.get(offset..).unwrap_or(&[]),
            rows,
            cols,
            ..self
        }
    }
}

/// A written strided matrix: element `(i, j)` is `data[i · stride + j]`. Rows never overlap,
/// and elements between rows are never touched by a kernel.
#[derive(Debug)]
pub struct ViewMut<'a, E = f32> {
    pub(crate) data: &'a mut [E],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) stride: usize,
}

impl<'a, E> ViewMut<'a, E> {
    /// `rows × cols` elements of `data`, row `r` starting at `r · stride`, with the errors of
    /// [`View::new`].
    pub fn new(
        data: &'a mut [E],
        rows: usize,
        cols: usize,
        stride: usize,
    ) -> Result<ViewMut<'a, E>, KernelError> {
        check(data.len(), rows, cols, stride, true)?;
        Ok(ViewMut {
            data,
            rows,
            cols,
            stride,
        })
    }

    /// `rows × cols` elements stored densely (`stride = cols`).
    pub fn dense(
        data: &'a mut [E],
        rows: usize,
        cols: usize,
    ) -> Result<ViewMut<'a, E>, KernelError> {
        ViewMut::new(data, rows, cols, cols)
    }

    /// The same elements, read-only, for as long as `self` is borrowed.
    pub fn as_view(&self) -> View<'_, E> {
        let (rows, cols, stride) = (self.rows, self.cols, self.stride);
        View::from_checked(self.data, rows, cols, stride)
    }

    /// The same elements, read-only, for the whole lifetime.
    pub fn into_view(self) -> View<'a, E> {
        let (rows, cols, stride) = (self.rows, self.cols, self.stride);
        View::from_checked(self.data, rows, cols, stride)
    }

    /// The same view, borrowed for a shorter time (to pass it to a kernel and use it after).
    pub fn reborrow(&mut self) -> ViewMut<'_, E> {
        ViewMut {
            data: self.data,
            ..*self
        }
    }

    /// Row `r` (`cols` elements), or `None` past the last row.
    pub fn row_mut(&mut self, r: usize) -> Option<&mut [E]> {
        if r >= self.rows {
            return None;
        }
        self.data.get_mut(r * self.stride..)?.get_mut(..self.cols)
    }

    /// The rows, each exactly `cols` long.
    pub fn iter_rows_mut(self) -> impl Iterator<Item = &'a mut [E]> {
        let (rows, cols) = (self.rows, self.cols);
        let step = step(rows, cols, self.stride).max(1);
        self.data
            .chunks_mut(step)
            .take(if cols == 0 { 0 } else { rows })
            .filter_map(move |row| row.get_mut(..cols))
    }

    shape_and_slices!(ViewMut);

    /// The `rows × cols` view from element `offset` on, which the slice functions checked.
    fn at(self, offset: usize, rows: usize, cols: usize) -> ViewMut<'a, E> {
        let len = self.data.len();
        ViewMut {
            data: self.data.get_mut(offset.min(len)..).unwrap_or_default(),
            rows,
            cols,
            stride: self.stride,
        }
    }
}

/// Checks that a view's `(rows, cols)` are `expected`: `what` names its rows and its columns.
pub(crate) fn check_shape(
    what: [&'static str; 2],
    expected: (usize, usize),
    got: (usize, usize),
) -> Result<(), KernelError> {
    check_dim(what[0], expected.0, got.0)?;
    check_dim(what[1], expected.1, got.1)
}

/// Checks that `first..first + count` lies inside `0..len`.
fn check_range(len: usize, first: usize, count: usize) -> Result<(), KernelError> {
    let end = first
        .checked_add(count)
        .ok_or(KernelError::Overflow(WHAT))?;
    if end > len {
        return Err(KernelError::BufferTooSmall {
            what: WHAT,
            needed: end,
            got: len,
        });
    }
    Ok(())
}

/// Where row `first` of a view starts, after checking that rows `first..first + count` exist.
/// An empty range past the rows starts at the end of the data.
fn row_offset(
    rows: usize,
    stride: usize,
    first: usize,
    count: usize,
) -> Result<usize, KernelError> {
    check_range(rows, first, count)?;
    Ok(if count == 0 { 0 } else { first * stride })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_check_the_span() {
        let data = [0.0f32; 18];
        assert!(View::new(&data[..0], 0, 5, 0).is_ok());
        assert!(View::new(&data[..0], 3, 0, 0).is_ok());
        assert!(View::new(&data[..5], 1, 5, 0).is_ok());
        assert!(View::new(&data, 3, 4, 7).is_ok());
        assert_eq!(
            View::new(&data[..17], 3, 4, 7).unwrap_err(),
            KernelError::BufferTooSmall {
                what: "view",
                needed: 18,
                got: 17
            }
        );
        assert!(matches!(
            View::new(&data, 3, 4, 3),
            Err(KernelError::BadStride { min: 4, got: 3, .. })
        ));
        assert!(View::overlapping(&data, 3, 4, 3).is_ok());
        assert_eq!(
            View::new(&data, usize::MAX, 4, 8).unwrap_err(),
            KernelError::Overflow("view")
        );
        let mut out = [0.0f32; 18];
        assert!(ViewMut::new(&mut out, 3, 4, 3).is_err());
        assert!(ViewMut::new(&mut out[..17], 3, 4, 7).is_err());
    }

    #[test]
    fn rows_and_slices() {
        let data: [u8; 10] = core::array::from_fn(|i| i as u8);
        let view = View::new(&data, 3, 2, 4).unwrap();
        assert_eq!(view.row(2), Some(&[8, 9][..]));
        assert_eq!(view.row(3), None);
        let cols = view.slice_cols(1, 1).unwrap();
        assert_eq!(cols.iter_rows().flatten().copied().sum::<u8>(), 1 + 5 + 9);
        let rows = view.slice_rows(1, 2).unwrap();
        assert_eq!(rows.row(0), Some(&[4, 5][..]));
        assert!(view.slice_rows(2, 2).is_err());
        assert!(view.slice_cols(1, 2).is_err());
        assert_eq!(view.slice_rows(3, 0).unwrap().rows(), 0);

        let mut out = [0u8; 10];
        let mut view = ViewMut::new(&mut out, 3, 2, 4).unwrap();
        for row in view.reborrow().iter_rows_mut() {
            row.fill(1);
        }
        view.reborrow()
            .slice_cols(1, 1)
            .unwrap()
            .row_mut(1)
            .unwrap()[0] = 7;
        assert_eq!(out, [1, 1, 0, 0, 1, 7, 0, 0, 1, 1]);
    }
}
