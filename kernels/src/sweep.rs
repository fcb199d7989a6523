//! One pass over a row, vector by vector: the loop every row-wise kernel (norms, softmax, bias
//! and activation) is built from.
//!
//! A pass reads one or more rows in lock step through a [`RowIo`], maps each vector to a value
//! that is stored back (or dropped, for read-only passes) and to `N` terms that are reduced
//! (summed or maxed). The reduction keeps four independent accumulators per term, so the loop
//! is bound by throughput rather than by the add latency, and each accumulator lane sums only
//! `width / (4 · lanes)` terms (blocked summation: the rounding error grows with that, not with
//! `width`). The tail shorter than a vector is loaded and stored with masks, and its terms are
//! masked out of the reduction.

use crate::view::ViewMut;
use pulp::Simd;

/// How a pass reduces its terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    /// Sum (identity 0).
    Sum,
    /// Maximum (identity -inf).
    Max,
}

impl Reduce {
    #[inline(always)]
    fn combine<S: Simd>(self, simd: S, a: S::f32s, b: S::f32s) -> S::f32s {
        match self {
            Reduce::Sum => simd.add_f32s(a, b),
            Reduce::Max => simd.max_f32s(a, b),
        }
    }
}

/// Rows read (and maybe written) in lock step, vector by vector.
///
/// The rows of one `RowIo` must have the same length; [`sweep`] checks this once per pass
/// ([`RowIo::consistent`]) and then accesses every row without bounds checks.
pub(crate) trait RowIo<S: Simd> {
    /// What one load yields.
    type Item: Copy;
    /// Number of full vectors.
    fn vectors(&self) -> usize;
    /// Elements after the full vectors (`< lanes`).
    fn tail_len(&self) -> usize;
    /// Whether every row holds exactly `vectors` full vectors and a `tail`-long tail.
    fn covers(&self, vectors: usize, tail: usize) -> bool;
    /// Whether every row has the length of the first ([`RowIo::vectors`], [`RowIo::tail_len`]).
    #[inline(always)]
    fn consistent(&self) -> bool {
        self.covers(self.vectors(), self.tail_len())
    }
    /// Loads full vector `i`.
    ///
    /// # Safety
    /// `i < self.vectors()` and `self.consistent()`.
    unsafe fn load(&self, simd: S, i: usize) -> Self::Item;
    /// Loads the tail, zero-padded.
    fn load_tail(&self, simd: S) -> Self::Item;
    /// Stores full vector `i` (a no-op for read-only rows).
    ///
    /// # Safety
    /// `i < self.vectors()` and `self.consistent()`.
    unsafe fn store(&mut self, simd: S, i: usize, value: S::f32s);
    /// Stores the tail's valid lanes (a no-op for read-only rows).
    fn store_tail(&mut self, simd: S, value: S::f32s);
}

/// The reading half of [`RowIo`] for a row held as `head` vectors and a `tail`.
macro_rules! row_reader_methods {
    () => {
        #[inline(always)]
        fn vectors(&self) -> usize {
            self.head.len()
        }
        #[inline(always)]
        fn tail_len(&self) -> usize {
            self.tail.len()
        }
        #[inline(always)]
        fn covers(&self, vectors: usize, tail: usize) -> bool {
            self.head.len() == vectors && self.tail.len() == tail
        }
        #[inline(always)]
        unsafe fn load(&self, _: S, i: usize) -> S::f32s {
            debug_assert!(i < self.head.len());
            // SAFETY: the caller guarantees `i < vectors() = head.len()`.
            unsafe { *self.head.get_unchecked(i) }
        }
        #[inline(always)]
        fn load_tail(&self, simd: S) -> S::f32s {
            simd.partial_load_f32s(self.tail)
        }
    };
}

/// A read-only row; stores are dropped.
pub(crate) struct Read<'a, S: Simd> {
    head: &'a [S::f32s],
    tail: &'a [f32],
}

impl<S: Simd> Clone for Read<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Simd> Copy for Read<'_, S> {}

impl<'a, S: Simd> Read<'a, S> {
    #[inline(always)]
    pub(crate) fn new(row: &'a [f32]) -> Self {
        let (head, tail) = S::as_simd_f32s(row);
        Read { head, tail }
    }
}

