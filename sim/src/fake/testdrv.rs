//! The test client both JSON-RPC codecs' tests drive their fake with: requests with fresh ids,
//! time stepped event by event, a log of everything the server sent. Assertions are on parsed
//! JSON.

use serde_json::{json, Value};
use toolop::transport::{InFrame, OutFrame};

use super::service::CancelFaults;
use super::truth::TaskTruth;
use super::FakeServer;

/// One JSON-RPC frame from the server, read and checked: HTTP 200, no Retry-After, version 2.0;
/// `request_id` the JSON-RPC id of a response (unless the body could not be read), none on a
/// server message.
pub fn parse(f: &InFrame) -> Value {
    assert_eq!(f.http_status, 200);
    assert_eq!(f.retry_after_ms, None);
    let v: Value = serde_json::from_slice(&f.body).expect("server sends JSON");
    assert_eq!(v["jsonrpc"], "2.0");
    if v.get("method").is_some() {
        assert_eq!(f.request_id, None, "{v}");
    } else if v["error"]["code"] != json!(-32700) {
        assert_eq!(f.request_id, v["id"].as_u64(), "{v}");
    }
    v
}

pub struct RpcDrv {
    pub s: FakeServer,
    pub now: u64,
    pub next_id: u64,
    /// Every frame the server sent, with the time.
    pub log: Vec<(u64, Value)>,
}

impl RpcDrv {
    pub fn on(s: FakeServer) -> RpcDrv {
        RpcDrv {
            s,
            now: 0,
            next_id: 1,
            log: Vec::new(),
        }
    }

    fn frames(&mut self, out: Vec<InFrame>) -> Vec<Value> {
        let out: Vec<Value> = out.iter().map(parse).collect();
        self.log.extend(out.iter().map(|v| (self.now, v.clone())));
        out
    }

    pub fn send_raw(&mut self, body: Vec<u8>, request_id: Option<u64>) -> Vec<Value> {
        let out = self.s.handle(
            self.now,
            OutFrame {
                request_id,
                body,
                http: None,
            },
        );
        self.frames(out)
    }

    pub fn send(&mut self, msg: Value) -> Vec<Value> {
        let rid = msg["id"].as_u64();
        self.send_raw(serde_json::to_vec(&msg).unwrap(), rid)
    }

    fn next_request(&mut self, method: &str, params: Value) -> (u64, OutFrame) {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (
            id,
            OutFrame {
                request_id: Some(id),
                body: serde_json::to_vec(&msg).unwrap(),
                http: None,
            },
        )
    }

    /// Send a request; returns (id, direct replies), each of which answers it.
    pub fn req(&mut self, method: &str, params: Value) -> (u64, Vec<Value>) {
        let (id, frame) = self.next_request(method, params);
        let out = self.s.handle(self.now, frame);
        let out = self.frames(out);
        for v in &out {
            assert_eq!(v["id"], json!(id));
        }
        (id, out)
    }

    /// A request answered at once.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_with(method, params, CancelFaults::default())
    }

    /// A request answered at once, with fault decisions riding on it (a cancel's).
    pub fn call_with(&mut self, method: &str, params: Value, faults: CancelFaults) -> Value {
        let (id, frame) = self.next_request(method, params);
        let out = self.s.handle_with(self.now, frame, faults);
        let out = self.frames(out);
        assert_eq!(out.len(), 1, "{method}: {out:?}");
        assert_eq!(out[0]["id"], json!(id));
        out.into_iter().next().unwrap()
    }

    pub fn get(&mut self, task_id: &str) -> Value {
        self.call("tasks/get", json!({ "taskId": task_id }))
    }

    pub fn status(&mut self, task_id: &str) -> String {
        self.get(task_id)["result"]["status"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Move time to `t`, event by event; returns what the server sent on the way.
    pub fn to(&mut self, t: u64) -> Vec<Value> {
        let frames = self.s.run_to(&mut self.now, t);
        let out: Vec<Value> = frames.iter().map(|(_, f)| parse(f)).collect();
        self.log
            .extend(frames.iter().map(|(at, _)| *at).zip(out.iter().cloned()));
        out
    }

    pub fn truth(&self, task_id: &str) -> &TaskTruth {
        &self.s.truth().tasks[task_id]
    }
}
