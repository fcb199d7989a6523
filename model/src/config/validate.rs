//! [`Config::validate`]: every invariant the model and the arena plan rely on.

use super::{Config, ConfigError, FrontEnd, StackKind, MAX_DIM, MAX_MODEL_BYTES, MAX_POSITIONS};

impl Config {
    /// Checks every invariant the model and the arena plan rely on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_sizes()?;
        self.validate_parts()?;
        self.validate_ids()?;
        self.validate_totals()
    }

    /// Every size positive and at most [`MAX_DIM`].
    fn validate_sizes(&self) -> Result<(), ConfigError> {
        let positive = [
            ("d_model", self.d_model),
            ("heads", self.heads),
            ("decoder_heads", self.heads_in(StackKind::Decoder)),
            ("d_ff", self.d_ff),
            ("decoder_d_ff", self.d_ff_in(StackKind::Decoder)),
            ("src_vocab", self.src_vocab),
            ("tgt_vocab", self.tgt_vocab),
            ("max_src_len", self.max_src_len),
            ("max_tgt_len", self.max_tgt_len),
            ("max_beam", self.max_beam),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(ConfigError::Zero(name));
            }
            if value > MAX_DIM {
                return Err(ConfigError::TooLarge(name));
            }
        }
        if let FrontEnd::Conv { n_mels } = self.front_end {
            if n_mels == 0 {
                return Err(ConfigError::Zero("front_end.n_mels"));
            }
            if n_mels > MAX_DIM {
                return Err(ConfigError::TooLarge("front_end.n_mels"));
            }
        }
        Ok(())
    }

    /// The optional parts (score scale, relative attention, position offset), layer counts
    /// and heads.
    fn validate_parts(&self) -> Result<(), ConfigError> {
        if let Some(scale) = self.attention_scale {
            if !(scale.is_finite() && scale > 0.0) {
                return Err(ConfigError::BadScale(scale));
            }
        }
        if let Some(r) = self.relative_attention {
            if r.buckets == 0 || r.max_distance == 0 {
                return Err(ConfigError::Zero("relative_attention"));
            }
            if r.buckets > MAX_DIM || r.max_distance > MAX_POSITIONS {
                return Err(ConfigError::TooLarge("relative_attention"));
            }
        }
        if self.position_offset > MAX_POSITIONS {
            return Err(ConfigError::TooLarge("position_offset"));
        }
        match self.global_block_size {
            Some(0) => return Err(ConfigError::Zero("global_block_size")),
            Some(g) if g > MAX_POSITIONS => return Err(ConfigError::TooLarge("global_block_size")),
            _ => {}
        }
        if self.encoder_layers > 1024 {
            return Err(ConfigError::TooLarge("encoder_layers"));
        }
        if self.decoder_layers > 1024 {
            return Err(ConfigError::TooLarge("decoder_layers"));
        }
        for stack in [StackKind::Encoder, StackKind::Decoder] {
            self.validate_heads(self.heads_in(stack))?;
        }
        Ok(())
    }

    /// `heads` heads of `d_head` (when given) within [`MAX_DIM`], or dividing `d_model`.
    fn validate_heads(&self, heads: usize) -> Result<(), ConfigError> {
        if let Some(d_head) = self.d_head {
            if d_head == 0 {
                return Err(ConfigError::Zero("d_head"));
            }
            if heads.checked_mul(d_head).is_none_or(|a| a > MAX_DIM) {
                return Err(ConfigError::TooLarge("heads × d_head"));
            }
        } else if !self.d_model.is_multiple_of(heads) {
            return Err(ConfigError::HeadsDoNotDivide {
                d_model: self.d_model,
                heads,
            });
        }
        Ok(())
    }

    /// Shared vocabularies, special ids, epsilon and position limits.
    fn validate_ids(&self) -> Result<(), ConfigError> {
        if self.share_embeddings && self.src_vocab != self.tgt_vocab {
            return Err(ConfigError::SharedVocabMismatch {
                src: self.src_vocab,
                tgt: self.tgt_vocab,
            });
        }
        for (which, id) in [
            ("bos", self.bos_id),
            ("eos", self.eos_id),
            ("pad", self.pad_id),
        ] {
            if id as usize >= self.tgt_vocab {
                return Err(ConfigError::SpecialIdOutOfRange {
                    which,
                    id,
                    vocab: self.tgt_vocab,
                });
            }
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(ConfigError::BadEps(self.layer_norm_eps));
        }
        if self.max_src_len > MAX_POSITIONS || self.max_tgt_len > MAX_POSITIONS {
            return Err(ConfigError::TooLarge(
                "max_src_len and max_tgt_len are limited to MAX_POSITIONS",
            ));
        }
        Ok(())
    }

    /// The model's bytes and the largest session buffer, within bounds.
    fn validate_totals(&self) -> Result<(), ConfigError> {
        match self.model_f32s() {
            Some(n) if n <= MAX_MODEL_BYTES / core::mem::size_of::<f32>() => {}
            _ => return Err(ConfigError::TooLarge("the model exceeds MAX_MODEL_BYTES")),
        }
        // The largest session buffer, the KV cache at the config's own limits (sessions may
        // plan smaller ones; every other arena region is smaller or checked by the plan).
        let cache = self
            .decoder_layers
            .checked_mul(self.max_beam)
            .and_then(|x| x.checked_mul(self.max_tgt_len))
            .and_then(|x| x.checked_mul(self.attention_width(StackKind::Decoder)))
            .and_then(|x| x.checked_mul(8));
        if cache.is_none_or(|x| x > isize::MAX as usize) {
            return Err(ConfigError::TooLarge(
                "the KV cache exceeds the address space",
            ));
        }
        Ok(())
    }
}
