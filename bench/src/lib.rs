//! The benchmark report format shared by every tessel benchmark binary, and a small timer.
//!
//! One JSON object per line: `suite`, `case`, `impl`, `isa`, `threads`, `median_ns`,
//! `unit_rate` (in `unit`, GFLOP/s or GB/s as the suite states) and, where the same run measured
//! a baseline, `baseline` (the baseline's `impl`) and `ratio` (baseline time / this time: above
//! 1 means faster than the baseline; against a peak or stream record of other work, this rate /
//! the baseline's rate, see [`Record::against_rate`]).

use serde::Serialize;
use std::time::{Duration, Instant};

pub mod hand_norm;
pub mod suites;

/// Unit of a record's `unit_rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Unit {
    /// 10^9 floating-point operations per second.
    #[serde(rename = "GFLOP/s")]
    GflopPerSecond,
    /// 10^9 bytes per second.
    #[serde(rename = "GB/s")]
    GbPerSecond,
}

/// How much work one run of a case does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Work {
    /// FLOP or bytes.
    pub amount: f64,
    /// What `amount` counts, per second.
    pub unit: Unit,
}

impl Work {
    /// `flop` floating-point operations.
    pub fn flops(flop: f64) -> Work {
        Work {
            amount: flop,
            unit: Unit::GflopPerSecond,
        }
    }

    /// `bytes` bytes moved.
    pub fn bytes(bytes: f64) -> Work {
        Work {
            amount: bytes,
            unit: Unit::GbPerSecond,
        }
    }
}

/// One measured case, serialised as one JSON line.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// Suite name (`gemm`, `attention`, `norm`, `e2e`, ...).
    pub suite: String,
    /// Case within the suite, e.g. `512x512x512`.
    pub case: String,
    /// Implementation measured: `tessel`, `reference`, `gemm-crate`, ...
    #[serde(rename = "impl")]
    pub implementation: String,
    /// ISA level the implementation ran at.
    pub isa: String,
    /// Threads used.
    pub threads: usize,
    /// Median wall time of one run, in nanoseconds.
    pub median_ns: f64,
    /// Work per second in `unit`.
    pub unit_rate: f64,
    /// Unit of `unit_rate`.
    pub unit: Unit,
    /// The `impl` of the same-run baseline this record is compared to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// Baseline median time divided by this median time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}

impl Record {
    /// A record for `work` done in `median_ns`.
    pub fn new(
        suite: &str,
        case: &str,
        implementation: &str,
        isa: &str,
        threads: usize,
        median_ns: f64,
        work: Work,
    ) -> Record {
        Record {
            suite: suite.to_owned(),
            case: case.to_owned(),
            implementation: implementation.to_owned(),
            isa: isa.to_owned(),
            threads,
            median_ns,
            unit_rate: work.amount / median_ns,
            unit: work.unit,
            baseline: None,
            ratio: None,
        }
    }

    /// Marks this record as compared with `baseline`, measured in the same run.
    pub fn against(mut self, baseline: &Record) -> Record {
        self.baseline = Some(baseline.implementation.clone());
        self.ratio = Some(baseline.median_ns / self.median_ns);
        self
    }

    /// Marks this record as compared with a rate `baseline` measured in the same run on other
    /// work of the same unit (the `fma-peak` chains, a stream read of other bytes): the ratio
    /// is this rate over the baseline's, the fraction of that peak this record reaches.
    pub fn against_rate(mut self, baseline: &Record) -> Record {
        debug_assert_eq!(self.unit, baseline.unit, "rates of different units");
        self.baseline = Some(baseline.implementation.clone());
        self.ratio = Some(self.unit_rate / baseline.unit_rate);
        self
    }

    /// The JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a Record always serialises")
    }
}

/// How long to measure each case.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Minimum samples.
    pub min_samples: usize,
    /// Stop adding samples after this much time (once `min_samples` are taken).
    pub time: Duration,
}

impl Budget {
    /// `--quick`: a smoke run that only shows the suite works.
    pub const QUICK: Budget = Budget {
        min_samples: 3,
        time: Duration::from_millis(150),
    };
    /// The default: enough samples for a stable median on a noisy shared machine.
    pub const FULL: Budget = Budget {
        min_samples: 11,
        time: Duration::from_secs(2),
    };
}

/// Median wall time of `run` in nanoseconds, after one warm-up call.
pub fn median_ns(budget: Budget, mut run: impl FnMut()) -> f64 {
    run();
    let start = Instant::now();
    let mut samples = Vec::with_capacity(budget.min_samples * 4);
    while samples.len() < budget.min_samples || start.elapsed() < budget.time {
        let t = Instant::now();
        run();
        samples.push(t.elapsed().as_nanos() as f64);
        if samples.len() >= 10_000 {
            break;
        }
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Median times of each of `runs` on `case`, sampled round-robin (one warm-up call each, then
/// one sample of each in turn), so a change of load on this shared machine affects them alike.
/// Takes at least `budget.min_samples` rounds and goes on for `budget.time` per run.
pub fn round_robin_median_ns<C>(
    budget: Budget,
    case: &mut C,
    runs: &mut [&mut dyn FnMut(&mut C)],
) -> Vec<f64> {
    runs.iter_mut().for_each(|run| run(case));
    let start = Instant::now();
    let limit = budget.time * runs.len() as u32;
    let mut samples = vec![Vec::new(); runs.len()];
    while samples[0].len() < budget.min_samples
        || (start.elapsed() < limit && samples[0].len() < 10_000)
    {
        for (run, samples) in runs.iter_mut().zip(&mut samples) {
            let t = Instant::now();
            run(case);
            samples.push(t.elapsed().as_nanos() as f64);
        }
    }
    samples
        .iter_mut()
        .map(|samples| {
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_serialise_with_the_report_fields() {
        let base = Record::new(
            "gemm",
            "1x1x1",
            "reference",
            "scalar",
            1,
            200.0,
            Work::flops(2.0),
        );
        let fast = Record::new(
            "gemm",
            "1x1x1",
            "tessel",
            "avx512",
            1,
            100.0,
            Work::flops(2.0),
        )
        .against(&base);
        let v: serde_json::Value = serde_json::from_str(&fast.to_json()).unwrap();
        for key in [
            "suite",
            "case",
            "impl",
            "isa",
            "threads",
            "median_ns",
            "unit_rate",
            "baseline",
            "ratio",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["ratio"], 2.0);
        assert_eq!(v["unit"], "GFLOP/s");
        let plain: serde_json::Value = serde_json::from_str(&base.to_json()).unwrap();
        assert!(plain.get("ratio").is_none());
    }

    #[test]
    fn median_runs_at_least_the_minimum() {
        let mut calls = 0;
        let budget = Budget {
            min_samples: 5,
            time: Duration::ZERO,
        };
        let t = median_ns(budget, || calls += 1);
        assert!(t >= 0.0);
        assert_eq!(calls, 6);
    }
}
