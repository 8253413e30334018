//! Helpers shared by the integration tests: locating built binaries and the golden data.
