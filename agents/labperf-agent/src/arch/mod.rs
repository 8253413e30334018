//! Per-architecture facts for the agent (CPU identity, default events), chosen by `cfg-if`.

cfg_if::cfg_if! {
    if #[cfg(target_arch = "x86_64")] {
        mod x86_64;
        pub use self::x86_64::*;
    } else if #[cfg(target_arch = "aarch64")] {
        mod aarch64;
        pub use self::aarch64::*;
    } else {
        mod generic;
        pub use self::generic::*;
    }
}
