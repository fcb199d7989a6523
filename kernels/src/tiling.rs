//! Tile sizes and cache blocking of every ISA level, in one place (as BLIS's per-architecture
//! block sizes or matrixmultiply's kernel parameters).
//!
//! Each level has one [`LevelTiling`] of named constants: the GEMM register tile and cache
//! blocks, the rows per block of the GEMM small-`m` path, and the attention prefill
//! microkernel. Generic kernel bodies pick their level's description with [`of_lanes`] from
//! `S::F32_LANES` (1 scalar, 4 NEON, 8 AVX2, 16 AVX-512: the lane count identifies the level)
//! and instantiate their const-generic microkernels from these constants, so no kernel derives
//! a size from the lane count on its own. Why each value was chosen is stated beside it.

/// Cache blocking of the GEMM blocked (large-`m`) path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmBlocking {
    /// Rows of the microkernel tile.
    pub mr: usize,
    /// Vectors per tile row (the tile is `nv · lanes` columns wide).
    pub nv: usize,
    /// Rows of `A` per block (a multiple of `mr`): the block's `mc × kc` part of `A` stays in
    /// L2 while the tiles sweep the columns.
    pub mc: usize,
    /// Depth of one block of `k`: the `kc × 32` micro-panel of `B` stays in L1/L2 while the
    /// tiles sweep the rows of the `A` block; every extra block costs a pass over `C`.
    pub kc: usize,
}

/// The attention prefill microkernel: `rows` keys (or head dimensions) × `query_vectors`
/// vectors of queries, accumulated in registers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttentionTiling {
    /// Rows of the microkernel (`MR`): broadcast scalars of K (or V columns) per step.
    pub rows: usize,
    /// Query vectors per tile (`NR`): a query tile is `query_vectors · lanes` queries.
    pub query_vectors: usize,
    /// Query tiles per block: each packed tile of K and V serves this many query tiles (at
    /// most [`MAX_ATTENTION_BLOCK_TILES`]).
    pub block_tiles: usize,
}

/// Rows of the attention microkernel that computes a call of at most this many rows at a level
/// whose `rows` is larger: the last call over `d_head = 64` (or over a 64-key tile) at AVX2's
/// 6 rows has 4, which the 6-row kernel would compute as 6 (`TESSEL_ISA=avx2
/// ATTENTION_CASES=self-512,self-1024 report attention`, 3 runs alternated: 0.68–0.70 →
/// 0.70–0.71 and 0.73 → 0.73–0.74 of `fma-peak`).
pub(crate) const ATTENTION_SHORT_ROWS: usize = 4;

/// The most query tiles per attention prefill block of any level.
pub(crate) const MAX_ATTENTION_BLOCK_TILES: usize = 8;

/// The attention decode path (a few queries over a long KV cache): how many vector
/// accumulators its `P V` update holds in registers. The update keeps `queries × vectors`
/// accumulators (`vectors` consecutive vectors of `d_head` for every query, each loaded `V`
/// vector used by every query), and splits the keys in two interleaved sets when that is fewer
/// than [`DecodeTiling::min_chains`] independent FMA chains.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DecodeTiling {
    /// Accumulator registers of the `P V` tile (the rest hold the loaded `V` vectors and the
    /// broadcast weight).
    pub accumulators: usize,
    /// Independent FMA chains that keep the FMA units busy (units × latency).
    pub min_chains: usize,
}

/// Every tile size and block of one ISA level.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LevelTiling {
    /// The GEMM blocked path.
    pub gemm: GemmBlocking,
    /// Largest rows per block of the GEMM small-`m` path (its accumulators fill the registers:
    /// `m` above this is split into balanced row blocks over a span of `B` kept in L2).
    pub gemm_small_rows: usize,
    /// The attention prefill microkernel.
    pub attention: AttentionTiling,
    /// The attention decode path.
    pub decode: DecodeTiling,
}

