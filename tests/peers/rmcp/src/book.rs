//! The server's own record, kept outside rmcp so a test can read it: task creations per
//! `io.toolop/idempotency-key`, synchronous runs, and each task's status as the `TaskManager`
//! reports it (terminal states and TTL evictions included). This is the ground truth the
//! interop tests hold the executor's receipts against ("no second task", "accepted terminal
//! state equals the server's").
//!
//! Every change is one event, written three ways: a JSON line appended to the events file
//! (`--events-file`, survives restarts and kills of the server: each incarnation appends), a
//! human line on stderr in the style of the transcript's probe, and the `stats` tool's snapshot.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::TaskStatus;
use rmcp::task_manager::TaskManager;
use serde::Serialize;
use serde_json::{json, Value};

/// How often the watcher asks the `TaskManager` for the status of unsettled tasks, so TTL
/// expiries and evictions reach the record even when no client polls.
pub const WATCH_INTERVAL_MS: u64 = 100;

/// One line of the events file. `seq` counts events of this process; `pid` tells incarnations
/// apart when a server is restarted onto the same file.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Ready {
        transport: String,
    },
    /// A task was created; `key` is the request's `_meta["io.toolop/idempotency-key"]`.
    Created {
        task_id: String,
        tool: String,
        key: Option<String>,
    },
    /// `--dedupe-by-key`: a `tools/call` with a known key got the existing task back.
    Deduplicated {
        task_id: String,
        tool: String,
        key: String,
    },
    /// The tool ran synchronously (the request did not declare the tasks extension).
    SyncRun {
        tool: String,
        key: Option<String>,
        outcome: String,
    },
    /// A status the `TaskManager` reported that differs from the last one recorded.
    Status {
        task_id: String,
        status: String,
        from: String,
    },
    /// The `TaskManager` no longer knows the task (its retention ran out).
    Evicted {
        task_id: String,
        last_status: String,
    },
    CancelRequested {
        task_id: String,
        outcome: String,
    },
    Update {
        task_id: String,
        keys: Vec<String>,
        outcome: String,
    },
}

