//! The fake server side of a series: one protocol-neutral [`service::TaskService`] (tasks, work,
//! input rounds, ttl, dedupe, cancel semantics, ground truth) behind one [`codec::Codec`] per
//! protocol. [`FakeServer`] puts the two together; the series' network calls its halves
//! separately (decode, serve, encode) so that its fault rules judge neutral exchanges.
//!
//! Adding a protocol: a codec module here (decoder, encoder, profile policy) and one arm in
//! [`server_for`].

use rand_chacha::ChaCha8Rng;
use toolop::transport::{InFrame, OutFrame};

use crate::scenario::{Protocol, ServerProfile};

pub mod codec;
pub mod jsonrpc;
pub mod script;
pub mod service;
pub mod truth;

pub mod aip151;
pub mod mcp_2025_11_25;
pub mod mcp_tasks_ext;
#[cfg(test)]
pub(crate) mod testdrv;

use codec::{Ask, CallId, Codec, CodecCaps, Decoded, FakeTool, Push, Request, Response, Shape};
use service::{CancelFaults, IdStyle, Out, Reply, ServiceConfig, TaskService};
use truth::GroundTruth;

/// A codec and the task service behind it.
pub struct FakeServer {
    codec: Box<dyn Codec>,
    service: TaskService,
}

impl FakeServer {
    pub fn new(
        codec: Box<dyn Codec>,
        ids: IdStyle,
        max_ttl_ms: Option<u64>,
        preempt_rate: f64,
        rng: ChaCha8Rng,
    ) -> FakeServer {
        let cfg = ServiceConfig {
            policy: codec.policy(),
            ids,
            max_ttl_ms,
            preempt_rate,
        };
        FakeServer {
            codec,
            service: TaskService::new(cfg, rng),
        }
    }

    pub fn caps(&self) -> CodecCaps {
        self.codec.caps()
    }

    /// Whether this server shows a task only to the session that created it.
    pub fn tasks_bound_to_session(&self) -> bool {
        self.codec.policy().tasks_bound_to_session
    }

    /// Read a client frame (on the wire, before any fault): what it asks and whether a reply is
    /// due.
    pub fn decode(&mut self, frame: OutFrame) -> Decoded {
        let decoded = self.codec.decode(frame);
        for call in self.codec.take_forbidden_task_calls() {
            self.service.note_forbidden_task_call(call);
        }
        decoded
    }

    /// A task-augmented submission as a server redeployed without task support for its tool
    /// answers it (`Codec::without_task_support`).
    pub fn without_task_support(&mut self, d: Decoded) -> Decoded {
        self.codec.without_task_support(d)
    }

    /// Serve a decoded request at `now_ms`: the replies due at once. A request the codec answers
    /// itself gets its reply here too. `frame`: the network's number for the frame that carried
    /// it (the truth names the frame that carried each answer to an input round).
    pub fn serve(
        &mut self,
        now_ms: u64,
        decoded: Decoded,
        faults: CancelFaults,
        frame: Option<u64>,
    ) -> Vec<Reply> {
        match decoded.ask {
            Ask::Service(request) => {
                self.service
                    .handle(now_ms, decoded.call, request, faults, frame, &*self.codec)
            }
            Ask::Codec => decoded
                .call
                .map(|call| Reply {
                    call,
                    response: Response::Ack,
                })
                .into_iter()
                .collect(),
            Ask::Nothing => Vec::new(),
        }
    }

    /// The server process restarts at `now_ms`, once what was due by then was advanced and
    /// sent: see [`TaskService::restart`]. Returns the ids of the tasks lost.
    pub fn restart(&mut self, now_ms: u64) -> Vec<String> {
        self.codec.restart();
        self.service.restart(now_ms)
    }

    pub fn advance(&mut self, now_ms: u64) -> Vec<Out> {
        self.service.advance(now_ms, &*self.codec)
    }

    pub fn next_event_at_ms(&self) -> Option<u64> {
        self.service.next_event_at_ms()
    }

    pub fn encode_reply(&mut self, call: CallId, response: &Response, shape: &Shape) -> InFrame {
        self.codec.encode_reply(call, response, shape)
    }

    pub fn encode_push(&mut self, push: &Push) -> Option<InFrame> {
        self.codec.encode_push(push)
    }

    /// What the codec's reply to `exchange` shows the executor ([`Codec::shows`]).
    pub fn shows(&self, exchange: codec::ExchangeKind, response: &Response) -> crate::trace::Shows {
        self.codec.shows(exchange, response)
    }

    pub fn truth(&self) -> &GroundTruth {
        self.service.truth()
    }

    pub fn service(&self) -> &TaskService {
        &self.service
    }

    /// Status-after-cancel: see [`TaskService::flip_after_cancel`].
    pub fn flip_after_cancel(&mut self, task_id: &str, now_ms: u64) -> Option<truth::TaskStatus> {
        self.service
            .flip_after_cancel(task_id, now_ms, &*self.codec)
    }

    pub fn take_finished_after_cancel(&mut self) -> Vec<String> {
        self.service.take_finished_after_cancel()
    }

    pub fn take_expired_running(&mut self) -> Vec<String> {
        self.service.take_expired_running()
    }

