//! Digests over canonical bytes. `serde_json::Value` keeps object keys sorted (the crate is
//! built without `preserve_order`), so `to_vec` of a `Value` is already canonical.

use sha2::{Digest, Sha256};

pub fn sha256_hex(bytes: &[u8]) -> String {
    let out = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in out {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

pub fn value_digest(v: &serde_json::Value) -> String {
    // Serialising a Value cannot fail: it has no non-string keys and no custom Serialize.
    sha256_hex(&serde_json::to_vec(v).expect("Value serialises"))
}

/// Digest of what a call node asks for: tool, tool descriptor version and arguments.
pub fn request_digest(tool: &str, tool_version: &str, body: &serde_json::Value) -> String {
    value_digest(
        &serde_json::json!({"tool": tool, "tool_version": tool_version, "arguments": body}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_key_order_but_not_values() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"a":2,"b":1}"#).unwrap();
        let c: serde_json::Value = serde_json::from_str(r#"{"a":2,"b":3}"#).unwrap();
        assert_eq!(value_digest(&a), value_digest(&b));
        assert_ne!(value_digest(&a), value_digest(&c));
        assert_eq!(sha256_hex(b"").len(), 64);
    }
}
