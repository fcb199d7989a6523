//! Prints benchmark results as JSON lines: `report <suite|all|list> [--quick]`.
//!
//! Honours `TESSEL_ISA` (the level tessel's kernels run at; baselines note their own).

use std::io::Write;
use std::process::ExitCode;
use tessel_bench::{suites, Budget};

fn main() -> ExitCode {
    let mut quick = false;
    let mut names = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            "-h" | "--help" => {
                print_usage();
                return ExitCode::SUCCESS;
            }
            _ => names.push(arg),
        }
    }
    if names.is_empty() {
        print_usage();
        return ExitCode::from(2);
    }
    if names.iter().any(|n| n == "list") {
        for suite in suites::ALL {
            println!("{:<10} {}", suite.name, suite.about);
        }
        return ExitCode::SUCCESS;
    }
    let mut selected = Vec::new();
    for name in &names {
        if name == "all" {
            selected.extend(suites::ALL.iter());
        } else if let Some(suite) = suites::ALL.iter().find(|s| s.name == name) {
            selected.push(suite);
        } else {
            eprintln!("report: unknown suite `{name}` (try `report list`)");
            return ExitCode::from(2);
        }
    }
    if let Err(err) = tessel_model::isa_env::isa_from_env() {
        eprintln!("report: TESSEL_ISA: {err}");
        return ExitCode::from(2);
    }
    let budget = if quick { Budget::QUICK } else { Budget::FULL };
    let stdout = std::io::stdout();
    for suite in selected {
        (suite.run)(budget, &mut |record| {
            let mut out = stdout.lock();
            // A closed pipe (e.g. `| head`) ends the report quietly.
            if writeln!(out, "{}", record.to_json()).is_err() {
                std::process::exit(0);
            }
            let _ = out.flush();
        });
    }
    ExitCode::SUCCESS
}

fn print_usage() {
    eprintln!("usage: report <suite>... [--quick]   suites: all, list, or one of:");
    for suite in suites::ALL {
        eprintln!("  {:<10} {}", suite.name, suite.about);
    }
}
