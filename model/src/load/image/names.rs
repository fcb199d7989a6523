//! The name of a directory slot, from its index and the config's shape (the canonical order of
//! [`super`]), for messages that point at one tensor of an image: "decoder block 1 feed-forward
//! up weight". Computed without allocating.

use core::fmt;

use super::BLOCK_SLOTS;
use crate::config::{Config, FrontEnd};

/// The slots of a token embedding, in order.
const EMBEDDING: [&str; 4] = ["table", "positions", "norm gamma", "norm beta"];

/// The slots of the audio front end (Whisper's conv stem), in order.
const CONV_STEM: [&str; 5] = [
    "conv1 weight",
    "conv1 bias",
    "conv2 weight",
    "conv2 bias",
    "positions",
];

/// The slots of one block, in order.
const BLOCK: [&str; BLOCK_SLOTS] = [
    "self-attention norm gamma",
    "self-attention norm beta",
    "self-attention qkv weight",
    "self-attention qkv bias",
    "self-attention output weight",
    "self-attention output bias",
    "cross-attention norm gamma",
    "cross-attention norm beta",
    "cross-attention query weight",
    "cross-attention query bias",
    "cross-attention key/value weight",
    "cross-attention key/value bias",
    "cross-attention output weight",
    "cross-attention output bias",
    "feed-forward norm gamma",
    "feed-forward norm beta",
    "feed-forward up weight",
    "feed-forward up bias",
    "feed-forward gate weight",
    "feed-forward gate bias",
    "feed-forward down weight",
    "feed-forward down bias",
];

/// The slots after a stack's blocks, in order.
const STACK_END: [&str; 3] = [
    "final norm gamma",
    "final norm beta",
    "relative position bias",
];

/// What a slot of an image's directory holds: the part of the model, the block within a
/// stack, the tensor. Displayed as "encoder block 0 feed-forward up weight".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorName {
    /// "source embedding", "audio stem", "target embedding", "encoder", "decoder",
    /// "generator", or "slot" past the end.
    pub part: &'static str,
    /// The block within the stack, for block tensors.
    pub block: Option<usize>,
    /// The tensor within the part.
    pub tensor: &'static str,
}

impl fmt::Display for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.block {
            Some(block) => write!(f, "{} block {block} {}", self.part, self.tensor),
            None => write!(f, "{} {}", self.part, self.tensor),
        }
    }
}

/// The shape the slot names follow: the front end and the stacks' depths.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotNames {
    audio: bool,
    encoder_layers: usize,
    decoder_layers: usize,
}

impl SlotNames {
    /// The names of `config`'s slots.
    pub(crate) fn of(config: &Config) -> SlotNames {
        SlotNames {
            audio: matches!(config.front_end, FrontEnd::Conv { .. }),
            encoder_layers: config.encoder_layers,
            decoder_layers: config.decoder_layers,
        }
    }

    /// The name of directory slot `slot`.
    pub(crate) fn name(&self, slot: usize) -> TensorName {
        let plain = |part, tensor| TensorName {
            part,
            block: None,
            tensor,
        };
        let source: &[&'static str] = if self.audio { &CONV_STEM } else { &EMBEDDING };
        let part = if self.audio {
            "audio stem"
        } else {
            "source embedding"
        };
        if let Some(&tensor) = source.get(slot) {
            return plain(part, tensor);
        }
        let mut rest = slot - source.len();
        if let Some(&tensor) = EMBEDDING.get(rest) {
            return plain("target embedding", tensor);
        }
        rest -= EMBEDDING.len();
        for (part, layers) in [
            ("encoder", self.encoder_layers),
            ("decoder", self.decoder_layers),
        ] {
            let blocks = layers * BLOCK_SLOTS;
            if rest < blocks {
                return TensorName {
                    part,
                    block: Some(rest / BLOCK_SLOTS),
                    tensor: BLOCK[rest % BLOCK_SLOTS],
                };
            }
            rest -= blocks;
            if let Some(&tensor) = STACK_END.get(rest) {
                return plain(part, tensor);
            }
            rest -= STACK_END.len();
        }
        match rest {
            0 => plain("generator", "weight"),
            1 => plain("generator", "bias"),
            _ => plain("slot", "past the directory's end"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::image::header::slot_count;

    #[test]
    fn every_slot_of_a_config_has_its_name_and_the_last_is_the_generator() {
        let config = Config::transformer_base();
        let names = SlotNames::of(&config);
        let count = slot_count(&config);
        assert_eq!(names.name(0).to_string(), "source embedding table");
        assert_eq!(names.name(4).to_string(), "target embedding table");
        let up = 8 + BLOCK_SLOTS + 16;
        assert_eq!(
            names.name(up).to_string(),
            "encoder block 1 feed-forward up weight"
        );
        let decoder = 8 + config.encoder_layers * BLOCK_SLOTS + 3;
        assert_eq!(
            names.name(decoder).to_string(),
            "decoder block 0 self-attention norm gamma"
        );
        assert_eq!(names.name(count - 2).to_string(), "generator weight");
        assert_eq!(names.name(count - 1).to_string(), "generator bias");
        assert_eq!(names.name(count).part, "slot");
    }
}
