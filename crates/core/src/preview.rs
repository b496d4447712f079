//! Consequence previews: what will change, shown on the card before the person decides.

use serde::{Deserialize, Serialize};

/// A preview of a call's effect from the action's dry run: a text diff, counts, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    /// A unified-diff-style text of what will change, if the action has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Counts of what will be affected: `("files deleted", 3)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counts: Vec<(String, u64)>,
}

impl Preview {
    /// A preview that is a diff.
    pub fn diff(diff: impl Into<String>) -> Self {
        Self {
            diff: Some(diff.into()),
            counts: Vec::new(),
        }
    }

    /// Adds a count.
    pub fn count(mut self, label: impl Into<String>, n: u64) -> Self {
        self.counts.push((label.into(), n));
        self
    }

    /// A line-by-line diff of `before` → `after` (`-`/`+`/` ` prefixed lines).
    pub fn of_text(before: &str, after: &str) -> Self {
        Self::diff(line_diff(before, after))
    }
}

/// A minimal line diff (longest common subsequence); over 2,000 lines, only the counts.
pub fn line_diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    if a.len() > 2_000 || b.len() > 2_000 {
        return format!("- {} lines\n+ {} lines\n", a.len(), b.len());
    }
    // lcs[i][j] = length of the LCS of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            let here = if a.get(i) == b.get(j) {
                cell(&lcs, i + 1, j + 1) + 1
            } else {
                cell(&lcs, i + 1, j).max(cell(&lcs, i, j + 1))
            };
            if let Some(slot) = lcs.get_mut(i).and_then(|row| row.get_mut(j)) {
                *slot = here;
            }
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                out.push_str(&format!("  {x}\n"));
                i += 1;
                j += 1;
            }
            (Some(x), Some(_)) if cell(&lcs, i + 1, j) >= cell(&lcs, i, j + 1) => {
                out.push_str(&format!("- {x}\n"));
                i += 1;
            }
            (_, Some(y)) => {
                out.push_str(&format!("+ {y}\n"));
                j += 1;
            }
            (Some(x), None) => {
                out.push_str(&format!("- {x}\n"));
                i += 1;
            }
            (None, None) => break,
        }
    }
    out
}

fn cell(table: &[Vec<u32>], i: usize, j: usize) -> u32 {
    table
        .get(i)
        .and_then(|row| row.get(j))
        .copied()
        .unwrap_or(0)
}
