//! The loops around the int8 microkernels, generic over one level's dot-product primitive
//! ([`Dot`]) and over what is done with each finished tile ([`Sink`]: the `f32` epilogue or the
//! exact `i32` sums).
//!
//! Per task (a range of panels): column spans whose packed weights fit half of L2, so every
//! block of rows reuses the span from L2 (at `m <= MR` one span covers the task: the weights
//! stream once); within a span, blocks of up to `MR` rows and tiles of `MR × NV` vectors over
//! the whole depth (the `i32` accumulators stay in registers from the first group of `k` to the
//! last, so no partial sums are ever stored). A block of one row (a batch-1 decode step) goes
//! panel by panel instead ([`sweep_row`]): the weights are read as one forward stream, with
//! the depth split over interleaved accumulator sets to keep enough products in flight.

use crate::gemm::driver::Columns;
use crate::gemm::int8::packed::{panel_bytes, GROUP_BYTES, HEADER_BYTES, K_GROUP};
use crate::gemm::int8::quant::AFormat;
use crate::gemm::tile::{prefetch, Output, TileAt, STREAM_AHEAD_BYTES};
use crate::gemm::PANEL_COLS;
use pulp::Simd;

/// One level's int8 dot-product primitive: `LANES` output channels per vector, each lane summing
/// the four products of one group of `k`.
///
/// Every method is `#[inline(always)]` and only called from a level's entry function, which
/// enables the target features the method's intrinsics need.
pub(crate) trait Dot: Copy {
    /// The pulp token whose `f32` vectors the epilogue runs on (`LANES` lanes).
    type S: Simd;
    /// A loaded vector of packed weights (`LANES` channels × 4 depths).
    type B: Copy;
    /// One row's group of 4 activations, broadcast as the primitive needs it.
    type A: Copy;
    /// The running accumulator of one vector of channels.
    type Acc: Copy;
    /// The finished exact `i32` sums of one vector of channels.
    type I32: Copy;
    /// Channels per vector.
    const LANES: usize;
    /// The form of `A` this primitive reads.
    const FORMAT: AFormat;
    /// Rows of the tallest tile (at most `quant::ROW_PAD`).
    const MAX_MR: usize;
    /// Whether the one-row sweep hints its weights into L1 [`ROW_PREFETCH_BYTES`] ahead.
    const HINT_ONE_ROW: bool;

    /// The `f32` SIMD token.
    fn simd(self) -> Self::S;
    /// Accumulators at zero.
    fn zero(self) -> Self::Acc;
    /// Loads `LANES · 4` bytes of packed weights.
    ///
    /// # Safety
    /// They must be readable.
    unsafe fn load_b(self, ptr: *const i8) -> Self::B;
    /// The accumulator a row's sums start from: zero, unless the primitive's products are off
    /// by a constant per row ([`Avx2`](super::x86::Avx2)), which it then reads from the row.
    ///
    /// # Safety
    /// The row of `A` at `row`, stored in `FORMAT` for depth `kp`, must be readable.
    #[inline(always)]
    unsafe fn start(self, row: *const i8, kp: usize) -> Self::Acc {
        let _ = (row, kp);
        self.zero()
    }
    /// Loads one group of a row of `A` at `ptr` (`FORMAT.group_bytes()` bytes).
    ///
    /// # Safety
    /// They must be readable.
    unsafe fn load_a(self, ptr: *const i8) -> Self::A;
    /// `acc + a · b`, four products per lane.
    fn madd(self, acc: Self::Acc, a: Self::A, b: Self::B) -> Self::Acc;
    /// `x + y` lane by lane (wrapping, as every accumulation is).
    fn add(self, x: Self::Acc, y: Self::Acc) -> Self::Acc;
    /// The exact sums from the accumulators (and, for [`AFormat::Offset`], the `LANES` channel
    /// sums at `sums`).
    ///
    /// # Safety
    /// `LANES` native-endian `i32` at `sums` must be readable.
    unsafe fn finish(self, acc: Self::Acc, sums: *const i8) -> Self::I32;
    /// The sums converted to `f32` (nearest).
    fn to_f32(self, v: Self::I32) -> <Self::S as Simd>::f32s;
    /// Writes the first `dst.len() <= LANES` sums.
    fn store_i32(self, v: Self::I32, dst: &mut [i32]);
    /// Runs [`sweep`] for a block of `rows` rows (`1..=MAX_MR`) with the level's tile shape.
    ///
    /// # Safety
    /// As [`sweep`].
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize);
}

