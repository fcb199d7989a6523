//! One attention call spread over a host's threads ([`Parallel`]): the call is cut into tasks
//! that each run the single-threaded kernel on a disjoint part.
//!
//! - **Many queries** (the prefill path): the queries are cut into contiguous runs of whole
//!   query blocks (the prefill path's unit: a few query tiles sharing each packed key tile),
//!   balanced by the number of keys each query sees (under a causal mask later queries see
//!   more). Each task attends its run of rows into its own output rows with its own part of the
//!   scratch. The runs start at block boundaries of the whole call and hold more than the
//!   decode path's queries, so every task forms the blocks a single call forms.
//! - **Few queries** (the decode path, one query per beam): the heads are cut into contiguous
//!   groups. Each task attends its heads into its own part of the scratch (the heads of a row
//!   are interleaved in the output, so tasks cannot write it directly), and the rows are copied
//!   into the output once every task has finished (at most 8 rows). A head's arithmetic does
//!   not depend on the other heads of its call.
//!
//! Either way each output element is computed by the same instruction sequence as in the
//! single-threaded call: the result is bit-identical for any thread count, and the error bound
//! of [`super`] holds unchanged. Calls with less than [`MIN_TASK_WORK`] multiply-adds per task
//! run on the calling thread ([`attention_split`] takes another threshold).

use core::ops::Range;
use core::sync::atomic::{AtomicBool, Ordering};

use super::band::Band;
use super::{
    attention, attention_scratch_kv, check, decode, prefill, run_checked, takes_decode,
    AttentionShape, Bias, Checked, KvElement, Mask, Operands, SideBias,
};
use crate::error::KernelError;
use crate::gemm::parallel::Claims;
use crate::gemm::{Parallel, MAX_TASKS};
use crate::isa::Isa;
use crate::scratch::ScratchSpec;
use crate::view::{View, ViewMut};

/// Multiply-adds (`q_len · kv_len · heads · d_head`, scores and `P V` together) below which a
/// task is not worth handing to another thread: a pool hand-off costs a few microseconds, about
/// what 2^18 multiply-adds of the decode path take on one core.
pub const MIN_TASK_WORK: usize = 1 << 18;

/// The scratch [`attention_parallel`] needs for `shape` at `isa` on up to `threads` threads
/// with `f32` K and V: one part per task, whatever split the call picks.
pub fn attention_parallel_scratch(isa: Isa, shape: &AttentionShape, threads: usize) -> ScratchSpec {
    attention_parallel_scratch_kv::<f32>(isa, shape, threads)
}

/// [`attention_parallel_scratch`] for K and V stored as `E`.
pub fn attention_parallel_scratch_kv<E: KvElement>(
    isa: Isa,
    shape: &AttentionShape,
    threads: usize,
) -> ScratchSpec {
    let single = attention_scratch_kv::<E>(isa, shape);
    (2..=threads.clamp(1, MAX_TASKS)).fold(single, |spec, tasks| {
        let part = task_scratch::<E>(isa, shape, tasks);
        spec.or(ScratchSpec::f32s(part.len().saturating_mul(tasks)))
    })
}

/// [`super::attention`] with its work split over `parallel`'s threads; same arguments, same
/// result bits. `scratch` must hold [`attention_parallel_scratch_kv`]`::<E>(isa, shape,
/// parallel.threads())` floats. Every argument is validated first; on error nothing is
/// written (a runner that skips a task is reported after the others have run).
#[allow(clippy::too_many_arguments)]
pub fn attention_parallel<E: KvElement>(
    isa: Isa,
    parallel: &dyn Parallel,
    shape: &AttentionShape,
    q: View<'_>,
    k: View<'_, E>,
    v: View<'_, E>,
    out: ViewMut<'_>,
    mask: &Mask<'_>,
    scale: Option<f32>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let split = Split {
        parallel,
        min_task_work: MIN_TASK_WORK,
    };
    attention_split(isa, split, shape, q, k, v, out, mask, scale, scratch)
}

