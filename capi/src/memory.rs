//! A model read in place from a packed image in caller-owned memory
//! (`tessel_model_load_memory`): every tensor borrows the caller's bytes, nothing of the
//! weights is copied.
//!
//! [`image::parse`] builds the model's blocks into storage the host provides and borrows them
//! for the model's lifetime. The C handle has no lifetime, so the storage is a heap slice
//! owned by a [`BlockStore`] that the handle drops after the model (field order), and the
//! caller's bytes are promised to outlive the handle (the header's contract). The blocks only
//! borrow (parsing allocates nothing), so storage that is never dropped element by element
//! leaks nothing.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use tessel_model::layers::Block;
use tessel_model::load::image::{self, ImageError, DATA_ALIGN};
use tessel_model::Model;

use crate::status::{tessel_status, Error};

/// Heap storage for the blocks of a model parsed from borrowed bytes; freed when dropped,
/// which must happen after the model that borrows it is dropped.
pub struct BlockStore {
    slots: NonNull<[MaybeUninit<Block<'static>>]>,
}

// SAFETY: the store is a plain allocation the owning handle frees once; it is never read
// through this pointer (only through the model's shared borrow, which is `Sync`).
unsafe impl Send for BlockStore {}
// SAFETY: as for `Send`: `BlockStore` itself offers no access to the slots.
unsafe impl Sync for BlockStore {}

impl Drop for BlockStore {
    fn drop(&mut self) {
        // SAFETY: `slots` came from `Box::into_raw` in `parse_in_place`, and the model that
        // borrowed it was dropped before this store (the owner's field order); `MaybeUninit`
        // runs no destructors, and the blocks own no heap memory.
        drop(unsafe { Box::from_raw(self.slots.as_ptr()) });
    }
}

/// The status of an image refusal: a misaligned buffer is `TESSEL_ERR_MISALIGNED`, anything
/// else `TESSEL_ERR_LOAD`.
pub fn image_error(error: ImageError) -> Error {
    let status = match error {
        ImageError::Misaligned(_) => tessel_status::TESSEL_ERR_MISALIGNED,
        _ => tessel_status::TESSEL_ERR_LOAD,
    };
    Error::boxed(status, error)
}

/// The model of the image in `bytes`, read in place, and the storage of its blocks.
///
/// `bytes` must start on a [`DATA_ALIGN`]-byte boundary (`TESSEL_ERR_MISALIGNED` otherwise)
/// and hold exactly one image.
pub fn parse_in_place(bytes: &'static [u8]) -> Result<(Model<'static>, BlockStore), Error> {
    if !(bytes.as_ptr() as usize).is_multiple_of(DATA_ALIGN) {
        return Err(image_error(ImageError::Misaligned(DATA_ALIGN)));
    }
    let needed = image::blocks_needed(bytes).map_err(image_error)?;
    let mut boxed: Box<[MaybeUninit<Block<'static>>]> = Box::new_uninit_slice(needed);
    let raw = NonNull::from(&mut *boxed);
    std::mem::forget(boxed);
    let store = BlockStore { slots: raw };
    // SAFETY: `raw` is the only pointer to this live allocation; the exclusive borrow given
    // to the parser (and the model's shared one it turns into) ends before `store` frees it,
    // because the caller keeps the model in a field dropped before the store's.
    let slots = unsafe { &mut *raw.as_ptr() };
    let model = image::parse(bytes, slots).map_err(image_error)?;
    Ok((model, store))
}
