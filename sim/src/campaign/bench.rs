//! The benchmark: the gate's throughput and memory against two baselines run in the same
//! process on the same number of threads and series:
//!
//! - **bare madsim**: a runtime per series doing as many timer and message events as the
//!   series' traces had: the physical limit of this design (one runtime, one thread per series).
//! - **floor**: bare madsim that also encodes and decodes, with serde_json, as many messages of
//!   the same sizes as crossed the simulated network: the work any harness that runs the real
//!   adapters must do (each frame is encoded by one side and decoded by the other).
//!
//! Every phase is measured in wall time and in this process's CPU time (user + system), since
//! on a shared machine the wall figures say more about the neighbours than about the harness.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::campaign::sweep::{self, Loaded};

/// Peak resident memory of this process (Linux VmHWM), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User + system CPU time of this process so far, in seconds (Linux `/proc/self/stat`, in
/// clock ticks of 1/100 s, the value of `CLK_TCK` on Linux).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) close with ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// A JSON-RPC reply of about `bytes` bytes (never less than its envelope): text content blocks,
/// so decoding meets many small fields as the real replies have, not one long string.
fn message(id: u64, bytes: usize) -> Vec<u8> {
    const BLOCK: usize = 48;
    const ENVELOPE: usize = 64;
    let blocks = bytes.saturating_sub(ENVELOPE) / (BLOCK + 26);
    let content: Vec<serde_json::Value> = (0..blocks)
        .map(|i| serde_json::json!({"type": "text", "text": format!("{:0>BLOCK$}", i)}))
        .collect();
    let v = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": content, "isError": false},
    });
    serde_json::to_vec(&v).expect("a JSON value encodes")
}

/// One baseline series on a fresh thread and runtime: `ticks` timer wake-ups, each sending a
/// message through a channel to a second task; with `frames`, also one JSON message of each
/// size, encoded by the sender and decoded by the receiver, spread over the ticks.
#[cfg(madsim)]
fn baseline_series(seed: u64, ticks: u64, frames: Vec<usize>) {
    std::thread::spawn(move || {
        let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
        rt.block_on(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
            let sink = tokio::spawn(async move {
                let mut n = 0usize;
                while let Some(b) = rx.recv().await {
                    n = n.wrapping_add(if b.is_empty() {
                        1
                    } else {
                        let v: serde_json::Value =
                            serde_json::from_slice(&b).expect("the sender's own JSON");
                        v.as_object().map_or(0, |o| o.len())
                    });
                }
                n
            });
            let per_tick = frames.len().div_ceil(ticks.max(1) as usize);
            let mut frames = frames.into_iter();
            for i in 0..ticks {
                tokio::time::sleep(std::time::Duration::from_millis(1 + i % 1_000)).await;
                let _ = tx.send(Vec::new());
                for bytes in frames.by_ref().take(per_tick) {
                    let _ = tx.send(message(i, bytes));
                }
            }
            for bytes in frames {
                let _ = tx.send(message(ticks, bytes));
            }
            drop(tx);
            let _ = sink.await;
        })
    })
    .join()
    .expect("baseline series thread");
}

#[cfg(not(madsim))]
fn baseline_series(_seed: u64, _ticks: u64, _frames: Vec<usize>) {}

/// Runs `series` baseline series on `jobs` threads; series `i` gets every `series`-th frame of
/// `frames` from the `i`-th. Returns (wall seconds, CPU seconds).
fn baseline(series: u64, jobs: usize, ticks: u64, frames: &[usize]) -> (f64, f64) {
    let cpu = cpu_seconds();
    let started = Instant::now();
    let next = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= series {
                    return;
                }
                let mine = frames
                    .iter()
                    .skip(i as usize)
                    .step_by(series as usize)
                    .copied()
                    .collect();
                baseline_series(i, ticks, mine);
            });
        }
    });
    let wall = started.elapsed().as_secs_f64();
    (wall, cpu_since(cpu))
}

fn cpu_since(before: Option<f64>) -> f64 {
    match (before, cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    }
}

pub fn run(scenarios: &[Loaded], series: u64, jobs: usize) -> String {
    let cpu = cpu_seconds();
    let started = Instant::now();
    let (rows, totals) = sweep::run(scenarios, 0, series, jobs, &|| {});
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_since(cpu);
    let peak = peak_rss_kib();
    let events_per_series = totals.events / series.max(1);
    let frames: Vec<usize> = totals
        .frame_sizes
        .iter()
        .flat_map(|(&bytes, &n)| std::iter::repeat_n(bytes, n as usize))
        .collect();
    let frame_bytes: usize = frames.iter().sum();
    // The same number of series and events on bare runtimes, on the same number of threads.
    let (bare_wall, bare_cpu) = baseline(series, jobs, events_per_series / 2, &[]);
    let (floor_wall, floor_cpu) = baseline(series, jobs, events_per_series / 2, &frames);
    let failing = rows.iter().filter(|r| !r.violations.is_empty()).count();
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "bench: {series} series, {jobs} jobs ({failing} with violations)"
    ));
    line(format!("  wall                 {wall:.3} s"));
    line(format!(
        "  cpu (user+sys)       {cpu:.2} s ({:.0} series per cpu-second)",
        series as f64 / cpu
    ));
    line(format!(
        "  series/s             {:.0}",
        series as f64 / wall
    ));
    line(format!(
        "  trace events         {} ({events_per_series} per series)",
        totals.events
    ));
    line(format!(
        "  events/s             {:.0}",
        totals.events as f64 / wall
    ));
    line(format!(
        "  frames               {} ({} per series, {:.0} bytes each on average)",
        frames.len(),
        frames.len() as u64 / series.max(1),
        frame_bytes as f64 / frames.len().max(1) as f64
    ));
    line(format!(
        "  simulated time       {:.0} s",
        totals.sim_ms as f64 / 1000.0
    ));
    line(format!(
        "  simulated/wall       {:.0}x",
        totals.sim_ms as f64 / 1000.0 / wall
    ));
    line(format!(
        "  peak memory          {} MiB",
        peak.map(|k| (k / 1024).to_string())
            .unwrap_or_else(|| "n/a".into())
    ));
    line(format!(
        "  bare madsim          {bare_wall:.3} s wall, {bare_cpu:.2} s cpu for the same series and events"
    ));
    line(format!(
        "  floor                {floor_wall:.3} s wall, {floor_cpu:.2} s cpu: bare madsim + serde_json encode and decode of the same frames"
    ));
    line(format!(
        "  overhead vs floor    {:.2}x wall, {:.2}x cpu",
        wall / floor_wall.max(1e-9),
        cpu / floor_cpu.max(1e-9)
    ));
    line(format!(
        "  overhead vs bare     {:.2}x wall, {:.2}x cpu",
        wall / bare_wall.max(1e-9),
        cpu / bare_cpu.max(1e-9)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor's messages are the sizes asked for (within one content block) and decode.
    #[test]
    fn floor_messages_have_the_frame_sizes() {
        for bytes in [10usize, 200, 1_000, 20_000] {
            let m = message(7, bytes);
            let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
            assert_eq!(v["id"], 7);
            if bytes > 100 {
                assert!(m.len().abs_diff(bytes) <= 80, "{bytes}: {}", m.len());
            }
        }
        assert!(cpu_seconds().is_some_and(|c| c >= 0.0));
    }
}
