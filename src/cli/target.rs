//! Where a call node's server is: an MCP URL, a stdio command, or an AIP-151 base URL with its
//! configuration file. Persisted per call node, so `toolop resume` needs no flags.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::protocol::aip151::{Aip151Adapter, Aip151Config};
use crate::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use crate::protocol::mcp_tasks_ext::McpTasksExtAdapter;
use crate::protocol::Adapter;
use crate::record::AdapterId;
use crate::transport::aip_http::AipHttpConfig;
use crate::transport::http::{HttpConfig, KeptSession, SessionHandle, SessionStore};
use crate::transport::stdio::StdioConfig;
use crate::transport::LiveTransport;

/// An adapter, its connected transport, and (MCP over HTTP) a handle on the session it holds.
pub type Connection = (
    Box<dyn Adapter + Send>,
    LiveTransport,
    Option<SessionHandle>,
);

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// MCP over Streamable HTTP.
    Mcp { url: String, protocol: AdapterId },
    /// MCP over stdio: the command line that starts the server.
    Stdio {
        command: String,
        protocol: AdapterId,
    },
    /// AIP-151 over HTTP/JSON; the configuration file is read again on resume.
    Aip {
        base_url: String,
        config_path: PathBuf,
    },
}

impl Target {
    /// `--server` value: `http(s)://...` or `stdio:COMMAND`.
    pub fn parse_server(server: &str, protocol: AdapterId) -> Result<Target, String> {
        if let Some(command) = server.strip_prefix("stdio:") {
            StdioConfig::from_command_line(command)?;
            return Ok(Target::Stdio {
                command: command.to_string(),
                protocol,
            });
        }
        if server.starts_with("http://") || server.starts_with("https://") {
            reqwest::Url::parse(server).map_err(|e| format!("--server \"{server}\": {e}"))?;
            return Ok(Target::Mcp {
                url: server.to_string(),
                protocol,
            });
        }
        Err(format!(
            "--server \"{server}\": expected http://..., https://... or stdio:COMMAND"
        ))
    }

    pub fn describe(&self) -> String {
        match self {
            Target::Mcp { url, .. } => url.clone(),
            Target::Stdio { command, .. } => format!("stdio:{command}"),
            Target::Aip { base_url, .. } => format!("aip:{base_url}"),
        }
    }

    /// The adapter and a connected transport. Must be called inside a tokio runtime.
    /// `kept`: the session an earlier process had with this MCP server, tried first. The
    /// handle says which session the transport holds now (MCP over HTTP only).
    pub fn connect(
        &self,
        request_timeout_ms: u64,
        kept: Option<KeptSession>,
        sessions: Option<Arc<dyn SessionStore>>,
    ) -> Result<Connection, String> {
        match self {
            Target::Mcp { url, protocol } => {
                let adapter = mcp_adapter(*protocol)?;
                let version = protocol_version(*protocol);
                let cfg = HttpConfig {
                    url: url.clone(),
                    protocol_version: version.into(),
                    resume: kept,
                    ..HttpConfig::default()
                };
                let (transport, handle) = crate::transport::http::connect_keeping(cfg, sessions)?;
                Ok((adapter, transport, Some(handle)))
            }
            Target::Stdio { command, protocol } => {
                let adapter = mcp_adapter(*protocol)?;
                let transport =
                    crate::transport::stdio::spawn(StdioConfig::from_command_line(command)?)?;
                Ok((adapter, transport, None))
            }
            Target::Aip {
                base_url,
                config_path,
            } => {
                let file = AipFile::load(config_path)?;
                let mut cfg = AipHttpConfig {
                    base_url: base_url.clone(),
                    request_timeout_ms,
                    ..AipHttpConfig::default()
                };
                if let Some(auth) = &file.auth {
                    cfg.headers.push(auth.header()?);
                }
                let adapter = Box::new(Aip151Adapter::new(file.adapter_config()));
                Ok((adapter, crate::transport::aip_http::connect(cfg)?, None))
            }
        }
    }
}

fn mcp_adapter(protocol: AdapterId) -> Result<Box<dyn Adapter + Send>, String> {
    match protocol {
        AdapterId::Mcp20251125 => Ok(Box::new(Mcp20251125Adapter::new())),
        AdapterId::McpTasksExt => Ok(Box::new(McpTasksExtAdapter::new())),
        AdapterId::Aip151 => Err("aip-151 is not an MCP protocol: use --aip".into()),
    }
}

fn protocol_version(protocol: AdapterId) -> &'static str {
    match protocol {
        AdapterId::McpTasksExt => crate::protocol::mcp_tasks_ext::PROTOCOL_VERSION,
        _ => crate::protocol::mcp_2025_11_25::PROTOCOL_VERSION,
    }
}

