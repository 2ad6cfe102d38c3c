//! The kill -9 driver (issue 10, item 6): `toolop` processes on one SQLite ledger file against
//! two real TypeScript SDK peers behind real sockets (one with the `io.toolop/idempotency`
//! extension, so a resumed submission can be looked up by key; one without, so it cannot and
//! must go to manual reconciliation), killed at every `CrashPoint` (the process aborts itself
//! there through the fault-injection hook `TOOLOP_FAULT_INJECT_CRASH`) and with SIGKILL at
//! seeded random instants, restarted with `toolop resume` or the caller's `toolop call --batch`
//! again, while an outbox consumer process (itself killed now and then) reads the outbox. The
//! end is judged from the world by `world.rs`.

pub mod consumer;
pub mod world;

use std::fs::File;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common::{toolop, Peer, Sdk};

pub const SEED_ENV: &str = "TOOLOP_CRASH_SEED";
pub const KILLS_ENV: &str = "TOOLOP_CRASH_KILLS";
pub const OVERLAP_ENV: &str = "TOOLOP_CRASH_OVERLAP";
/// The CI run: at least this many executor kills.
pub const KILLS_DEFAULT: u64 = 200;
const HOOK_ENV: &str = "TOOLOP_FAULT_INJECT_CRASH";
/// Attempts per round before the unarmed call that must settle it.
const ATTEMPTS_MAX: u32 = 8;
/// No process of the run may take longer than this (a hang is a finding).
const PROCESS_LIMIT: Duration = Duration::from_secs(90);
const SIGKILL: i32 = 9;
const SIGABRT: i32 = 6;

#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub seed: u64,
    pub kills: u64,
    /// Overlap some attempts with a second executor on the same epoch (default on).
    pub overlap: bool,
}

impl Settings {
    /// From the environment; a fresh seed (printed) unless one is given.
    pub fn from_env() -> Settings {
        let num = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name}={v}: expected an unsigned integer"))
            })
        };
        let seed = num(SEED_ENV).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                % 1_000_000_007
        });
        Settings {
            seed,
            kills: num(KILLS_ENV).unwrap_or(KILLS_DEFAULT),
            overlap: num(OVERLAP_ENV).unwrap_or(1) == 1,
        }
    }

    pub fn repro(&self) -> String {
        format!(
            "{SEED_ENV}={} {KILLS_ENV}={} {OVERLAP_ENV}={} cargo test -p toolop --test crash_kill9",
            self.seed,
            self.kills,
            u8::from(self.overlap)
        )
    }
}

/// What the run did, for the report line and the floor checks.
#[derive(Debug, Default)]
pub struct Tally {
    pub kills_commit_before_send: u64,
    pub kills_reply_before_commit: u64,
    pub kills_random: u64,
    pub consumer_kills: u64,
    pub armed_but_not_hit: u64,
    pub random_too_late: u64,
    pub attempts: u64,
    pub rounds: u64,
    pub cancels: u64,
    /// Attempts a second executor (`toolop resume`) overlapped.
    pub overlaps: u64,
}

impl Tally {
    pub fn kills(&self) -> u64 {
        self.kills_commit_before_send + self.kills_reply_before_commit + self.kills_random
    }
}