/// How a call may be split: the runner, and the fewest multiply-adds worth a task
/// ([`MIN_TASK_WORK`] in [`attention_parallel`]; 1 splits every call as far as its heads or
/// query blocks allow).
#[derive(Clone, Copy)]
pub struct Split<'a> {
    /// The threads.
    pub parallel: &'a dyn Parallel,
    /// Multiply-adds per task below which fewer tasks are made.
    pub min_task_work: usize,
}

/// [`attention_parallel`] with the split's threshold chosen by the caller.
#[allow(clippy::too_many_arguments)]
pub fn attention_split<E: KvElement>(
    isa: Isa,
    split: Split<'_>,
    shape: &AttentionShape,
    q: View<'_>,
    k: View<'_, E>,
    v: View<'_, E>,
    out: ViewMut<'_>,
    mask: &Mask<'_>,
    scale: Option<f32>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let parallel = split.parallel;
    let checked = check(shape, &q, &k, &v, &out, mask, scale)?;
    let needed = attention_parallel_scratch_kv::<E>(isa, shape, parallel.threads()).len();
    if scratch.len() < needed {
        return Err(KernelError::ScratchTooSmall {
            needed,
            got: scratch.len(),
        });
    }
    let tasks = task_count::<E>(isa, shape, parallel.threads(), split.min_task_work);
    if tasks <= 1 {
        return attention(isa, shape, q, k, v, out, mask, scale, scratch);
    }
    let call = Call {
        isa,
        checked,
        shape: *shape,
        q,
        k,
        v,
        mask,
        scale: Some(checked.scale),
    };
    let part = task_scratch::<E>(isa, shape, tasks).len();
    if decode::handles(shape.q_len) {
        by_heads(&call, parallel, tasks, out, part, scratch)
    } else {
        let rows = split_rows(&call.checked.band, shape.q_len, row_unit::<E>(isa), tasks);
        by_rows(&call, parallel, &rows[..=tasks], out, part, scratch)
    }
}

/// How many tasks a call is cut into on `threads` threads, each worth at least
/// `min_task_work` multiply-adds.
fn task_count<E: KvElement>(
    isa: Isa,
    shape: &AttentionShape,
    threads: usize,
    min_task_work: usize,
) -> usize {
    let work = shape
        .q_len
        .saturating_mul(shape.kv_len)
        .saturating_mul(shape.heads)
        .saturating_mul(shape.d_head);
    let units = if decode::handles(shape.q_len) {
        shape.heads
    } else {
        shape.q_len.div_ceil(row_unit::<E>(isa))
    };
    threads
        .clamp(1, MAX_TASKS)
        .min(units)
        .min(work / min_task_work.max(1))
        .max(1)
}

/// The scratch of one task when a call is cut into `tasks` tasks.
fn task_scratch<E: KvElement>(isa: Isa, shape: &AttentionShape, tasks: usize) -> ScratchSpec {
    if decode::handles(shape.q_len) {
        let heads = shape.heads.div_ceil(tasks.min(shape.heads).max(1));
        let group = AttentionShape { heads, ..*shape };
        let rows = shape
            .q_len
            .saturating_mul(heads)
            .saturating_mul(shape.d_head);
        attention_scratch_kv::<E>(isa, &group).and(ScratchSpec::f32s(rows))
    } else {
        attention_scratch_kv::<E>(isa, shape)
    }
}

/// Rows per unit of a row split: a query block of the level (more than
/// [`decode::MAX_QUERIES`] queries at every level), or the decode path's run of
/// [`decode::MAX_QUERIES`] queries for K and V the prefill path does not read (each task's runs
/// are then the single-threaded call's runs).
fn row_unit<E: KvElement>(isa: Isa) -> usize {
    if takes_decode::<E>(decode::MAX_QUERIES + 1) {
        decode::MAX_QUERIES
    } else {
        prefill::query_block_len(isa.level().f32_lanes())
    }
}

