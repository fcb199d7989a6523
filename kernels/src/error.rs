//! The one error type every kernel returns for bad arguments.

use core::fmt;

/// Why a kernel refused its arguments. Nothing was written when a kernel returns one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelError {
    /// A slice is shorter than the shape and strides it is used with require.
    BufferTooSmall {
        /// Which argument.
        what: &'static str,
        /// Elements the shape needs.
        needed: usize,
        /// Elements given.
        got: usize,
    },
    /// Two arguments disagree on a dimension.
    ShapeMismatch {
        /// Which dimension.
        what: &'static str,
        /// The size one argument implies.
        expected: usize,
        /// The size the other has.
        got: usize,
    },
    /// A stride is smaller than the row it steps over (rows would overlap).
    BadStride {
        /// Which argument.
        what: &'static str,
        /// The smallest valid stride.
        min: usize,
        /// The stride given.
        got: usize,
    },
    /// A parameter is outside its valid range (for example a head count of zero).
    InvalidArgument(&'static str),
    /// A shape is so large that its element count overflows `usize`.
    Overflow(&'static str),
    /// The caller's scratch buffer is smaller than the kernel's `ScratchSpec` asked for.
    ScratchTooSmall {
        /// `f32` elements needed.
        needed: usize,
        /// `f32` elements given.
        got: usize,
    },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KernelError::BufferTooSmall { what, needed, got } => {
                write!(
                    f,
                    "`{what}` holds {got} elements but the shape needs {needed}"
                )
            }
            KernelError::ShapeMismatch {
                what,
                expected,
                got,
            } => {
                write!(
                    f,
                    "dimension `{what}` mismatch: expected {expected}, got {got}"
                )
            }
            KernelError::BadStride { what, min, got } => {
                write!(f, "stride of `{what}` is {got}, below the row length {min}")
            }
            KernelError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            KernelError::Overflow(what) => write!(f, "size of `{what}` overflows usize"),
            KernelError::ScratchTooSmall { needed, got } => {
                write!(f, "scratch holds {got} f32 but the call needs {needed}")
            }
        }
    }
}

impl core::error::Error for KernelError {}

/// Elements a strided `rows × cols` view spans: `(rows - 1) * stride + cols`, 0 when empty.
pub fn strided_len(
    what: &'static str,
    rows: usize,
    cols: usize,
    stride: usize,
) -> Result<usize, KernelError> {
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    if rows > 1 && stride < cols {
        return Err(KernelError::BadStride {
            what,
            min: cols,
            got: stride,
        });
    }
    (rows - 1)
        .checked_mul(stride)
        .and_then(|n| n.checked_add(cols))
        .ok_or(KernelError::Overflow(what))
}

/// Checks that `len` elements cover a strided `rows × cols` view.
pub fn check_view(
    what: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
    stride: usize,
) -> Result<(), KernelError> {
    let needed = strided_len(what, rows, cols, stride)?;
    if len < needed {
        return Err(KernelError::BufferTooSmall {
            what,
            needed,
            got: len,
        });
    }
    Ok(())
}

/// Checks that two dimensions agree.
pub fn check_dim(what: &'static str, expected: usize, got: usize) -> Result<(), KernelError> {
    if expected != got {
        return Err(KernelError::ShapeMismatch {
            what,
            expected,
            got,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_views() {
        assert_eq!(strided_len("a", 0, 5, 0), Ok(0));
        assert_eq!(strided_len("a", 3, 0, 0), Ok(0));
        assert_eq!(strided_len("a", 1, 5, 0), Ok(5));
        assert_eq!(strided_len("a", 3, 4, 7), Ok(18));
        assert!(matches!(
            strided_len("a", 3, 4, 3),
            Err(KernelError::BadStride { .. })
        ));
        assert_eq!(
            strided_len("a", usize::MAX, 4, 8),
            Err(KernelError::Overflow("a"))
        );
        assert!(check_view("a", 17, 3, 4, 7).is_err());
        assert!(check_view("a", 18, 3, 4, 7).is_ok());
        assert!(check_dim("k", 3, 4).is_err());
    }
}
