//! The model's weight pool: the packed weights too small for huge pages of their own, gathered
//! in one huge-page buffer.
//!
//! A buffer of at least 2 MiB has its own mapping in transparent huge pages
//! ([`AlignedBuf`]); a smaller one comes from the heap, on 4 KiB pages. A decode step streams
//! every weight once, and in a model whose projections are each under 2 MiB (int8 at
//! `d_model` 512, or `f32` at 384) that stream crosses a small page every 4 KiB: a TLB miss at
//! each, and the hardware prefetcher, which does not cross pages, starting over at each.
//! [`pool_small_weights`] copies those weights, in the order the forward pass reads them
//! (encoder, decoder block by block, the output projection), into one buffer of huge pages and
//! points each layer at its copy. A weight that already has huge pages stays where it is. The
//! copy happens once, when the model is built: the extra memory while it runs is the pooled
//! weights' size, and afterwards the model holds the same bytes as before.
//!
//! Without huge pages (another OS, or fewer than 2 MiB to gather) nothing moves.

use std::sync::Arc;

use crate::aligned::{AlignedBuf, ALIGN_BYTES};

/// A layer with a packed weight that [`pool_small_weights`] may gather (a linear layer).
pub(crate) trait PooledWeight {
    /// The packed weight's bytes, when the layer owns them on small pages (what the pool
    /// gathers).
    fn weight_on_small_pages(&self) -> Option<&[u8]>;

    /// Reads the packed weight from byte `offset` of `pool`, where a copy of it was put, and
    /// lets go of its own buffer. Leaves the layer as it was if the range does not hold it.
    fn move_weight_to_pool(&mut self, pool: &Arc<AlignedBuf<u8>>, offset: usize);
}

/// Gathers the owned small-page packed weights of `linears` (a model's, in the order its
/// passes read them) into one huge-page buffer (see the module docs). Best effort: if the buffer
/// cannot be had, the weights stay where they are.
pub(crate) fn pool_small_weights<L: PooledWeight>(mut linears: Vec<&mut L>) {
    let mut offsets = Vec::with_capacity(linears.len());
    let mut total = 0usize;
    for linear in &linears {
        let offset = linear.weight_on_small_pages().map(|bytes| {
            let at = total;
            total = (at + bytes.len()).next_multiple_of(ALIGN_BYTES);
            at
        });
        offsets.push(offset);
    }
    let Ok(mut pool) = AlignedBuf::<u8>::zeros(total) else {
        return;
    };
    if !pool.is_huge_page_backed() {
        return;
    }
    for (linear, offset) in linears.iter().zip(&offsets) {
        if let (Some(bytes), Some(at)) = (linear.weight_on_small_pages(), *offset) {
            if let Some(slot) = pool.as_mut_slice().get_mut(at..at + bytes.len()) {
                slot.copy_from_slice(bytes);
            }
        }
    }
    let pool = Arc::new(pool);
    for (linear, offset) in linears.iter_mut().zip(offsets) {
        if let Some(at) = offset {
            linear.move_weight_to_pool(&pool, at);
        }
    }
}
