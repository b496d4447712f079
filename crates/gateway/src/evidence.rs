//! `countersign-gateway evidence`: the trail as an auditor asks for it. One row per call
//! (who asked, what, how it was decided and by whom, how it ended, the countersignature
//! minted for it, and the line of its terminal record in the verifiable log), filtered,
//! as CSV or JSON, and a one-page summary.

use std::collections::{BTreeMap, HashMap};

use countersign::audit::AuditEvent;
use countersign::reason::LevelSource;
use serde::Serialize;

use crate::audit_store::ChainedLine;

/// One call, as the trail tells it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// When the call arrived (its first record), milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The page session.
    pub session: String,
    /// The session's role (the page's word).
    pub role: String,
    /// Who asked: `assistant`, `webmcp` or `mcp`.
    pub caller: String,
    /// The action.
    pub action: String,
    /// Its kind: `read`, `write`, `danger`, or empty when it never resolved.
    pub kind: String,
    /// `OK` or the refusal code; empty while the call has not ended.
    pub outcome: String,
    /// Who decided whether it ran: `person`, `session_grant`, `policy`, `mode`, …
    pub decided_by: String,
    /// The rule that decided, in words.
    pub reason: String,
    /// Where the level the gate applied came from: `declared` (the action's own kind and
    /// confirm), `policy file: role R, line N` (the policy file in force), or `broken
    /// policy file`; empty when no level decided the call.
    pub level_from: String,
    /// The grant that allowed it, if any.
    pub grant: String,
    /// The countersignature minted for it (`jti`), if any.
    pub countersignature: String,
    /// The terminal record's line in the verifiable log (from 0), for
    /// `GET /v1/log/inclusion?index=…`; empty while the call has not ended.
    pub log_index: String,
}

/// What to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// From this time on (ms since the epoch, inclusive).
    pub from_ms: Option<u64>,
    /// Before this time (ms since the epoch, exclusive).
    pub to_ms: Option<u64>,
    /// Only these actions (any, when empty).
    pub actions: Vec<String>,
    /// Only these kinds.
    pub kinds: Vec<String>,
    /// Only these outcomes.
    pub outcomes: Vec<String>,
    /// Only calls decided by these.
    pub decided_by: Vec<String>,
    /// Only calls from these callers.
    pub callers: Vec<String>,
}

impl Filter {
    fn keeps(&self, row: &Row) -> bool {
        let any = |wanted: &[String], value: &str| {
            wanted.is_empty() || wanted.iter().any(|w| w.eq_ignore_ascii_case(value))
        };
        self.from_ms.is_none_or(|from| row.at_ms >= from)
            && self.to_ms.is_none_or(|to| row.at_ms < to)
            && any(&self.actions, &row.action)
            && any(&self.kinds, &row.kind)
            && any(&self.outcomes, &row.outcome)
            && any(&self.decided_by, &row.decided_by)
            && any(&self.callers, &row.caller)
    }
}

/// Why the trail could not be read.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct EvidenceError {
    /// The line (from 1).
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

fn text<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The lines of the trail `bytes` (JSON Lines, as exported) that are a call's records
/// (not a gap's, not a restored grant's), in order.
pub(crate) fn call_lines(
    bytes: &[u8],
) -> impl Iterator<Item = Result<ChainedLine, EvidenceError>> + '_ {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .filter_map(
            |(n, line)| match serde_json::from_slice::<ChainedLine>(line) {
                Err(e) => Some(Err(EvidenceError {
                    line: n + 1,
                    message: e.to_string(),
                })),
                Ok(c) if c.record.event == AuditEvent::TrailGap || c.record.call == 0 => None,
                Ok(c) => Some(Ok(c)),
            },
        )
}

