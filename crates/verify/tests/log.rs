//! The verifiable log's Merkle tree (RFC 9162): the tree hashes Certificate
//! Transparency's tests know, and proofs that hold for every size and fail for any
//! change.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use countersign_verify::log::{
    consistency_proof, from_hex, inclusion_proof, leaf_hash, root, to_hex, verify_consistency,
    verify_inclusion, Hash,
};

/// Certificate Transparency's test leaves and the tree hash of each prefix.
fn known() -> (Vec<Vec<u8>>, [&'static str; 9]) {
    let leaves = vec![
        vec![],
        vec![0x00],
        vec![0x10],
        vec![0x20, 0x21],
        vec![0x30, 0x31],
        vec![0x40, 0x41, 0x42, 0x43],
        (0x50..0x58).collect(),
        (0x60..0x70).collect(),
    ];
    let roots = [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];
    (leaves, roots)
}

fn hashes(n: usize) -> Vec<Hash> {
    (0..n)
        .map(|i| leaf_hash(format!("line {i}").as_bytes()))
        .collect()
}

#[test]
fn tree_hashes_are_certificate_transparencys() {
    let (leaves, roots) = known();
    let hashed: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
    for (n, want) in roots.iter().enumerate() {
        assert_eq!(to_hex(&root(&hashed[..n])), *want, "{n} leaves");
        assert_eq!(from_hex(want).map(|h| to_hex(&h)).as_deref(), Some(*want));
    }
}

/// Every leaf of every tree up to 40 is proven included, and a proof for another leaf or
/// index fails (the size comes from the signed head).
#[test]
fn inclusion_proofs_hold_for_every_leaf_and_only_for_it() {
    for n in 1..=40 {
        let leaves = hashes(n);
        let top = root(&leaves);
        for i in 0..n {
            let proof = inclusion_proof(i, &leaves);
            let (i64, n64) = (i as u64, n as u64);
            assert!(
                verify_inclusion(i64, n64, &leaves[i], &proof, &top),
                "{i} of {n}"
            );
            let other = leaf_hash(b"another line");
            assert!(!verify_inclusion(i64, n64, &other, &proof, &top));
            assert!(!verify_inclusion(n64, n64, &leaves[i], &proof, &top));
            if n > 1 {
                assert!(!verify_inclusion(
                    (i64 + 1) % n64,
                    n64,
                    &leaves[i],
                    &proof,
                    &top
                ));
            }
        }
    }
}

/// Every prefix of every tree up to 40 is proven consistent; a changed line before the
/// old size (a rewrite), a shorter log (a cut) or another history (a fork) fails.
#[test]
fn consistency_proofs_hold_for_every_prefix_and_catch_rewrites_and_forks() {
    for n in 1..=40 {
        let leaves = hashes(n);
        let new_root = root(&leaves);
        for m in 1..=n {
            let old_root = root(&leaves[..m]);
            let proof = consistency_proof(m, &leaves);
            let (m64, n64) = (m as u64, n as u64);
            assert!(
                verify_consistency(m64, n64, &old_root, &new_root, &proof),
                "{m} to {n}"
            );
            // A line before `m` rewritten: the new log's proof cannot match the old head.
            let mut rewritten = leaves.clone();
            rewritten[m - 1] = leaf_hash(b"rewritten");
            let proof = consistency_proof(m, &rewritten);
            assert!(
                !verify_consistency(m64, n64, &old_root, &root(&rewritten), &proof),
                "rewrite at {m} of {n}"
            );
            // A fork: the same old lines, then other ones; each head is consistent with
            // the old one, but not with the other.
            if m < n {
                let mut fork = leaves[..m].to_vec();
                fork.extend((m..n).map(|i| leaf_hash(format!("fork {i}").as_bytes())));
                let proof = consistency_proof(m, &fork);
                assert!(verify_consistency(
                    m64,
                    n64,
                    &old_root,
                    &root(&fork),
                    &proof
                ));
                let across = consistency_proof(m, &leaves);
                assert!(!verify_consistency(
                    m64,
                    n64,
                    &old_root,
                    &root(&fork),
                    &across
                ));
                // A cut: an old head larger than the log now.
                assert!(!verify_consistency(n64, m64, &new_root, &old_root, &[]));
            }
        }
    }
}
