//! Compiles the generated parser (`src/parser.c`) and the external scanner (`src/scanner.c`).

fn main() {
    let src = std::path::Path::new("src");
    let mut c = cc::Build::new();
    c.std("c11").include(src);
    #[cfg(target_env = "msvc")]
    c.flag("-utf-8");
    for file in ["parser.c", "scanner.c"] {
        let path = src.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        c.file(path);
    }
    // The generated parser has unused parameters and variables by design.
    c.flag_if_supported("-Wno-unused-parameter").flag_if_supported("-Wno-unused-but-set-variable");
    c.compile("tree-sitter-dl");
}
