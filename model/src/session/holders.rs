//! What a session holds its model and its arena in.

#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;
use crate::model::Model;

/// How a session holds its model: `&Model`, or (with `std`) `Arc<Model>`, `Rc<Model>`,
/// `Box<Model>`, whatever the lifetime of the model's tensors.
pub trait ModelRef {
    /// The model, its tensors seen for as long as the borrow of the handle.
    fn model(&self) -> &Model<'_>;
}

impl<'w> ModelRef for &Model<'w> {
    fn model(&self) -> &Model<'_> {
        self
    }
}

/// The owning pointers a host may keep a model in.
#[cfg(feature = "std")]
macro_rules! model_ref_for {
    ($($pointer:ident)::+) => {
        impl<'w> ModelRef for $($pointer)::+<Model<'w>> {
            fn model(&self) -> &Model<'_> {
                self
            }
        }
    };
}
#[cfg(feature = "std")]
model_ref_for!(std::sync::Arc);
#[cfg(feature = "std")]
model_ref_for!(std::rc::Rc);
#[cfg(feature = "std")]
model_ref_for!(Box);

/// Memory a session's arena can live in: its own `AlignedBuf` (the default, with `std`), or
/// `&mut [f32]` carved from a buffer the host provides ([`Session::in_buffer`](super::Session::in_buffer)).
pub trait Arena: AsRef<[f32]> + AsMut<[f32]> {}

impl<A: AsRef<[f32]> + AsMut<[f32]>> Arena for A {}

/// The arena a session allocates for itself.
#[cfg(feature = "std")]
pub type OwnArena = AlignedBuf;
/// Without `std` a session's arena is always a host's buffer.
#[cfg(not(feature = "std"))]
pub type OwnArena = &'static mut [f32];
