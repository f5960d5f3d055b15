//! The standard library, written in DL and embedded in the binary.

/// (module path, source). `std.prelude` is imported into every module.
pub const MODULES: &[(&str, &str)] = &[
    ("std.prelude", include_str!("../../stdlib/prelude.dl")),
    ("std.nn", include_str!("../../stdlib/nn.dl")),
    ("std.optim", include_str!("../../stdlib/optim.dl")),
    ("std.data", include_str!("../../stdlib/data.dl")),
];

pub fn source(path: &str) -> Option<&'static str> {
    MODULES.iter().find(|(p, _)| *p == path).map(|(_, s)| *s)
}