/// What every task reads.
#[derive(Clone, Copy)]
pub(crate) struct Job {
    /// The quantised `A` (in the primitive's format, rows padded to `ROW_PAD`).
    pub a: *const i8,
    /// Bytes between rows of the quantised `A`.
    pub a_stride: usize,
    /// `round_up(k, 4)`: the padded depth (`kp / 4` groups; a `MaskAbs` row's correction is
    /// `2 kp` bytes into the row).
    pub kp: usize,
    /// The packed weights.
    pub b: *const i8,
    /// The form `A` was stored in (the primitive's own).
    pub format: AFormat,
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

// SAFETY: a `Job` only carries read-only pointers into buffers that outlive the call that
// shares it between its tasks.
unsafe impl Sync for Job {}

impl Job {
    /// Bytes of one packed panel.
    fn panel(&self) -> usize {
        panel_bytes(self.k)
    }

    /// Byte offset of the header word of channel `col` (sums at `+0`, factors at `+128`).
    pub(crate) fn header(&self, col: usize) -> usize {
        (col / PANEL_COLS) * self.panel() + (col % PANEL_COLS) * 4
    }
}

/// What is done with a finished tile.
pub(crate) trait Sink: Sync {
    /// Takes the tile at rows `[row0, row0 + rows)` and columns `[col0, col0 + cols)` (only
    /// that part is valid).
    ///
    /// # Safety
    /// The tile's valid part lies inside `m × n`, and no other thread writes those outputs.
    unsafe fn put<D: Dot, const MR: usize, const NV: usize>(
        &self,
        d: D,
        job: &Job,
        acc: &[[D::Acc; NV]; MR],
        at: TileAt,
    );
}

/// The `f32` output: `C = epilogue(sum · d_a[i] · d_w[j])`.
pub(crate) struct F32Sink<'a> {
    pub out: Output<'a>,
    /// The rows' dequantisation factors.
    pub a_dequant: &'a [f32],
}

impl Sink for F32Sink<'_> {
    #[inline(always)]
    unsafe fn put<D: Dot, const MR: usize, const NV: usize>(
        &self,
        d: D,
        job: &Job,
        acc: &[[D::Acc; NV]; MR],
        at: TileAt,
    ) {
        let simd = d.simd();
        let mut f = [[simd.splat_f32s(0.0); NV]; MR];
        let mut w = [simd.splat_f32s(0.0); NV];
        for (v, w_v) in w.iter_mut().enumerate() {
            let head = job.header(at.col0 + v * D::LANES);
            *w_v = load_factors(simd, job.b.wrapping_add(head + 4 * PANEL_COLS));
        }
        for (i, (f_row, acc_row)) in f.iter_mut().zip(acc).enumerate() {
            // Padding rows (past `rows`) are dropped by the store.
            let a_i = simd.splat_f32s(self.a_dequant[(at.row0 + i).min(job.m - 1)]);
            for (v, (f_iv, &acc_iv)) in f_row.iter_mut().zip(acc_row).enumerate() {
                let head = job.header(at.col0 + v * D::LANES);
                // SAFETY: the vector's channels lie in one panel, whose header is readable.
                let sums = unsafe { d.finish(acc_iv, job.b.add(head)) };
                *f_iv = simd.mul_f32s(simd.mul_f32s(d.to_f32(sums), w[v]), a_i);
            }
        }
        // SAFETY: forwarded contract.
        unsafe { self.out.store::<D::S, MR, NV>(simd, &f, at) };
    }
}

