//! CTranslate2 vocabulary files: a JSON array of tokens (`*_vocabulary.json`) or one token a
//! line (`*_vocabulary.txt`), the id being the position.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Ct2Error;

/// Tokens by id and ids by token.
#[derive(Clone, Debug, Default)]
pub struct Vocabulary {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Vocabulary {
    /// Builds a vocabulary from tokens in id order; a repeated token keeps its first id.
    pub fn new(tokens: Vec<String>) -> Vocabulary {
        let mut ids = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            ids.entry(t.clone()).or_insert(i as u32);
        }
        Vocabulary { tokens, ids }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The id of `token`.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The token of `id`.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Reads `{stem}.json` or, failing that, `{stem}.txt` in `dir`; `None` if neither exists.
    pub fn read(dir: &Path, stem: &str) -> Result<Option<Vocabulary>, Ct2Error> {
        let json = dir.join(format!("{stem}.json"));
        if json.is_file() {
            let text = read(&json)?;
            let tokens: Vec<String> =
                serde_json::from_str(&text).map_err(|e| Ct2Error::Vocabulary {
                    path: json.clone(),
                    reason: e.to_string(),
                })?;
            return Ok(Some(Vocabulary::new(tokens)));
        }
        let txt = dir.join(format!("{stem}.txt"));
        if txt.is_file() {
            let text = read(&txt)?;
            let tokens = text
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
                .collect::<Vec<_>>();
            // A final newline does not start another token.
            let tokens = match tokens.split_last() {
                Some((last, rest)) if last.is_empty() => rest.to_vec(),
                _ => tokens,
            };
            return Ok(Some(Vocabulary::new(tokens)));
        }
        Ok(None)
    }
}

fn read(path: &PathBuf) -> Result<String, Ct2Error> {
    std::fs::read_to_string(path).map_err(|source| Ct2Error::Io {
        path: path.clone(),
        source,
    })
}