    /// The call node a request is about, as this server knows it (from the script a task was
    /// submitted with), and the submission key it names.
    pub fn node_of(&self, request: &Request) -> (Option<String>, Option<String>) {
        let s = &self.service;
        let by_task = |t: &str| s.node_of_task(t).map(str::to_string);
        match request {
            Request::Submit(sub) => (
                Some(sub.script.call_node.clone()).filter(|n| !n.is_empty()),
                sub.key.clone(),
            ),
            Request::Poll { task }
            | Request::Fetch { task }
            | Request::Cancel { task }
            | Request::Delete { task } => (by_task(task), None),
            Request::Answer { task, items } => {
                let named = task.as_deref().or_else(|| {
                    items.iter().find_map(|i| {
                        i.prefer_task
                            .as_deref()
                            .or(i.candidates.first().map(|c| c.0.as_str()))
                    })
                });
                (named.and_then(by_task), None)
            }
            Request::Lookup { key } => (s.node_of_key(key).map(str::to_string), Some(key.clone())),
            Request::List => (None, None),
        }
    }

    /// Frame in, direct replies out (test driver): decode, serve, encode. What the request
    /// causes later comes from [`FakeServer::advance_frames`].
    pub fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        self.handle_with(now_ms, frame, CancelFaults::default())
    }

    /// [`FakeServer::handle`] with fault decisions riding on a cancel.
    pub fn handle_with(
        &mut self,
        now_ms: u64,
        frame: OutFrame,
        faults: CancelFaults,
    ) -> Vec<InFrame> {
        let decoded = self.decode(frame);
        let replies = self.serve(now_ms, decoded, faults, None);
        replies
            .into_iter()
            .map(|r| self.encode_reply(r.call, &r.response, &Shape::default()))
            .collect()
    }

    /// Step time to `t` one internal event at a time (test driver): every frame that became due,
    /// with the time it did; `now` ends at `t`.
    #[cfg(test)]
    pub(crate) fn run_to(&mut self, now: &mut u64, t: u64) -> Vec<(u64, InFrame)> {
        let mut out = Vec::new();
        while let Some(e) = self.next_event_at_ms().filter(|&e| e <= t) {
            *now = (*now).max(e);
            let frames = self.advance_frames(*now);
            assert!(
                !frames.is_empty() || self.next_event_at_ms() != Some(e),
                "advance made no progress"
            );
            out.extend(frames.into_iter().map(|f| (*now, f)));
        }
        *now = t;
        out
    }

    /// Move time and encode what became due (test driver).
    pub fn advance_frames(&mut self, now_ms: u64) -> Vec<InFrame> {
        let out = self.advance(now_ms);
        out.into_iter()
            .filter_map(|o| match o {
                Out::Reply(r) => Some(self.encode_reply(r.call, &r.response, &Shape::default())),
                Out::Push(p) => self.encode_push(&p),
            })
            .collect()
    }
}

/// What the scenario and the seed say about a lane's server, whatever its protocol.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSetup {
    pub profile: ServerProfile,
    pub toolop_extensions: bool,
    pub poll_interval_ms: Option<u64>,
    pub max_ttl_ms: Option<u64>,
    pub tools: Vec<FakeTool>,
    pub aip: crate::scenario::AipSpec,
}

/// The fake server of `protocol`: its codec (with the profile's quirks) and a task service with
/// the codec's policy.
pub fn server_for(protocol: Protocol, setup: &ServerSetup, rng: ChaCha8Rng) -> FakeServer {
    match protocol {
        Protocol::Mcp20251125 => {
            let profile = match setup.profile {
                ServerProfile::TsSdk => mcp_2025_11_25::Profile::TsSdk,
                ServerProfile::PythonSdk => mcp_2025_11_25::Profile::PythonSdk,
                // Validation admits only the three above for this protocol.
                ServerProfile::SpecStrict
                | ServerProfile::Rmcp
                | ServerProfile::CancelDoneOk
                | ServerProfile::CancelDoneFailedPrecondition
                | ServerProfile::CancelDoneNotFound => mcp_2025_11_25::Profile::SpecStrict,
            };
            let cfg = mcp_2025_11_25::McpConfig {
                profile,
                toolop_extensions: setup.toolop_extensions,
                poll_interval_ms: setup.poll_interval_ms,
                max_ttl_ms: setup.max_ttl_ms,
                tools: setup.tools.clone(),
            };
            mcp_2025_11_25::server(cfg, rng)
        }
        Protocol::McpTasksExt => {
            let mut cfg = mcp_tasks_ext::ExtConfig::new(setup.tools.clone());
            cfg.toolop_extensions = setup.toolop_extensions;
            cfg.poll_interval_ms = setup.poll_interval_ms.unwrap_or(cfg.poll_interval_ms);
            cfg.ttl_ms = setup.max_ttl_ms;
            cfg.rmcp = setup.profile == ServerProfile::Rmcp;
            mcp_tasks_ext::server(cfg, rng)
        }
        Protocol::Aip151 => {
            let a = &setup.aip;
            let tools = setup.tools.iter().map(|t| t.name.clone()).collect();
            let mut cfg = aip151::AipConfig::new(
                &a.submit_path,
                &a.operation_path,
                &a.operations_collection,
                tools,
            );
            cfg.toolop_extensions = setup.toolop_extensions;
            cfg.dedupe_window_ms = a.dedupe_window_ms;
            cfg.cancel_supported = a.cancel_supported;
            cfg.retention_after_done_ms = a.retention_after_done_ms;
            cfg.cancel_on_done = match setup.profile {
                ServerProfile::CancelDoneFailedPrecondition => {
                    aip151::CancelOnDone::FailedPrecondition
                }
                ServerProfile::CancelDoneNotFound => aip151::CancelOnDone::NotFound,
                ServerProfile::CancelDoneOk
                | ServerProfile::SpecStrict
                | ServerProfile::TsSdk
                | ServerProfile::PythonSdk
                | ServerProfile::Rmcp => aip151::CancelOnDone::Ok,
            };
            aip151::server(cfg, setup.max_ttl_ms, a.preempt_rate, rng)
        }
    }
}