/// Loads `LANES` native-endian `f32` factors from a panel header (any alignment).
#[inline(always)]
fn load_factors<S: Simd>(_simd: S, ptr: *const i8) -> S::f32s {
    let mut lanes = [0.0f32; 16];
    for (l, lane) in lanes.iter_mut().enumerate().take(S::F32_LANES) {
        // SAFETY: the caller points at a header's factors, `S::F32_LANES <= 16` words of which
        // from this channel on lie in the same panel's header (vectors never cross a panel).
        *lane = unsafe { core::ptr::read_unaligned((ptr as *const f32).add(l)) };
    }
    S::as_simd_f32s(&lanes[..S::F32_LANES]).0[0]
}

/// The exact `i32` output `C[i · ldc + j] = Σ_p q_a[i][p] · q_w[j][p]`.
pub(crate) struct I32Sink {
    pub c: *mut i32,
    pub ldc: usize,
}

// SAFETY: each task writes only its own columns of `C` through the pointer.
unsafe impl Sync for I32Sink {}

impl Sink for I32Sink {
    #[inline(always)]
    unsafe fn put<D: Dot, const MR: usize, const NV: usize>(
        &self,
        d: D,
        job: &Job,
        acc: &[[D::Acc; NV]; MR],
        at: TileAt,
    ) {
        for (i, acc_row) in acc.iter().enumerate().take(at.rows) {
            // SAFETY: the caller guarantees the row segment is inside `C` and ours alone.
            let c_row = unsafe {
                core::slice::from_raw_parts_mut(
                    self.c.add((at.row0 + i) * self.ldc + at.col0),
                    at.cols,
                )
            };
            for (v, &acc_iv) in acc_row.iter().enumerate() {
                let lo = v * D::LANES;
                if lo >= at.cols {
                    break;
                }
                let head = job.header(at.col0 + lo);
                // SAFETY: the vector's channels lie in one panel, whose header is readable.
                let sums = unsafe { d.finish(acc_iv, job.b.add(head)) };
                d.store_i32(sums, &mut c_row[lo..at.cols.min(lo + D::LANES)]);
            }
        }
    }
}

/// Bytes of packed weights a column span covers when several row blocks read it (half of L2).
const SPAN_BYTES: usize = 512 * 1024;

/// Groups of 128 bytes of a panel fetched ahead of the microkernel (3 KB). Measured here
/// (`report gemm`, `1x512x32000`, AVX-512 VNNI, loaded machine): 0.42 of the int8 stream-read
/// rate against 0.38 with 8 groups; `1x512x2048` (L2-resident) unchanged at ~0.96.
const PREFETCH_GROUPS: usize = 24;

/// Computes the task's columns of the output for every row.
///
/// # Safety
/// `job` describes valid buffers: `A` quantised in `D::FORMAT` for `round_up(m, 8)` rows, the
/// packed weights of a validated `PackedI8`; the sink's output covers `m × n`; `cols` lies
/// inside `0..ceil(n / 32)` and no other thread writes those columns.
#[inline(always)]
pub(crate) unsafe fn run<D: Dot, K: Sink>(d: D, job: &Job, sink: &K, cols: Columns) {
    debug_assert_eq!(job.format, D::FORMAT);
    let blocks = job.m.div_ceil(D::MAX_MR);
    let span = if blocks <= 1 {
        cols.panel1 - cols.panel0
    } else {
        (SPAN_BYTES / job.panel()).max(1)
    };
    let mut p = cols.panel0;
    while p < cols.panel1 {
        let span_cols = Columns {
            panel0: p,
            panel1: cols.panel1.min(p + span),
        };
        let mut row0 = 0;
        while row0 < job.m {
            let rows = D::MAX_MR.min(job.m - row0);
            // SAFETY: forwarded contract; the rows lie inside `m`.
            unsafe { d.rows(job, sink, span_cols, row0, rows) };
            row0 += rows;
        }
        p = span_cols.panel1;
    }
}

