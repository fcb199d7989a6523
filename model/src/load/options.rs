//! How a model is laid out as it is loaded.

use crate::layers::WeightType;

/// How a model is laid out as it is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Storage of the linear layers' weights whatever the file holds, or `None` to keep the
    /// type each weight is stored in (`f32`, `f16`, `bf16`). Embeddings, position tables,
    /// norms and biases are `f32` in memory either way.
    pub weights: Option<WeightType>,
}

impl LoadOptions {
    /// Linear weights stored as `weights`.
    pub fn weights(weights: WeightType) -> LoadOptions {
        LoadOptions {
            weights: Some(weights),
        }
    }
}
