//! The image's header and config record: where the directory and the data lie, checked against
//! the image's length before anything reads them.

use super::config_record::{config_from_words, CONFIG_WORDS};
use super::record::RECORD_BYTES;
use super::{ImageError, BLOCK_SLOTS, BYTE_ORDER_MARK, DATA_ALIGN, HEADER_BYTES, MAGIC, VERSION};
use crate::config::{Config, FrontEnd};

/// What the header and the config record say.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageHeader {
    /// The model's config.
    pub config: Config,
    /// Tensor slots in the directory.
    pub tensors: usize,
    /// Byte offset of the directory.
    pub directory: usize,
    /// Byte offset of the data.
    pub data: usize,
    /// Bytes of the whole image.
    pub total: usize,
}

/// Tensor slots the canonical order gives `config`.
pub(crate) fn slot_count(config: &Config) -> usize {
    let source = match config.front_end {
        FrontEnd::Tokens => 4,
        FrontEnd::Conv { .. } => 5,
    };
    // Layer counts are at most 1024 each (validated): no overflow.
    let blocks = (config.encoder_layers + config.decoder_layers) * BLOCK_SLOTS;
    source + 4 + blocks + 2 * 3 + 2
}

/// Offset of the directory and of the data, for `tensors` slots.
pub(crate) fn offsets(tensors: usize) -> Option<(usize, usize)> {
    let directory = HEADER_BYTES + 4 * CONFIG_WORDS;
    let end = tensors.checked_mul(RECORD_BYTES)?.checked_add(directory)?;
    Some((directory, end.checked_next_multiple_of(DATA_ALIGN)?))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from(u32_at(bytes, at)) | (u64::from(u32_at(bytes, at + 4)) << 32)
}

pub(super) fn truncated(what: &'static str, needed: usize, got: usize) -> ImageError {
    ImageError::Truncated {
        what,
        needed: needed as u64,
        got: got as u64,
    }
}

impl ImageHeader {
    /// Reads and checks the header and the config record.
    pub fn read(bytes: &[u8]) -> Result<ImageHeader, ImageError> {
        let got = bytes.len();
        if got < HEADER_BYTES {
            return Err(truncated("the header", HEADER_BYTES, got));
        }
        if bytes[..8] != MAGIC {
            return Err(ImageError::BadMagic);
        }
        let version = u32_at(bytes, 8);
        if version != VERSION {
            return Err(ImageError::Version(version));
        }
        if u32_at(bytes, 12) != BYTE_ORDER_MARK || cfg!(target_endian = "big") {
            return Err(ImageError::ByteOrder);
        }
        if u32_at(bytes, 16) as usize != CONFIG_WORDS {
            return Err(ImageError::Header("config record size"));
        }
        if bytes[48..HEADER_BYTES].iter().any(|&b| b != 0) {
            return Err(ImageError::Header("reserved header bytes"));
        }
        let config_end = HEADER_BYTES + 4 * CONFIG_WORDS;
        if got < config_end {
            return Err(truncated("the config record", config_end, got));
        }
        let words: [u32; CONFIG_WORDS] =
            core::array::from_fn(|i| u32_at(bytes, HEADER_BYTES + 4 * i));
        let config = config_from_words(&words)?;
        let tensors = u32_at(bytes, 20) as usize;
        let expected = slot_count(&config);
        if tensors != expected {
            return Err(ImageError::SlotCount {
                expected: expected as u64,
                got: tensors as u64,
            });
        }
        let (directory, data) = offsets(tensors).ok_or(ImageError::Header("directory size"))?;
        if u64_at(bytes, 24) != directory as u64 || u64_at(bytes, 32) != data as u64 {
            return Err(ImageError::Header("directory or data offset"));
        }
        let total = u64_at(bytes, 40);
        if total < data as u64 {
            return Err(ImageError::Header("stated length"));
        }
        if (got as u64) < total {
            return Err(ImageError::Truncated {
                what: "the data",
                needed: total,
                got: got as u64,
            });
        }
        if got as u64 != total {
            return Err(ImageError::Header("bytes after the stated length"));
        }
        let directory_end = directory + tensors * RECORD_BYTES;
        if bytes[directory_end..data].iter().any(|&b| b != 0) {
            return Err(ImageError::Header("padding before the data"));
        }
        Ok(ImageHeader {
            config,
            tensors,
            directory,
            data,
            total: got,
        })
    }
}

/// Blocks of both stacks of the image's model: the slots [`parse`](super::parse) needs.
pub fn blocks_needed(bytes: &[u8]) -> Result<usize, ImageError> {
    let config = ImageHeader::read(bytes)?.config;
    Ok(config.encoder_layers + config.decoder_layers)
}
