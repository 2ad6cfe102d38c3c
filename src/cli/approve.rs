//! The approval gate of live calls: every input request gets an answer (declined, accepted
//! from a file, or asked on the terminal), never a silent drop.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use tokio::sync::mpsc;

use crate::protocol::ApprovalReply;
use crate::runner::{ApprovalRequest, Input};

#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    Decline,
    AcceptFile(PathBuf),
    Prompt,
}

impl Gate {
    pub fn parse(s: &str) -> Result<Gate, String> {
        match s {
            "decline" => Ok(Gate::Decline),
            "prompt" if std::io::stdin().is_terminal() => Ok(Gate::Prompt),
            "prompt" => Err(
                "--approve prompt needs a terminal on stdin; use decline or accept-file=FILE"
                    .into(),
            ),
            other => match other.strip_prefix("accept-file=") {
                Some(path) if !path.is_empty() => {
                    let content = read_content(&PathBuf::from(path))?;
                    drop(content);
                    Ok(Gate::AcceptFile(PathBuf::from(path)))
                }
                _ => Err(format!(
                    "--approve \"{other}\": expected decline, accept-file=FILE or prompt"
                )),
            },
        }
    }

    /// The answer to one request.
    fn answer(&self, req: &ApprovalRequest) -> ApprovalReply {
        match self {
            Gate::Decline => ApprovalReply::Decline,
            Gate::AcceptFile(path) => match read_content(path) {
                Ok(content) => ApprovalReply::Accept { content },
                Err(e) => {
                    tracing::warn!("{e}: declining the input request of {}", req.node);
                    ApprovalReply::Decline
                }
            },
            Gate::Prompt => prompt(req),
        }
    }
}

fn read_content(path: &PathBuf) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--approve accept-file {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("--approve accept-file {}: not JSON: {e}", path.display()))?;
    if !v.is_object() {
        return Err(format!(
            "--approve accept-file {}: must hold a JSON object",
            path.display()
        ));
    }
    Ok(v)
}

fn prompt(req: &ApprovalRequest) -> ApprovalReply {
    let message = req
        .request
        .pointer("/params/message")
        .and_then(|m| m.as_str())
        .unwrap_or("(no message)");
    let schema = req
        .request
        .pointer("/params/requestedSchema")
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut err = std::io::stderr();
    let _ = writeln!(err, "\n{} asks for input (round {}): {message}\nschema: {schema}\nanswer with a JSON object, or an empty line to decline:", req.node, req.round);
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() || line.trim().is_empty() {
        return ApprovalReply::Decline;
    }
    match serde_json::from_str::<serde_json::Value>(line.trim()) {
        Ok(content) if content.is_object() => ApprovalReply::Accept { content },
        _ => {
            let _ = writeln!(err, "not a JSON object: declined");
            ApprovalReply::Decline
        }
    }
}

/// Answer every approval request the runner asks, until it stops asking.
pub async fn serve(
    gate: Gate,
    mut requests: mpsc::UnboundedReceiver<ApprovalRequest>,
    inputs: mpsc::UnboundedSender<Input>,
) {
    while let Some(req) = requests.recv().await {
        let g = gate.clone();
        // A prompt blocks on the terminal: keep it off the runtime's workers.
        let reply = match tokio::task::spawn_blocking({
            let req = req.clone();
            move || g.answer(&req)
        })
        .await
        {
            Ok(reply) => reply,
            Err(_) => ApprovalReply::Decline,
        };
        let input = Input::Approval {
            node: req.node,
            round: req.round,
            schema_digest: req.schema_digest,
            reply,
        };
        if inputs.send(input).is_err() {
            return;
        }
    }
}