/// The calls the trail `bytes` (JSON Lines, as exported) records, in the order they
/// arrived, with `filter` applied.
pub fn rows(bytes: &[u8], filter: &Filter) -> Result<Vec<Row>, EvidenceError> {
    let mut rows: Vec<Row> = Vec::new();
    let mut index: HashMap<(String, u64), usize> = HashMap::new();
    for chained in call_lines(bytes) {
        let chained = chained?;
        let r = chained.record;
        let key = (r.session.to_string(), r.call);
        let at = *index.entry(key).or_insert_with(|| {
            rows.push(Row {
                at_ms: r.at_ms,
                session: r.session.to_string(),
                role: r.role.to_string(),
                caller: r.caller.as_str().to_owned(),
                action: r.action.to_string(),
                kind: String::new(),
                outcome: String::new(),
                decided_by: String::new(),
                reason: String::new(),
                level_from: String::new(),
                grant: String::new(),
                countersignature: String::new(),
                log_index: String::new(),
            });
            rows.len() - 1
        });
        let Some(row) = rows.get_mut(at) else {
            continue;
        };
        if let Some(kind) = r.kind {
            row.kind = text(&kind);
        }
        if let countersign::Reason::Level(level) = &r.reason {
            if row.level_from.is_empty() {
                row.level_from = match &level.source {
                    LevelSource::Declared => "declared".into(),
                    LevelSource::RoleOverride { role, line } => {
                        format!("policy file: role {role}, line {line}")
                    }
                    LevelSource::BrokenFileFallback { .. } => "broken policy file".into(),
                };
            }
        }
        if let Some(grant) = r.grant {
            row.grant = serde_json::to_string(&grant).unwrap_or_default();
        }
        match r.event {
            AuditEvent::Countersigned => {
                row.countersignature = r.countersignature.clone().unwrap_or_default();
            }
            // The decision that let it run: the person's, a grant's, the policy's.
            AuditEvent::Allowed | AuditEvent::Approved | AuditEvent::Granted => {
                row.decided_by = text(&r.decided_by);
                row.reason = crate::summary::summary(&r.reason);
            }
            // How it ended; for a refusal, who refused and why.
            _ if r.is_terminal() => {
                row.outcome = r.outcome.clone().unwrap_or_default();
                row.log_index = chained.seq.saturating_sub(1).to_string();
                if row.outcome != "OK" || row.decided_by.is_empty() {
                    row.decided_by = text(&r.decided_by);
                    row.reason = crate::summary::summary(&r.reason);
                }
            }
            _ => {}
        }
    }
    rows.retain(|row| filter.keeps(row));
    Ok(rows)
}

/// The rows as CSV (RFC 4180), with a header line.
pub fn csv(rows: &[Row]) -> String {
    let field = |value: &str| {
        // A cell a spreadsheet would run as a formula is written as text.
        let value = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            format!("'{value}")
        } else {
            value.to_owned()
        };
        if value.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", value.replace('"', "\"\""))
        } else {
            value
        }
    };
    let mut out = String::from(
        "at_ms,session,role,caller,action,kind,outcome,decided_by,reason,level_from,grant,countersignature,log_index\r\n",
    );
    for r in rows {
        let cells = [
            r.at_ms.to_string(),
            r.session.clone(),
            r.role.clone(),
            r.caller.clone(),
            r.action.clone(),
            r.kind.clone(),
            r.outcome.clone(),
            r.decided_by.clone(),
            r.reason.clone(),
            r.level_from.clone(),
            r.grant.clone(),
            r.countersignature.clone(),
            r.log_index.clone(),
        ];
        let line: Vec<String> = cells.iter().map(|c| field(c)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

/// Reads one column of a row.
type Column = fn(&Row) -> &str;

/// A one-page summary: how many calls, and counts by outcome, by who decided, by
/// action, by caller, and by where the level came from (the policy file's rules in force,
/// or the declarations).
pub fn summary(rows: &[Row]) -> String {
    let count = |key: Column| {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for row in rows {
            let value = key(row);
            *counts
                .entry(if value.is_empty() {
                    "(none yet)"
                } else {
                    value
                })
                .or_default() += 1;
        }
        counts
    };
    let mut out = format!("{} calls", rows.len());
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        out.push_str(&format!(
            ", from {} to {} (ms since the epoch)",
            first.at_ms, last.at_ms
        ));
    }
    out.push('\n');
    let sections: [(&str, Column); 5] = [
        ("by outcome", |r| &r.outcome),
        ("decided by", |r| &r.decided_by),
        ("by action", |r| &r.action),
        ("by caller", |r| &r.caller),
        ("level from", |r| &r.level_from),
    ];
    for (title, key) in sections {
        out.push_str(&format!("\n{title}:\n"));
        for (value, n) in count(key) {
            out.push_str(&format!("  {n:>6}  {value}\n"));
        }
    }
    let countersigned = rows
        .iter()
        .filter(|r| !r.countersignature.is_empty())
        .count();
    out.push_str(&format!(
        "\n{countersigned} of them ran under a countersignature\n"
    ));
    out
}
