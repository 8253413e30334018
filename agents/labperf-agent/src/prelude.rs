//! What every module takes from `alloc` (`std`'s prelude gives these; `no_std`'s does not).

pub use alloc::boxed::Box;
pub use alloc::format;
pub use alloc::string::{String, ToString};
pub use alloc::vec;
pub use alloc::vec::Vec;
