//! Removing the provider key from anything sent back, even split across stream chunks.

use bytes::{Bytes, BytesMut};

const MARK: &[u8] = b"[redacted]";

/// Replaces every occurrence of a secret in a byte stream. It holds back the last
/// `secret.len() - 1` bytes of each chunk, so an occurrence split across two chunks
/// is still caught.
#[derive(Debug)]
pub struct Redactor {
    secret: Vec<u8>,
    carry: BytesMut,
}

impl Redactor {
    /// A redactor for `secret`; an empty secret redacts nothing.
    pub fn new(secret: &str) -> Self {
        Self {
            secret: secret.as_bytes().to_vec(),
            carry: BytesMut::new(),
        }
    }

    /// Takes the next chunk; returns what can safely be sent now.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        if self.secret.is_empty() {
            return Bytes::copy_from_slice(chunk);
        }
        self.carry.extend_from_slice(chunk);
        let replaced = replace_all(&self.carry, &self.secret);
        let keep = self.secret.len() - 1;
        // Hold back a tail that could be the start of the secret.
        let split = replaced.len().saturating_sub(keep);
        let mut replaced = BytesMut::from(replaced.as_slice());
        let tail = replaced.split_off(split);
        self.carry = tail;
        replaced.freeze()
    }

    /// Ends the stream: returns whatever was held back.
    pub fn finish(&mut self) -> Bytes {
        let rest = replace_all(&self.carry, &self.secret);
        self.carry.clear();
        Bytes::from(rest)
    }

    /// Redacts one whole body.
    pub fn whole(secret: &str, body: &[u8]) -> Bytes {
        if secret.is_empty() {
            Bytes::copy_from_slice(body)
        } else {
            Bytes::from(replace_all(body, secret.as_bytes()))
        }
    }
}

fn replace_all(haystack: &[u8], needle: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack.get(i..i + needle.len()) == Some(needle) {
            out.extend_from_slice(MARK);
            i += needle.len();
        } else {
            out.extend(haystack.get(i).copied());
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(secret: &str, chunks: &[&str]) -> String {
        let mut r = Redactor::new(secret);
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&r.push(c.as_bytes()));
        }
        out.extend_from_slice(&r.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_key_split_across_chunks_is_redacted() {
        let got = stream("sk-secret-123", &["data: sk-se", "cret-", "123 end", ""]);
        assert_eq!(got, "data: [redacted] end");
    }

    #[test]
    fn text_without_the_key_passes_unchanged_and_in_order() {
        let chunks = ["data: {\"a\":1}\n\n", "data: [DONE]\n\n"];
        assert_eq!(stream("sk-xyz", &chunks), chunks.concat());
    }

    #[test]
    fn every_split_point_is_caught() {
        let text = "aa sk-abcdef bb sk-abcdef";
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(
                stream("sk-abcdef", &[a, b]),
                "aa [redacted] bb [redacted]",
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn whole_bodies_are_redacted() {
        assert_eq!(&Redactor::whole("k3y", b"x k3y y")[..], b"x [redacted] y");
        assert_eq!(&Redactor::whole("", b"x")[..], b"x");
    }
}
