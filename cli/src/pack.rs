//! `tessel pack`: writes a model as one packed image file (`tessel_model::load::image`), its GEMM
//! weights already in the kernels' layout, which `tessel run --model FILE` (and a host without
//! an allocator, from `include_bytes!`) runs directly.

use std::io::Write;

use tessel_model::LoadSettings;

use crate::args::{defaults, PackArgs};
use crate::error::CliError;
use crate::source::Source;

/// Loads the model `args` names, packs it and writes the image to `args.output`.
pub fn pack(args: &PackArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let source = Source::of(&args.model)?;
    let built = source.build(args.weights, defaults::SEED, LoadSettings::default())?;
    let image = built.model.pack()?;
    std::fs::write(&args.output, &image).map_err(|source| CliError::Read {
        path: args.output.clone(),
        source,
    })?;
    writeln!(
        out,
        "{}: {} bytes ({} of weights) from {}",
        args.output.display(),
        image.len(),
        built.model.weight_bytes(),
        built.what
    )?;
    Ok(())
}
