//! Keeps the linker's relocations in the app's wasm: `countersign-split` needs them.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-bins=--emit-relocs");
    }
}
