//! Storage whose first element sits on a 64-byte boundary (one cache line, one AVX-512
//! register), allocated once and fallibly: sizes can come from files, so a failed allocation
//! is an error value, never an abort.

use thiserror::Error;

/// Alignment of every weight buffer and of the session arena, in bytes.
pub const ALIGN_BYTES: usize = 64;

/// An allocation the system refused (or whose size overflows `usize`).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("cannot allocate {bytes} bytes")]
pub struct AllocError {
    /// Bytes asked for (saturated at `usize::MAX`).
    pub bytes: usize,
}

/// A fixed-length, zero-initialised, 64-byte aligned run of `T` (`f32` by default; the 16-bit
/// weight types too).
#[derive(Debug, Default)]
pub struct AlignedBuf<T = f32> {
    storage: Vec<T>,
    offset: usize,
    len: usize,
}

impl<T: bytemuck::Pod> AlignedBuf<T> {
    /// Elements of slack that let any allocation be advanced to a 64-byte boundary.
    const SLACK: usize = ALIGN_BYTES / core::mem::size_of::<T>() - 1;

    /// `len` zeros, or an [`AllocError`] when the allocation fails.
    pub fn zeros(len: usize) -> Result<AlignedBuf<T>, AllocError> {
        let bytes = len.saturating_mul(core::mem::size_of::<T>());
        let error = AllocError { bytes };
        let total = len.checked_add(Self::SLACK).ok_or(error)?;
        let mut storage = Vec::new();
        storage.try_reserve_exact(total).map_err(|_| error)?;
        storage.resize(total, T::zeroed());
        // Elements of `T` to skip until the 64-byte boundary (every `T` here has a size that
        // divides 64 and is its alignment, so the boundary falls on an element).
        let misaligned = storage.as_ptr() as usize % ALIGN_BYTES;
        let offset = (ALIGN_BYTES - misaligned) % ALIGN_BYTES / core::mem::size_of::<T>();
        Ok(AlignedBuf {
            storage,
            offset,
            len,
        })
    }

    /// An aligned copy of `values`, or an [`AllocError`].
    pub fn from_slice(values: &[T]) -> Result<AlignedBuf<T>, AllocError> {
        let mut buf = AlignedBuf::zeros(values.len())?;
        buf.as_mut_slice().copy_from_slice(values);
        Ok(buf)
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.storage[self.offset..self.offset + self.len]
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.storage[self.offset..self.offset + self.len]
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the elements (excluding alignment slack).
    pub fn bytes(&self) -> usize {
        core::mem::size_of_val(self.as_slice())
    }
}

impl<T: bytemuck::Pod> Clone for AlignedBuf<T> {
    /// A copy placed on its own 64-byte boundary (a cloned `Vec` may land elsewhere). Like any
    /// `Clone` of owned memory, it aborts if the allocation fails; loaders never clone.
    fn clone(&self) -> AlignedBuf<T> {
        let mut storage = Vec::with_capacity(self.len + Self::SLACK);
        storage.resize(self.len + Self::SLACK, T::zeroed());
        let misaligned = storage.as_ptr() as usize % ALIGN_BYTES;
        let offset = (ALIGN_BYTES - misaligned) % ALIGN_BYTES / core::mem::size_of::<T>();
        storage[offset..offset + self.len].copy_from_slice(self.as_slice());
        AlignedBuf {
            storage,
            offset,
            len: self.len,
        }
    }
}

impl<T: bytemuck::Pod> AsRef<[T]> for AlignedBuf<T> {
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: bytemuck::Pod> AsMut<[T]> for AlignedBuf<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let buf = AlignedBuf::<f32>::zeros(len).unwrap();
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_slice().as_ptr() as usize % ALIGN_BYTES, 0);
            assert!(buf.as_slice().iter().all(|&v| v == 0.0));
            let half = AlignedBuf::<u16>::zeros(len).unwrap();
            assert_eq!(half.as_slice().as_ptr() as usize % ALIGN_BYTES, 0);
            assert_eq!(half.bytes(), 2 * len);
            let copy = half.clone();
            assert_eq!(copy.as_slice().as_ptr() as usize % ALIGN_BYTES, 0);
        }
        let buf = AlignedBuf::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
        assert_eq!(buf.clone().as_slice(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        // Far beyond `isize::MAX` bytes: `try_reserve` refuses without touching the allocator.
        for len in [usize::MAX, usize::MAX / 4, usize::MAX / 8] {
            let err = AlignedBuf::<f32>::zeros(len).unwrap_err();
            assert_eq!(err.bytes, len.saturating_mul(4));
        }
    }
}
