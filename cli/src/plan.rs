//! `tessel plan`: the arena a session allocates for a model and limits, region by region.

use std::io::Write;

use tessel_model::{ArenaPlan, Limits, LoadSettings};

use crate::args::PlanArgs;
use crate::error::CliError;
use crate::source::Source;

/// Plans the arena `args` describe and writes it to `out`.
pub fn plan(args: &PlanArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let source = Source::of(&args.model)?;
    let defaults = LoadSettings::default();
    let lens = [args.max_src_len, args.max_tgt_len];
    let load_limits = LoadSettings {
        // Models without stored lengths (CTranslate2, T5) are read for the longest asked.
        max_len: lens
            .into_iter()
            .flatten()
            .fold(defaults.max_len, usize::max),
        max_beam: args.max_beam.unwrap_or(defaults.max_beam),
        weights: None,
    };
    let config = source.config(load_limits)?;
    let own = Limits::of(&config);
    let limits = Limits {
        max_src_len: args.max_src_len.unwrap_or(own.max_src_len),
        max_tgt_len: args.max_tgt_len.unwrap_or(own.max_tgt_len),
        max_beam: args.max_beam.unwrap_or(own.max_beam),
        max_batch: 1,
        encode_sources: 1,
        threads: args.threads,
        cross_kv: tessel_model::MemoryType::F32,
    };
    let limits = match args.batch {
        1 => limits,
        n => limits
            .with_batch(n)
            .with_encode_rows(tessel_model::ENCODE_ROWS),
    };
    let plan = ArenaPlan::with_limits(&config, limits).map_err(CliError::Plan)?;
    writeln!(
        out,
        "arena {} bytes ({:.2} MB) for max src {}, max tgt {}, max beam {}, batch {}, {} thread{}",
        plan.total_bytes(),
        plan.total_bytes() as f64 / 1e6,
        limits.max_src_len,
        limits.max_tgt_len,
        limits.max_beam,
        limits.max_batch,
        limits.threads,
        if limits.threads == 1 { "" } else { "s" }
    )?;
    for r in plan.regions() {
        writeln!(
            out,
            "  {:<28} offset {:>12} B  size {:>12} B",
            r.name, r.offset_bytes, r.bytes
        )?;
    }
    Ok(())
}
