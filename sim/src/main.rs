//! The toolop-sim command line. Every command exits 0 ok, 1 a checker, gate or mutation failed,
//! 2 bad usage or input (the message names the file, the field and the problem), 130 interrupted
//! (a partial report was written). docs/cli.md has the table of commands and what they write.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolop::core::mutation::Mutation;
use toolop_sim::campaign::{bench, jobs_parser, shrink};

mod cli;

use cli::gate::GateArgs;
use cli::single::View;

const EXIT_CODES: &str = "\
Exit codes: 0 ok; 1 a checker, gate or mutation failed; 2 bad usage or input (file, field, problem);
130 interrupted by Ctrl-C (a partial report was written).
Commands print `toolop-sim ...` lines to paste: `make install-sim` puts toolop-sim on PATH.";

#[derive(Parser)]
#[command(
    name = "toolop-sim",
    version,
    about = "Deterministic simulation harness for the toolop executor",
    after_help = EXIT_CODES
)]
struct Cli {
    /// Colour verdicts: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, default_value_t = cli::Color::Auto)]
    color: cli::Color,
    #[command(subcommand)]
    cmd: Cmd,
}

/// `--mutation` (replay, mutants): a mutation by the name `mutants` prints; an unknown name is
/// refused with the list of names.
fn mutation_parser(name: &str) -> Result<Mutation, String> {
    Mutation::from_name(name).ok_or_else(|| {
        let known: Vec<String> = Mutation::ALL.iter().map(|m| m.name()).collect();
        format!("no such mutation; known: {}", known.join(", "))
    })
}

