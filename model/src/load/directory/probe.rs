//! Cheap looks at a model's files before any weight is read: the JSON files, the spec name
//! at the start of a CTranslate2 `model.bin`, the magic of a packed image, and whether a
//! safetensors file holds every byte its header describes.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::OpenError;
use crate::load::image;

/// `path` parsed, or `None` when there is no such file.
pub fn read_json(path: &Path) -> Result<Option<Value>, OpenError> {
    if !path.is_file() {
        return Ok(None);
    }
    let bad = |reason: String| OpenError::Json {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// Whether `path` is a file that starts with the packed image's magic.
pub fn is_image_file(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut magic))
        .is_ok_and(|()| magic == image::MAGIC)
}

/// Reads up to `buf.len()` bytes from the start of `file`; the count read.
fn read_head(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// The spec name a CTranslate2 `model.bin` starts with (binary version 2 on: `u32` version,
/// `u16` length, the NUL-terminated name; version 1 files hold a `TransformerSpec` and no
/// name).
pub fn ct2_spec(path: &Path) -> Result<String, OpenError> {
    let io = |source| OpenError::Read {
        path: path.to_owned(),
        source,
    };
    let truncated = |detail: &str| OpenError::Truncated {
        path: path.to_owned(),
        detail: detail.to_owned(),
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 6];
    let got = read_head(&mut file, &mut head).map_err(io)?;
    if got < 4 {
        return Err(truncated("it ends inside its binary version"));
    }
    let version = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if version < 2 {
        return Ok("TransformerSpec".to_owned());
    }
    if got < 6 {
        return Err(truncated("it ends inside its spec name"));
    }
    let len = u16::from_le_bytes([head[4], head[5]]);
    let mut name = Vec::with_capacity(usize::from(len));
    file.take(u64::from(len))
        .read_to_end(&mut name)
        .map_err(io)?;
    if name.len() < usize::from(len) {
        return Err(truncated("it ends inside its spec name"));
    }
    Ok(String::from_utf8_lossy(name.strip_suffix(&[0]).unwrap_or(&name)).into_owned())
}

/// The largest header a safetensors reader accepts (the `safetensors` crate's limit): a
/// larger declared length is a malformed file, left to the loader to report.
const MAX_SAFETENSORS_HEADER: u64 = 100_000_000;

/// Checks that a safetensors file holds every byte its header describes: the 8-byte header
/// length, the header, and the data up to the last tensor's end. A shorter file is
/// [`OpenError::Truncated`]; anything else wrong is left to the loader.
pub fn check_safetensors(path: &Path) -> Result<(), OpenError> {
    let io = |source| OpenError::Read {
        path: path.to_owned(),
        source,
    };
    let truncated = |detail: String| {
        Err(OpenError::Truncated {
            path: path.to_owned(),
            detail,
        })
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len < 8 {
        return truncated(format!("{len} bytes, less than its 8-byte header length"));
    }
    let mut size = [0u8; 8];
    file.read_exact(&mut size).map_err(io)?;
    let header = u64::from_le_bytes(size);
    if header > MAX_SAFETENSORS_HEADER {
        return Ok(());
    }
    if 8 + header > len {
        return truncated(format!(
            "{len} bytes, but its header alone declares {}",
            8 + header
        ));
    }
    let mut text = Vec::with_capacity(header as usize);
    file.take(header).read_to_end(&mut text).map_err(io)?;
    let Ok(Value::Object(tensors)) = serde_json::from_slice::<Value>(&text) else {
        return Ok(());
    };
    let data_end = tensors
        .values()
        .filter_map(|t| t.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    let needed = (8 + header).saturating_add(data_end);
    if needed > len {
        return truncated(format!(
            "{len} bytes, but its header describes {needed} (tensor data is missing)"
        ));
    }
    Ok(())
}
