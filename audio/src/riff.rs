//! The RIFF/WAVE header: the chunks up to `data`, read from a stream as ffmpeg and Python's
//! `wave` read them.
//!
//! - Chunks are word-aligned: a chunk of odd size is followed by a pad byte, which is skipped.
//!   Writers that omit it are common, so after an odd chunk the reader looks at both places the
//!   next chunk may start and takes the one holding a chunk id (a known one first, then any
//!   printable one), the padded place when both or neither do.
//! - Chunks other than `fmt ` and `data` (`LIST`, `fact`, `bext`, `JUNK`, …) are skipped.
//! - The RIFF size is not used (ffmpeg ignores it too). A data size of `0xFFFFFFFF`, or of 0
//!   when the RIFF size does not end the file at the data chunk, is a streamed WAV (as ffmpeg
//!   writes to a pipe): the samples run to the end of the file.
//! - The `fmt ` chunk must come before `data`. Its encoding is one of [`Encoding`]: PCM
//!   (format tag 1), IEEE float (3) or `WAVE_FORMAT_EXTENSIBLE` (0xFFFE) with a PCM or float
//!   sub-format, whose samples are read by their container width (`wBitsPerSample`), as ffmpeg
//!   does; the block alignment must be the channel count times the container's bytes. The byte
//!   rate is not used.

use std::io::{self, Read};

use crate::AudioError;

/// How one sample is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Unsigned 8-bit integer, 128 is zero.
    U8,
    /// Signed little-endian integers of 2, 3 or 4 bytes.
    S16,
    S24,
    S32,
    /// Little-endian IEEE floats.
    F32,
    F64,
}

impl Encoding {
    /// Bytes per sample.
    pub(crate) fn bytes(self) -> usize {
        match self {
            Self::U8 => 1,
            Self::S16 => 2,
            Self::S24 => 3,
            Self::S32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    /// Whether samples are IEEE floats.
    pub(crate) fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64)
    }
}

/// What the `fmt ` chunk declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Format {
    /// How samples are stored.
    pub encoding: Encoding,
    /// Channels per frame (at least 1).
    pub channels: u16,
    /// Frames per second (not checked here).
    pub rate: u32,
    /// Bits per sample as the file states them (the valid bits of an extensible format).
    pub bits: u16,
}

impl Format {
    /// Bytes per frame (the block alignment).
    pub(crate) fn frame_bytes(&self) -> usize {
        usize::from(self.channels) * self.encoding.bytes()
    }
}

/// The header up to the first sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The `fmt ` chunk.
    pub format: Format,
    /// The data chunk's declared size; `None` for a streamed WAV (to the end of the file).
    pub data_len: Option<u64>,
    /// Bytes before the first sample.
    pub data_start: u64,
}

const PCM: u16 = 1;
const IEEE_FLOAT: u16 = 3;
const EXTENSIBLE: u16 = 0xFFFE;
/// Bytes 2..16 of every `KSDATAFORMAT_SUBTYPE_*` GUID whose first two bytes are a format tag.
const GUID_TAIL: [u8; 14] = *b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71";
/// Bytes of the `fmt ` chunk read: a `WAVEFORMATEXTENSIBLE`; the rest is skipped.
const FMT_READ: usize = 40;

/// Chunk ids found in WAV files, preferred when guessing where a chunk starts.
const KNOWN_IDS: [&[u8; 4]; 20] = [
    b"fmt ", b"data", b"LIST", b"fact", b"PEAK", b"bext", b"JUNK", b"junk", b"PAD ", b"id3 ",
    b"ID3 ", b"cue ", b"smpl", b"inst", b"acid", b"iXML", b"axml", b"cart", b"DISP", b"FLLR",
];

