//! Where a layer's tensors live: borrowed from a byte image, or (with `std`) owned.
//!
//! Every layer holds its tensors as [`Weights<'w, T>`], one small enum: a slice borrowed for
//! `'w` (from a packed image, [`crate::image`], or any host memory), or an [`AlignedBuf`] the
//! layer owns, or one shared between layers (an embedding table that is also the other
//! stack's). The layers, the model and the forward pass carry one lifetime `'w` and are
//! compiled once whatever the storage: the kind is a value, read once per kernel call (the
//! kernels see a plain `&[T]`), never a type parameter, so `forward.rs` is monomorphised once.
//! Loaders build owned layers, `Model<'static>`; [`crate::image::parse`] builds borrowed ones.
//!
//! The alternative, a `Store` trait with generic associated types (`Owned`, `Borrowed<'a>`) as
//! a type parameter of every layer, would have let loader signatures stay unchanged through a
//! default parameter, but compiles the forward pass, the session and the search once per store
//! and puts a bound on every impl; a lifetime costs the loaders only `'static` in a few
//! signatures.

#[cfg(feature = "std")]
use std::sync::Arc;

#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;

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
