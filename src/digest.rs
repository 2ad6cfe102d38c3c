//! Digests over canonical bytes. `serde_json::Value` keeps object keys sorted (the crate is
//! built without `preserve_order`), so `to_vec` of a `Value` is already canonical.

use sha2::{Digest, Sha256};

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a digest's bytes.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
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
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }
}
