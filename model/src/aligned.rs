//! Storage whose first element sits on a 64-byte boundary (one cache line, one AVX-512
//! register), allocated once and fallibly: sizes can come from files, so a failed allocation
//! is an error value, never an abort. The buffer type needs `std`; its alignment and error
//! are shared with the `no_std` core.

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

/// Size of a transparent huge page on the platforms that back buffers with them.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// A fixed-length, zero-initialised, 64-byte aligned run of `T` (`f32` by default; the 16-bit
/// weight types too).
///
/// On Linux a buffer of at least [`HUGE_PAGE_BYTES`] is an anonymous mapping whose data starts
/// on a 2 MiB boundary and whose whole 2 MiB pages are advised (`MADV_HUGEPAGE`) to be
/// transparent huge pages: a decode step streams every weight once, and huge pages spare that
/// stream a TLB miss every 4 KiB (measured here: ~5% more single-core read bandwidth). The
/// partial last page stays in 4 KiB pages, so resident memory is the buffer's size, as before.
/// Smaller buffers, other platforms, or a kernel without huge pages: ordinary heap memory.
#[cfg(feature = "std")]
#[derive(Debug, Default)]
pub struct AlignedBuf<T = f32> {
    backing: Backing<T>,
    /// Elements of `T` before the first element of the buffer.
    offset: usize,
    len: usize,
}

/// Where the elements of an [`AlignedBuf`] live.
#[cfg(feature = "std")]
#[derive(Debug)]
enum Backing<T> {
    /// A vector with enough slack to advance to a 64-byte boundary.
    Heap(Vec<T>),
    /// An anonymous mapping (zero-filled by the kernel) with 2 MiB of slack to advance to a
    /// huge-page boundary; the slack is never touched, so it is address space, not memory.
    #[cfg(target_os = "linux")]
    Mapped(memmap2::MmapMut),
}

#[cfg(feature = "std")]
impl<T> Default for Backing<T> {
    fn default() -> Backing<T> {
        Backing::Heap(Vec::new())
    }
}

#[cfg(feature = "std")]
impl<T: bytemuck::Pod> AlignedBuf<T> {
    /// Elements of slack that let any allocation be advanced to a 64-byte boundary.
    const SLACK: usize = ALIGN_BYTES / core::mem::size_of::<T>() - 1;

    /// `len` zeros, or an [`AllocError`] when the allocation fails.
    pub fn zeros(len: usize) -> Result<AlignedBuf<T>, AllocError> {
        let bytes = len.saturating_mul(core::mem::size_of::<T>());
        let error = AllocError { bytes };
        #[cfg(target_os = "linux")]
        if bytes >= HUGE_PAGE_BYTES {
            return Self::mapped(len, bytes).map_err(|_| error);
        }
        let total = len.checked_add(Self::SLACK).ok_or(error)?;
        let mut storage = Vec::new();
        storage.try_reserve_exact(total).map_err(|_| error)?;
        storage.resize(total, T::zeroed());
        let offset = Self::offset_to_boundary(storage.as_ptr() as usize, ALIGN_BYTES);
        Ok(AlignedBuf {
            backing: Backing::Heap(storage),
            offset,
            len,
        })
    }

    /// `len` zeros (`bytes` of them) in an anonymous mapping advised to use huge pages.
    #[cfg(target_os = "linux")]
    fn mapped(len: usize, bytes: usize) -> std::io::Result<AlignedBuf<T>> {
        let total = bytes
            .checked_add(HUGE_PAGE_BYTES)
            .ok_or(std::io::ErrorKind::OutOfMemory)?;
        let map = memmap2::MmapMut::map_anon(total)?;
        let offset = Self::offset_to_boundary(map.as_ptr() as usize, HUGE_PAGE_BYTES);
        let whole_pages = bytes / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        // Advice, not a requirement: without transparent huge pages the buffer is still valid.
        let _ = map.advise_range(
            memmap2::Advice::HugePage,
            offset * core::mem::size_of::<T>(),
            whole_pages,
        );
        Ok(AlignedBuf {
            backing: Backing::Mapped(map),
            offset,
            len,
        })
    }

    /// Elements of `T` to skip from `address` to the next multiple of `boundary` (every `T`
    /// here has a size that divides 64 and is its alignment, so the boundary falls on an
    /// element).
    fn offset_to_boundary(address: usize, boundary: usize) -> usize {
        (boundary - address % boundary) % boundary / core::mem::size_of::<T>()
    }

