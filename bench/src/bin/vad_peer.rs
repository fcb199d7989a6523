//! Times tessel's Silero VAD over raw audio for `bench/peers/vad.py`, which runs onnxruntime
//! on the same samples in the same run.
//!
//! `vad_peer AUDIO.f32 [--threads N] [--runs N] [--model PATH] [--out PROBS.f32]`
//!
//! AUDIO.f32: 16 kHz mono samples, little-endian `f32`. Runs `Vad::speech_probabilities_with`
//! (faster-whisper's padding and windowing, one stream) `--runs` times (default 5) after a
//! warm-up, the encoder's GEMMs on `--threads` threads (default 1), and prints one JSON line:
//! the ISA level, threads, audio seconds, windows, and the best and median wall times in
//! seconds. `--out` writes the probabilities as little-endian `f32`.

use std::path::PathBuf;
use std::time::Instant;

use tessel_model::ThreadPool;
use tessel_vad::DEFAULT_BATCH;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut audio_path = None;
    let (mut threads, mut runs) = (1usize, 5usize);
    let mut model = None;
    let mut out = None;
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--threads" => threads = value()?.parse()?,
            "--runs" => runs = value()?.parse()?,
            "--model" => model = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            _ if audio_path.is_none() => audio_path = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg}").into()),
        }
    }
    let audio_path = audio_path.ok_or("usage: vad_peer AUDIO.f32 [--threads N] [--runs N]")?;
    let bytes = std::fs::read(&audio_path)?;
    let samples: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let vad = tessel_vad::locate::open_model(model.as_deref())?;
    let pool = ThreadPool::new(threads)?;
    let mut state = vad.state_with(DEFAULT_BATCH, threads);
    let mut probabilities = vad.speech_probabilities_with(&mut state, &samples, &pool)?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        probabilities = vad.speech_probabilities_with(&mut state, &samples, &pool)?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    if let Some(out) = out {
        let bytes: Vec<u8> = probabilities.iter().flat_map(|p| p.to_le_bytes()).collect();
        std::fs::write(out, bytes)?;
    }
    println!(
        "{{\"isa\": \"{}\", \"threads\": {threads}, \"audio_seconds\": {}, \"windows\": {}, \
         \"best_seconds\": {}, \"median_seconds\": {}}}",
        vad.isa().level(),
        samples.len() as f64 / 16_000.0,
        probabilities.len(),
        times[0],
        times[times.len() / 2]
    );
    Ok(())
}