impl<S: Simd> RowIo<S> for Read<'_, S> {
    type Item = S::f32s;
    row_reader_methods!();
    #[inline(always)]
    unsafe fn store(&mut self, _: S, _: usize, _: S::f32s) {}
    #[inline(always)]
    fn store_tail(&mut self, _: S, _: S::f32s) {}
}

/// A row updated in place: each vector is loaded, mapped and stored back.
pub(crate) struct Update<'a, S: Simd> {
    head: &'a mut [S::f32s],
    tail: &'a mut [f32],
}

impl<'a, S: Simd> Update<'a, S> {
    #[inline(always)]
    pub(crate) fn new(row: &'a mut [f32]) -> Self {
        let (head, tail) = S::as_mut_simd_f32s(row);
        Update { head, tail }
    }
}

impl<S: Simd> RowIo<S> for Update<'_, S> {
    type Item = S::f32s;
    row_reader_methods!();
    #[inline(always)]
    unsafe fn store(&mut self, _: S, i: usize, value: S::f32s) {
        debug_assert!(i < self.head.len());
        // SAFETY: the caller guarantees `i < vectors() = head.len()`.
        unsafe { *self.head.get_unchecked_mut(i) = value };
    }
    #[inline(always)]
    fn store_tail(&mut self, simd: S, value: S::f32s) {
        simd.partial_store_f32s(self.tail, value);
    }
}

/// Reads through `source` and stores into a separate row of the same length.
pub(crate) struct Write<'a, S: Simd, Src> {
    source: Src,
    destination: Update<'a, S>,
}

impl<'a, S: Simd, Src: RowIo<S>> Write<'a, S, Src> {
    #[inline(always)]
    pub(crate) fn new(source: Src, destination: &'a mut [f32]) -> Self {
        let destination = Update::new(destination);
        Write {
            source,
            destination,
        }
    }
}

impl<S: Simd, Src: RowIo<S>> RowIo<S> for Write<'_, S, Src> {
    type Item = Src::Item;
    #[inline(always)]
    fn vectors(&self) -> usize {
        self.source.vectors()
    }
    #[inline(always)]
    fn tail_len(&self) -> usize {
        self.source.tail_len()
    }
    #[inline(always)]
    fn covers(&self, vectors: usize, tail: usize) -> bool {
        self.source.covers(vectors, tail) && self.destination.covers(vectors, tail)
    }
    #[inline(always)]
    unsafe fn load(&self, simd: S, i: usize) -> Src::Item {
        // SAFETY: `consistent()` makes the source's length this io's length, which bounds `i`.
        unsafe { self.source.load(simd, i) }
    }
    #[inline(always)]
    fn load_tail(&self, simd: S) -> Src::Item {
        self.source.load_tail(simd)
    }
    #[inline(always)]
    unsafe fn store(&mut self, simd: S, i: usize, value: S::f32s) {
        // SAFETY: `consistent()` makes the destination's length this io's length, which
        // bounds `i`.
        unsafe { self.destination.store(simd, i, value) };
    }
    #[inline(always)]
    fn store_tail(&mut self, simd: S, value: S::f32s) {
        self.destination.store_tail(simd, value);
    }
}

/// Two rows in lock step; stores go to the first.
#[derive(Clone, Copy)]
pub(crate) struct Zip<A, B>(pub(crate) A, pub(crate) B);

impl<S: Simd, A: RowIo<S>, B: RowIo<S>> RowIo<S> for Zip<A, B> {
    type Item = (A::Item, B::Item);
    #[inline(always)]
    fn vectors(&self) -> usize {
        self.0.vectors()
    }
    #[inline(always)]
    fn tail_len(&self) -> usize {
        self.0.tail_len()
    }
    #[inline(always)]
    fn covers(&self, vectors: usize, tail: usize) -> bool {
        self.0.covers(vectors, tail) && self.1.covers(vectors, tail)
    }
    #[inline(always)]
    unsafe fn load(&self, simd: S, i: usize) -> Self::Item {
        // SAFETY: `consistent()` gives both rows this io's length, which bounds `i`.
        unsafe { (self.0.load(simd, i), self.1.load(simd, i)) }
    }
    #[inline(always)]
    fn load_tail(&self, simd: S) -> Self::Item {
        (self.0.load_tail(simd), self.1.load_tail(simd))
    }
    #[inline(always)]
    unsafe fn store(&mut self, simd: S, i: usize, value: S::f32s) {
        // SAFETY: as for `load`.
        unsafe { self.0.store(simd, i, value) };
    }
    #[inline(always)]
    fn store_tail(&mut self, simd: S, value: S::f32s) {
        self.0.store_tail(simd, value);
    }
}

