//! Bearer tokens on Preemptor's HTTP APIs (agent, controller, the emulated NodeManager's
//! internal API): one way to read them and one way to compare them.

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

/// The token of an `Authorization: Bearer <token>` header, trimmed.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Whether `presented` is `expected`, in time that does not depend on where they differ.
pub fn token_matches(presented: &[u8], expected: &[u8]) -> bool {
    bool::from(presented.ct_eq(expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_trimmed_and_compared_whole() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer  s3cret ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("s3cret"));
        assert!(token_matches(b"s3cret", b"s3cret"));
        assert!(!token_matches(b"s3cre", b"s3cret"));
        assert!(!token_matches(b"", b"s3cret"));
    }
}
