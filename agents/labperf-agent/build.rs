//! Link options that keep the static agents within their size budget (≤ 256 KiB for the no_std Rust agents: `xtask/src/build_agents.rs` BUDGETS).

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    println!("cargo:rerun-if-changed=no-eh-frame.ld");
    if target.ends_with("-linux-musl") && release {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        // rust-lld links both musl agents (see .cargo/config.toml): identical code folding,
        // no page-aligned code segment, and no unwind tables (panic=abort: the `agent`
        // profile, which inherits release, so PROFILE is "release"; main.rs refuses an
        // optimized musl build that would unwind).
        for a in [
            "--icf=all".to_string(),
            "-znoseparate-code".into(),
            "--no-eh-frame-hdr".into(),
            format!("-T{dir}/no-eh-frame.ld"),
        ] {
            println!("cargo:rustc-link-arg-bins={a}");
        }
    }
}