/// Reads the header of a RIFF/WAVE stream up to the first sample (module docs: the rules).
pub(crate) fn read_header<R: Read>(reader: R) -> Result<(Header, Walker<R>), AudioError> {
    let mut walker = Walker::new(reader);
    let mut head = [0u8; 12];
    let got = walker.fill(&mut head)?;
    if got == 0 {
        return Err(AudioError::Empty);
    }
    if let Some(found) = foreign_container(&head[..got]) {
        return Err(AudioError::UnsupportedContainer { found });
    }
    if got < head.len() {
        return Err(walker.truncated("its RIFF header"));
    }
    let riff_end = u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]])) + 8;
    let mut format = None;
    let mut after_odd = false;
    while let Some((id, size)) = walker.chunk_header(after_odd)? {
        match &id {
            b"fmt " => format = Some(read_fmt(&mut walker, size)?),
            b"data" => {
                let Some(format) = format else {
                    return Err(AudioError::Malformed(
                        "the data chunk comes before the fmt chunk".into(),
                    ));
                };
                let streamed = size == u32::MAX || (size == 0 && riff_end != walker.pos);
                let header = Header {
                    format,
                    data_len: (!streamed).then_some(u64::from(size)),
                    data_start: walker.pos,
                };
                return Ok((header, walker));
            }
            _ => walker.skip(u64::from(size), &id, size)?,
        }
        after_odd = size % 2 == 1;
    }
    Err(AudioError::Malformed(format!(
        "no {} chunk (the file ends after {} bytes)",
        if format.is_some() { "data" } else { "fmt" },
        walker.pos
    )))
}

/// Reads a `fmt ` chunk of `size` bytes.
fn read_fmt<R: Read>(walker: &mut Walker<R>, size: u32) -> Result<Format, AudioError> {
    let mut fmt = [0u8; FMT_READ];
    let want = FMT_READ.min(size as usize);
    if walker.fill(&mut fmt[..want])? < want {
        return Err(walker.truncated(&chunk_name(b"fmt ", size)));
    }
    if size > FMT_READ as u32 {
        walker.skip(u64::from(size) - FMT_READ as u64, b"fmt ", size)?;
    }
    parse_fmt(&fmt[..want])
}

/// Decodes the fields of a `fmt ` chunk.
fn parse_fmt(fmt: &[u8]) -> Result<Format, AudioError> {
    if fmt.len() < 16 {
        return Err(AudioError::Malformed(format!(
            "the fmt chunk holds {} bytes, fewer than the 16 of a PCM format",
            fmt.len()
        )));
    }
    let u16_at = |i: usize| u16::from_le_bytes([fmt[i], fmt[i + 1]]);
    let mut tag = u16_at(0);
    let channels = u16_at(2);
    let rate = u32::from_le_bytes([fmt[4], fmt[5], fmt[6], fmt[7]]);
    let block_align = u16_at(12);
    let container = u16_at(14);
    let mut bits = container;
    if tag == EXTENSIBLE {
        if fmt.len() < FMT_READ {
            return Err(AudioError::Malformed(format!(
                "a WAVE_FORMAT_EXTENSIBLE fmt chunk of {} bytes (it needs {FMT_READ})",
                fmt.len()
            )));
        }
        let guid = &fmt[24..40];
        if guid[2..] != GUID_TAIL {
            return Err(AudioError::UnsupportedEncoding {
                what: format!("WAVE_FORMAT_EXTENSIBLE sub-format {}", hex(guid)),
            });
        }
        tag = u16::from_le_bytes([guid[0], guid[1]]);
        bits = match u16_at(18) {
            0 => container,
            valid if valid > container => {
                return Err(AudioError::Malformed(format!(
                    "{valid} valid bits in a {container}-bit sample container"
                )))
            }
            valid => valid,
        };
    }
    let float = match tag {
        PCM => false,
        IEEE_FLOAT => true,
        _ => {
            return Err(AudioError::Compressed {
                tag,
                name: tag_name(tag),
            })
        }
    };
    if channels == 0 {
        return Err(AudioError::Malformed(
            "the fmt chunk declares 0 channels".into(),
        ));
    }
    let encoding = encoding(float, container)?;
    let format = Format {
        encoding,
        channels,
        rate,
        bits,
    };
    if format.frame_bytes() != usize::from(block_align) {
        return Err(AudioError::Malformed(format!(
            "block align {block_align} does not match {channels} channel(s) of {container}-bit \
             samples ({} bytes per frame)",
            format.frame_bytes()
        )));
    }
    Ok(format)
}

