//! The keys a query sees: at most two ranges per query, the global keys `0..global` that every
//! query sees, and its local range (from key padding, causal masking, the sliding window and the
//! symmetric radius) above them. Both ends of the local range never decrease with the query
//! index, which is what lets the kernels skip whole key tiles.
//!
//! The kernels take the two parts one after the other ([`Band::parts`]), each a band of one
//! range per query, so that a global key inside a query's local range is counted once.

use core::ops::Range;

/// The structural (non-bias) part of a [`super::Mask`], validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Band {
    /// Keys at or beyond this index are ignored.
    pub key_len: usize,
    /// Keys below this index are outside the local range (the global keys sit there).
    pub floor: usize,
    /// Queries sit at positions `past..past + q_len` and see keys up to their own position.
    pub causal_offset: Option<usize>,
    /// Only the last `w` keys up to the query's position are seen (with `causal_offset`).
    pub window: Option<usize>,
    /// Query `i` sees the keys within `r` of its position `origin + i`.
    pub radius: Option<usize>,
    /// The position of query 0 for `radius` (non-zero in a part of a call cut into rows).
    pub origin: usize,
    /// Keys `0..global` are seen by every query (at most `key_len`).
    pub global: usize,
}

impl Band {
    /// The band of a mask without global keys: `key_len` keys, `causal_offset`, `window`
    /// and `radius`, queries from position 0.
    pub fn new(
        key_len: usize,
        causal_offset: Option<usize>,
        window: Option<usize>,
        radius: Option<usize>,
    ) -> Band {
        Band {
            key_len,
            floor: 0,
            causal_offset,
            window,
            radius,
            origin: 0,
            global: 0,
        }
    }

    /// The local keys of query `i`: within `floor..key_len`, empty when none (then at `floor`
    /// or above); both ends never decrease with `i`. Without global keys, every key the query
    /// sees.
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
        if let Some(r) = self.radius {
            let position = self.origin.saturating_add(i);
            start = start.max(position.saturating_sub(r));
            end = end.min(position.saturating_add(r).saturating_add(1));
        }
        let end = end.max(self.floor);
        start.max(self.floor).min(end)..end
    }

    /// How many keys query `i` sees, global and local.
    #[inline]
    pub fn seen(&self, i: usize) -> usize {
        self.parts().iter().map(|part| part.keys(i).len()).sum()
    }

    /// The two parts of the band, each with one range per query and no global keys: the global
    /// keys (`0..global` for every query; empty without them), then the local keys at or above
    /// them.
    #[inline]
    pub fn parts(&self) -> [Band; 2] {
        let global = Band::new(self.global, None, None, None);
        let local = Band {
            floor: self.floor.max(self.global),
            global: 0,
            ..*self
        };
        [global, local]
    }

    /// The band of the queries from `first` on (after the first `first` rows), as queries
    /// `0..` of a call of their own.
    #[inline]
    pub fn after_rows(&self, first: usize) -> Band {
        Band {
            causal_offset: self.causal_offset.map(|past| past + first),
            origin: self.origin + first,
            ..*self
        }
    }

    /// Keys visible to at least one of the queries `rows` (non-empty), and the keys visible to all
    /// of them (possibly empty). Without global keys.
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
        let plain = Band::new(7, None, None, None);
        assert_eq!(plain.keys(100), 0..7);
        let causal = Band::new(10, Some(2), None, None);
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

    #[test]
    fn a_radius_sees_both_sides() {
        let local = Band::new(10, None, None, Some(2));
        assert_eq!(local.keys(0), 0..3);
        assert_eq!(local.keys(5), 3..8);
        assert_eq!(local.keys(9), 7..10);
        assert_eq!(local.keys(11), 9..10);
        assert_eq!(local.keys(12), 10..10);
        assert_eq!(local.keys(40), 10..10);
        assert_eq!(Band::new(10, None, None, Some(0)).keys(4), 4..5);
        assert_eq!(Band::new(10, None, None, Some(usize::MAX)).keys(4), 0..10);
        assert_eq!(local.after_rows(5).keys(0), local.keys(5));
        assert_eq!(local.keys_of_rows(2..6), (0..8, 3..5));
    }

    #[test]
    fn an_origin_centres_the_radius_past_keys_placed_first() {
        // Transient-global layout: 3 side keys, then one key per query.
        let band = Band {
            global: 3,
            origin: 3,
            ..Band::new(13, None, None, Some(2))
        };
        let [global, local] = band.parts();
        assert_eq!(global.keys(0), 0..3);
        assert_eq!(local.keys(0), 3..6);
        assert_eq!(local.keys(1), 3..7);
        assert_eq!(local.keys(5), 6..11);
        assert_eq!(local.keys(9), 10..13);
        assert_eq!(local.after_rows(5).keys(0), local.keys(5));
        assert_eq!(band.seen(0), 6);
        assert_eq!(band.seen(5), 8);
    }

    #[test]
    fn global_keys_are_a_part_of_their_own() {
        let band = Band {
            global: 3,
            ..Band::new(20, None, None, Some(2))
        };
        let [global, local] = band.parts();
        for i in 0..30 {
            assert_eq!(global.keys(i), 0..3);
        }
        // The global range and the band overlap, touch, and lie apart.
        assert_eq!(local.keys(0), 3..3);
        assert_eq!(local.keys(3), 3..6);
        assert_eq!(local.keys(5), 3..8);
        assert_eq!(local.keys(6), 4..9);
        assert_eq!(local.keys(25), 20..20);
        assert_eq!(band.seen(0), 3);
        assert_eq!(band.seen(6), 8);
        let padded = Band {
            global: 2,
            ..Band::new(2, None, None, None)
        };
        assert_eq!(padded.parts()[1].keys(0), 2..2);
        assert_eq!(padded.seen(0), 2);
    }
}
