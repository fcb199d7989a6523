//! The batch API under arbitrary call sequences on tiny random models: encodes of several
//! sources at once into any slots (out of range or repeated too), packed into encoder passes
//! of any size, admissions with odd options and prefixes, steps with some running
//! slots' requests missing, hypotheses of any slot, whole-batch searches. Every call returns
//! `Ok` or a typed `RunError` (never `RunError::Kernel`) and never panics, and every slot's
//! finished hypotheses are bit for bit those of a plain session running the same source and
//! request alone.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{isa, tiny_models, token_ids};
use tessel_model::{Batch, Limits, Model, Request, RunError, SearchOptions, Session};

#[derive(Arbitrary, Debug)]
enum Call {
    Encode(Vec<(u8, Vec<u8>)>),
    Admit { slot: u8, search: Search },
    Step { drop_slot: Option<u8> },
    Hypotheses(u8),
    Generate(Vec<Search>),
}

#[derive(Arbitrary, Debug, Clone)]
struct Search {
    beam: u8,
    max_steps: u8,
    length_penalty: i8,
    stop_at_eos: bool,
    /// Patience in eighths (0 and odd values included).
    patience: u8,
    prefix: Option<Vec<u8>>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    model: u8,
    isa: u8,
    limits: (u8, u8, u8, u8, u8),
    calls: Vec<Call>,
}

impl Search {
    fn options(&self) -> SearchOptions {
        SearchOptions {
            beam: self.beam as usize % 5,
            max_steps: self.max_steps as usize % 9,
            length_penalty: self.length_penalty as f32 / 32.0,
            stop_at_eos: self.stop_at_eos,
            sampling: None,
            patience: f32::from(self.patience % 32) / 8.0,
        }
    }

    fn prefix(&self) -> Option<Vec<u32>> {
        self.prefix.as_deref().map(token_ids)
    }
}

/// A search's hypotheses as (tokens, score bits).
type Found = Vec<(Vec<u32>, u32)>;

fn found(hyps: tessel_model::Hypotheses<'_>) -> Found {
    hyps.iter()
        .map(|h| (h.tokens.to_vec(), h.score.to_bits()))
        .collect()
}

/// What a plain session finds for `src` and `search`, or why it refuses.
fn alone(session: &mut Session<&Model>, src: &[u32], search: &Search) -> Result<Found, RunError> {
    session.encode(src)?;
    let prefix = search.prefix();
    let mut request = Request::new(search.options());
    if let Some(p) = &prefix {
        request = request.prefix(p);
    }
    session.generate(request).map(found)
}

fn typed<T>(result: Result<T, RunError>, call: &Call) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            assert!(
                !matches!(e, RunError::Kernel(_)),
                "{call:?}: internal error {e}"
            );
            None
        }
    }
}

/// What the fuzzer knows of each slot: its source, and the search admitted there.
#[derive(Clone, Default)]
struct Slot {
    src: Option<Vec<u32>>,
    search: Option<Search>,
}

fuzz_target!(|input: Input| {
    let model = &tiny_models()[input.model as usize % 8];
    let isa = isa(input.isa);
    let (s, t, b, n, e) = input.limits;
    let limits = Limits {
        max_src_len: s as usize % 9,
        max_tgt_len: t as usize % 8,
        max_beam: b as usize % 5,
        max_batch: n as usize % 5,
        encode_sources: e as usize % 4,
        threads: 1,
        cross_kv: if t & 0x80 == 0 {
            tessel_model::MemoryType::F32
        } else {
            tessel_model::MemoryType::F16
        },
    };
    let Ok(mut batch) = Batch::new(model, isa, limits) else {
        return;
    };
    let mut session = Session::with_limits(model, isa, limits.with_batch(1)).expect("same plan");
    let slots = limits.max_batch;
    let mut known = vec![Slot::default(); slots];
    for call in input.calls.iter().take(24) {
        match call {
            Call::Encode(sources) => {
                let sources: Vec<(usize, Vec<u32>)> = (sources.iter().take(6))
                    .map(|(slot, src)| (*slot as usize % (slots + 1), token_ids(src)))
                    .collect();
                let given: Vec<(usize, &[u32])> =
                    sources.iter().map(|(slot, src)| (*slot, &src[..])).collect();
                if typed(batch.encode_all(&given), call).is_some() {
                    for (slot, src) in sources {
                        known[slot] = Slot {
                            src: Some(src),
                            search: None,
                        };
                    }
                }
            }
            Call::Admit { slot, search } => {
                let slot = *slot as usize % (slots + 1);
                let prefix = search.prefix();
                let mut request = Request::new(search.options());
                if let Some(p) = &prefix {
                    request = request.prefix(p);
                }
                if typed(batch.admit(slot, &mut request), call).is_some() {
                    known[slot].search = Some(search.clone());
                }
            }
            Call::Step { drop_slot } => {
                let prefixes: Vec<Option<Vec<u32>>> = known
                    .iter()
                    .map(|k| k.search.as_ref().and_then(Search::prefix))
                    .collect();
                let mut requests: Vec<Option<Request<'_>>> = known
                    .iter()
                    .zip(&prefixes)
                    .enumerate()
                    .map(|(i, (k, prefix))| {
                        let search = k.search.as_ref().filter(|_| Some(i as u8) != *drop_slot)?;
                        let request = Request::new(search.options());
                        Some(match prefix {
                            Some(p) => request.prefix(p),
                            None => request,
                        })
                    })
                    .collect();
                typed(batch.step(&mut requests[..]), call);
            }
            Call::Hypotheses(slot) => {
                let slot = *slot as usize % (slots + 1);
                let got = typed(batch.hypotheses(slot), call).map(found);
                if let (Some(got), Some(k)) = (got, known.get(slot)) {
                    let (Some(src), Some(search)) = (&k.src, &k.search) else {
                        panic!("slot {slot} has hypotheses without a search");
                    };
                    let want = alone(&mut session, src, search).expect("a search the batch ran");
                    assert_eq!(got, want, "slot {slot}: differs from a session alone");
                }
            }
            Call::Generate(searches) => {
                let prefixes: Vec<Option<Vec<u32>>> = searches.iter().map(Search::prefix).collect();
                let mut requests: Vec<Request<'_>> = searches
                    .iter()
                    .zip(&prefixes)
                    .map(|(search, prefix)| {
                        let request = Request::new(search.options());
                        match prefix {
                            Some(p) => request.prefix(p),
                            None => request,
                        }
                    })
                    .collect();
                if typed(batch.generate(&mut requests), call).is_some() {
                    for (k, search) in known.iter_mut().zip(searches) {
                        k.search = Some(search.clone());
                    }
                }
            }
        }
    }
});
