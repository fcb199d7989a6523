//! Caller-provided scratch: how much a kernel needs, and carving it into aligned parts.
//!
//! A kernel states its needs as a [`ScratchSpec`] (a count of `f32`, every part 64-byte
//! aligned). Specs compose: [`ScratchSpec::and`] for parts live at the same time,
//! [`ScratchSpec::or`] for parts that reuse the same bytes one after the other. The caller
//! allocates once (the model crate does it inside its arena) and passes the buffer in; the
//! kernel carves it with [`Scratch`].

use crate::error::KernelError;

/// Alignment of every scratch part, in bytes: one cache line, one AVX-512 register.
pub const SCRATCH_ALIGN_BYTES: usize = 64;
const ALIGN_F32: usize = SCRATCH_ALIGN_BYTES / core::mem::size_of::<f32>();

/// How many `f32` of scratch a call needs, including the slack to align each part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ScratchSpec {
    f32s: usize,
}

impl ScratchSpec {
    /// No scratch.
    pub const EMPTY: ScratchSpec = ScratchSpec { f32s: 0 };

    /// One aligned part of `n` floats (0 needs nothing).
    pub const fn f32s(n: usize) -> ScratchSpec {
        if n == 0 {
            return ScratchSpec::EMPTY;
        }
        // Worst case the part starts just past an aligned address: ALIGN_F32 - 1 slack.
        ScratchSpec {
            f32s: n.saturating_add(ALIGN_F32 - 1),
        }
    }

    /// Both parts at once.
    pub const fn and(self, other: ScratchSpec) -> ScratchSpec {
        ScratchSpec {
            f32s: self.f32s.saturating_add(other.f32s),
        }
    }

    /// Either part, reusing the same floats.
    pub const fn or(self, other: ScratchSpec) -> ScratchSpec {
        ScratchSpec {
            f32s: if self.f32s > other.f32s {
                self.f32s
            } else {
                other.f32s
            },
        }
    }

    /// Length of the `f32` buffer to allocate.
    pub const fn len(self) -> usize {
        self.f32s
    }

    /// Whether no scratch is needed.
    pub const fn is_empty(self) -> bool {
        self.f32s == 0
    }
}

/// A caller's scratch buffer being carved into aligned parts.
#[derive(Debug)]
pub struct Scratch<'a> {
    rest: &'a mut [f32],
}

impl<'a> Scratch<'a> {
    /// Wraps a buffer; checks it holds at least `spec`.
    pub fn new(buffer: &'a mut [f32], spec: ScratchSpec) -> Result<Scratch<'a>, KernelError> {
        if buffer.len() < spec.len() {
            return Err(KernelError::ScratchTooSmall {
                needed: spec.len(),
                got: buffer.len(),
            });
        }
        Ok(Scratch { rest: buffer })
    }

    /// Takes the next 64-byte aligned part of `n` floats.
    ///
    /// Parts taken in the order of the `ScratchSpec::f32s` terms summed by `and` always fit in a
    /// buffer `Scratch::new` accepted; otherwise this returns `ScratchTooSmall`.
    pub fn take(&mut self, n: usize) -> Result<&'a mut [f32], KernelError> {
        if n == 0 {
            return Ok(&mut []);
        }
        let rest = core::mem::take(&mut self.rest);
        let misalignment = (rest.as_ptr() as usize / core::mem::size_of::<f32>()) % ALIGN_F32;
        let skip = (ALIGN_F32 - misalignment) % ALIGN_F32;
        let needed = skip.saturating_add(n);
        if rest.len() < needed {
            let got = rest.len();
            self.rest = rest;
            return Err(KernelError::ScratchTooSmall { needed, got });
        }
        let (part, rest) = rest[skip..].split_at_mut(n);
        self.rest = rest;
        Ok(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_aligned_and_fit_at_any_offset() {
        let spec = ScratchSpec::f32s(5)
            .and(ScratchSpec::f32s(17))
            .and(ScratchSpec::f32s(1));
        let mut backing = [0.0f32; 256];
        for offset in 0..16 {
            let buffer = &mut backing[offset..offset + spec.len()];
            let mut scratch = Scratch::new(buffer, spec).unwrap();
            for n in [5, 17, 1] {
                let part = scratch.take(n).unwrap();
                assert_eq!(part.len(), n);
                assert_eq!(part.as_ptr() as usize % SCRATCH_ALIGN_BYTES, 0);
            }
        }
    }

    #[test]
    fn too_small_is_an_error() {
        let spec = ScratchSpec::f32s(40);
        let mut backing = [0.0f32; 40];
        assert!(matches!(
            Scratch::new(&mut backing, spec),
            Err(KernelError::ScratchTooSmall { .. })
        ));
        let mut scratch = Scratch::new(&mut backing, ScratchSpec::EMPTY).unwrap();
        assert!(scratch.take(64).is_err());
        assert_eq!(scratch.take(0).unwrap().len(), 0);
    }

    #[test]
    fn or_takes_the_larger() {
        let a = ScratchSpec::f32s(10);
        let b = ScratchSpec::f32s(100);
        assert_eq!(a.or(b), b);
        assert_eq!(a.and(b).len(), a.len() + b.len());
        assert!(ScratchSpec::f32s(0).is_empty());
    }
}