/// Sweeps the columns of `cols` for rows `[row0, row0 + rows)` (`rows <= MR`) with `MR × NV`
/// tiles, and `MR × 1` tiles where fewer than `NV` vectors of the task's panels are left.
///
/// # Safety
/// As [`run`], with `row0 + MR <= round_up(m, 8)` (the padded rows of `A` exist).
#[inline(always)]
pub(crate) unsafe fn sweep<D: Dot, K: Sink, const MR: usize, const NV: usize>(
    d: D,
    job: &Job,
    sink: &K,
    cols: Columns,
    row0: usize,
    rows: usize,
) {
    let padded_end = cols.panel1 * PANEL_COLS;
    let col_end = job.n.min(padded_end);
    let at = |col0: usize, width: usize| TileAt {
        row0,
        rows,
        col0,
        cols: width.min(col_end - col0),
        first: true,
        last: true,
    };
    let mut col0 = cols.panel0 * PANEL_COLS;
    while col0 < col_end {
        let wide = NV * D::LANES;
        if col0 + wide <= padded_end {
            // SAFETY: `MR` padded rows of `A` from `row0`; the tile's vectors lie in this
            // task's panels.
            let acc = unsafe { tile::<D, MR, NV>(d, job, row0, col0) };
            // SAFETY: valid rows and columns inside `m × n` and this task's columns.
            unsafe { sink.put::<D, MR, NV>(d, job, &acc, at(col0, wide)) };
            col0 += wide;
        } else {
            // SAFETY: as above, one vector.
            let acc = unsafe { tile::<D, MR, 1>(d, job, row0, col0) };
            // SAFETY: as above.
            unsafe { sink.put::<D, MR, 1>(d, job, &acc, at(col0, D::LANES)) };
            col0 += D::LANES;
        }
    }
}

/// `A(MR rows from row0) · W(NV vectors of channels from col0)ᵀ` over the whole depth.
///
/// # Safety
/// The `MR` padded rows of `A` from `row0` and the `NV` vectors of channels from `col0` (each
/// inside one packed panel) must exist.
#[inline(always)]
unsafe fn tile<D: Dot, const MR: usize, const NV: usize>(
    d: D,
    job: &Job,
    row0: usize,
    col0: usize,
) -> [[D::Acc; NV]; MR] {
    let offsets: [usize; NV] = core::array::from_fn(|v| {
        let col = col0 + v * D::LANES;
        (col / PANEL_COLS) * job.panel() + HEADER_BYTES + (col % PANEL_COLS) * K_GROUP
    });
    let a: [*const i8; MR] =
        core::array::from_fn(|i| job.a.wrapping_add((row0 + i) * job.a_stride));
    // SAFETY: the padded rows of `A` exist (caller).
    let mut acc: [[D::Acc; NV]; MR] = a.map(|a_i| [unsafe { d.start(a_i, job.kp) }; NV]);
    let groups = job.kp / K_GROUP;
    let mut b = job.b;
    for g in 0..groups {
        for (v, &offset) in offsets.iter().enumerate() {
            // One hint per 128-byte group row of a panel (the adjacent-line prefetcher brings
            // its second line).
            if v == 0 || (col0 + v * D::LANES).is_multiple_of(PANEL_COLS) {
                prefetch(b.wrapping_add(offset + PREFETCH_GROUPS * GROUP_BYTES));
            }
        }
        // SAFETY: group `g < groups` of each vector, inside its panel.
        let bv: [D::B; NV] = core::array::from_fn(|v| unsafe { d.load_b(b.add(offsets[v])) });
        for (row, &a_i) in acc.iter_mut().zip(&a) {
            // SAFETY: group `g` of a padded row of `A`.
            let a_g = unsafe { d.load_a(a_i.add(g * D::FORMAT.group_bytes())) };
            for (acc_iv, &b_v) in row.iter_mut().zip(&bv) {
                *acc_iv = d.madd(*acc_iv, a_g, b_v);
            }
        }
        b = b.wrapping_add(GROUP_BYTES);
    }
    acc
}