/// Boundaries of `tasks` runs of rows (`bounds[t]..bounds[t + 1]`, some possibly empty), cut at
/// multiples of `unit` so that each run's share of the visible keys is as even as the units
/// allow. A last run of at most [`decode::MAX_QUERIES`] rows joins the non-empty run before it
/// (alone it would take the decode path, whose bits differ from the prefill's).
fn split_rows(band: &Band, q_len: usize, unit: usize, tasks: usize) -> [usize; MAX_TASKS + 1] {
    let cost = |rows: Range<usize>| -> u128 { rows.map(|i| band.seen(i) as u128 + 1).sum() };
    let total = cost(0..q_len);
    let mut bounds = [q_len; MAX_TASKS + 1];
    bounds[0] = 0;
    let (mut t, mut row, mut done) = (1, 0, 0u128);
    while row < q_len && t < tasks {
        let end = (row + unit).min(q_len);
        done += cost(row..end);
        row = end;
        while t < tasks && done * tasks as u128 >= total * t as u128 {
            bounds[t] = row;
            t += 1;
        }
    }
    let last = (1..=tasks)
        .rev()
        .find(|&t| bounds[t - 1] < q_len)
        .unwrap_or(1);
    // The last run joins the non-empty run before it: empty runs may lie between them, and
    // every bound at the last run's start moves to the end.
    let start = bounds[last - 1];
    if start > 0 && q_len - start <= decode::MAX_QUERIES {
        for bound in bounds[1..].iter_mut().filter(|bound| **bound == start) {
            *bound = q_len;
        }
    }
    bounds
}

/// The read-only arguments of a call, shared by its tasks.
struct Call<'a, E> {
    isa: Isa,
    checked: Checked,
    shape: AttentionShape,
    q: View<'a>,
    k: View<'a, E>,
    v: View<'a, E>,
    mask: &'a Mask<'a>,
    scale: Option<f32>,
}

/// A raw base pointer shared by the tasks, each of which derives its own disjoint part.
#[derive(Clone, Copy)]
struct Base(*mut f32);

// SAFETY: tasks only derive from `Base` the disjoint parts their claimed index owns (see the
// users), so sharing the pointer between threads creates no data race.
unsafe impl Sync for Base {}

impl Base {
    /// The `len` elements from `offset` on.
    ///
    /// # Safety
    /// `offset + len` must lie within the buffer `self` was taken from, which must outlive the
    /// result, and no other live reference may overlap the range.
    unsafe fn part<'a>(self, offset: usize, len: usize) -> &'a mut [f32] {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts_mut(self.0.add(offset), len) }
    }
}

/// Runs the tasks, each claimed once, and reports a runner that skipped one or a task that
/// failed.
fn run_claimed(
    parallel: &dyn Parallel,
    tasks: usize,
    task: &(dyn Fn(usize) -> Result<(), KernelError> + Sync),
) -> Result<(), KernelError> {
    let claims = Claims::new();
    let failed = AtomicBool::new(false);
    parallel.run(tasks, &|t| {
        if t < tasks && claims.claim(t) && task(t).is_err() {
            failed.store(true, Ordering::Relaxed);
        }
    });
    if !claims.all_claimed(tasks) {
        return Err(KernelError::InvalidArgument(
            "the Parallel runner did not run every task",
        ));
    }
    if failed.load(Ordering::Relaxed) {
        // Every argument was validated for the whole call, and each task's part lies inside it.
        return Err(KernelError::InvalidArgument("an attention task failed"));
    }
    Ok(())
}

