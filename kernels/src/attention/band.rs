//! The keys a query sees: one contiguous range per query, from key padding, causal masking and
//! the sliding window. Both ends of the range never decrease with the query index, which is what
//! lets the kernels skip whole key tiles.

use core::ops::Range;

/// The structural (non-bias) part of a [`super::Mask`], validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Band {
    /// Keys at or beyond this index are ignored.
    pub key_len: usize,
    /// Queries sit at positions `past..past + q_len` and see keys up to their own position.
    pub causal_offset: Option<usize>,
    /// Only the last `w` keys up to the query's position are seen (with `causal_offset`).
    pub window: Option<usize>,
}

impl Band {
    /// Keys visible to query `i`, within `0..key_len` (empty when none; both ends never
    /// decrease with `i`).
    #[inline]
    pub fn keys(&self, i: usize) -> Range<usize> {
        let mut end = self.key_len;
        let mut start = 0;
        if let Some(past) = self.causal_offset {
            let position_end = past.saturating_add(i).saturating_add(1);
            end = end.min(position_end);
            if let Some(w) = self.window {
                start = position_end.saturating_sub(w);
            }
        }
        start.min(end)..end
    }

    /// Keys visible to at least one of the queries `rows` (non-empty), and the keys visible to all
    /// of them (possibly empty).
    #[inline]
    pub fn keys_of_rows(&self, rows: Range<usize>) -> (Range<usize>, Range<usize>) {
        let first = self.keys(rows.start);
        let last = self.keys(rows.end.saturating_sub(1).max(rows.start));
        let any = first.start..last.end;
        let all = last.start..first.end.max(last.start);
        (any, all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_the_mask() {
        let plain = Band {
            key_len: 7,
            causal_offset: None,
            window: None,
        };
        assert_eq!(plain.keys(100), 0..7);
        let causal = Band {
            key_len: 10,
            causal_offset: Some(2),
            window: None,
        };
        assert_eq!(causal.keys(0), 0..3);
        assert_eq!(causal.keys(20), 0..10);
        let window = Band {
            window: Some(4),
            ..causal
        };
        assert_eq!(window.keys(0), 0..3);
        assert_eq!(window.keys(5), 4..8);
        assert_eq!(window.keys(30), 10..10);
        let none = Band {
            window: Some(0),
            ..causal
        };
        assert!(none.keys(3).is_empty());
        let (any, all) = window.keys_of_rows(2..6);
        assert_eq!(any, 1..8);
        assert_eq!(all, 4..5);
    }
}
