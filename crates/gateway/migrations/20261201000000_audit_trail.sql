-- The audit trail: the same chained lines as the file store, one row each.
-- `line` is the exact sealed JSON line (its mac covers its bytes); `record_id` is the
-- record's id, unique, so a batch sent again is never stored twice.
CREATE TABLE countersign_audit (
    seq BIGINT PRIMARY KEY CHECK (seq > 0),
    record_id TEXT NOT NULL UNIQUE,
    line TEXT NOT NULL
);

-- The head: the last acknowledged seq and mac, keyed. One row; every append locks it
-- (SELECT ... FOR UPDATE), so replicas extend the one chain in turn.
CREATE TABLE countersign_audit_head (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq BIGINT NOT NULL CHECK (seq >= 0),
    last TEXT NOT NULL,
    pending BIGINT NOT NULL,
    mac TEXT NOT NULL
);