/// The encoding of samples of `container` bits, or why it is refused.
fn encoding(float: bool, container: u16) -> Result<Encoding, AudioError> {
    Ok(match (float, container) {
        (_, 0) => return Err(AudioError::Malformed("0 bits per sample".into())),
        (false, 8) => Encoding::U8,
        (false, 16) => Encoding::S16,
        (false, 24) => Encoding::S24,
        (false, 32) => Encoding::S32,
        (true, 32) => Encoding::F32,
        (true, 64) => Encoding::F64,
        (float, bits) => {
            let kind = if float { "IEEE float" } else { "integer PCM" };
            return Err(AudioError::UnsupportedEncoding {
                what: format!("{bits}-bit {kind}"),
            });
        }
    })
}

/// The name of a format tag (mmreg.h) that is not PCM or float.
fn tag_name(tag: u16) -> &'static str {
    match tag {
        0x0002 => "MS-ADPCM",
        0x0006 => "A-law",
        0x0007 => "mu-law",
        0x0011 => "IMA ADPCM",
        0x0031 => "GSM 6.10",
        0x0040 => "G.721 ADPCM",
        0x0045 => "G.726 ADPCM",
        0x0050 => "MPEG audio",
        0x0055 => "MP3",
        0x0092 => "AC-3 over S/PDIF",
        0x00FF | 0x1610 => "AAC",
        0x0160..=0x0163 => "Windows Media Audio",
        0x2000 => "AC-3",
        0x2001 => "DTS",
        0xF1AC => "FLAC",
        _ => "an unknown or vendor format",
    }
}

/// `bytes` as hexadecimal digits.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a stream from its start, counting the bytes consumed; after the header, it reads the
/// samples.
pub(crate) struct Walker<R> {
    reader: R,
    /// Bytes consumed so far.
    pos: u64,
    /// A byte read ahead that belongs to what follows.
    pending: Option<u8>,
}

impl<R: Read> Walker<R> {
    fn new(reader: R) -> Self {
        Self {
            reader,
            pos: 0,
            pending: None,
        }
    }

    /// Reads until `buf` is full or the stream ends; returns the bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, AudioError> {
        read_up_to(self, buf).map_err(AudioError::Io)
    }

    /// The next chunk's id and size, `None` at the end of the stream. After a chunk of odd
    /// size, the next one starts after a pad byte, or right away in files that omit it.
    fn chunk_header(&mut self, after_odd: bool) -> Result<Option<([u8; 4], u32)>, AudioError> {
        let mut buf = [0u8; 9];
        let want = if after_odd { 9 } else { 8 };
        let got = self.fill(&mut buf[..want])?;
        let pad = usize::from(after_odd);
        if got <= pad {
            return Ok(None);
        }
        let start = if after_odd && unpadded(&buf) {
            if got == want {
                self.pending = Some(buf[8]);
                self.pos -= 1;
            }
            0
        } else {
            pad
        };
        if got < start + 8 {
            return Err(self.truncated("a chunk header"));
        }
        let header = &buf[start..start + 8];
        let id = [header[0], header[1], header[2], header[3]];
        let size = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        Ok(Some((id, size)))
    }

    /// Skips the `left` last bytes of the chunk `id` of `size` bytes.
    fn skip(&mut self, left: u64, id: &[u8; 4], size: u32) -> Result<(), AudioError> {
        let skipped =
            io::copy(&mut self.by_ref().take(left), &mut io::sink()).map_err(AudioError::Io)?;
        if skipped < left {
            return Err(self.truncated(&chunk_name(id, size)));
        }
        Ok(())
    }

    /// The stream ended inside `what`.
    fn truncated(&self, what: &str) -> AudioError {
        AudioError::Truncated {
            bytes: self.pos,
            inside: what.to_owned(),
        }
    }
}

