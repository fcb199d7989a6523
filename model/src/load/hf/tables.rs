//! Which tensors of a Hugging Face file hold the token tables and the output projection.
//!
//! `transformers` 5 names a tie per module (`encoder.embed_tokens ← shared`,
//! `decoder.embed_tokens ← shared`, `lm_head ← shared`, or Marian's separate-vocabulary
//! `lm_head ← decoder.embed_tokens`) and ties only when the config's `tie_word_embeddings`
//! holds. Loading a file, it ties a pair only where one side is absent or both hold the same
//! values; a tied module whose own tensor is present with other values keeps it. So a module
//! reads its own tensor when the file has one, else its tie source:
//!
//! | module | reads |
//! |---|---|
//! | encoder table | its `embed_tokens` if present, else `shared` |
//! | decoder table | its `embed_tokens` if present, else `shared` |
//! | output projection | `lm_head` if present, else (tied) the decoder table; untied and absent is an error |
//!
//! Untied files saved by `transformers` 4 keep only `shared` (its stacks always shared one
//! module, whatever the flag): the stacks read it, as that version did. A tensor nobody reads
//! must be a byte-identical copy of one that is read, or the `shared` table that no module
//! reads because both stacks have their own (`transformers` 5 keeps it as a parameter that
//! its forward pass never touches, and CTranslate2's converter reads the stacks' tables).

use crate::load::source::{SafetensorsSource, TensorSource};
use crate::load::LoadError;

/// A family's names for its tables.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TableNames {
    /// The table both stacks tie to (`model.shared.weight`, `shared.weight`), when the
    /// family has one.
    pub shared: Option<&'static str>,
    /// The encoder's own table.
    pub encoder: &'static str,
    /// The decoder's own table.
    pub decoder: &'static str,
    /// The output projection.
    pub lm_head: &'static str,
}

/// The tensors read, as [`resolve`] found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tables {
    /// The encoder's table.
    pub source: &'static str,
    /// The decoder's table.
    pub target: &'static str,
    /// The output projection's weight.
    pub output: &'static str,
    /// The source table holds the target table's bytes: one table serves both.
    pub shared: bool,
    /// The output projection holds the target table's bytes: it is the tied table.
    pub tied: bool,
}

/// Reads `dir`'s `model.safetensors` for a family whose tables are `names` (tied as `tie`
/// says when the file leaves it open), records on `config` whether one table serves both
/// stacks and the projection, builds the model with `build`, and checks that every tensor of
/// the file was read or is a copy of one that was.
pub(crate) fn load_file<T>(
    dir: &std::path::Path,
    (names, tie): (TableNames, bool),
    config: &mut crate::config::Config,
    build: impl FnOnce(
        &crate::config::Config,
        &Tables,
        &mut SafetensorsSource<'_>,
    ) -> Result<T, LoadError>,
) -> Result<T, LoadError> {
    let bytes = super::read(dir, "model.safetensors")?;
    let mut source = SafetensorsSource::parse(&bytes)?;
    let tables = resolve(&source.file, names, tie)?;
    config.share_embeddings = tables.shared;
    config.tie_output = tables.tied;
    let built = build(config, &tables, &mut source)?;
    tables.accept_unread(&mut source, names);
    source.check_all_used()?;
    Ok(built)
}

/// Whether tensors `a` and `b` of `file` hold the same dtype, shape and bytes.
pub(crate) fn same_bytes(file: &safetensors::SafeTensors<'_>, a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (file.tensor(a), file.tensor(b)) {
        (Ok(x), Ok(y)) => x.dtype() == y.dtype() && x.shape() == y.shape() && x.data() == y.data(),
        _ => false,
    }
}

/// The tensors each module reads from `file` (see the module docs); `tie` is the config's
/// `tie_word_embeddings`.
pub(crate) fn resolve(
    file: &safetensors::SafeTensors<'_>,
    names: TableNames,
    tie: bool,
) -> Result<Tables, LoadError> {
    let has = |name: &str| file.tensor(name).is_ok();
    let own = |name: &'static str| match names.shared {
        Some(shared) if !has(name) && has(shared) => shared,
        _ => name,
    };
    let (source, target) = (own(names.encoder), own(names.decoder));
    let output = if has(names.lm_head) || !tie {
        names.lm_head
    } else {
        target
    };
    if !has(output) {
        return Err(LoadError::Missing {
            name: format!("{output} (tie_word_embeddings is false, so it is not the embedding)"),
        });
    }
    Ok(Tables {
        source,
        target,
        output,
        shared: same_bytes(file, source, target),
        tied: same_bytes(file, output, target),
    })
}

impl Tables {
    /// Marks as read the tensors of `names` that no module reads but the file may hold: byte
    /// copies of a table that is read, and a `shared` table that neither stack reads. Any
    /// other such tensor stays unread, for the caller's check of unused tensors to name.
    pub(crate) fn accept_unread(&self, source: &mut SafetensorsSource<'_>, names: TableNames) {
        let read: Vec<&str> = [
            Some(self.target),
            (!self.shared).then_some(self.source),
            (!self.tied).then_some(self.output),
        ]
        .into_iter()
        .flatten()
        .collect();
        let has = |name: &str| source.file.tensor(name).is_ok();
        let stacks_own = has(names.encoder) && has(names.decoder);
        let mut candidates = vec![names.encoder, names.decoder, names.lm_head];
        candidates.extend(names.shared);
        for name in candidates {
            if read.contains(&name) || !has(name) {
                continue;
            }
            let copy = read.iter().any(|r| same_bytes(&source.file, name, r));
            let idle_shared = Some(name) == names.shared && stacks_own;
            if copy || idle_shared {
                source.used.insert(name.to_owned());
            }
        }
    }
}