/// Sweeps the columns of `cols` for the one row `row0`, a whole panel at a time: `NV` vectors
/// of `LANES` channels make one panel (`NV · LANES = PANEL_COLS`), and the depth is split over
/// `PH` interleaved accumulator sets (group `g` adds into set `g % PH`), so `PH · NV` chains are
/// in flight. With `ST = 2` the task's panels are read as two forward streams at once (its
/// first and second half, a panel of each per step); with `ST = 1` as one. The sets are added
/// at the end; integer sums are exact in any order, so the result is the same as [`sweep`]'s.
///
/// The AVX-512 primitives read two streams, the others one. Measured on Zen 5, 1 thread, the
/// int8 Transformer-base decode step (`TESSEL_ISA=avx512 report e2e --quick`, 3 runs
/// alternated): one stream 701–767 µs, two 583–597 µs (0.65–0.66 → 0.80–0.83 of the same run's
/// stream read of its weights), four (`PH = 2`) 611–623 µs. At AVX2 (its AVX-VNNI primitive)
/// two streams took 773–893 µs against one's 693–721 µs.
///
/// # Safety
/// As [`sweep`] for one row (`row0 < m`); `NV · D::LANES == PANEL_COLS`.
#[inline(always)]
pub(crate) unsafe fn sweep_row<
    D: Dot,
    K: Sink,
    const NV: usize,
    const PH: usize,
    const ST: usize,
>(
    d: D,
    job: &Job,
    sink: &K,
    cols: Columns,
    row0: usize,
) {
    debug_assert_eq!(NV * D::LANES, PANEL_COLS);
    let col_end = job.n.min(cols.panel1 * PANEL_COLS);
    let last = cols.panel1.min(col_end.div_ceil(PANEL_COLS));
    let count = last.saturating_sub(cols.panel0);
    let step = count.div_ceil(ST);
    for i in 0..step {
        let panels: [usize; ST] = core::array::from_fn(|s| cols.panel0 + s * step + i);
        if ST > 1 && panels[ST - 1] >= last {
            // The last streams are a panel shorter: the others' panels one at a time.
            for &panel in panels.iter().filter(|&&p| p < last) {
                // SAFETY: as below, for one panel.
                let [acc] = unsafe { panel_rows::<D, NV, PH, 1>(d, job, row0, [panel]) };
                // SAFETY: as below.
                unsafe { put_row(d, job, sink, row0, panel, col_end, acc) };
            }
            continue;
        }
        // SAFETY: row `row0` of `A` and these panels of the task exist (caller).
        let accs = unsafe { panel_rows::<D, NV, PH, ST>(d, job, row0, panels) };
        for (&panel, acc) in panels.iter().zip(accs) {
            // SAFETY: a valid row and the columns of a panel of this task.
            unsafe { put_row(d, job, sink, row0, panel, col_end, acc) };
        }
    }
}

/// Stores one row's sums over panel `panel` (columns up to `col_end`).
///
/// # Safety
/// `row0 < m`; the panel is one of the task's, starting below `col_end`.
#[inline(always)]
unsafe fn put_row<D: Dot, K: Sink, const NV: usize>(
    d: D,
    job: &Job,
    sink: &K,
    row0: usize,
    panel: usize,
    col_end: usize,
    acc: [D::Acc; NV],
) {
    let col0 = panel * PANEL_COLS;
    let at = TileAt {
        row0,
        rows: 1,
        col0,
        cols: PANEL_COLS.min(col_end - col0),
        first: true,
        last: true,
    };
    // SAFETY: a valid row and columns inside `m × n` and this task's columns (caller).
    unsafe { sink.put::<D, 1, NV>(d, job, &[acc], at) };
}