/// One call node the driver asked for, and what its tool does on the server.
#[derive(Clone, Debug)]
pub struct Node {
    pub id: String,
    pub tool: &'static str,
    pub args: serde_json::Value,
    /// Index into the peers: 0 deduplicates and looks up by key (a crash never needs an
    /// operator there), 1 does not (a crash in `SUBMITTING` must go to reconciliation).
    pub peer: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kill {
    Point(&'static str, u64),
    /// SIGKILL this many ms after the start.
    At(u64),
    Never,
}

enum Ended {
    Exited(i32),
    Signaled(i32),
}

/// A `toolop` process of an attempt.
struct Proc {
    child: Child,
    args: String,
    kill: Kill,
    killed: bool,
    started: Instant,
    status: Option<std::process::ExitStatus>,
}

pub struct Driver {
    pub settings: Settings,
    pub dir: PathBuf,
    pub ledger: PathBuf,
    pub peers: Vec<Peer>,
    pub nodes: Vec<Node>,
    pub tally: Tally,
    rng: ChaCha8Rng,
    log: File,
    consumer: Option<Child>,
}

impl Driver {
    pub fn new(settings: Settings) -> Driver {
        let dir = std::env::temp_dir().join(format!(
            "toolop-crash-kill9-{}-{}",
            settings.seed,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = File::create(dir.join("driver.log")).expect("driver log");
        let peers = vec![
            Peer::start(Sdk::Ts, &["--idempotency"]),
            Peer::start(Sdk::Ts, &[]),
        ];
        Driver {
            settings,
            ledger: dir.join("toolop.db"),
            dir,
            peers,
            nodes: Vec::new(),
            tally: Tally::default(),
            rng: ChaCha8Rng::seed_from_u64(settings.seed),
            log,
            consumer: None,
        }
    }

    /// A failure: what went wrong, the seed, the command that reproduces it, and the kept files.
    pub fn fail(&self, what: &str) -> ! {
        panic!(
            "crash_kill9 FAILED (seed {}): {what}\n  reproduce: {}\n  ledger, batches and the log of every process: {}",
            self.settings.seed,
            self.settings.repro(),
            self.dir.display()
        );
    }

    fn note(&mut self, line: &str) {
        let _ = writeln!(self.log, "{line}");
    }

    /// Rounds of fresh call nodes until the run has killed enough executors.
    pub fn run(&mut self) {
        self.start_consumer();
        let rounds_max = self.settings.kills.saturating_mul(2).max(20);
        while self.tally.kills() < self.settings.kills {
            if self.tally.rounds >= rounds_max {
                self.fail(&format!(
                    "only {} kills after {} rounds: the crash points stopped firing",
                    self.tally.kills(),
                    self.tally.rounds
                ));
            }
            let before = self.tally.kills();
            self.round();
            // A line per 500 kills, for the long runs.
            if self.tally.kills() / 500 > before / 500 {
                println!(
                    "crash_kill9: {} kills, {} rounds",
                    self.tally.kills(),
                    self.tally.rounds
                );
            }
        }
        self.stop_consumer();
        // The last reader: whatever the killed consumers left ready is consumed now.
        let out = consumer::command(&self.ledger, true)
            .output()
            .expect("start the draining consumer");
        if !out.status.success() {
            self.fail(&format!(
                "the draining consumer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }

    fn plan_nodes(&mut self) -> Vec<Node> {
        let round = self.tally.rounds;
        let peer = (round % 2) as usize;
        let count = self.rng.gen_range(3..=6);
        let mut nodes = Vec::new();
        for i in 0..count {
            let ms: u64 = self.rng.gen_range(20..250);
            let (tool, args) = match self.rng.gen_range(0..4) {
                0 | 1 => (
                    "build_report",
                    serde_json::json!({ "month": format!("r{round}n{i}"), "ms": ms }),
                ),
                2 => ("failing_job", serde_json::json!({ "ms": ms })),
                _ => ("tool_error", serde_json::json!({ "ms": ms })),
            };
            nodes.push(Node {
                id: format!("r{round}-n{i}"),
                tool,
                args,
                peer,
            });
        }
        // Half the rounds have a long job, the one `toolop cancel` may aim at.
        if self.rng.gen_bool(0.5) {
            nodes.push(Node {
                id: format!("r{round}-slow"),
                tool: "slow_job",
                args: serde_json::json!({ "ms": self.rng.gen_range(300..1200u64) }),
                peer,
            });
        }
        nodes
    }

    fn round(&mut self) {
        let nodes = self.plan_nodes();
        let round = self.tally.rounds;
        self.tally.rounds += 1;
        let batch = self.dir.join(format!("round-{round}.jsonl"));
        let lines: String = nodes
            .iter()
            .map(|n| {
                format!(
                    "{}\n",
                    serde_json::json!({ "node": n.id, "tool": n.tool, "args": n.args })
                )
            })
            .collect();
        std::fs::write(&batch, lines).expect("batch file");
        let url = self.peers[nodes[0].peer].url();
        let call: Vec<String> = [
            "call",
            "--server",
            &url,
            "--batch",
            batch.to_str().expect("utf-8 path"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let slow = nodes
            .iter()
            .find(|n| n.tool == "slow_job")
            .map(|n| n.id.clone());
        let n = nodes.len() as u64;
        self.nodes.extend(nodes);
        for attempt in 0..ATTEMPTS_MAX {
            let resume = attempt > 0 && self.rng.gen_bool(0.5);
            let args = if resume {
                vec!["resume".to_string()]
            } else {
                call.clone()
            };
            let kill = match self.rng.gen_range(0..3) {
                // Each node passes both points a few times (submit, polls, the result fetch):
                // a hit within the first n + 1 is nearly always reached, early or late.
                0 => Kill::Point("after_commit_before_send", self.rng.gen_range(1..=n + 1)),
                1 => Kill::Point("after_reply_before_commit", self.rng.gen_range(1..=n + 1)),
                // Most processes finish within half a second.
                _ => Kill::At(self.rng.gen_range(0..450)),
            };
            let cancel = slow
                .clone()
                .filter(|_| self.rng.gen_bool(0.3))
                .map(|node| (self.rng.gen_range(0..500u64), node));
            if self.rng.gen_bool(0.3) {
                self.kill_consumer();
                self.start_consumer();
            }
            // Now and then a second executor on the same ledger and epoch overlaps this one
            // (unless TOOLOP_CRASH_OVERLAP=0; it found the liveness bug `runner/stall.rs`
            // fixes). Drawn either way, so a seed's schedule does not depend on it.
            let overlapping = self.rng.gen_bool(0.15);
            let overlap = (overlapping && self.settings.overlap).then(|| {
                let second = if self.rng.gen_bool(0.5) {
                    Kill::At(self.rng.gen_range(0..450))
                } else {
                    Kill::Never
                };
                (self.rng.gen_range(0..300u64), second)
            });
            let ended = self.attempt(&args, kill, cancel, overlap);
            match ended {
                Ended::Signaled(_) => {}
                Ended::Exited(0 | 1 | 3) if !resume => return,
                Ended::Exited(0 | 1 | 3 | 4) => {}
                Ended::Exited(code) => self.fail(&format!(
                    "`toolop {}` exited {code} (round {round}, attempt {attempt})",
                    args.join(" ")
                )),
            }
        }
        // The caller's last try, unarmed: every node of the round must settle now.
        match self.attempt(&call, Kill::Never, None, None) {
            Ended::Exited(0 | 1 | 3) => {}
            Ended::Exited(code) => self.fail(&format!(
                "round {round}: the unarmed `toolop call --batch` exited {code}: the round did not settle"
            )),
            Ended::Signaled(sig) => self.fail(&format!(
                "round {round}: the unarmed `toolop call` died of signal {sig}"
            )),
        }
    }

    /// One `toolop` process: armed or timed to die, maybe with a `toolop cancel` from another
    /// process while it runs, maybe overlapped by a second executor (`toolop resume`, on the
    /// same epoch, itself SIGKILLed or not), as a restarted executor that overlaps its
    /// predecessor would. Counts the kills. What the first process ended with is returned.
    fn attempt(
        &mut self,
        args: &[String],
        kill: Kill,
        cancel: Option<(u64, String)>,
        overlap: Option<(u64, Kill)>,
    ) -> Ended {
        self.tally.attempts += 1;
        let started = Instant::now();
        let mut procs = vec![self.spawn(args, kill)];
        let mut overlap = overlap;
        let mut cancel = cancel;
        while procs.iter().any(|p| p.status.is_none()) || overlap.is_some() {
            let ms = started.elapsed().as_millis() as u64;
            if started.elapsed() > PROCESS_LIMIT {
                let hung: Vec<String> = procs
                    .iter()
                    .filter(|p| p.status.is_none())
                    .map(|p| format!("`toolop {}`", p.args))
                    .collect();
                for p in &mut procs {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                }
                self.fail(&format!(
                    "{} ran over {} s",
                    hung.join(" and "),
                    PROCESS_LIMIT.as_secs()
                ));
            }
            if let Some((_, node)) = cancel.clone().filter(|(at, _)| ms >= *at) {
                cancel = None;
                self.cancel(&node);
            }
            if let Some((_, second)) = overlap.filter(|(at, _)| ms >= *at) {
                overlap = None;
                self.tally.overlaps += 1;
                procs.push(self.spawn(&["resume".to_string()], second));
            }
            for p in procs.iter_mut().filter(|p| p.status.is_none()) {
                p.status = p.child.try_wait().expect("wait for toolop");
                if p.status.is_none() && !p.killed {
                    if let Kill::At(at) = p.kill {
                        if p.started.elapsed().as_millis() as u64 >= at {
                            // SIGKILL: nothing of the process runs after this.
                            let _ = p.child.kill();
                            p.killed = true;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut ended = procs.into_iter().map(|p| self.classify(p));
        let first = ended.next().expect("the attempt's process");
        for (i, second) in ended.enumerate() {
            if let Ended::Exited(code @ (2 | 5..)) = second {
                self.fail(&format!(
                    "the overlapping `toolop resume` ({i}) exited {code}"
                ));
            }
        }
        first
    }

    fn spawn(&mut self, args: &[String], kill: Kill) -> Proc {
        let log = self.log.try_clone().expect("log handle");
        self.note(&format!("--- toolop {} ({kill:?})", args.join(" ")));
        let mut cmd = toolop();
        cmd.arg("--ledger")
            .arg(&self.ledger)
            .args(args)
            // A 2 s beat timeout: a killed process's submissions are taken up sooner (the
            // default 5 s made the run half as long again); the hold is exercised all the same.
            .args(["--poll-interval-ms", "50", "--max-qps", "500"])
            .args(["--beat-timeout-ms", "2000"])
            .stdout(Stdio::null())
            .stderr(log);
        if let Kill::Point(point, hit) = kill {
            cmd.env(HOOK_ENV, format!("{point}:{hit}"));
        }
        Proc {
            child: cmd.spawn().expect("start toolop"),
            args: args.join(" "),
            kill,
            killed: false,
            started: Instant::now(),
            status: None,
        }
    }

    /// How a process ended, counted; a death the driver did not cause fails the run.
    fn classify(&mut self, p: Proc) -> Ended {
        let status = p.status.expect("a finished process");
        let ended = match status.signal() {
            Some(sig) => Ended::Signaled(sig),
            None => Ended::Exited(status.code().unwrap_or(-1)),
        };
        match (&ended, p.kill) {
            (Ended::Signaled(SIGABRT), Kill::Point("after_commit_before_send", _)) => {
                self.tally.kills_commit_before_send += 1
            }
            (Ended::Signaled(SIGABRT), Kill::Point(_, _)) => {
                self.tally.kills_reply_before_commit += 1
            }
            (Ended::Signaled(SIGKILL), Kill::At(_)) if p.killed => self.tally.kills_random += 1,
            (Ended::Exited(_), Kill::Point(_, _)) => self.tally.armed_but_not_hit += 1,
            (Ended::Exited(_), Kill::At(_)) => self.tally.random_too_late += 1,
            (Ended::Exited(_), Kill::Never) => {}
            (Ended::Signaled(sig), kill) => self.fail(&format!(
                "`toolop {}` died of signal {sig}, which the driver did not send or arm ({kill:?})",
                p.args
            )),
        }
        let code = match &ended {
            Ended::Exited(c) => format!("exit {c}"),
            Ended::Signaled(s) => format!("signal {s}"),
        };
        self.note(&format!(
            "--- toolop {}: {code} after {} ms",
            p.args,
            p.started.elapsed().as_millis()
        ));
        ended
    }

    /// `toolop cancel NODE` from a separate process, as an operator would.
    fn cancel(&mut self, node: &str) {
        let out = toolop()
            .arg("--ledger")
            .arg(&self.ledger)
            .args(["cancel", node])
            .output()
            .expect("run toolop cancel");
        self.tally.cancels += 1;
        match out.status.code() {
            Some(0) => {}
            // The node has no record yet (its executor was killed before writing it).
            Some(2) if String::from_utf8_lossy(&out.stderr).contains("no call node") => {}
            _ => self.fail(&format!(
                "`toolop cancel {node}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }

    fn start_consumer(&mut self) {
        let log = self.log.try_clone().expect("log handle");
        let child = consumer::command(&self.ledger, false)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the consumer");
        self.consumer = Some(child);
    }

    /// SIGKILL the consumer at whatever it is doing (inside a transaction, sometimes).
    fn kill_consumer(&mut self) {
        let Some(mut child) = self.consumer.take() else {
            return;
        };
        if let Some(status) = child.try_wait().expect("wait for the consumer") {
            self.fail(&format!("the consumer stopped by itself: {status}"));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.tally.consumer_kills += 1;
    }

    fn stop_consumer(&mut self) {
        self.kill_consumer();
    }

    pub fn ledger(&self) -> &Path {
        &self.ledger
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(mut c) = self.consumer.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