    /// An aligned copy of `values`, or an [`AllocError`].
    pub fn from_slice(values: &[T]) -> Result<AlignedBuf<T>, AllocError> {
        let mut buf = AlignedBuf::zeros(values.len())?;
        buf.as_mut_slice().copy_from_slice(values);
        Ok(buf)
    }

    /// All the elements the backing holds, slack included.
    fn whole(&self) -> &[T] {
        match &self.backing {
            Backing::Heap(storage) => storage,
            // A mapping starts on a page boundary and its length is `bytes + HUGE_PAGE_BYTES`,
            // a multiple of `size_of::<T>()`: the cast cannot fail.
            #[cfg(target_os = "linux")]
            Backing::Mapped(map) => bytemuck::cast_slice(map),
        }
    }

    /// All the elements the backing holds, slack included, mutably.
    fn whole_mut(&mut self) -> &mut [T] {
        match &mut self.backing {
            Backing::Heap(storage) => storage,
            #[cfg(target_os = "linux")]
            Backing::Mapped(map) => bytemuck::cast_slice_mut(map),
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.whole()[self.offset..self.offset + self.len]
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        let range = self.offset..self.offset + self.len;
        &mut self.whole_mut()[range]
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

    /// Writes one element of every 4 KiB page (zero, the value the page already reads as), so
    /// the system backs the whole buffer now instead of at each page's first use: a mapping's
    /// pages are otherwise faulted in (and zeroed by the kernel) one by one when first touched,
    /// a stall in whatever call touches them. Heap buffers were written when made; nothing to do.
    pub fn make_resident(&mut self) {
        if !self.is_huge_page_backed() {
            return;
        }
        let step = (4096 / core::mem::size_of::<T>()).max(1);
        for element in self.as_mut_slice().iter_mut().step_by(step) {
            *element = T::zeroed();
        }
    }

    /// Whether the elements live in a mapping advised to use huge pages.
    pub fn is_huge_page_backed(&self) -> bool {
        !matches!(self.backing, Backing::Heap(_))
    }
}

#[cfg(feature = "std")]
impl<T: bytemuck::Pod> Clone for AlignedBuf<T> {
    /// A copy with the same alignment and backing. Like any `Clone` of owned memory, it aborts
    /// if the allocation fails; loaders never clone.
    fn clone(&self) -> AlignedBuf<T> {
        match AlignedBuf::from_slice(self.as_slice()) {
            Ok(copy) => copy,
            Err(error) => std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(error.bytes, ALIGN_BYTES)
                    .unwrap_or(std::alloc::Layout::new::<T>()),
            ),
        }
    }
}

#[cfg(feature = "std")]
impl<T: bytemuck::Pod> AsRef<[T]> for AlignedBuf<T> {
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

#[cfg(feature = "std")]
impl<T: bytemuck::Pod> AsMut<[T]> for AlignedBuf<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

#[cfg(all(test, feature = "std"))]
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
    fn large_buffers_start_on_a_huge_page_and_are_zero() {
        for len in [
            HUGE_PAGE_BYTES / 4,
            HUGE_PAGE_BYTES / 4 + 3,
            3 * HUGE_PAGE_BYTES / 4 - 5,
        ] {
            let mut buf = AlignedBuf::<f32>::zeros(len).unwrap();
            assert_eq!(buf.len(), len);
            assert_eq!(buf.is_huge_page_backed(), cfg!(target_os = "linux"));
            let boundary = if cfg!(target_os = "linux") {
                HUGE_PAGE_BYTES
            } else {
                ALIGN_BYTES
            };
            assert_eq!(buf.as_slice().as_ptr() as usize % boundary, 0);
            assert!(buf.as_slice().iter().all(|&v| v == 0.0));
            buf.as_mut_slice()[len - 1] = 7.0;
            let copy = buf.clone();
            assert_eq!(copy.as_slice(), buf.as_slice());
            assert_eq!(copy.as_slice().as_ptr() as usize % boundary, 0);
        }
        assert!(!AlignedBuf::<u16>::zeros(HUGE_PAGE_BYTES / 2 - 1)
            .unwrap()
            .is_huge_page_backed());
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
