//! What a `tessel_model` points to: a [`ModelHandle`], the model with its vocabulary and block
//! storage behind a tag in its first word that tells a live model handle from any other
//! pointer (checked in [`crate::model::handle`]) and is overwritten when the handle drops.

use tessel_model::Model;
use tessel_numbers::Vocab;

use crate::memory::BlockStore;

/// The tag in the first word of a live model handle ("tslmodel").
pub(crate) const MODEL_TAG: u64 = u64::from_le_bytes(*b"tslmodel");
/// The tag a model handle gets when it is dropped.
const DEAD_TAG: u64 = u64::from_le_bytes(*b"tsl-dead");

/// What a `tessel_model` points to. Fields drop in order: the model before the block storage
/// it may borrow.
#[repr(C)]
pub struct ModelHandle {
    tag: u64,
    /// The model.
    pub model: Model<'static>,
    /// The numbers-format text vocabulary, when the model came with one.
    pub vocab: Option<Vocab>,
    /// The blocks of a model read in place from caller memory.
    blocks: Option<BlockStore>,
}

// Models are shared by threads through raw pointers, which the compiler cannot check.
const _: () = {
    const fn shared_by_threads<T: Send + Sync>() {}
    shared_by_threads::<ModelHandle>();
};

impl ModelHandle {
    /// A live handle over `model`, its vocabulary and the blocks it may borrow.
    pub fn new(model: Model<'static>, vocab: Option<Vocab>, blocks: Option<BlockStore>) -> Self {
        ModelHandle {
            tag: MODEL_TAG,
            model,
            vocab,
            blocks,
        }
    }
}

impl Drop for ModelHandle {
    fn drop(&mut self) {
        self.tag = DEAD_TAG;
    }
}
