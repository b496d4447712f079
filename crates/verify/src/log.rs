//! The trail as a verifiable log (RFC 9162, as Certificate Transparency does it): a
//! Merkle tree over the trail's lines, tree heads the gateway signs, and the inclusion
//! and consistency proofs anyone holding a signed head can check without the audit key.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The header's `typ` of a signed tree head.
pub const TREE_HEAD_TYPE: &str = "countersign-tree-head+jwt";

/// A SHA-256 hash.
pub type Hash = [u8; 32];

/// A signed tree head's claims: the log's size and root at a moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeHead {
    /// Who signed it (the gateway's issuer).
    pub iss: String,
    /// When, seconds since the Unix epoch.
    pub iat: u64,
    /// How many lines the log held.
    pub tree_size: u64,
    /// The Merkle tree hash over them (lowercase hex).
    pub root_hash: String,
}

/// The hash of one leaf: `SHA-256(0x00 ‖ line)`, a line of the trail without its newline.
pub fn leaf_hash(line: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(line);
    hasher.finalize().into()
}

fn node(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The largest power of two smaller than `n` (for `n` > 1).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// The first `k` leaves and the rest, `k` the largest power of two below their count.
fn halves(leaves: &[Hash]) -> (&[Hash], &[Hash]) {
    leaves
        .split_at_checked(split(leaves.len()))
        .unwrap_or((leaves, &[]))
}

/// The Merkle tree hash over `leaves` (leaf hashes, in order); the empty tree's is
/// `SHA-256("")`.
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves {
        [] => Sha256::digest([]).into(),
        [leaf] => *leaf,
        _ => {
            let (left, right) = halves(leaves);
            node(&root(left), &root(right))
        }
    }
}

/// The inclusion proof of leaf `index` in the tree over `leaves` (empty if out of range).
pub fn inclusion_proof(index: usize, leaves: &[Hash]) -> Vec<Hash> {
    let n = leaves.len();
    if index >= n || n < 2 {
        return Vec::new();
    }
    let (left, right) = halves(leaves);
    let k = left.len();
    let (mut path, other) = if index < k {
        (inclusion_proof(index, left), root(right))
    } else {
        (inclusion_proof(index - k, right), root(left))
    };
    path.push(other);
    path
}

/// The consistency proof from the tree of the first `first` leaves to the tree over all
/// `leaves` (empty when `first` is 0, or not smaller than the tree).
pub fn consistency_proof(first: usize, leaves: &[Hash]) -> Vec<Hash> {
    if first == 0 || first >= leaves.len() {
        return Vec::new();
    }
    subproof(first, leaves, true)
}

fn subproof(m: usize, leaves: &[Hash], whole: bool) -> Vec<Hash> {
    let n = leaves.len();
    if m == n {
        return if whole {
            Vec::new()
        } else {
            vec![root(leaves)]
        };
    }
    let (left, right) = halves(leaves);
    let k = left.len();
    let (mut proof, other) = if m <= k {
        (subproof(m, left, whole), root(right))
    } else {
        (subproof(m - k, right, false), root(left))
    };
    proof.push(other);
    proof
}

/// Whether `proof` shows the leaf `leaf` at `index` in the tree of `size` with `root`
/// (RFC 9162, 2.1.3.2).
pub fn verify_inclusion(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == *root
}

/// Whether `proof` shows that the tree of `first` leaves with `first_root` is a prefix of
/// the tree of `second` leaves with `second_root` (RFC 9162, 2.1.4.2): nothing of the
/// first was removed or changed since.
pub fn verify_consistency(
    first: u64,
    second: u64,
    first_root: &Hash,
    second_root: &Hash,
    proof: &[Hash],
) -> bool {
    if first > second {
        return false;
    }
    if first == second {
        return proof.is_empty() && first_root == second_root;
    }
    if first == 0 {
        return proof.is_empty();
    }
    let mut path: Vec<&Hash> = Vec::with_capacity(proof.len() + 1);
    if first.is_power_of_two() {
        path.push(first_root);
    }
    path.extend(proof);
    let Some((head, rest)) = path.split_first() else {
        return false;
    };
    let (mut f, mut s) = (first - 1, second - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (**head, **head);
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node(c, &fr);
            sr = node(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == *first_root && sr == *second_root && s == 0
}

/// A hash as lowercase hex.
pub fn to_hex(hash: &Hash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash from 64 lowercase or uppercase hex digits.
pub fn from_hex(text: &str) -> Option<Hash> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        *slot = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}
