//! The benchmark: the gate's throughput and memory, and a bare madsim runtime doing a
//! comparable number of timer and message events, so harness overhead is a ratio from one run.

use std::time::Instant;

use crate::campaign::sweep::{self, Loaded};

/// Peak resident memory of this process (Linux VmHWM), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A bare runtime per series on a fresh thread: `events` timer wake-ups, each also sending a
/// message through a channel to a second task, the harness's two staple event kinds.
#[cfg(madsim)]
fn bare_series(seed: u64, events: u64) {
    std::thread::spawn(move || {
        let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
        rt.block_on(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let sink = tokio::spawn(async move {
                let mut n = 0u64;
                while let Some(x) = rx.recv().await {
                    n = n.wrapping_add(x);
                }
                n
            });
            for i in 0..events / 2 {
                tokio::time::sleep(std::time::Duration::from_millis(1 + i % 1_000)).await;
                let _ = tx.send(i);
            }
            drop(tx);
            let _ = sink.await;
        })
    })
    .join()
    .expect("bare series thread");
}

#[cfg(not(madsim))]
fn bare_series(_seed: u64, _events: u64) {}

pub fn run(scenarios: &[Loaded], series: u64, jobs: usize) -> String {
    let started = Instant::now();
    let (rows, totals) = sweep::run(scenarios, 0, series, jobs, &|| {});
    let wall = started.elapsed().as_secs_f64();
    let peak = peak_rss_kib();
    let events_per_series = totals.events / series.max(1);
    // The same number of series and events on bare runtimes, on the same number of threads.
    let bare_started = Instant::now();
    let next = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= series {
                    return;
                }
                bare_series(i, events_per_series);
            });
        }
    });
    let bare_wall = bare_started.elapsed().as_secs_f64();
    let failing = rows.iter().filter(|r| !r.violations.is_empty()).count();
    let mut out = String::new();
    out.push_str(&format!(
        "bench: {series} series, {jobs} jobs ({failing} with violations)\n"
    ));
    out.push_str(&format!("  wall                 {wall:.3} s\n"));
    out.push_str(&format!(
        "  series/s             {:.0}\n",
        series as f64 / wall
    ));
    out.push_str(&format!(
        "  trace events         {} ({events_per_series} per series)\n",
        totals.events
    ));
    out.push_str(&format!(
        "  events/s             {:.0}\n",
        totals.events as f64 / wall
    ));
    out.push_str(&format!(
        "  simulated time       {:.0} s\n",
        totals.sim_ms as f64 / 1000.0
    ));
    out.push_str(&format!(
        "  simulated/wall       {:.0}x\n",
        totals.sim_ms as f64 / 1000.0 / wall
    ));
    out.push_str(&format!(
        "  peak memory          {} MiB\n",
        peak.map(|k| (k / 1024).to_string())
            .unwrap_or_else(|| "n/a".into())
    ));
    out.push_str(&format!(
        "  bare madsim          {bare_wall:.3} s for the same series and events\n"
    ));
    out.push_str(&format!(
        "  harness overhead     {:.2}x bare madsim\n",
        wall / bare_wall.max(1e-9)
    ));
    out
}
