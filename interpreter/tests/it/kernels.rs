//! The generated kernels of every example and bench program, in the kernel IR (dlc::kernels):
//! rendered as C and run against the interpreter on the same inputs (elementwise kernels and
//! groups bit for bit, every kind checked), and rendered as CUDA C and compiled by NVRTC and
//! ptxas for sm_80 and sm_90 without register spills, when the CUDA compilers are installed
//! (scripts/cuda-toolchain.sh; CI installs them and sets DLC_REQUIRE_CUDA_TOOLCHAIN=1 so that
//! their absence fails rather than skips).

use dlc::kernels::{c_check, collect, emu_check, Generated};
use dlc::{ExecMode, Program};
use dlc_jit::kir::{Inst, Kernel};
use dlc_language::ir::UnaryOp;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The example and bench programs, plus variants: the bf16 MLP step under f16, and a program of
/// math at the edges of its range (as tests/jit.rs uses).
fn programs() -> Vec<(String, String, PathBuf)> {
    let ws = workspace();
    let mut out = vec![];
    for dir in ["examples", "bench"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(ws.join(dir)).expect("a directory").map(|e| e.expect("an entry").path()).collect();
        files.sort();
        for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "dl")) {
            let text = std::fs::read_to_string(&f).expect("readable");
            out.push((f.display().to_string(), text, ws.join(dir)));
        }
    }
    let bf16 = std::fs::read_to_string(ws.join("bench/mlp_step_128_bf16.dl")).expect("readable");
    assert!(bf16.contains("precision = bf16"));
    out.push(("mlp_step_128_f16.dl".into(), bf16.replace("precision = bf16", "precision = f16"), ws.join("bench")));
    out.push((
        "math_edges.dl".into(),
        "let x = randn(f32[4097], seed: 1) * 4.0\n\
         let y = randn(f32[4097], seed: 2)\n\
         print(gelu(x) * sigmoid(y) + maximum(x, y) - minimum(x, 0.5 * y))\n\
         print(where(x > y, exp(-abs(x)), sqrt(abs(y))) / (1.0 + abs(x)) + erf(y) * cast(x != y, f32))\n\
         print(exp(x * 40.0), exp(-x * 40.0), erf(x * 3.0), -x, 1.0 / (x + 0.25))\n\
         print(tanh(x * 3.0), tanh(y), log(abs(x)), log(x), log(abs(y) * 1e-40), log(exp(x * 30.0)), log(x * 0.0))\n\
         print(cast(cast(x, bf16) * cast(y, bf16), f32), cast(cast(x, f16) + cast(y, f16), f32))\n"
            .into(),
        ws.join("examples"),
    ));
    out
}

fn kernels_of(name: &str, text: &str, root: &Path) -> Vec<Generated> {
    let mut p = Program::run_with(name, text, Some(root), false, 0, ExecMode::Fused);
    assert!(p.ok, "{name}: {:?}", p.diagnostics());
    let (gens, skipped) = collect(&mut p, root);
    assert!(skipped.is_empty(), "{name}: kernels not lowered to the kernel IR: {skipped:?}");
    gens
}

