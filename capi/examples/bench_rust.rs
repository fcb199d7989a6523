//! The Rust side of `capi/bench/run.sh`: the same work as `capi/bench/bench.c`, through
//! `tessel-model` directly.
//!
//! `bench_rust TSV LINES ROUNDS` reads the first LINES lines of TSV (words first). Each round
//! times, over every line, what `tessel_numbers_read` does (tokenise, encode, greedy search,
//! detokenise) per generated token, and a greedy loop of `decode_step` with the same argmax as
//! the C side, per step. Prints the medians and minima over ROUNDS in nanoseconds per token.

use std::time::Instant;

use tessel_model::isa_env::isa_from_env;
use tessel_model::{Limits, Request, SearchOptions, Session};
use tessel_numbers::Numbers;

/// Sorts `values`; returns the median.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        0.5 * (values[n / 2 - 1] + values[n / 2])
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, tsv, lines, rounds] = args.as_slice() else {
        return Err("usage: bench_rust TSV LINES ROUNDS".into());
    };
    let (lines, rounds): (usize, usize) = (lines.parse()?, rounds.parse()?);
    let text = std::fs::read_to_string(tsv)?;
    let words: Vec<&str> = text
        .lines()
        .take(lines)
        .map(|l| l.split('\t').next().unwrap_or(l))
        .collect();
    let (model, vocab) = Numbers::embedded()?.into_parts();
    let config = model.config();
    let limits = Limits {
        max_beam: 1,
        ..Limits::of(config)
    };
    let mut session = Session::with_limits(&model, isa_from_env()?, limits)?;
    let steps = vocab.max_target().min(limits.max_tgt_len);
    let greedy = SearchOptions::greedy(steps);
    let mut ids = Vec::with_capacity(limits.max_src_len);

    let mut read_tokens = 0usize;
    for w in &words {
        vocab.encode_into(w, &mut ids)?;
        session.encode(&ids)?;
        session.generate(Request::new(greedy).on_step(|_| read_tokens += 1))?;
    }

    let (mut read_ns, mut decode_ns) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        for w in &words {
            vocab.encode_into(w, &mut ids)?;
            session.encode(&ids)?;
            let hyps = session.generate(Request::new(greedy))?;
            let best = hyps.best().map_or(&[][..], |h| h.tokens);
            std::hint::black_box(vocab.decode(best));
        }
        read_ns.push(start.elapsed().as_nanos() as f64 / read_tokens as f64);

        let (mut decode_time, mut count) = (0f64, 0usize);
        for w in &words {
            vocab.encode_into(w, &mut ids)?;
            session.encode(&ids)?;
            let hyps = session.generate(Request::new(greedy))?;
            std::hint::black_box(hyps.best().map(|h| h.tokens.len()));
            session.reset_decoder();
            let mut token = config.bos_id;
            let t0 = Instant::now();
            for _ in 0..limits.max_tgt_len {
                let logits = session.decode_step(&[token])?;
                let mut best = 0;
                for v in 1..logits.len() {
                    if logits[v] > logits[best] {
                        best = v;
                    }
                }
                count += 1;
                token = best as u32;
                if token == config.eos_id {
                    break;
                }
            }
            decode_time += t0.elapsed().as_nanos() as f64;
        }
        decode_ns.push(decode_time / count as f64);
    }
    let (read_median, decode_median) = (median(&mut read_ns), median(&mut decode_ns));
    println!(
        "rust read_ns_per_token {read_median:.1} decode_ns_per_step {decode_median:.1} min {:.1} {:.1}",
        read_ns[0], decode_ns[0]
    );
    Ok(())
}
