//! Keeps the linker's relocations in the tutorial's wasm: `countersign-split` (trunk's
//! post-build hook) needs them to split the Countersign layer into its own part.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-bins=--emit-relocs");
    }
}