#[test]
fn every_generated_kernel_as_c_computes_what_the_interpreter_computes() {
    let dir = std::env::temp_dir().join(format!("dlc-c-check-{}", std::process::id()));
    let mut kinds = std::collections::BTreeMap::new();
    let (mut checked, mut large) = (0, 0);
    for (name, text, root) in programs() {
        let mut gens = kernels_of(&name, &text, &root);
        // Kernels over 4M elements (whole-test-set evaluations) take most of the time in a debug
        // build and run the same code as smaller ones; `dlc kernels FILE --check c` runs them all.
        let n = gens.len();
        gens.retain(|g| g.kernel.params().iter().all(|(p, _)| p.len <= 1 << 22));
        large += n - gens.len();
        checked += gens.len();
        let results = c_check::check(&gens, &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(results.len(), gens.len());
        for r in &results {
            assert!(r.ok, "{name}: {} ({}) differs from the interpreter: {r:?}", r.name, r.origin);
            *kinds.entry(r.kind).or_insert(0) += 1;
        }
    }
    assert!(large * 20 < checked, "{large} kernels too large to check against {checked} checked");
    eprintln!("{checked} kernels checked, {large} over 4M elements left to `dlc kernels --check c`");
    // Every kind of the kernel IR was exercised.
    for kind in ["elementwise", "group", "rows", "sum"] {
        assert!(kinds.get(kind).copied().unwrap_or(0) > 0, "no {kind} kernel was checked: {kinds:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The check is not vacuous: a kernel whose body computes something else is caught.
#[test]
fn the_c_check_catches_a_wrong_kernel() {
    let ws = workspace();
    let text = std::fs::read_to_string(ws.join("examples/gelu.dl")).expect("readable");
    let mut gens = kernels_of("gelu.dl", &text, &ws.join("examples"));
    // (Its input's seeded draws are a kernel too.)
    let at = gens.iter().position(|g| matches!(g.kernel, Kernel::Elementwise(_))).expect("gelu is an elementwise kernel");
    gens = vec![gens.remove(at)];
    let Kernel::Elementwise(e) = &mut gens[0].kernel else { unreachable!("found above") };
    // erf replaced by tanh: close in shape, wrong in value.
    let op = e.body.iter_mut().find_map(|i| if let Inst::Unary(op, _) = i { Some(op) } else { None }).expect("gelu calls erf");
    assert_eq!(*op, UnaryOp::Erf);
    *op = UnaryOp::Tanh;
    let dir = std::env::temp_dir().join(format!("dlc-c-check-wrong-{}", std::process::id()));
    let results = c_check::check(&gens, &dir).expect("the check runs");
    assert!(!results[0].ok && results[0].differing > 0, "{:?}", results[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CUDA compilers scripts/cuda-toolchain.sh installs, if they are there.
fn toolchain() -> Option<(PathBuf, PathBuf)> {
    let nvidia = workspace().join(".cuda/python/nvidia");
    let lib = nvidia.join("cuda_nvrtc/lib");
    let ptxas = nvidia.join("cuda_nvcc/bin/ptxas");
    (lib.join("libnvrtc.so.12").exists() && ptxas.exists()).then_some((lib, ptxas))
}

#[test]
fn every_generated_kernel_compiles_with_nvrtc_and_ptxas_without_spills() {
    let Some((lib, ptxas)) = toolchain() else {
        assert!(
            std::env::var_os("DLC_REQUIRE_CUDA_TOOLCHAIN").is_none(),
            "DLC_REQUIRE_CUDA_TOOLCHAIN is set but .cuda/ has no NVRTC and ptxas: run scripts/cuda-toolchain.sh"
        );
        eprintln!("SKIPPED: no CUDA compilers in .cuda/ (bash scripts/cuda-toolchain.sh installs them)");
        return;
    };
    // NVRTC is loaded at run time from the library path, which is read when a process starts:
    // the check runs in a `dlc kernels` process with the path set.
    let dir = std::env::temp_dir().join(format!("dlc-cuda-check-{}", std::process::id()));
    let (mut builds, mut uncontracted) = (0, 0);
    for (name, text, root) in programs() {
        // Variants live only in memory: write them next to their data so paths resolve.
        let file = if Path::new(&name).exists() {
            PathBuf::from(&name)
        } else {
            root.join(format!(".kernels-test-{}-{name}", std::process::id()))
        };
        let temporary = !Path::new(&name).exists();
        if temporary {
            std::fs::write(&file, &text).expect("writable");
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dlc"))
            .args(["kernels", "--check", "cuda", "--json", "--out"])
            .arg(&dir)
            .arg(&file)
            .env("LD_LIBRARY_PATH", &lib)
            .env("PTXAS", &ptxas)
            .output()
            .expect("dlc runs");
        if temporary {
            let _ = std::fs::remove_file(&file);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: dlc kernels --check cuda failed:\n{stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let kernels = report["kernels"].as_array().expect("kernels").len();
        let built = report["cuda_check"]["kernels"].as_array().expect("builds");
        assert_eq!(built.len(), 2 * kernels, "{name}: every kernel assembled for sm_80 and sm_90");
        for b in built {
            assert_eq!(b["spill_stores"].as_u64().unwrap_or(1) + b["spill_loads"].as_u64().unwrap_or(1), 0, "{name}: {b}");
            assert!(b["registers"].as_u64().unwrap_or(0) > 0, "{name}: {b}");
        }
        builds += built.len();
        uncontracted += kernels_without_contraction(&dir, &name);
    }
    assert!(builds > 500, "only {builds} kernel builds");
    assert!(uncontracted > 50, "only {uncontracted} kernels checked for contracted multiply-adds");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A C type name, as in a cast `(float)x` or `(long long)i`.
fn is_type(word: &str) -> bool {
    ["float", "double", "int", "long", "unsigned", "bool", "short", "char"].contains(&word)
}

/// NVRTC must not contract a multiply and an add into one rounding (the CPU rounds both): every
/// kernel whose CUDA C calls no math helper (those call `fmaf` where the CPU calls `mul_add`) has
/// no `fma` in its sm_90 PTX. Returns how many kernels were checked.
fn kernels_without_contraction(out: &Path, name: &str) -> usize {
    let dir = out.join("cuda");
    let cu = std::fs::read_to_string(dir.join("kernels.cu")).expect("the check wrote kernels.cu");
    let ptx = std::fs::read_to_string(dir.join("kernels.sm_90.ptx")).expect("the check wrote the PTX");
    let mut checked = 0;
    for body in cu.split("extern \"C\" __global__ void ").skip(1) {
        let named = body.strip_prefix("__launch_bounds__(").and_then(|b| b.split_once(") ")).map_or(body, |(_, rest)| rest);
        let kernel = named.split('(').next().expect("a name").trim();
        // Calls other than these may contain fused multiply-adds of their own (`fmaf`, dlc's
        // math helpers, CUDA's `powf`): such kernels are not checked.
        let plain = ["sqrtf", "__int_as_float", "__float_as_int", "__syncthreads", "__shfl_down_sync", "for", "if", "while"];
        let body_text = named.split_once('{').map_or("", |(_, b)| b);
        let calls_other = body_text.match_indices('(').any(|(i, _)| {
            let word: String = body_text[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            !word.is_empty() && !word.chars().all(|c| c.is_ascii_digit()) && !plain.contains(&word.as_str()) && !is_type(&word)
        });
        if calls_other {
            continue;
        }
        let entry =
            ptx.split(".entry ").find(|e| e.starts_with(&format!("{kernel}("))).unwrap_or_else(|| panic!("{name}: no PTX for {kernel}"));
        let entry = entry.split("\n}\n").next().expect("a body");
        assert!(!entry.contains("fma.rn"), "{name}: NVRTC contracted a multiply-add in {kernel}");
        checked += 1;
    }
    checked
}

/// The CUDA C itself, compiled for the CPU with an emulation of blocks, threads, barriers and
/// warp shuffles, against the interpreter: the small programs (every barrier switches through
/// all of a block's threads), batch norm's sums, and rows long enough for cross-warp reductions.
#[test]
fn the_cuda_c_emulated_on_the_cpu_computes_what_the_interpreter_computes() {
    let wanted = [
        "iris.dl",
        "digits.dl",
        "gelu.dl",
        "tour.dl",
        "mnist_mlp.dl",
        "cifar_bn.dl",
        "mlp_step_128_bf16.dl",
        "mlp_step_128_f16.dl",
        "math_edges.dl",
    ];
    let mut programs: Vec<(String, String, PathBuf)> =
        programs().into_iter().filter(|(name, _, _)| wanted.iter().any(|w| name.ends_with(w))).collect();
    assert_eq!(programs.len(), wanted.len());
    programs.push((
        "long_rows.dl".into(),
        "let x = randn(f32[3, 1000], seed: 1) * 2.0\n\
         let y = randn(f32[5, 300], seed: 2)\n\
         print(softmax(x))\n\
         print(log_softmax(x * 0.5) + 1.0)\n\
         print(layer_norm(y, randn(f32[300], seed: 3), randn(f32[300], seed: 4)))\n"
            .into(),
        workspace().join("examples"),
    ));
    // Movement outside fused regions as device kernels: concatenations (of f32 and i64),
    // slices with negative steps, i64 arithmetic.
    programs.push((
        "movement.dl".into(),
        "let x = randn(f32[4, 6], seed: 1)\n\
         let i = cast(abs(randn(f32[4, 6], seed: 2)) * 3.0, i64)\n\
         print(concat((x, x * 2.0, x[:, 1:3]), axis: 1))\n\
         print(x[::-1, ::2] + 1.0)\n\
         print(concat((i, i[1:3]), axis: 0))\n\
         print(i[::-1, 1:] * 2)\n"
            .into(),
        workspace().join("examples"),
    ));
    // The transformer's layer-norm backward: rows whose sums cancel, where an f32 sum in the
    // GPU's order differed from the CPU's f64 one (found on the first real GPU run).
    let char_lm = std::fs::read_to_string(workspace().join("examples/char_lm.dl")).expect("char_lm.dl");
    let small = char_lm
        .replace("dim: int = 128", "dim: int = 32")
        .replace("block: int = 64", "block: int = 16")
        .replace("block: 64", "block: 16")
        .replace("batch(32", "batch(4")
        .replace("  b2 = TransformerBlock(dim, heads, block)\n", "")
        .replace("b2(b1(x))", "b1(x)")
        .replace("context     = 64", "context     = 16");
    assert!(small.contains("dim: int = 32") && small.contains("b1(x)"), "char_lm.dl changed: update the variant");
    programs.push(("char_lm_small.dl".into(), small, workspace().join("examples")));
    // An embedding gradient over several chunks of indices (600: three of 256) and columns (300:
    // two tiles of 256), the block-per-row form's loops and partial ends.
    programs.push((
        "embedding_grad.dl".into(),
        "use std.nn\nuse std.data\nuse std.optim\n\
         model E(vocab: int = 65, dim: int = 300) {\n  tok = Embedding(vocab, dim)\n  head = Linear(dim, vocab)\n  \
         forward(idx: i64[B, T]) -> f32[B, T, vocab] = head(tok(idx))\n}\n\
         data d = text(\"data/tinyshakespeare/input.txt\", block: 300, level: \"char\") |> take(8) |> batch(2, drop_last: true)\n\
         train {\n  model = E()\n  data = d\n  loss = cross_entropy(reshape(model(x), (-1, 65)), flatten(y))\n  \
         optimizer = sgd(lr: 0.1)\n  steps = 1\n}\n"
            .into(),
        workspace().join("examples"),
    ));
    let dir = std::env::temp_dir().join(format!("dlc-emu-check-{}", std::process::id()));
    let mut kinds = std::collections::BTreeMap::new();
    for (name, text, root) in programs {
        let gens = kernels_of(&name, &text, &root);
        let results = emu_check::check(&gens, &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        for r in &results {
            assert!(r.ok, "{name}: {} ({}) emulated differs from the interpreter: {r:?}", r.name, r.origin);
            // Not only within tolerance: the CUDA C computes the CPU's arithmetic (ARCHITECTURE's
            // invariant), so every element is the interpreter's, bit for bit.
            assert_eq!(r.differing, 0, "{name}: {} ({}) emulated is not bit for bit the interpreter's: {r:?}", r.name, r.origin);
            *kinds.entry(r.kind).or_insert(0) += 1;
        }
    }
    for kind in [
        "elementwise",
        "group",
        "rows",
        "sum",
        "copy",
        "concat",
        "unslice",
        "int_binary",
        "rand",
        "argmax",
        "pool",
        "pool_grad",
        "take_grad",
    ] {
        assert!(kinds.get(kind).copied().unwrap_or(0) > 0, "no {kind} kernel was emulated: {kinds:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