/// AVX-512 (32 zmm registers, 16 lanes).
///
/// GEMM: 8 × 32 tile, 16 accumulators of 32 registers: the row pointers of a wider tile
/// exhaust the general-purpose registers (measured slower at 12 and 14 rows). `kc = 1024` (a
/// micro-panel of up to 128 KB, served from L2 with prefetch) measured faster here than
/// L1-sized 128 or 256 and than 512: one pass over `C` for `k` up to 1024 (on this shared-L3
/// machine the extra passes over `C` cost more than the L1 misses on `B`). The `128 × 1024`
/// block of `A` (512 KB) and the `B` micro-panel together fit the 1 MB L2.
///
/// Also measured on this Zen 5 (ratios to the `gemm` crate, alternated in the same runs), and
/// not better: the crate's own shape, a 6 × 64 tile over two panels (24 accumulators, the
/// `6 × kc` sliver of `A` kept in L1 while it sweeps a `kc`-deep block of `B` kept in L2, with
/// the next sliver prefetched): equal on 512³ and 1500×384×1536, 2–6% slower on 1024³ and
/// 64×512×512; packing `A` into 12-row slivers for a 12 × 32 tile read through one pointer: the
/// microkernel matched the crate's but the packing took ~7% of a 512³ product; `kc` 256–1024,
/// `mc` 64–256 and column blocks of 256–768 KB of `B`: within the ±3% run-to-run noise.
///
/// Attention: 8 × 3 zmm accumulators, 48 queries per tile. Decode: 24 accumulators (5 queries
/// × 4 keys of partial scores, 5 queries × 4 vectors of `P V`), the other 8 registers for the
/// loaded K or V vectors and the broadcasts.
pub(crate) const AVX512: LevelTiling = LevelTiling {
    gemm: GemmBlocking {
        mr: 8,
        nv: 2,
        mc: 8 * 16,
        kc: 1024,
    },
    gemm_small_rows: 8,
    attention: AttentionTiling {
        rows: 8,
        query_vectors: 3,
        block_tiles: 4,
    },
    decode: DecodeTiling {
        accumulators: 24,
        min_chains: 8,
    },
};

/// AVX2 (16 ymm registers, 8 lanes).
///
/// GEMM: 6 × 16 tile, 12 accumulators of 16 registers. `kc = 1024`: one pass over `C` for
/// `k <= 1024`, two for Whisper's `1500 × 1536 × 384` (the micro-panel is then served from L2
/// with prefetch, as at AVX-512). On Zen 4 at `TESSEL_ISA=avx2`, 1 thread, the best of many runs
/// against the same run's `fma-peak`, 6 runs alternated: `1024³` 0.76–0.85 with 512, 0.85–0.88
/// with 1024; `1500 × 1536 × 384` 0.78–0.81 → 0.80–0.84; shapes with `k <= 512` unchanged
/// (512³ 0.95). 256 was slower than 512 on every shape (two passes over `C` for `k = 384`);
/// `mc` 72–288 made no difference on Zen 5.
///
/// Attention: 6 × 2 ymm accumulators, 16 queries: the 12 accumulators, the two `B` vectors and
/// the broadcast take 15 registers. 4 × 3 took all 16, and the compiler spilled an accumulator
/// to the stack on every step: 0.49 of `fma-peak` against 0.69 for 6 × 2 (`TESSEL_ISA=avx2
/// ATTENTION_CASES=self-512,self-1024 report attention --quick`; 3 × 3 0.65, 5 × 2 0.66).
/// Blocks of 8 query tiles (128 queries, near AVX-512's 4 × 48 = 192) halve the packing of
/// K and V per query, which took 6% of the kernel's time with 4 (`perf`): self-1024 0.65–0.68
/// of `fma-peak` with 4, 0.67–0.70 with 8 (same command, 4 runs alternated).
/// Decode: 12 accumulators (5 queries × 2 keys or 2 vectors), the other 4 registers for the
/// loaded K or V vectors and the broadcast.
pub(crate) const AVX2: LevelTiling = LevelTiling {
    gemm: GemmBlocking {
        mr: 6,
        nv: 2,
        mc: 6 * 24,
        kc: 1024,
    },
    gemm_small_rows: 6,
    attention: AttentionTiling {
        rows: 6,
        query_vectors: 2,
        block_tiles: 8,
    },
    decode: DecodeTiling {
        accumulators: 12,
        min_chains: 8,
    },
};

