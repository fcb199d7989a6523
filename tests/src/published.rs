//! Checkpoints of published dimensions, rebuilt at test time from a committed manifest.
//!
//! A row of `tests/published/` (made by `tools/make_published_golden.py`) commits the
//! published `config.json` and `generation_config.json`, a manifest of every tensor of its
//! `model.safetensors` and the reference outputs, but not the weights (hundreds of MB). This
//! module regenerates the weights with the generator the Python script used
//! (`tools/published_weights.py`): element `i` of a tensor is `offset + scale · (2u − 1)`
//! rounded to f32, with `u` the top 53 bits of SplitMix64 at state `fnv1a64(gen) + seed + i`
//! times 2⁻⁵³. Each step is integer arithmetic or one IEEE double operation, so both sides
//! produce the same bits; each tensor's f64 sum, recorded by the script, checks that.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use safetensors::tensor::{serialize_to_file, Dtype, View};
use serde_json::Value;

/// One tensor of a row's `model.safetensors`, as the manifest describes it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its name in the file.
    pub name: String,
    /// The generator name it was drawn under (tied and copied tensors share one).
    pub generator: String,
    /// Its shape.
    pub shape: Vec<usize>,
    offset: f64,
    scale: f64,
    zero_rows: Vec<usize>,
    set: Vec<(usize, f32)>,
    sum: f64,
    /// Stored as float16 (the generated float32 values rounded to nearest even), as
    /// checkpoints published in half precision are; float32 otherwise.
    half: bool,
}

/// A row's manifest: the generator seed and every tensor of the file.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The seed added to every generator state.
    pub seed: u64,
    /// The file's tensors.
    pub tensors: Vec<Entry>,
}

impl Manifest {
    /// Reads `manifest.json` of the row directory `row`; panics naming the file when it is
    /// malformed (a broken fixture, not a test outcome).
    pub fn read(row: &Path) -> Manifest {
        let path = row.join("manifest.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let json: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let seed = json["seed"].as_u64().expect("manifest seed");
        let tensors = json["tensors"]
            .as_array()
            .expect("manifest tensors")
            .iter()
            .map(Entry::from_json)
            .collect();
        Manifest { seed, tensors }
    }

    /// The number of values of all tensors.
    pub fn values(&self) -> usize {
        self.tensors.iter().map(Entry::len).sum()
    }
}

impl Entry {
    /// An entry of a manifest (or an input the script drew the same way); panics naming the
    /// field that is missing (a broken fixture, not a test outcome).
    pub fn from_json(value: &Value) -> Entry {
        let text = |key: &str| value[key].as_str().expect(key).to_string();
        let float = |key: &str| value[key].as_f64().expect(key);
        let list = |key: &str| value[key].as_array().cloned().unwrap_or_default();
        Entry {
            name: text("name"),
            generator: text("gen"),
            shape: list("shape")
                .iter()
                .map(|d| d.as_u64().expect("shape") as usize)
                .collect(),
            offset: float("offset"),
            scale: float("scale"),
            zero_rows: list("zero_rows")
                .iter()
                .map(|r| r.as_u64().expect("zero_rows") as usize)
                .collect(),
            set: list("set")
                .iter()
                .map(|pair| {
                    let index = pair[0].as_u64().expect("set index") as usize;
                    (index, pair[1].as_f64().expect("set value") as f32)
                })
                .collect(),
            sum: float("sum"),
            half: value["dtype"].as_str() == Some("F16"),
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`Entry::generate`], checked against the sum the manifest records; panics when they
    /// differ (the two generators disagree).
    pub fn generate_checked(&self, seed: u64) -> Vec<f32> {
        let values = self.generate(seed);
        let sum: f64 = values.iter().map(|&v| v as f64).sum();
        let magnitude: f64 = values.iter().map(|&v| (v as f64).abs()).sum();
        assert!(
            (sum - self.sum).abs() <= 1e-9 * magnitude.max(1.0),
            "{}: generated sum {sum} but the manifest says {}: the generators differ",
            self.name,
            self.sum
        );
        values
    }

    /// Its values, drawn as `tools/published_weights.py` draws them.
    pub fn generate(&self, seed: u64) -> Vec<f32> {
        let base = fnv1a64(&self.generator).wrapping_add(seed);
        let mut values: Vec<f32> = (0..self.len() as u64)
            .map(|i| {
                let bits = splitmix64(base.wrapping_add(i)) >> 11;
                let u = bits as f64 * (1.0 / (1u64 << 53) as f64) * 2.0 - 1.0;
                (self.offset + self.scale * u) as f32
            })
            .collect();
        let row = self.shape.iter().skip(1).product::<usize>();
        for &r in &self.zero_rows {
            values[r * row..(r + 1) * row].fill(0.0);
        }
        for &(index, value) in &self.set {
            values[index] = value;
        }
        values
    }
}

fn fnv1a64(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01B3)
    })
}

fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A tensor generated when the file writer asks for its bytes, checked against the
/// manifest's sum.
struct Generated<'a> {
    entry: &'a Entry,
    seed: u64,
}

impl View for Generated<'_> {
    fn dtype(&self) -> Dtype {
        if self.entry.half {
            Dtype::F16
        } else {
            Dtype::F32
        }
    }

    fn shape(&self) -> &[usize] {
        &self.entry.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        let values = self.entry.generate_checked(self.seed);
        let bytes = if self.entry.half {
            values
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect()
        } else {
            values.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
        Cow::Owned(bytes)
    }

    fn data_len(&self) -> usize {
        self.entry.len() * if self.entry.half { 2 } else { 4 }
    }
}

/// A row's generated Hugging Face directory. Dropping it deletes the generated weights (a row
/// holds up to 1.3 GB) unless the row is one `TESSEL_PUBLISHED_KEEP` names.
pub struct Materialized {
    dir: PathBuf,
    keep: bool,
}

impl Materialized {
    /// The directory: the configuration files and `model.safetensors`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Materialized {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(self.dir.join("manifest.json"));
            let _ = std::fs::remove_file(self.dir.join("model.safetensors"));
        }
    }
}

/// Whether `TESSEL_PUBLISHED_KEEP` (`all`, or row names separated by commas) names `row`.
fn kept(row: &str) -> bool {
    std::env::var("TESSEL_PUBLISHED_KEEP")
        .is_ok_and(|keep| keep == "all" || keep.split(',').any(|name| name == row))
}

/// The Hugging Face directory of row `row` under `cache`: its config files and the
/// `model.safetensors` the manifest describes, generated unless a kept earlier run's file is
/// there (a stamp holding the manifest marks it).
pub fn materialize(row: &Path, cache: &Path) -> Materialized {
    let name = row.file_name().expect("row name");
    let dir = cache.join(name);
    let manifest_text = std::fs::read(row.join("manifest.json")).expect("manifest");
    let stamp = dir.join("manifest.json");
    let weights = dir.join("model.safetensors");
    let fresh = std::fs::read(&stamp).is_ok_and(|s| s == manifest_text) && weights.is_file();
    if !fresh {
        std::fs::create_dir_all(&dir).expect("cache directory");
        let _ = std::fs::remove_file(&stamp);
        let manifest = Manifest::read(row);
        let views = manifest.tensors.iter().map(|entry| {
            (
                entry.name.clone(),
                Generated {
                    entry,
                    seed: manifest.seed,
                },
            )
        });
        serialize_to_file(views, &None, &weights).expect("write model.safetensors");
        std::fs::write(&stamp, &manifest_text).expect("stamp");
    }
    for file in ["config.json", "generation_config.json"] {
        std::fs::copy(row.join(file), dir.join(file)).expect("copy config");
    }
    Materialized {
        dir,
        keep: kept(&name.to_string_lossy()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_matches_known_values() {
        // splitmix64 from state 0 (its first output) and FNV-1a of "a", published values.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(fnv1a64("a"), 0xAF63_DC4C_8601_EC8C);
    }
}
