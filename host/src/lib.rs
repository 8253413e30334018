//! labperf host library: record files read, symbolized, turned into views, rendered and exported, and the lab machines they come from.
//!
//! Layers, each using only those above it in this list (`ARCHITECTURE.md` says what each owns):
//! the base modules (`text`, `progress`, `interrupt`, `fxhash`), [`files`], [`record`],
//! [`symbolize`], [`import`], [`render`], [`views`], [`export`], [`lab`].

pub mod export;
pub mod files;
pub mod fxhash;
pub mod import;
pub mod interrupt;
pub mod lab;
pub mod progress;
pub mod record;
pub mod render;
pub mod symbolize;
pub mod text;
pub mod views;
