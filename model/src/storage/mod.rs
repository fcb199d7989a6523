//! Where a layer's tensors live: borrowed from a byte image, or (with `std`) owned.
//!
//! Every layer holds its tensors as [`Weights<'w, T>`], one small enum: a slice borrowed for
//! `'w` (from a packed image, [`crate::load::image`], or any host memory), or an
//! [`AlignedBuf`] the layer owns, or one shared between layers (an embedding table that is
//! also the other stack's), or a range of the model's weight pool (`pool`: the packed weights
//! too small for huge pages of their own, gathered in one huge-page mapping when the model is
//! built). The layers, the model and the forward pass carry one lifetime `'w` and are
//! compiled once whatever the storage: the kind is a value, read once per kernel call (the
//! kernels see a plain `&[T]`), never a type parameter, so `forward.rs` is monomorphised once.
//! Loaders build owned layers, `Model<'static>`; [`crate::load::image::parse`] builds borrowed
//! ones.
//!
//! The alternative, a `Store` trait with generic associated types (`Owned`, `Borrowed<'a>`) as
//! a type parameter of every layer, would have let loader signatures stay unchanged through a
//! default parameter, but compiles the forward pass, the session and the search once per store
//! and puts a bound on every impl; a lifetime costs the loaders only `'static` in a few
//! signatures.

#[cfg(feature = "std")]
pub(crate) mod pool;

#[cfg(feature = "std")]
use std::sync::Arc;

#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;

/// `len` elements of `T` at byte `offset` of a shared byte pool: a model's packed weights
/// gathered in one buffer. Made only where the range lies inside the pool and is aligned for
/// `T` ([`PoolSlice::new`]).
#[cfg(feature = "std")]
pub struct PoolSlice<T> {
    pool: Arc<AlignedBuf<u8>>,
    offset: usize,
    len: usize,
    element: core::marker::PhantomData<T>,
}

#[cfg(feature = "std")]
impl<T: bytemuck::Pod> PoolSlice<T> {
    /// The `len` elements at byte `offset` of `pool`, or `None` when they do not lie inside it
    /// or are not aligned for `T`.
    pub fn new(pool: Arc<AlignedBuf<u8>>, offset: usize, len: usize) -> Option<PoolSlice<T>> {
        let bytes = len.checked_mul(core::mem::size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        let range = pool.as_slice().get(offset..end)?;
        bytemuck::try_cast_slice::<u8, T>(range).ok()?;
        Some(PoolSlice {
            pool,
            offset,
            len,
            element: core::marker::PhantomData,
        })
    }

    /// The elements (checked in bounds and aligned when made).
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        let end = self.offset + self.len * core::mem::size_of::<T>();
        self.pool
            .as_slice()
            .get(self.offset..end)
            .and_then(|bytes| bytemuck::try_cast_slice(bytes).ok())
            .unwrap_or(&[])
    }
}

/// A run of `T`: borrowed for `'w`, or owned (64-byte aligned), or shared by several layers.
pub enum Weights<'w, T> {
    /// Elements borrowed from memory the host keeps alive for `'w` (a packed image).
    Borrowed(&'w [T]),
    /// Elements the layer owns.
    #[cfg(feature = "std")]
    Owned(AlignedBuf<T>),
    /// Elements shared with other layers (a table both embeddings read).
    #[cfg(feature = "std")]
    Shared(Arc<AlignedBuf<T>>),
    /// Elements in the model's weight pool.
    #[cfg(feature = "std")]
    Pooled(PoolSlice<T>),
}

impl<T: bytemuck::Pod> Weights<'_, T> {
    /// The elements.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        match self {
            Weights::Borrowed(values) => values,
            #[cfg(feature = "std")]
            Weights::Owned(buf) => buf.as_slice(),
            #[cfg(feature = "std")]
            Weights::Shared(buf) => buf.as_slice(),
            #[cfg(feature = "std")]
            Weights::Pooled(slice) => slice.as_slice(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Bytes of the elements.
    pub fn bytes(&self) -> usize {
        core::mem::size_of_val(self.as_slice())
    }

    /// Whether the elements are borrowed (not owned by the layer).
    pub fn is_borrowed(&self) -> bool {
        matches!(self, Weights::Borrowed(_))
    }

    /// Whether the layer owns the elements in a heap buffer of their own (not in huge pages):
    /// what the model's weight pool gathers.
    #[cfg(feature = "std")]
    pub fn is_owned_on_small_pages(&self) -> bool {
        matches!(self, Weights::Owned(buf) if !buf.is_huge_page_backed())
    }

    /// Whether `self` and `other` are the same elements in memory (one table read by two
    /// layers), whatever holds them.
    pub fn same_as(&self, other: &Weights<'_, T>) -> bool {
        let (a, b) = (self.as_slice(), other.as_slice());
        a.as_ptr() == b.as_ptr() && a.len() == b.len()
    }
}

impl<T: bytemuck::Pod> AsRef<[T]> for Weights<'_, T> {
    #[inline]
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: bytemuck::Pod> Clone for Weights<'_, T> {
    /// Borrowed and shared elements stay so; owned ones are copied.
    fn clone(&self) -> Self {
        match self {
            Weights::Borrowed(values) => Weights::Borrowed(values),
            #[cfg(feature = "std")]
            Weights::Owned(buf) => Weights::Owned(buf.clone()),
            #[cfg(feature = "std")]
            Weights::Shared(buf) => Weights::Shared(Arc::clone(buf)),
            #[cfg(feature = "std")]
            Weights::Pooled(slice) => Weights::Pooled(PoolSlice {
                pool: Arc::clone(&slice.pool),
                ..*slice
            }),
        }
    }
}

impl<T: bytemuck::Pod> core::fmt::Debug for Weights<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kind = match self {
            Weights::Borrowed(_) => "Borrowed",
            #[cfg(feature = "std")]
            Weights::Owned(_) => "Owned",
            #[cfg(feature = "std")]
            Weights::Shared(_) => "Shared",
            #[cfg(feature = "std")]
            Weights::Pooled(_) => "Pooled",
        };
        write!(f, "{kind}[{}]", self.len())
    }
}

impl<'w, T> From<&'w [T]> for Weights<'w, T> {
    fn from(values: &'w [T]) -> Self {
        Weights::Borrowed(values)
    }
}

#[cfg(feature = "std")]
impl<T> From<AlignedBuf<T>> for Weights<'_, T> {
    fn from(buf: AlignedBuf<T>) -> Self {
        Weights::Owned(buf)
    }
}

#[cfg(feature = "std")]
impl<T> From<Arc<AlignedBuf<T>>> for Weights<'_, T> {
    fn from(buf: Arc<AlignedBuf<T>>) -> Self {
        Weights::Shared(buf)
    }
}