/// One unit's call of [`per_unit`]: the unit, its rows of the output, the task's scratch.
pub type UnitCall<'a> =
    dyn Fn(usize, ViewMut<'_>, &mut [f32]) -> Result<(), KernelError> + Sync + 'a;

/// Independent calls over runs of an output's rows (each beam of a decoder step attending its
/// own cache, each sequence of a batch its own encoder memory) spread over `parallel`'s
/// threads. Unit `u` of `units` owns rows `first_row(u)..first_row(u + 1)` of `out` (from 0 to
/// `out.rows()`, never decreasing); the units are cut into as many contiguous runs as there are
/// threads (fewer when there are fewer units, or when `scratch` holds fewer parts of `part`
/// floats), and each run's task calls `each(u, rows, own)` for its units in order, with `rows`
/// the unit's rows of `out` and `own` the task's own `part` floats of `scratch`. Each unit is
/// computed by the one call `each` makes for it whatever the split, so the results do not
/// depend on the thread count. A failing call ends its run and the whole call returns an
/// error; the other runs finish.
pub fn per_unit(
    parallel: &dyn Parallel,
    (units, first_row): (usize, &(dyn Fn(usize) -> usize + Sync)),
    out: ViewMut<'_>,
    (scratch, part): (&mut [f32], usize),
    each: &UnitCall<'_>,
) -> Result<(), KernelError> {
    if scratch.len() < part {
        return Err(KernelError::ScratchTooSmall {
            needed: part,
            got: scratch.len(),
        });
    }
    let tasks = parallel
        .threads()
        .clamp(1, MAX_TASKS)
        .min(units)
        .min(scratch.len() / part.max(1))
        .max(1);
    // Each task's rows, fixed here: a task only ever writes inside its own.
    let mut bounds = [0; MAX_TASKS + 1];
    for (t, bound) in bounds[..=tasks].iter_mut().enumerate() {
        *bound = first_row(t * units / tasks);
    }
    let ordered = bounds[..=tasks].windows(2).all(|w| w[0] <= w[1]);
    if bounds[0] != 0 || bounds[tasks] != out.rows() || !ordered {
        return Err(KernelError::InvalidArgument(
            "units that do not cover the output",
        ));
    }
    let (stride, cols, len) = (out.stride, out.cols(), out.data.len());
    let out_base = Base(out.data.as_mut_ptr());
    let scratch_base = Base(scratch.as_mut_ptr());
    run_claimed(parallel, tasks, &|t| {
        for unit in t * units / tasks..(t + 1) * units / tasks {
            let rows = first_row(unit)..first_row(unit + 1);
            if rows.start < bounds[t] || rows.start > rows.end || rows.end > bounds[t + 1] {
                return Err(KernelError::InvalidArgument(
                    "a unit's rows outside its run",
                ));
            }
            if rows.is_empty() {
                continue;
            }
            let span = (rows.len() - 1) * stride + cols;
            let start = rows.start * stride;
            if start + span > len {
                return Err(KernelError::InvalidArgument(
                    "a unit's rows outside the output",
                ));
            }
            // SAFETY: `out.data` and `scratch` are borrowed mutably for this whole function.
            // The claim of `t` gives this task alone the rows `bounds[t]..bounds[t + 1]`
            // (ordered, so the tasks' rows are disjoint), and the unit's rows lie inside them
            // (tested above): they span up to the run's next row at most (`stride >= cols`, as
            // in every `ViewMut`), inside `out.data` (tested above). The task's own `part` of
            // the scratch lies inside it (`tasks · part <= scratch.len()`). Each unit's borrows
            // end before the next unit's begin.
            let (out_rows, own) = unsafe {
                (
                    out_base.part(start, span),
                    scratch_base.part(t * part, part),
                )
            };
            each(unit, ViewMut::new(out_rows, rows.len(), cols, stride)?, own)?;
        }
        Ok(())
    })
}

/// The prefill split: task `t` attends rows `bounds[t]..bounds[t + 1]` into those output rows.
fn by_rows<E: KvElement>(
    call: &Call<'_, E>,
    parallel: &dyn Parallel,
    bounds: &[usize],
    out: ViewMut<'_>,
    part: usize,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let tasks = bounds.len() - 1;
    let width = call.shape.heads * call.shape.d_head;
    let (out_stride, out_len) = (out.stride, out.data.len());
    let out_base = Base(out.data.as_mut_ptr());
    let scratch_base = Base(scratch.as_mut_ptr());
    run_claimed(parallel, tasks, &|t| {
        let rows = bounds[t]..bounds[t + 1];
        if rows.is_empty() {
            return Ok(());
        }
        let span = (rows.len() - 1) * out_stride + width;
        let start = rows.start * out_stride;
        if start + span > out_len {
            return Err(KernelError::InvalidArgument("row split outside the output"));
        }
        // SAFETY: `out.data` and `scratch` are borrowed mutably for this whole function, and
        // the claim of `t` gives this task alone its rows, whose span ends before the next
        // run's first row (`stride >= width`, as in every `ViewMut`) and lies inside `out.data`
        // (tested above), and its own `part` of the scratch, inside the validated length
        // (`tasks · part <= attention_parallel_scratch`).
        let (out_rows, own) = unsafe {
            (
                out_base.part(start, span),
                scratch_base.part(t * part, part),
            )
        };
        let operands = Operands::new(call.q, call.k, call.v, call.mask);
        run_checked(
            call.isa,
            &call.checked.rows(rows.clone()),
            operands.rows(rows.clone())?,
            ViewMut::new(out_rows, rows.len(), width, out_stride)?,
            own,
        )
    })
}

/// The decode split: task `t` attends its group of heads into the last `q_len · heads ·
/// d_head` floats of its scratch part; the groups are copied into `out` afterwards.
fn by_heads<'a, E: KvElement>(
    call: &Call<'a, E>,
    parallel: &dyn Parallel,
    tasks: usize,
    out: ViewMut<'_>,
    part: usize,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let AttentionShape {
        heads,
        d_head,
        q_len,
        ..
    } = call.shape;
    let group = heads.div_ceil(tasks);
    let heads_of = |t: usize| (t * group).min(heads)..((t + 1) * group).min(heads);
    let rows_len = |n: usize| q_len * n * d_head;
    let scratch_base = Base(scratch.as_mut_ptr());
    run_claimed(parallel, tasks, &|t| {
        let own_heads = heads_of(t);
        if own_heads.is_empty() {
            return Ok(());
        }
        let n = own_heads.len();
        // SAFETY: `scratch` is borrowed mutably for this whole function; the claim of `t`
        // gives this task alone part `t`, inside the validated length (`tasks · part <=
        // attention_parallel_scratch`).
        let own = unsafe { scratch_base.part(t * part, part) };
        let (kernel_scratch, rows) = own.split_at_mut(part - rows_len(n));
        let col = own_heads.start * d_head;
        let bias = call.mask.bias.map(|b| Bias {
            data: &b.data[(own_heads.start * b.head_stride).min(b.data.len())..],
            ..b
        });
        let side_bias = call.mask.side_bias.map(|b| SideBias {
            data: &b.data[(own_heads.start * b.head_stride).min(b.data.len())..],
            ..b
        });
        attention(
            call.isa,
            &AttentionShape {
                heads: n,
                ..call.shape
            },
            call.q.slice_cols(col, n * d_head)?,
            call.k.slice_cols(col, n * d_head)?,
            call.v.slice_cols(col, n * d_head)?,
            ViewMut::dense(&mut rows[..rows_len(n)], q_len, n * d_head)?,
            &Mask {
                bias,
                side_bias,
                ..*call.mask
            },
            call.scale,
            kernel_scratch,
        )
    })?;
    for t in 0..tasks {
        let own_heads = heads_of(t);
        let width = own_heads.len() * d_head;
        let rows = &scratch[t * part..(t + 1) * part];
        let rows = &rows[part - rows_len(own_heads.len())..];
        for i in 0..q_len {
            let at = i * out.stride + own_heads.start * d_head;
            out.data[at..at + width].copy_from_slice(&rows[i * width..(i + 1) * width]);
        }
    }
    Ok(())
}
