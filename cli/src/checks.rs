//! The checks `translate` and `transcribe` make before the work they guard: options that
//! contradict each other, the input file, the kind of model directory (before its weights
//! load), and the sessions' arenas against the memory the machine has (before they are
//! allocated). Bounds of single values are the value parsers of [`crate::args`].

use std::path::Path;

use tessel_model::load::directory::{Directory, Modality};

use crate::error::CliError;

/// What a command needs of its model directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// `translate`: a text-to-text model.
    Text,
    /// `transcribe`: a Whisper model.
    Speech,
}

/// Opens `dir` without loading its weights ([`Directory::open`]: a missing `config.json`,
/// an unknown `model_type` or a truncated weights file are errors), and refuses a model of
/// the wrong kind for `command`.
pub fn model_kind(dir: &Path, command: &'static str, needs: Needs) -> Result<Directory, CliError> {
    let directory = Directory::open(dir)?;
    let speech = directory.modality() == Some(Modality::Speech);
    let (fits, wanted) = match needs {
        Needs::Text => (
            !speech,
            "a translation model (Marian, BART, mBART, M2M100/NLLB, T5); \
             Whisper translates speech to English with `tessel transcribe --task translate`",
        ),
        Needs::Speech => (speech, "a Whisper model"),
    };
    if fits {
        Ok(directory)
    } else {
        Err(CliError::WrongModel {
            dir: dir.to_owned(),
            what: directory.describe(),
            command,
            needs: wanted,
        })
    }
}

/// Checks that the file at `path` exists, is a file and can be opened for reading.
pub fn readable_file(path: &Path) -> Result<(), CliError> {
    let unreadable = |source| CliError::InputFile {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let metadata = file.metadata().map_err(unreadable)?;
    if metadata.is_dir() {
        return Err(unreadable(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a directory",
        )));
    }
    Ok(())
}

/// Checks that `nbest` hypotheses fit in a beam of `beam` (`from`: where the width comes
/// from, for the message).
pub fn nbest_within_beam(nbest: usize, beam: usize, from: &str) -> Result<(), CliError> {
    if nbest > beam {
        return Err(CliError::Invalid(format!(
            "--nbest {nbest} is more than the beam width {beam} ({from}): a beam search keeps \
             at most its width of hypotheses; ask for --beam {nbest} or more"
        )));
    }
    Ok(())
}

/// Checks that a minimum output of `min_length` decoder positions (the start token counted,
/// as `--min-length` counts them) fits in a maximum of `max_positions` (`from`: where the
/// maximum comes from, for the message).
pub fn min_within_max(min_length: usize, max_positions: usize, from: &str) -> Result<(), CliError> {
    if min_length > max_positions {
        return Err(CliError::Invalid(format!(
            "--min-length {min_length} is more than {from} allows: at most {max_positions} \
             positions, the start token counted"
        )));
    }
    Ok(())
}

/// Checks that `sessions` arenas of `bytes_each` bytes fit in the memory available now
/// ([`available_memory`]; no check where it is unknown).
pub fn fits_in_memory(bytes_each: usize, sessions: usize) -> Result<(), CliError> {
    fits_in(bytes_each, sessions, available_memory())
}

/// [`fits_in_memory`] against `available` bytes.
fn fits_in(bytes_each: usize, sessions: usize, available: Option<u64>) -> Result<(), CliError> {
    let Some(available) = available else {
        return Ok(());
    };
    let total = (bytes_each as u128) * (sessions as u128);
    if total > u128::from(available) {
        return Err(CliError::TooLittleMemory {
            bytes_each,
            sessions,
            available,
        });
    }
    Ok(())
}

/// Bytes of memory available for new allocations without swapping: `MemAvailable` of
/// `/proc/meminfo` on Linux; `None` elsewhere or when it cannot be read.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    mem_available(&text)
}

/// The `MemAvailable:` line of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut words = line.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let meminfo = "MemTotal:       16318412 kB\nMemFree:         1234 kB\n\
                       MemAvailable:    8000000 kB\nBuffers:  1 kB\n";
        assert_eq!(mem_available(meminfo), Some(8_192_000_000));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: many kB\n"), None);
        if cfg!(target_os = "linux") {
            assert!(available_memory().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn sessions_larger_than_the_memory_available_are_refused() {
        assert!(fits_in(1 << 20, 4, Some(4 << 20)).is_ok());
        assert!(fits_in(usize::MAX, 100, None).is_ok());
        let refused = fits_in(114_000_000, 100, Some(3_000_000_000)).unwrap_err();
        let message = refused.to_string();
        assert!(
            message.contains("11400000000 bytes") && message.contains("100 sessions"),
            "{message}"
        );
        assert!(message.contains("3000000000 bytes available"), "{message}");
    }

    #[test]
    fn option_combinations_are_checked() {
        assert!(nbest_within_beam(4, 4, "--beam").is_ok());
        let message = nbest_within_beam(5, 4, "--beam").unwrap_err().to_string();
        assert!(
            message.contains("--nbest 5 is more than the beam width 4"),
            "{message}"
        );
        assert!(min_within_max(11, 11, "--max-length 10").is_ok());
        let message = min_within_max(100, 11, "--max-length 10")
            .unwrap_err()
            .to_string();
        assert!(message.contains("--min-length 100"), "{message}");
        assert!(message.contains("--max-length 10"), "{message}");
    }
}