impl Event {
    /// The stderr line (the transcript's probe wrote lines of this shape).
    fn line(&self) -> String {
        let key = |k: &Option<String>| {
            k.as_deref()
                .map(|k| format!(" key={k}"))
                .unwrap_or_default()
        };
        match self {
            Event::Ready { transport } => format!("ready {transport}"),
            Event::Created {
                task_id,
                tool,
                key: k,
            } => format!("created {task_id} {tool}{}", key(k)),
            Event::Deduplicated { task_id, tool, key } => {
                format!("deduplicated {task_id} {tool} key={key}")
            }
            Event::SyncRun {
                tool,
                key: k,
                outcome,
            } => format!("sync-done {tool} {outcome}{}", key(k)),
            Event::Status {
                task_id,
                status,
                from,
            } => format!("status {task_id} {status} from={from}"),
            Event::Evicted {
                task_id,
                last_status,
            } => format!("evicted {task_id} last={last_status}"),
            Event::CancelRequested { task_id, outcome } => format!("cancel {task_id} {outcome}"),
            Event::Update {
                task_id,
                keys,
                outcome,
            } => format!("update {task_id} keys={} {outcome}", keys.join(",")),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct TaskRecord {
    tool: String,
    key: Option<String>,
    /// Last status the `TaskManager` reported.
    status: String,
    evicted: bool,
}

#[derive(Debug, Default)]
struct BookInner {
    seq: u64,
    tasks_created_by_key: BTreeMap<String, u64>,
    tasks_created_without_key: u64,
    sync_runs_by_key: BTreeMap<String, u64>,
    sync_runs_without_key: u64,
    dedupe_hits_by_key: BTreeMap<String, u64>,
    /// For `--dedupe-by-key`: the task each key created.
    task_by_key: BTreeMap<String, String>,
    tasks: BTreeMap<String, TaskRecord>,
}

pub struct Book {
    inner: Mutex<BookInner>,
    events: Option<Mutex<File>>,
    pid: u32,
    started: Instant,
}

/// The wire spelling of a status (`input_required`, ...).
pub fn status_name(status: TaskStatus) -> String {
    match serde_json::to_value(status) {
        Ok(Value::String(s)) => s,
        _ => "unknown".to_string(),
    }
}

fn is_terminal_name(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

impl Book {
    pub fn new(events_file: Option<&Path>) -> std::io::Result<Book> {
        let events = match events_file {
            Some(path) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            )),
            None => None,
        };
        Ok(Book {
            inner: Mutex::default(),
            events,
            pid: std::process::id(),
            started: Instant::now(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BookInner> {
        self.inner.lock().expect("book lock poisoned")
    }

    /// Writes one event. Called with the book lock held, so lines come out in `seq` order.
    fn emit(&self, inner: &mut BookInner, event: Event) {
        inner.seq += 1;
        eprintln!("{}", event.line());
        let Some(file) = &self.events else { return };
        let mut line = json!({ "seq": inner.seq, "pid": self.pid, "t_ms": self.started.elapsed().as_millis() as u64 });
        if let (Value::Object(l), Ok(Value::Object(e))) = (&mut line, serde_json::to_value(&event))
        {
            l.extend(e);
        }
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        // One write per line on an O_APPEND file: a reader never sees two lines interleaved,
        // and a line without its newline is one still being written.
        let mut file = file.lock().expect("events file lock poisoned");
        if let Err(e) = file.write_all(&bytes) {
            eprintln!("events file write failed: {e}");
        }
    }

    pub fn ready(&self, transport: &str) {
        let mut inner = self.lock();
        self.emit(
            &mut inner,
            Event::Ready {
                transport: transport.to_string(),
            },
        );
    }

    /// Creates a task through `create` and records it, or, with `dedupe` and a key this server
    /// has already seen whose task is still retained, returns that task's id instead. The book
    /// lock is held across the lookup and the creation: two racing submissions with one key
    /// cannot both create.
    pub fn create_task(
        &self,
        tool: &str,
        key: Option<&str>,
        dedupe: bool,
        manager: &TaskManager,
        create: impl FnOnce() -> rmcp::model::Task,
    ) -> rmcp::model::Task {
        let mut inner = self.lock();
        if let (true, Some(key)) = (dedupe, key) {
            if let Some(existing) = inner.task_by_key.get(key).cloned() {
                if let Ok(detailed) = manager.get_task(&existing) {
                    *inner.dedupe_hits_by_key.entry(key.to_string()).or_default() += 1;
                    let event = Event::Deduplicated {
                        task_id: existing,
                        tool: tool.to_string(),
                        key: key.to_string(),
                    };
                    self.emit(&mut inner, event);
                    return detailed.task;
                }
            }
        }
        let task = create();
        match key {
            Some(k) => {
                *inner.tasks_created_by_key.entry(k.to_string()).or_default() += 1;
                inner
                    .task_by_key
                    .insert(k.to_string(), task.task_id.clone());
            }
            None => inner.tasks_created_without_key += 1,
        }
        let record = TaskRecord {
            tool: tool.to_string(),
            key: key.map(str::to_string),
            status: status_name(task.status),
            evicted: false,
        };
        inner.tasks.insert(task.task_id.clone(), record);
        let event = Event::Created {
            task_id: task.task_id.clone(),
            tool: tool.to_string(),
            key: key.map(str::to_string),
        };
        self.emit(&mut inner, event);
        task
    }

    pub fn sync_run(&self, tool: &str, key: Option<&str>, outcome: &str) {
        let mut inner = self.lock();
        match key {
            Some(k) => *inner.sync_runs_by_key.entry(k.to_string()).or_default() += 1,
            None => inner.sync_runs_without_key += 1,
        }
        let event = Event::SyncRun {
            tool: tool.to_string(),
            key: key.map(str::to_string),
            outcome: outcome.to_string(),
        };
        self.emit(&mut inner, event);
    }

    pub fn cancel_requested(&self, task_id: &str, outcome: &str) {
        let mut inner = self.lock();
        let event = Event::CancelRequested {
            task_id: task_id.to_string(),
            outcome: outcome.to_string(),
        };
        self.emit(&mut inner, event);
    }

    pub fn update(&self, task_id: &str, keys: Vec<String>, outcome: &str) {
        let mut inner = self.lock();
        self.emit(
            &mut inner,
            Event::Update {
                task_id: task_id.to_string(),
                keys,
                outcome: outcome.to_string(),
            },
        );
    }

    /// Reads the `TaskManager`'s view of `task_id` into the record (a status change or an
    /// eviction becomes an event). Ids this server never created are ignored.
    pub fn observe(&self, manager: &TaskManager, task_id: &str) {
        let mut inner = self.lock();
        self.observe_locked(&mut inner, manager, task_id);
    }

    fn observe_locked(&self, inner: &mut BookInner, manager: &TaskManager, task_id: &str) {
        let Some(record) = inner.tasks.get(task_id) else {
            return;
        };
        if record.evicted {
            return;
        }
        let last = record.status.clone();
        let event = match manager.get_task(task_id) {
            Ok(detailed) => {
                let now = status_name(detailed.status());
                if now == last {
                    return;
                }
                inner.tasks.get_mut(task_id).expect("checked above").status = now.clone();
                Event::Status {
                    task_id: task_id.to_string(),
                    status: now,
                    from: last,
                }
            }
            Err(_) => {
                inner.tasks.get_mut(task_id).expect("checked above").evicted = true;
                Event::Evicted {
                    task_id: task_id.to_string(),
                    last_status: last,
                }
            }
        };
        self.emit(inner, event);
    }

    /// Observes every task that can still change: not evicted, and not terminal unless it can
    /// still be evicted (`ttl` set).
    pub fn observe_all(&self, manager: &TaskManager, ttl_set: bool) {
        let mut inner = self.lock();
        let ids: Vec<String> = inner
            .tasks
            .iter()
            .filter(|(_, r)| !r.evicted && (ttl_set || !is_terminal_name(&r.status)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.observe_locked(&mut inner, manager, &id);
        }
    }

    /// The `stats` tool's answer.
    pub fn snapshot(&self) -> Value {
        let inner = self.lock();
        json!({
            "pid": self.pid,
            "events": inner.seq,
            "tasksCreatedByKey": inner.tasks_created_by_key,
            "tasksCreatedWithoutKey": inner.tasks_created_without_key,
            "syncRunsByKey": inner.sync_runs_by_key,
            "syncRunsWithoutKey": inner.sync_runs_without_key,
            "dedupeHitsByKey": inner.dedupe_hits_by_key,
            "tasks": inner.tasks,
        })
    }
}

/// Runs [`Book::observe_all`] every [`WATCH_INTERVAL_MS`] for the life of the process.
pub async fn watch(book: std::sync::Arc<Book>, manager: TaskManager, ttl_set: bool) {
    let mut tick = tokio::time::interval(Duration::from_millis(WATCH_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        book.observe_all(&manager, ttl_set);
    }
}
