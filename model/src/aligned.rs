//! `f32` storage whose first element sits on a 64-byte boundary (one cache line, one AVX-512
//! register), allocated once.

/// Alignment of every weight buffer and of the session arena, in bytes.
pub const ALIGN_BYTES: usize = 64;
const ALIGN_F32: usize = ALIGN_BYTES / core::mem::size_of::<f32>();

/// A fixed-length, zero-initialised, 64-byte aligned run of `f32`.
#[derive(Debug, Default)]
pub struct AlignedBuf {
    storage: Vec<f32>,
    offset: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zeros.
    pub fn zeros(len: usize) -> AlignedBuf {
        AlignedBuf::place(vec![0.0f32; len + ALIGN_F32 - 1], len)
    }

    /// `len` zeros, or `None` when the allocation fails (instead of aborting).
    pub fn try_zeros(len: usize) -> Option<AlignedBuf> {
        let total = len.checked_add(ALIGN_F32 - 1)?;
        let mut storage = Vec::new();
        storage.try_reserve_exact(total).ok()?;
        storage.resize(total, 0.0);
        Some(AlignedBuf::place(storage, len))
    }

    fn place(storage: Vec<f32>, len: usize) -> AlignedBuf {
        let misalignment = (storage.as_ptr() as usize / core::mem::size_of::<f32>()) % ALIGN_F32;
        let offset = (ALIGN_F32 - misalignment) % ALIGN_F32;
        AlignedBuf {
            storage,
            offset,
            len,
        }
    }

    /// An aligned copy of `values`.
    pub fn from_slice(values: &[f32]) -> AlignedBuf {
        let mut buf = AlignedBuf::zeros(values.len());
        buf.as_mut_slice().copy_from_slice(values);
        buf
    }

    /// The elements.
    pub fn as_slice(&self) -> &[f32] {
        &self.storage[self.offset..self.offset + self.len]
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
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
        self.len * core::mem::size_of::<f32>()
    }
}

impl Clone for AlignedBuf {
    /// A copy placed on its own 64-byte boundary (a cloned `Vec` may land elsewhere).
    fn clone(&self) -> AlignedBuf {
        AlignedBuf::from_slice(self.as_slice())
    }
}

impl AsRef<[f32]> for AlignedBuf {
    fn as_ref(&self) -> &[f32] {
        self.as_slice()
    }
}

impl AsMut<[f32]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [f32] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let buf = AlignedBuf::zeros(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_slice().as_ptr() as usize % ALIGN_BYTES, 0);
            assert!(buf.as_slice().iter().all(|&v| v == 0.0));
        }
        let buf = AlignedBuf::from_slice(&[1.0, 2.0, 3.0]);
        assert_eq!(buf.as_slice(), &[1.0, 2.0, 3.0]);
    }
}