/// NEON (32 q registers, 4 lanes).
///
/// GEMM: 6 × 16 tile, 24 accumulators of 32 registers. Attention: 8 × 3, 12 queries. Decode:
/// 24 accumulators, as AVX-512.
pub(crate) const NEON: LevelTiling = LevelTiling {
    gemm: GemmBlocking {
        mr: 6,
        nv: 4,
        mc: 6 * 24,
        kc: 256,
    },
    gemm_small_rows: 6,
    attention: AttentionTiling {
        rows: 8,
        query_vectors: 3,
        block_tiles: 4,
    },
    decode: DecodeTiling {
        accumulators: 24,
        min_chains: 8,
    },
};

/// Scalar (one lane): GEMM 4 × 4 tile; attention 4 × 4, 4 queries; decode 8 accumulators.
pub(crate) const SCALAR: LevelTiling = LevelTiling {
    gemm: GemmBlocking {
        mr: 4,
        nv: 4,
        mc: 4 * 16,
        kc: 256,
    },
    gemm_small_rows: 4,
    attention: AttentionTiling {
        rows: 4,
        query_vectors: 4,
        block_tiles: 4,
    },
    decode: DecodeTiling {
        accumulators: 8,
        min_chains: 4,
    },
};

/// The deepest GEMM `kc` of any level: what a buffer holding one `kc × 32` micro-panel must
/// allow whatever level a call runs at.
pub(crate) const MAX_GEMM_KC: usize = {
    let mut max = SCALAR.gemm.kc;
    let levels = [AVX2, AVX512, NEON];
    let mut i = 0;
    while i < levels.len() {
        if levels[i].gemm.kc > max {
            max = levels[i].gemm.kc;
        }
        i += 1;
    }
    max
};

/// The description of the level whose vectors have `lanes` `f32` lanes.
pub(crate) const fn of_lanes(lanes: usize) -> LevelTiling {
    match lanes {
        16 => AVX512,
        8 => AVX2,
        4 => NEON,
        _ => SCALAR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::Level;

    /// Every level's description is found from its own lane count, and its row blocks are
    /// whole tiles.
    #[test]
    fn each_level_has_a_consistent_description() {
        for (level, tiling) in [
            (Level::Scalar, SCALAR),
            (Level::Avx2, AVX2),
            (Level::Avx512, AVX512),
            (Level::Neon, NEON),
        ] {
            let found = of_lanes(level.f32_lanes());
            assert_eq!(found.gemm.mr, tiling.gemm.mr, "{level}");
            assert_eq!(found.gemm.kc, tiling.gemm.kc, "{level}");
            assert_eq!(found.gemm_small_rows, tiling.gemm_small_rows, "{level}");
            assert_eq!(found.attention.rows, tiling.attention.rows, "{level}");
            assert!((1..=MAX_ATTENTION_BLOCK_TILES).contains(&tiling.attention.block_tiles));
            assert!(tiling.gemm.mc.is_multiple_of(tiling.gemm.mr), "{level}");
            assert!(tiling.gemm_small_rows >= 1 && tiling.attention.query_vectors >= 1);
            assert_eq!(
                found.decode.accumulators, tiling.decode.accumulators,
                "{level}"
            );
            assert!(
                tiling.decode.accumulators >= tiling.decode.min_chains,
                "{level}"
            );
        }
    }
}