/// The [`RowIo`] methods of a row with no length of its own that is never stored: it only
/// rides behind a real row ([`Zip`]), which sets the length.
macro_rules! lengthless_methods {
    () => {
        #[inline(always)]
        fn vectors(&self) -> usize {
            0
        }
        #[inline(always)]
        fn tail_len(&self) -> usize {
            0
        }
        #[inline(always)]
        fn covers(&self, _: usize, _: usize) -> bool {
            true
        }
        #[inline(always)]
        unsafe fn store(&mut self, _: S, _: usize, _: S::f32s) {}
        #[inline(always)]
        fn store_tail(&mut self, _: S, _: S::f32s) {}
    };
}

/// A row of `-0.0` that is never stored: stands in for an absent `beta` or bias and costs
/// nothing after inlining (`v + (-0.0)` is `v` for every `v`, so the compiler drops the add;
/// `+0.0` would not be an identity for `v = -0.0`). Only ever zipped behind a real row, which
/// sets the length.
#[derive(Clone, Copy)]
pub(crate) struct Zeros;

impl<S: Simd> RowIo<S> for Zeros {
    type Item = S::f32s;
    lengthless_methods!();
    #[inline(always)]
    unsafe fn load(&self, simd: S, _: usize) -> S::f32s {
        simd.splat_f32s(-0.0)
    }
    #[inline(always)]
    fn load_tail(&self, simd: S) -> S::f32s {
        simd.splat_f32s(-0.0)
    }
}

/// The next row of a batch, pulled towards the core while a pass works on the current one:
/// loading vector `i` of the pass prefetches the cache line holding element `i · lanes` of
/// the next row. Reads nothing (a prefetch never faults and is never dereferenced), stores
/// nothing; [`Prefetch::NONE`] for the last row.
///
/// Used by softmax, whose long compute-bound exponential pass leaves the memory system idle:
/// only large rows gain (smaller rows of a batch stay in L2).
#[derive(Clone, Copy)]
pub(crate) struct Prefetch {
    next: *const f32,
    len: usize,
}

impl Prefetch {
    /// No row to prefetch.
    pub(crate) const NONE: Prefetch = Prefetch {
        next: core::ptr::null(),
        len: 0,
    };

    /// Rows at least this long (in `f32`) are prefetched: 16 KiB, the size at which a row's
    /// inputs and outputs no longer stay in L1 and the rows of a batch come from L3.
    pub(crate) const MIN_LEN: usize = 4096;

    /// The `len` elements at `next` (a pointer into a view, only ever prefetched).
    pub(crate) fn new(next: *const f32, len: usize) -> Prefetch {
        Prefetch { next, len }
    }
}

impl<S: Simd> RowIo<S> for Prefetch {
    type Item = ();
    lengthless_methods!();
    #[inline(always)]
    unsafe fn load(&self, _: S, i: usize) {
        let offset = i * S::F32_LANES;
        if offset < self.len {
            prefetch(self.next.wrapping_add(offset));
        }
    }
    #[inline(always)]
    fn load_tail(&self, _: S) {}
}

