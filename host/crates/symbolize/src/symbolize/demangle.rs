//! Symbol names for people: Rust (legacy and v0) and C++ names demangled as perf shows them, PLT stubs as `name@plt`.

/// Demangles Rust (legacy and v0) and C++ names; others are returned as they are.
pub fn demangle(name: &str) -> String {
    demangle_as(name, false)
}

/// A symbol's name for people, as perf shows it: C++ names without their parameter lists
/// and return types (`std::map<K, V>::operator[]`; template arguments stay, so that two
/// instances stay two functions), Rust names without their hash; `full`: the whole C++
/// signature (`--full-names`, perf's `-v`).
pub fn demangle_as(name: &str, full: bool) -> String {
    // A PLT stub's name: its symbol demangled, as perf shows it.
    if let Some(sym) = name.strip_suffix("@plt") {
        return format!("{}@plt", demangle_as(sym, full));
    }
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") && name.len() < 4096 {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            let o = cpp_demangle::DemangleOptions::default();
            let o = if full {
                o
            } else {
                o.no_params().no_return_type()
            };
            if let Ok(d) = s.demangle(&o) {
                return d;
            }
        }
    }
    name.to_string()
}