/// Bytes ahead of the group being read that the one-row sweep hints into L1 (where its
/// primitive asks for hints), one hint per 64-byte line: the distance of every streaming
/// product. Measured on Zen 4, 1 thread: at AVX-512 VNNI the int8 Transformer-base decode step
/// took 1.56 ms at 2 KB, 1.42 ms at 16 KB; with `prefetcht1` at 16 KB 1.69 ms, and with one
/// hint per 128 bytes far slower (the adjacent-line prefetcher does not keep up). With no hints
/// at all it took 1.29 ms (median of 6 runs alternated, against 1.53 ms at 16 KB), and an
/// L2-resident `1x512x2048` 12.0 µs against 15.5 µs, so the AVX-512 primitives (one 64-byte
/// load per multiply-add instruction) go without. The AVX2 ones keep them: without, the
/// L3-resident `1x512x32000` slowed from 337 µs to 365–419 µs and the step did not change.
const ROW_PREFETCH_BYTES: usize = STREAM_AHEAD_BYTES;

/// Row `row0` of `A` times each of the `ST` whole panels `panels`: `NV` vectors of sums each,
/// the panels read side by side.
///
/// # Safety
/// Row `row0` of `A` and the panels of the packed weights must exist.
#[inline(always)]
unsafe fn panel_rows<D: Dot, const NV: usize, const PH: usize, const ST: usize>(
    d: D,
    job: &Job,
    row0: usize,
    panels: [usize; ST],
) -> [[D::Acc; NV]; ST] {
    let b = panels.map(|p| job.b.wrapping_add(p * job.panel() + HEADER_BYTES));
    let a = job.a.wrapping_add(row0 * job.a_stride);
    let groups = job.kp / K_GROUP;
    let mut acc = [[[d.zero(); NV]; PH]; ST];
    for set in &mut acc {
        // SAFETY: row `row0` of `A` exists (caller).
        set[0] = [unsafe { d.start(a, job.kp) }; NV];
    }
    let mut g = 0;
    while g + PH <= groups {
        for ph in 0..PH {
            for (set, &b_s) in acc.iter_mut().zip(&b) {
                // SAFETY: group `g + ph < groups` (caller's panels and row).
                unsafe { group_row(d, a, b_s, g + ph, &mut set[ph]) };
            }
        }
        g += PH;
    }
    while g < groups {
        for (set, &b_s) in acc.iter_mut().zip(&b) {
            // SAFETY: as above.
            unsafe { group_row(d, a, b_s, g, &mut set[0]) };
        }
        g += 1;
    }
    acc.map(|set| {
        let mut sums = set[0];
        for part in &set[1..] {
            for (s, &x) in sums.iter_mut().zip(part) {
                *s = d.add(*s, x);
            }
        }
        sums
    })
}

/// Adds group `g` of the row at `a` times group row `g` of the panel at `b` into `acc`.
///
/// # Safety
/// Group `g` of the row and of the panel must exist.
#[inline(always)]
unsafe fn group_row<D: Dot, const NV: usize>(
    d: D,
    a: *const i8,
    b: *const i8,
    g: usize,
    acc: &mut [D::Acc; NV],
) {
    let row = b.wrapping_add(g * GROUP_BYTES);
    if D::HINT_ONE_ROW {
        prefetch(row.wrapping_add(ROW_PREFETCH_BYTES));
        prefetch(row.wrapping_add(ROW_PREFETCH_BYTES + 64));
    }
    // SAFETY: group `g` of the row of `A` exists (caller).
    let a_g = unsafe { d.load_a(a.add(g * D::FORMAT.group_bytes())) };
    for (v, acc_v) in acc.iter_mut().enumerate() {
        // SAFETY: vector `v` of group row `g` lies inside the panel (caller).
        let b_v = unsafe { d.load_b(row.add(v * D::LANES * K_GROUP)) };
        *acc_v = d.madd(*acc_v, a_g, b_v);
    }
}