/// Hints the cache line at `at` into L2 (a no-op off x86-64).
#[inline(always)]
fn prefetch(at: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads no memory architecturally and never faults,
    // whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(at as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Lanes `< len` set.
#[inline(always)]
fn tail_mask<S: Simd>(simd: S, len: usize) -> S::m32s {
    const IOTA: [f32; 64] = {
        let mut iota = [0.0f32; 64];
        let mut i = 0;
        while i < 64 {
            iota[i] = i as f32;
            i += 1;
        }
        iota
    };
    let lanes = core::mem::size_of::<S::f32s>() / core::mem::size_of::<f32>();
    let iota = simd.partial_load_f32s(&IOTA[..lanes.min(IOTA.len())]);
    simd.less_than_f32s(iota, simd.splat_f32s(len as f32))
}

/// Maps full vector `i` of `io`, stores the value and folds the terms into `acc`.
///
/// # Safety
/// `i < io.vectors()` and `io.consistent()`.
#[inline(always)]
unsafe fn step<S: Simd, Io: RowIo<S>, const N: usize>(
    simd: S,
    io: &mut Io,
    map: &impl Fn(Io::Item) -> (S::f32s, [S::f32s; N]),
    reduce: Reduce,
    acc: &mut [S::f32s; N],
    i: usize,
) {
    // SAFETY: forwarded from the caller.
    let (value, terms) = map(unsafe { io.load(simd, i) });
    // SAFETY: forwarded from the caller.
    unsafe { io.store(simd, i, value) };
    for (a, t) in acc.iter_mut().zip(terms) {
        *a = reduce.combine(simd, *a, t);
    }
}

/// One pass over `io`: each vector's item goes through `map`, whose first result is stored
/// back through `io` and whose `N` terms are reduced with `reduce`. Returns the reductions.
#[inline(always)]
pub(crate) fn sweep<S: Simd, Io: RowIo<S>, const N: usize>(
    simd: S,
    io: &mut Io,
    reduce: Reduce,
    map: impl Fn(Io::Item) -> (S::f32s, [S::f32s; N]),
) -> [f32; N] {
    let identity = simd.splat_f32s(match reduce {
        Reduce::Sum => 0.0,
        Reduce::Max => f32::NEG_INFINITY,
    });
    let combine = |a, b| reduce.combine(simd, a, b);
    let mut acc = [[identity; N]; 4];
    // Rows of different lengths are a bug in this crate (every caller validated the shapes);
    // refuse them rather than read out of bounds.
    let consistent = io.consistent();
    debug_assert!(consistent, "rows of one pass differ in length");
    let vectors = if consistent { io.vectors() } else { 0 };
    let mut i = 0;
    while i + 4 <= vectors {
        for (u, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `i + u < vectors`, which is `io.vectors()` of a consistent io.
            unsafe { step(simd, io, &map, reduce, acc, i + u) };
        }
        i += 4;
    }
    for (j, acc) in acc.iter_mut().enumerate().take(vectors - i) {
        // SAFETY: `i + j < vectors`, as above.
        unsafe { step(simd, io, &map, reduce, acc, i + j) };
    }
    if !consistent {
        return [0.0; N];
    }
    let tail = io.tail_len();
    if tail > 0 {
        let (value, terms) = map(io.load_tail(simd));
        io.store_tail(simd, value);
        let valid = tail_mask(simd, tail);
        for (a, t) in acc[3].iter_mut().zip(terms) {
            *a = combine(*a, simd.select_f32s(valid, t, identity));
        }
    }
    let mut result = [0.0; N];
    for (j, r) in result.iter_mut().enumerate() {
        let merged = combine(combine(acc[0][j], acc[1][j]), combine(acc[2][j], acc[3][j]));
        *r = match reduce {
            Reduce::Sum => simd.reduce_sum_f32s(merged),
            Reduce::Max => simd.reduce_max_f32s(merged),
        };
    }
    result
}

/// The starts of a view's rows, to prefetch row `r + 1` while row `r` is processed.
#[derive(Clone, Copy)]
pub(crate) struct Ahead {
    base: *const f32,
    step: usize,
    rows: usize,
    width: usize,
}

impl Ahead {
    /// The rows of `view`.
    pub(crate) fn of(view: &ViewMut<'_>) -> Ahead {
        let step = if view.rows <= 1 {
            view.cols
        } else {
            view.stride
        };
        Ahead {
            base: view.data.as_ptr(),
            step: step.max(1),
            rows: view.rows,
            width: view.cols,
        }
    }

    /// The row after row `r`, or nothing for the last row and for rows too short to gain.
    #[inline(always)]
    pub(crate) fn after(&self, r: usize) -> Prefetch {
        if r + 1 < self.rows && self.width >= Prefetch::MIN_LEN {
            Prefetch::new(self.base.wrapping_add((r + 1) * self.step), self.width)
        } else {
            Prefetch::NONE
        }
    }
}
