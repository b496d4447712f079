//! `countersign-gateway`: serve the page, proxy the model, keep the audit trail (see
//! [`countersign_gateway::cli`]).

use std::process::ExitCode;

/// mimalloc, not the system allocator: the proxy path allocates per request on every
/// worker thread, where glibc's arenas showed as 14% of a profile (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    countersign_gateway::cli::main()
}
