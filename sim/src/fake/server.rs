//! One interface over the fake servers, so the world and the network need not know which
//! protocol a lane speaks. Fault hooks a protocol cannot honour default to "not applicable".

use toolop::transport::{InFrame, OutFrame};

use super::aip151::FakeAipServer;
use super::mcp::{FakeMcpServer, GroundTruth};
use super::mcp_ext::FakeMcpExtServer;

pub trait SimServer: Send {
    fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame>;
    fn advance(&mut self, now_ms: u64) -> Vec<InFrame>;
    fn next_event_at_ms(&self) -> Option<u64>;
    fn truth(&self) -> &GroundTruth;
    /// Completion racing a cancel: the work ends now.
    fn finish_now(&mut self, _task_id: &str, _now_ms: u64) -> bool {
        false
    }
    fn is_deleted(&self, _task_id: &str) -> bool {
        false
    }
    /// The status-after-cancel quirk (MCP 2025-11-25 servers that keep working).
    fn keep_working_after_cancel(&mut self, _task_id: &str, _tag: u64) -> bool {
        false
    }
    fn take_finished_after_cancel(&mut self) -> Vec<(String, u64, u64)> {
        Vec::new()
    }
    fn complete_after_cancel(&mut self, _task_id: &str, _now_ms: u64) -> bool {
        false
    }
}

impl SimServer for FakeMcpServer {
    fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        FakeMcpServer::handle(self, now_ms, frame)
    }
    fn advance(&mut self, now_ms: u64) -> Vec<InFrame> {
        FakeMcpServer::advance(self, now_ms)
    }
    fn next_event_at_ms(&self) -> Option<u64> {
        FakeMcpServer::next_event_at_ms(self)
    }
    fn truth(&self) -> &GroundTruth {
        FakeMcpServer::truth(self)
    }
    fn finish_now(&mut self, task_id: &str, now_ms: u64) -> bool {
        FakeMcpServer::finish_now(self, task_id, now_ms)
    }
    fn is_deleted(&self, task_id: &str) -> bool {
        FakeMcpServer::is_deleted(self, task_id)
    }
    fn keep_working_after_cancel(&mut self, task_id: &str, tag: u64) -> bool {
        FakeMcpServer::keep_working_after_cancel(self, task_id, tag)
    }
    fn take_finished_after_cancel(&mut self) -> Vec<(String, u64, u64)> {
        FakeMcpServer::take_finished_after_cancel(self)
    }
    fn complete_after_cancel(&mut self, task_id: &str, now_ms: u64) -> bool {
        FakeMcpServer::complete_after_cancel(self, task_id, now_ms)
    }
}

impl SimServer for FakeMcpExtServer {
    fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        FakeMcpExtServer::handle(self, now_ms, frame)
    }
    fn advance(&mut self, now_ms: u64) -> Vec<InFrame> {
        FakeMcpExtServer::advance(self, now_ms)
    }
    fn next_event_at_ms(&self) -> Option<u64> {
        FakeMcpExtServer::next_event_at_ms(self)
    }
    fn truth(&self) -> &GroundTruth {
        FakeMcpExtServer::truth(self)
    }
    fn finish_now(&mut self, task_id: &str, now_ms: u64) -> bool {
        FakeMcpExtServer::finish_now(self, task_id, now_ms)
    }
    fn is_deleted(&self, task_id: &str) -> bool {
        FakeMcpExtServer::is_deleted(self, task_id)
    }
}

impl SimServer for FakeAipServer {
    fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        FakeAipServer::handle(self, now_ms, frame)
    }
    fn advance(&mut self, now_ms: u64) -> Vec<InFrame> {
        FakeAipServer::advance(self, now_ms)
    }
    fn next_event_at_ms(&self) -> Option<u64> {
        FakeAipServer::next_event_at_ms(self)
    }
    fn truth(&self) -> &GroundTruth {
        FakeAipServer::truth(self)
    }
}
