//! Where the events of a `text/event-stream` body start and end, found incrementally as bytes
//! pass, so a fault can land inside the event that matters (the JSON-RPC response a client is
//! waiting for) while every byte still passes through unchanged. Not an SSE client: it only
//! finds event boundaries (an empty line, with LF, CRLF or CR line ends) and reads `data:`.

use serde_json::Value;

/// One complete event: bytes `[start, end)` of the stream, its blank line included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSpan {
    pub start: usize,
    pub end: usize,
    /// Its data is one JSON-RPC response (`id` and `result` or `error`).
    pub is_response: bool,
    /// It has a non-empty `data` field (not a priming event or keep-alive comment).
    pub has_data: bool,
}

#[derive(Debug)]
pub struct Scanner {
    /// Bytes fed so far.
    pos: usize,
    event_start: usize,
    line: Vec<u8>,
    data: Vec<u8>,
    /// The last byte fed was a CR ending a line; a following LF belongs to it.
    pending_cr: bool,
    /// Longest line or event data kept for inspection; longer ones pass as "not a response".
    max_bytes: usize,
    overflow: bool,
}

impl Scanner {
    pub fn new(max_bytes: usize) -> Scanner {
        Scanner {
            pos: 0,
            event_start: 0,
            line: Vec::new(),
            data: Vec::new(),
            pending_cr: false,
            max_bytes,
            overflow: false,
        }
    }

    /// Feeds the next bytes of the stream; returns the events that ended within them.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<EventSpan> {
        let mut done = Vec::new();
        for (i, &b) in chunk.iter().enumerate() {
            let at = self.pos + i;
            if std::mem::take(&mut self.pending_cr) {
                if b == b'\n' {
                    self.end_line(at + 1, &mut done);
                    continue;
                }
                self.end_line(at, &mut done);
            }
            match b {
                b'\r' => self.pending_cr = true,
                b'\n' => self.end_line(at + 1, &mut done),
                _ if self.line.len() < self.max_bytes => self.line.push(b),
                _ => self.overflow = true,
            }
        }
        self.pos += chunk.len();
        done
    }

    /// The stream ended: a line ended by a final CR is complete now.
    pub fn finish(&mut self) -> Vec<EventSpan> {
        let mut done = Vec::new();
        if std::mem::take(&mut self.pending_cr) {
            self.end_line(self.pos, &mut done);
        }
        done
    }

    /// Bytes fed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn end_line(&mut self, end: usize, done: &mut Vec<EventSpan>) {
        if self.line.is_empty() {
            let has_data = !self.data.is_empty();
            let is_response = !self.overflow && is_response(&self.data);
            done.push(EventSpan {
                start: self.event_start,
                end,
                is_response,
                has_data,
            });
            self.event_start = end;
            self.data.clear();
            self.overflow = false;
            return;
        }
        let line = std::mem::take(&mut self.line);
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (
                &line[..i],
                line[i + 1..].strip_prefix(b" ").unwrap_or(&line[i + 1..]),
            ),
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() < self.max_bytes {
                if !self.data.is_empty() {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
            } else {
                self.overflow = true;
            }
        }
    }
}

fn is_response(data: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(m)) => {
            m.contains_key("id") && (m.contains_key("result") || m.contains_key("error"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "data: \nid: 0\nretry: 3000\n\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"elicitation/create\",\"params\":{}}\n\n\
        : keep-alive\n\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1/0\n\n";

    fn spans(stream: &str, chunk: usize) -> Vec<EventSpan> {
        let mut s = Scanner::new(1 << 20);
        let mut all: Vec<EventSpan> = stream
            .as_bytes()
            .chunks(chunk)
            .flat_map(|c| s.feed(c))
            .collect();
        all.extend(s.finish());
        all
    }

    #[test]
    fn events_are_found_whatever_the_chunking() {
        let whole = spans(STREAM, STREAM.len());
        assert_eq!(whole.len(), 4);
        assert_eq!(
            whole
                .iter()
                .map(|e| (e.is_response, e.has_data))
                .collect::<Vec<_>>(),
            [(false, false), (false, true), (false, false), (true, true)]
        );
        assert_eq!(whole[0].start, 0);
        assert!(whole.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(whole[3].end, STREAM.len());
        for chunk in [1, 2, 3, 7, 64] {
            assert_eq!(spans(STREAM, chunk), whole, "chunk size {chunk}");
        }
    }

    #[test]
    fn crlf_and_cr_line_ends_count_as_line_ends() {
        let crlf = STREAM.replace('\n', "\r\n");
        let a = spans(&crlf, 1);
        assert_eq!(a.len(), 4);
        assert_eq!(a[3].end, crlf.len());
        assert!(a[3].is_response);
        let cr = STREAM.replace('\n', "\r");
        let b = spans(&cr, 5);
        assert_eq!(b.len(), 4);
        assert!(b[3].is_response);
    }

    #[test]
    fn an_oversized_event_is_not_taken_for_a_response() {
        let mut s = Scanner::new(8);
        let spans = s.feed(b"data: {\"id\":1,\"result\":{}}\n\n");
        assert_eq!(spans.len(), 1);
        assert!(!spans[0].is_response);
    }
}