/// `--series`: at least one, at most ten million.
pub(crate) fn series_parser() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(1..=10_000_000)
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one seeded series, judge it with every checker, and write its trace.
    /// Exit 0 every property holds, 1 a checker fired, 2 bad input.
    Run {
        /// The scenario file (TOML; see docs/scenario-reference.md).
        #[arg(long)]
        scenario: PathBuf,
        #[command(flatten)]
        set: cli::SetArgs,
        /// The seed: everything the series draws follows from it.
        #[arg(long)]
        seed: u64,
        /// Where traces go: <reports>/<scenario name>/<seed>/trace.jsonl.
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
    },
    /// Replay one series byte for byte: parameters, a timeline with a legend, the checkers'
    /// verdicts. Exit 0 every property holds, 1 a checker fired, 2 bad input.
    Replay {
        /// The scenario file; required unless --schedule names it.
        #[arg(long)]
        scenario: Option<PathBuf>,
        #[command(flatten)]
        set: cli::SetArgs,
        /// The seed; required unless --schedule names it.
        #[arg(long)]
        seed: Option<u64>,
        /// Replay a fault schedule file (from `shrink`, or edited by hand): its scenario (a path
        /// relative to the schedule file) and seed unless --scenario/--seed override them.
        #[arg(long)]
        schedule: Option<PathBuf>,
        /// Where the trace goes: <reports>/<scenario name>/<seed>/(schedule-)trace.jsonl.
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
        /// Also show every send, reply and network frame.
        #[arg(long)]
        verbose: bool,
        /// Show only this call node's lines (and the world's), e.g. n002.
        #[arg(long)]
        node: Option<String>,
        /// Plant a mutation (an anti-pattern from `toolop-sim mutants`) in the executor.
        #[arg(long, value_parser = mutation_parser)]
        mutation: Option<Mutation>,
        /// Print one JSON object (verdict, violations, trace hash) instead of the timeline.
        #[arg(long)]
        json: bool,
    },
    /// Run a seeded sweep, check every invariant on every series, judge the gates, write the
    /// reports, shrink the first failing seed of each failing checker.
    /// Exit 0 every gate passes, 1 a gate failed (or --fail-fast stopped), 2 bad input, 130 Ctrl-C.
    Gate(GateArgs),
    /// Merge the shard folders of `gate --shard K/N` into one report and one verdict, the same
    /// as a single-machine gate over the same seeds (wall time: the longest shard plus the
    /// merge). Exit 0 every gate passes, 1 a gate failed, 2 shards that are not the parts of
    /// one sweep by this build (the message names the file and the problem).
    Merge(cli::shard::MergeArgs),
    /// Shrink a failing series: record its fault schedule, remove firings, call nodes, the
    /// rollback and the short ttl while the same checker still fails, and write the schedule.
    /// Exit 0 shrunk, 1 the seed does not fail (nothing to shrink), 2 bad input.
    Shrink {
        /// The scenario file.
        #[arg(long)]
        scenario: PathBuf,
        #[command(flatten)]
        set: cli::SetArgs,
        /// The failing seed.
        #[arg(long)]
        seed: u64,
        /// Shrink against this checker (default: the first violation's); `toolop-sim list checkers`.
        #[arg(long)]
        checker: Option<String>,
        /// Where the shrunk schedule goes (default <reports>/<scenario>/<seed>/schedule.toml);
        /// the recorded one goes next to it as <name>.original.toml.
        #[arg(long)]
        out: Option<PathBuf>,
        /// At most this many replays (at least 1).
        #[arg(long, default_value_t = shrink::DEFAULT_MAX_REPLAYS, value_parser = clap::value_parser!(u32).range(1..))]
        max_replays: u32,
        /// The folder the default --out goes under.
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
    },
    /// Run the gate against planted anti-patterns (mutations of the executor); every one must be
    /// caught. Exit 0 all caught and the unmutated executor clean, 1 otherwise, 2 bad input.
    Mutants {
        /// Scenario files the mutations are hunted on.
        #[arg(long, num_args = 1.., default_values_t = toolop_sim::campaign::mutants::DEFAULT_SET.map(String::from))]
        scenario: Vec<String>,
        /// Series budget per mutation (1 to 10,000,000).
        #[arg(long, default_value_t = 2_000, value_parser = series_parser())]
        series: u64,
        /// Worker threads (1 to 256).
        #[arg(long, default_value_t = 2, value_parser = jobs_parser)]
        jobs: usize,
        /// Hunt only these mutations (names as `mutants` prints them); every one by default.
        /// After changing a checker or a scenario, one plant's first catch in minutes.
        #[arg(long, num_args = 1.., value_parser = mutation_parser)]
        mutation: Vec<Mutation>,
        /// Series of the sweep that judges a plant that is slow, not wrong (no checker can
        /// catch it; a latency gate must), and of the unmutated sweep it is compared with.
        #[arg(long, default_value_t = toolop_sim::campaign::mutants::GATE_SERIES, value_parser = series_parser())]
        gate_series: u64,
    },
    /// Evaluate a grid of executor poll settings on the same seeds; recommend one for a latency
    /// target. Exit 0 a recommendation, 1 none meets the target, 2 bad input.
    Tune(toolop_sim::campaign::tune::TuneArgs),
    /// Measure the gate (series/s, events/s, simulated-to-wall ratio, peak memory) against a
    /// bare madsim runtime doing a comparable number of timer and message events. Exit 0, 2 bad
    /// input.
    Bench {
        /// Scenario files; series take turns over them.
        #[arg(long, num_args = 1.., required = true)]
        scenario: Vec<PathBuf>,
        /// Number of series (1 to 10,000,000).
        #[arg(long, default_value_t = 10_000, value_parser = series_parser())]
        series: u64,
        /// Worker threads (1 to 256).
        #[arg(long, default_value_t = 2, value_parser = jobs_parser)]
        jobs: usize,
    },
    /// Print, write or check the determinism list: the trace hash of seeds 0..N of every
    /// scenario (default: the release gate's set). Exit 0, 1 --check found a difference, 2 bad
    /// input.
    Hashes(cli::hashes::HashesArgs),
    /// List scenarios, faults, checkers or gates, one line of meaning each. Exit 0, 2 bad input.
    List {
        /// What to list: scenarios, faults, checkers or gates.
        #[arg(value_enum)]
        what: cli::list::What,
        /// The folder `list scenarios` reads.
        #[arg(long, default_value = "scenarios")]
        folder: PathBuf,
    },
    /// Print the scenario reference (docs/scenario-reference.md), generated from the table the
    /// loader validates with. Exit 0.
    Reference,
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `toolop-sim gate ... | head` closes stdout early. Rust ignores SIGPIPE, so the next print
/// panicked with a backtrace; like any Unix tool, the process now ends quietly by the signal.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: one signal's default disposition restored at start-up, before any thread runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    cli::set_color(cli.color);
    match cli.cmd {
        Cmd::Run {
            scenario,
            set,
            seed,
            reports,
        } => match cli::checked_sets(&set) {
            Ok(sets) => cli::single::run(&scenario, sets, seed, &reports),
            Err(code) => code,
        },
        Cmd::Replay {
            scenario,
            set,
            seed,
            schedule,
            reports,
            verbose,
            node,
            mutation,
            json,
        } => match cli::checked_sets(&set) {
            Ok(sets) => cli::single::replay_cmd(
                scenario,
                sets,
                seed,
                schedule,
                &reports,
                &View {
                    verbose,
                    node,
                    json,
                },
                mutation,
            ),
            Err(code) => code,
        },
        Cmd::Shrink {
            scenario,
            set,
            seed,
            checker,
            out,
            max_replays,
            reports,
        } => match cli::checked_sets(&set) {
            Ok(sets) => cli::single::shrink_cmd(
                &scenario,
                sets,
                seed,
                checker.as_deref(),
                out,
                max_replays,
                &reports,
            ),
            Err(code) => code,
        },
        Cmd::Gate(args) => cli::gate::gate(args),
        Cmd::Merge(args) => cli::shard::merge_cmd(args),
        Cmd::Bench {
            scenario,
            series,
            jobs,
        } => match cli::load_all(&scenario, &[]) {
            Ok(s) => {
                print!("{}", bench::run(&s, series, jobs));
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Cmd::Mutants {
            scenario,
            series,
            jobs,
            mutation,
            gate_series,
        } => mutants_cmd(
            &scenario.iter().map(PathBuf::from).collect::<Vec<_>>(),
            (series, gate_series),
            jobs,
            if mutation.is_empty() {
                Mutation::ALL.to_vec()
            } else {
                mutation
            },
        ),
        Cmd::Hashes(args) => cli::hashes::hashes_cmd(args),
        Cmd::Tune(args) => toolop_sim::campaign::tune::main_tune(args),
        Cmd::List { what, folder } => cli::list::list(what, &folder),
        Cmd::Reference => {
            print!("{}", toolop_sim::scenario::reference::render());
            ExitCode::SUCCESS
        }
    }
}

/// `series`: the budget of a plant a checker must catch, and the sweep of one the gate judges.
fn mutants_cmd(
    paths: &[PathBuf],
    (series, gate_series): (u64, u64),
    jobs: usize,
    plants: Vec<Mutation>,
) -> ExitCode {
    use toolop_sim::campaign::mutants;
    let scenarios = match cli::load_all(paths, &[]) {
        Ok(s) => s,
        Err(code) => return code,
    };
    println!(
        "mutants: {} mutations, up to {series} series each ({gate_series} for one the gate judges) over {}",
        plants.len(),
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let base = mutants::baseline(&scenarios, series, jobs);
    let (results, unmutated_gates) =
        mutants::hunt_all(&scenarios, &plants, (series, gate_series), jobs);
    print!("{}", mutants::table(&results, &base));
    if let Some(unmutated_gates) = &unmutated_gates {
        println!(
            "unmutated executor's sweep of {gate_series} series: {}",
            if unmutated_gates.is_empty() {
                "every gate passes".to_string()
            } else {
                format!(
                    "fails {} (not counted as catches)",
                    unmutated_gates
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    for r in &results {
        for (gate, measured) in &r.gates_failed {
            println!("  {}: {gate}: {measured}", r.mutation.name());
        }
    }
    for r in results.iter().filter(|r| r.caught()) {
        if let Some((_, seed, file)) = &r.first_failure {
            println!(
                "  {}: toolop-sim replay --scenario {file} --seed {seed} --mutation {}",
                r.mutation.name(),
                r.mutation.name()
            );
        }
    }
    let survivors = results.iter().filter(|r| !r.caught()).count();
    let clean = base.values().all(|&n| n == 0);
    if survivors == 0 && clean {
        println!(
            "{}: every mutation caught; the unmutated executor is clean",
            cli::paint(true, "PASS")
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "{}: {survivors} mutation(s) survived{}",
            cli::paint(false, "FAIL"),
            if clean {
                ""
            } else {
                "; the unmutated executor tripped checkers"
            }
        );
        ExitCode::from(cli::EXIT_FAIL)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every command and every flag says what it is for (issue 13: `mutants` showed bench's
    /// text, `bench` had none, `--seed`, `--series`, `--jobs` had no help).
    #[test]
    fn every_command_and_flag_has_help() {
        let cli = Cli::command();
        for cmd in cli.get_subcommands() {
            let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{} has no description", cmd.get_name());
            if !matches!(cmd.get_name(), "reference" | "list") {
                assert!(
                    about.contains("Exit"),
                    "{}: no exit codes in {about:?}",
                    cmd.get_name()
                );
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                assert!(
                    arg.get_help().is_some(),
                    "{} --{id} has no help",
                    cmd.get_name()
                );
            }
        }
        let mutants = cli
            .find_subcommand("mutants")
            .unwrap()
            .get_about()
            .unwrap()
            .to_string();
        assert!(!mutants.contains("bare madsim"), "{mutants}");
    }

    /// `mutants --mutation` hunts the plants named, and a name no plant has is refused with the
    /// list of names.
    #[test]
    fn mutants_hunts_only_the_plants_named() {
        let parse =
            |args: &[&str]| Cli::try_parse_from(["toolop-sim", "mutants"].iter().chain(args));
        let Ok(Cli {
            cmd: Cmd::Mutants { mutation, .. },
            ..
        }) = parse(&["--mutation", "poll_not_rearmed", "blind_cancel_write"])
        else {
            panic!("two known names are taken");
        };
        assert_eq!(
            mutation,
            vec![Mutation::PollNotRearmed, Mutation::BlindCancelWrite]
        );
        let Err(e) = parse(&["--mutation", "no_such_plant"]) else {
            panic!("an unknown name is taken");
        };
        let said = e.to_string();
        assert!(said.contains("no such mutation"), "{said}");
        assert!(
            said.contains("poll_not_rearmed"),
            "the known names are listed: {said}"
        );
    }
}
