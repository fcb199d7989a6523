//! Validation of a `precompiled_charsmap` before `spm_precompiled` reads it.
//!
//! The blob is `u32 trie_bytes`, a darts-clone double array of `trie_bytes / 4` little-endian
//! `u32` units, then the replacement strings, each ending in `\0`. `spm_precompiled` indexes the
//! array and slices the strings without bounds checks, so a malformed blob would panic (or
//! allocate up to 8 GB for the array) while normalizing text. This walks every state the trie
//! search can reach, exactly as `DoubleArray::common_prefix_search` moves, and checks that:
//!
//! - the declared array fits in the blob and the replacement strings are UTF-8;
//! - from every reachable state `p`, each byte `c` leads to an index `p ^ c` inside the array;
//! - every leaf's value unit is inside the array and its value is a character boundary of the
//!   replacement strings.
//!
//! A blob that passes cannot make the search index out of bounds or slice off a boundary; the
//! walk visits each state once, so it costs O(units × 256).

/// Checks a charsmap blob; the error says what is wrong.
pub fn validate(blob: &[u8]) -> Result<(), String> {
    let (units, strings) = split(blob)?;
    let strings = std::str::from_utf8(strings).map_err(|e| format!("replacements: {e}"))?;
    if units.is_empty() {
        return Err("empty trie".into());
    }
    let mut seen = vec![false; units.len()];
    let mut stack = vec![offset(units[0])];
    while let Some(state) = stack.pop() {
        if state >= units.len() || seen[state] {
            if state >= units.len() {
                return Err(format!("state {state} outside the trie"));
            }
            continue;
        }
        seen[state] = true;
        for c in 1..=255usize {
            let unit = *units
                .get(state ^ c)
                .ok_or_else(|| format!("byte {c} from state {state} leaves the trie"))?;
            if label(unit) != c {
                continue;
            }
            let next = (state ^ c) ^ offset(unit);
            if has_leaf(unit) {
                let value_unit = *units
                    .get(next)
                    .ok_or_else(|| format!("leaf {next} outside the trie"))?;
                let value = value_unit & ((1 << 31) - 1);
                if value > strings.len() || !strings.is_char_boundary(value) {
                    return Err(format!("leaf value {value} is not a replacement start"));
                }
            }
            stack.push(next);
        }
    }
    Ok(())
}

/// The units and the replacement bytes of a blob.
fn split(blob: &[u8]) -> Result<(Vec<usize>, &[u8]), String> {
    let head: [u8; 4] = blob
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or("shorter than its 4-byte header")?;
    let trie_bytes = u32::from_le_bytes(head) as usize;
    let rest = &blob[4..];
    let array_bytes = trie_bytes / 4 * 4;
    if array_bytes > rest.len() {
        return Err(format!(
            "trie of {trie_bytes} bytes in a blob of {} bytes",
            blob.len()
        ));
    }
    let units = rest[..array_bytes]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    Ok((units, &rest[array_bytes..]))
}

/// darts-clone's unit fields, as `spm_precompiled` reads them.
fn has_leaf(unit: usize) -> bool {
    (unit >> 8) & 1 == 1
}

/// The label a unit must carry to be the child reached by byte `c`.
fn label(unit: usize) -> usize {
    unit & ((1 << 31) | 0xFF)
}

/// The offset to a unit's children.
fn offset(unit: usize) -> usize {
    (unit >> 10) << ((unit & (1 << 9)) >> 6)
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn refuses_truncated_and_oversized_headers() {
        assert!(validate(&[]).is_err());
        assert!(validate(&[8, 0, 0, 0, 1, 2, 3]).is_err());
        assert!(validate(&[0xFF, 0xFF, 0xFF, 0xFF]).is_err());
        assert!(validate(&[0, 0, 0, 0]).is_err());
    }

    #[test]
    fn refuses_a_trie_smaller_than_one_block() {
        // One unit: byte 1 from the root's state leads past it.
        assert!(validate(&[4, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
