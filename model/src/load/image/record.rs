//! One tensor record of the directory: 32 bytes, little-endian.
//!
//! | bytes | field |
//! |---|---|
//! | 0 | element [`Kind`] |
//! | 1 | [`Layout`] |
//! | 2..4 | flags ([`TensorRecord::BF16_DOT`]) |
//! | 4..8 | parameter (`f32` bits or an integer; its meaning is the slot's) |
//! | 8..12 | `k`: rows of a table, reduction length of a packed weight |
//! | 12..16 | `n`: columns of a table, output width of a packed weight |
//! | 16..24 | byte offset of the data in the image (a multiple of 64) |
//! | 24..32 | byte length of the data |

/// Bytes of one record.
pub const RECORD_BYTES: usize = 32;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No tensor in this slot (an absent optional tensor).
    Absent,
    /// 32-bit floats.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// Symmetric int8 weights with one scale per output channel (`PackedI8`'s layout).
    I8,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Absent => 0,
            Kind::F32 => 1,
            Kind::F16 => 2,
            Kind::Bf16 => 3,
            Kind::I8 => 4,
        }
    }

    fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            0 => Kind::Absent,
            1 => Kind::F32,
            2 => Kind::F16,
            3 => Kind::Bf16,
            4 => Kind::I8,
            _ => return None,
        })
    }

    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Kind::Absent => 0,
            Kind::F32 => 4,
            Kind::F16 | Kind::Bf16 => 2,
            Kind::I8 => 1,
        }
    }
}

/// How a tensor's elements are arranged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Row-major `k × n` (a vector is `1 × n`).
    Plain,
    /// A GEMM weight in the kernels' packed panel layout, `k × n`.
    Packed,
}

/// One slot of the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorRecord {
    /// Element type ([`Kind::Absent`] for an empty slot).
    pub kind: Kind,
    /// Arrangement.
    pub layout: Layout,
    /// Flags.
    pub flags: u16,
    /// The slot's parameter.
    pub param: u32,
    /// Rows (plain) or reduction length (packed).
    pub k: u32,
    /// Columns (plain) or output width (packed).
    pub n: u32,
    /// Byte offset in the image.
    pub offset: u64,
    /// Byte length.
    pub len: u64,
}

impl TensorRecord {
    /// Flag: a bf16 packed weight runs with bf16 dot products.
    pub const BF16_DOT: u16 = 1;

    /// An empty slot.
    pub const ABSENT: TensorRecord = TensorRecord {
        kind: Kind::Absent,
        layout: Layout::Plain,
        flags: 0,
        param: 0,
        k: 0,
        n: 0,
        offset: 0,
        len: 0,
    };

    /// The record's bytes.
    pub fn to_bytes(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0] = self.kind.code();
        b[1] = match self.layout {
            Layout::Plain => 0,
            Layout::Packed => 1,
        };
        b[2..4].copy_from_slice(&self.flags.to_le_bytes());
        b[4..8].copy_from_slice(&self.param.to_le_bytes());
        b[8..12].copy_from_slice(&self.k.to_le_bytes());
        b[12..16].copy_from_slice(&self.n.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// A record from its bytes; `None` for an unknown kind, layout or flag.
    pub fn from_bytes(b: &[u8; RECORD_BYTES]) -> Option<TensorRecord> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | (u64::from(u32_at(i + 4)) << 32);
        let flags = u16::from_le_bytes([b[2], b[3]]);
        if flags & !Self::BF16_DOT != 0 {
            return None;
        }
        Some(TensorRecord {
            kind: Kind::from_code(b[0])?,
            layout: match b[1] {
                0 => Layout::Plain,
                1 => Layout::Packed,
                _ => return None,
            },
            flags,
            param: u32_at(4),
            k: u32_at(8),
            n: u32_at(12),
            offset: u64_at(16),
            len: u64_at(24),
        })
    }
}