/// `--aip-config aip.toml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AipFile {
    /// Submit path with `{tool}`, e.g. `/v1/reports:{tool}`.
    pub submit_path: String,
    /// Operation path with `{name}`, e.g. `/v1/{name}`.
    pub operation_path: String,
    /// `ListOperations` collection, e.g. `/v1/operations`.
    pub operations_collection: String,
    pub tools: Vec<String>,
    /// AIP-155 dedupe window of `request_id`; omitted: as long as the operation exists.
    pub dedupe_window_ms: Option<u64>,
    #[serde(default = "yes")]
    pub cancel_supported: bool,
    pub auth: Option<AipAuth>,
}

/// An optional auth header whose value comes from the environment (never from the file).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AipAuth {
    /// e.g. `Authorization`.
    pub header: String,
    /// Environment variable holding the value, e.g. `SVC_TOKEN` (holding `Bearer ...`).
    pub value_env: String,
}

fn yes() -> bool {
    true
}

impl AipAuth {
    fn header(&self) -> Result<(String, String), String> {
        let value = std::env::var(&self.value_env)
            .map_err(|_| format!("auth: environment variable {} is not set", self.value_env))?;
        Ok((self.header.clone(), value))
    }
}

impl AipFile {
    pub fn load(path: &Path) -> Result<AipFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file: AipFile = toml::from_str(&text)
            .map_err(|e| format!("{}: {}", path.display(), e.to_string().trim_end()))?;
        let check = |field: &str, value: &str, placeholder: &str| {
            if value.contains(placeholder) {
                Ok(())
            } else {
                Err(format!(
                    "{}: field {field}: must contain {placeholder}",
                    path.display()
                ))
            }
        };
        check(
            "submit_path",
            &file.submit_path,
            crate::protocol::aip151::TOOL_PLACEHOLDER,
        )?;
        check(
            "operation_path",
            &file.operation_path,
            crate::protocol::aip151::NAME_PLACEHOLDER,
        )?;
        if file.tools.is_empty() {
            return Err(format!(
                "{}: field tools: list at least one tool",
                path.display()
            ));
        }
        Ok(file)
    }

    pub fn adapter_config(&self) -> Aip151Config {
        Aip151Config {
            submit_path: self.submit_path.clone(),
            operation_path: self.operation_path.clone(),
            operations_collection: self.operations_collection.clone(),
            tools: self.tools.clone(),
            dedupe_window_ms: self.dedupe_window_ms,
            cancel_supported: self.cancel_supported,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_values_parse_into_targets_or_clear_errors() {
        let p = AdapterId::Mcp20251125;
        assert!(matches!(
            Target::parse_server("http://127.0.0.1:3000/mcp", p),
            Ok(Target::Mcp { .. })
        ));
        match Target::parse_server("stdio:node 'my server.js'", p) {
            Ok(Target::Stdio { command, .. }) => assert_eq!(command, "node 'my server.js'"),
            other => panic!("{other:?}"),
        }
        assert!(Target::parse_server("ftp://x", p)
            .unwrap_err()
            .contains("expected http://"));
        assert!(Target::parse_server("stdio:", p)
            .unwrap_err()
            .contains("empty"));
        assert!(Target::parse_server("stdio:node 'unclosed", p).is_err());
    }

    #[test]
    fn aip_config_errors_name_the_file_and_the_field() {
        let dir = std::env::temp_dir().join(format!("toolop-aip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("aip.toml");
        std::fs::write(&path, "submit_path = \"/v1/x\"\noperation_path = \"/v1/{name}\"\noperations_collection = \"/v1/operations\"\ntools = [\"t\"]\n").unwrap();
        let e = AipFile::load(&path).unwrap_err();
        assert!(
            e.contains("aip.toml") && e.contains("submit_path") && e.contains("{tool}"),
            "{e}"
        );
        std::fs::write(&path, "submit_path = \"/v1/x:{tool}\"\noperation_path = \"/v1/{name}\"\noperations_collection = \"/v1/operations\"\ntools = [\"t\"]\nbogus = 1\n").unwrap();
        assert!(AipFile::load(&path).unwrap_err().contains("bogus"));
        std::fs::write(&path, "submit_path = \"/v1/x:{tool}\"\noperation_path = \"/v1/{name}\"\noperations_collection = \"/v1/operations\"\ntools = [\"t\"]\n").unwrap();
        let f = AipFile::load(&path).unwrap();
        assert!(f.cancel_supported);
        assert_eq!(f.adapter_config().submit_path_for("t"), "/v1/x:t");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
