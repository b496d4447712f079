//! How many heap allocations one call costs through the gate, against the handler
//! called directly from the model's JSON: the gate benchmark's workload, counted
//! instead of timed. Counts do not depend on the machine's load, so this test can hold
//! a bound where a timed test could not; the bound is what the gate costs today, so a
//! change that adds allocations to every call is seen in the change that adds them.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic, clippy::print_stdout)]

#[path = "../benches/gate_workload/mod.rs"]
mod gate_workload;

use countersign::Call;

/// Allocations (and reallocations) made by `f`, on this thread.
fn counted(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

/// The bound: what one call through the gate allocates today. Lower it when the gate
/// gets leaner; never raise it without saying why in BENCHMARKS.md.
/// 9 today: the arguments' text, kept for a later stage that would ask for them as a
/// value (1: flat arguments are read, checked and hashed without one; other arguments
/// are parsed to a value, 3 for this call's), the typed params (1, as the direct call),
/// the bound call (1), the live call (1, boxed: moved as a pointer, not copied), the
/// job's boxed future (1), and the handler's own output (4, as the direct call). Nothing
/// per record: the records' ids and digests are kept as their parts, and the tool call
/// id is the model's own copy, shared. Nothing per field: flat params the schema check
/// vouches for are read without `serde_ignored`.
const MAX_GATE_ALLOCATIONS: u64 = 9;

#[test]
fn a_call_through_the_gate_allocates_a_bounded_amount() {
    let (exec, _regs, records) = gate_workload::executor(1);
    // One call first, so lazily built state (the action's schema) is not counted.
    gate_workload::through_gate(&exec, Call::new("tc_0", "read_0", gate_workload::RAW));
    let direct = counted(|| {
        gate_workload::direct_from_json(gate_workload::RAW).unwrap();
    });
    let call = Call::new("tc_1", "read_0", gate_workload::RAW);
    let before = records.get();
    let gate = counted(|| {
        gate_workload::through_gate(&exec, call);
    });
    println!("allocations per call: direct {direct}, through the gate {gate}");
    assert_eq!(
        records.get() - before,
        2,
        "allowed and settled, nothing else"
    );
    assert!(direct > 0, "the counter counts");
    assert!(
        gate <= MAX_GATE_ALLOCATIONS,
        "one call through the gate allocated {gate} times (bound {MAX_GATE_ALLOCATIONS})"
    );
}