impl<R: Read> Read for Walker<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match (self.pending, buf.first_mut()) {
            (Some(byte), Some(first)) => {
                *first = byte;
                self.pending = None;
                1
            }
            _ => self.reader.read(buf)?,
        };
        self.pos += n as u64;
        Ok(n)
    }
}

/// How a truncated chunk is named.
fn chunk_name(id: &[u8; 4], size: u32) -> String {
    format!(
        "its `{}` chunk of {size} bytes",
        String::from_utf8_lossy(id)
    )
}

/// Whether, after a chunk of odd size, the 9 bytes `buf` read more likely start the next chunk
/// at `buf[0]` (no pad byte) than at `buf[1]`.
fn unpadded(buf: &[u8; 9]) -> bool {
    let known = |id: &[u8]| KNOWN_IDS.iter().any(|k| &k[..] == id);
    let printable = |id: &[u8]| id.iter().all(|b| (0x20..0x7F).contains(b)) && id[0] != b' ';
    let (padded, bare) = (&buf[1..5], &buf[0..4]);
    if buf[0] == 0 && known(padded) {
        false
    } else if known(bare) {
        true
    } else if known(padded) || printable(padded) {
        false
    } else {
        printable(bare)
    }
}

/// Names a container that is not RIFF/WAVE from its first bytes.
pub(crate) fn foreign_container(head: &[u8]) -> Option<&'static str> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    if starts(b"RIFF") || b"RIFF".starts_with(head) {
        return match head.get(8..12) {
            Some(b"WAVE") | None => None,
            Some(b"AVI ") => Some("AVI"),
            Some(b"WEBP") => Some("WebP"),
            Some(_) => Some("RIFF (not WAVE)"),
        };
    }
    Some(if starts(b"RF64") || starts(b"BW64") {
        "RF64/BW64 (64-bit WAV)"
    } else if starts(b"RIFX") {
        "RIFX (big-endian WAV)"
    } else if starts(b"fLaC") {
        "FLAC"
    } else if starts(b"OggS") {
        "Ogg (Vorbis/Opus/FLAC)"
    } else if starts(b"ID3") || (head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0) {
        "MP3/AAC (MPEG audio)"
    } else if starts(b"FORM") {
        "AIFF"
    } else if head.get(4..8) == Some(b"ftyp") {
        "MP4/M4A"
    } else if starts(&[0x1A, 0x45, 0xDF, 0xA3]) {
        "Matroska/WebM"
    } else if starts(b".snd") {
        "Sun/NeXT AU"
    } else if starts(b"caff") {
        "Core Audio (CAF)"
    } else {
        "unknown (not RIFF/WAVE)"
    })
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
pub(crate) fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_named() {
        assert_eq!(foreign_container(b"fLaC\0\0\0\x22"), Some("FLAC"));
        assert_eq!(foreign_container(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(foreign_container(b"ID3\x04"), Some("MP3/AAC (MPEG audio)"));
        assert_eq!(foreign_container(b"\0\0\0\x20ftypM4A "), Some("MP4/M4A"));
    }

    #[test]
    fn the_pad_byte_is_told_from_a_missing_one_by_the_chunk_id() {
        // Padded: a zero pad byte, then `data`.
        assert!(!unpadded(b"\0data\x10\0\0\0"));
        // Unpadded: `data` right away, whatever the size's first byte.
        assert!(unpadded(b"data\x41\0\0\0\0"));
        assert!(unpadded(b"data\0\0\0\0\0"));
        // Unknown ids: the printable one; the padded place when neither is.
        assert!(!unpadded(b"\0abcd\0\0\0\0"));
        assert!(unpadded(b"abcd\x01\0\0\0\0"));
        assert!(!unpadded(&[1; 9]));
    }
}
