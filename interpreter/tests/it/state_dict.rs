//! Checkpoints are PyTorch `state_dict`s as they are. tests/state_dicts/ holds what PyTorch itself
//! produced (tests/fixtures/torch_twins.py): for each std.nn layer and example model, its torch
//! twin's `state_dict()` names, dtypes and shapes, and a small model's state dict trained in
//! PyTorch. Here:
//! - a dlc checkpoint of each holds exactly those names, dtypes and shapes;
//! - PyTorch loads each checkpoint with `strict=True` and computes the same outputs to 1e-5 (when
//!   bench/.venv has torch; SKIPPED otherwise, a failure with DLC_REQUIRE_TORCH=1);
//! - `init = "FILE"` starts training from PyTorch's state dict, and `checkpoint = "FILE"` of an
//!   `evaluate` block reads it, giving PyTorch's outputs;
//! - a state dict that does not fit says every missing, unexpected and mis-shaped name.

use dlc::runtime::tensor::Tensor;
use dlc::train::checkpoint;
use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

fn fixtures() -> PathBuf {
    workspace().join("tests/state_dicts")
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlc-state-dict-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a temporary directory");
    d
}

struct Case {
    name: String,
    /// The DL program: the case's model trained two steps into `ck`, then the input and the
    /// trained model's output on it written as x.npy and out.npy.
    program: String,
    /// PyTorch's names, dtypes and shapes, sorted by name.
    want: Vec<(String, String, Vec<usize>)>,
}

/// An example's `model` declarations, as they are in the file.
fn models_of(example: &str) -> String {
    let text = std::fs::read_to_string(workspace().join(example)).expect("the example");
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        inside |= line.starts_with("model ");
        if inside {
            out += line;
            out.push('\n');
        }
        if inside && line == "}" {
            inside = false;
        }
    }
    out
}

fn cases() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("tests/state_dicts")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 16, "expected the fixtures of every std.nn layer and four examples, found {}", files.len());
    files
        .iter()
        .map(|f| {
            let j: Json = serde_json::from_str(&std::fs::read_to_string(f).expect("a fixture")).expect("JSON");
            let dl = j["dl"].as_str().expect("dl");
            let models = j["example"].as_str().map(models_of).unwrap_or_default();
            let input = &j["input"];
            let shape: Vec<String> = input["shape"].as_array().expect("shape").iter().map(|d| d.to_string()).collect();
            let shape = shape.join(", ");
            let sample = match input["high"].as_u64() {
                Some(high) => format!("cast(floor(rand(f32[{shape}], seed: 7) * {high}.0), i64)"),
                None => format!("randn(f32[{shape}], seed: 7)"),
            };
            let batch = input["shape"][0].as_u64().expect("a batch size");
            let program = format!(
                "use std.nn\nuse std.data\nuse std.optim\n{models}\nmodel Inputs() {{\n  forward(x) = x\n}}\n\
                 let sample = {sample}\ndata d = tensors(sample, sample) |> batch({batch})\n\
                 train {{\n  model = {dl}\n  data = d\n  loss = mean(model(x) ** 2)\n  optimizer = sgd(lr: 0.05)\n  steps = 2\n  checkpoint \"ck\" every epoch\n}}\n\
                 infer {{ model = Inputs(), input = sample, output = \"x.npy\" }}\n\
                 infer {{ model = {dl}, checkpoint = \"ck\", input = sample, output = \"out.npy\" }}\n"
            );
            let mut want: Vec<(String, String, Vec<usize>)> = j["state_dict"]
                .as_array()
                .expect("state_dict")
                .iter()
                .map(|e| {
                    let shape = e[2].as_array().expect("a shape").iter().map(|d| d.as_u64().expect("a size") as usize).collect();
                    (e[0].as_str().expect("a name").to_string(), e[1].as_str().expect("a dtype").to_string(), shape)
                })
                .collect();
            want.sort();
            Case { name: j["case"].as_str().expect("case").to_string(), program, want }
        })
        .collect()
}

fn described(tensors: &[(String, Tensor)]) -> Vec<(String, String, Vec<usize>)> {
    let mut v: Vec<_> = tensors.iter().map(|(n, t)| (n.clone(), t.dtype.to_string(), t.shape.clone())).collect();
    v.sort();
    v
}

#[test]
fn checkpoints_have_pytorchs_names_dtypes_and_shapes() {
    let mut failures = vec![];
    for case in cases() {
        let dir = temp(&case.name);
        let mut p = Program::check("case.dl", &case.program, Some(&dir));
        assert!(p.ok, "{}: {:?}", case.name, p.diagnostics());
        let info = p.session.t.recipes[0].clone();
        let mut t = Trainer::new(&mut p.session, info, TrainOptions::new(dir.clone(), 0)).expect("a trainer");
        t.save(&dir.join("ck"), 0, 0).expect("a checkpoint");
        let got = described(&checkpoint::load(&dir.join("ck")).expect("the checkpoint").params);
        if got != case.want {
            failures.push(format!("{}:\n  dlc     {:?}\n  PyTorch {:?}", case.name, got, case.want));
        } else {
            println!("{}: {} tensors, as PyTorch names them", case.name, got.len());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "checkpoints differ from PyTorch's state_dict:\n{}", failures.join("\n"));
}

fn torch_python() -> Option<PathBuf> {
    let py = workspace().join("bench/.venv/bin/python");
    let ok =
        py.exists() && Command::new(&py).args(["-c", "import torch, safetensors"]).output().map(|o| o.status.success()).unwrap_or(false);
    if ok {
        return Some(py);
    }
    assert!(
        std::env::var_os("DLC_REQUIRE_TORCH").is_none(),
        "DLC_REQUIRE_TORCH is set but bench/.venv has no torch and safetensors: run bash bench/setup.sh"
    );
    eprintln!("SKIPPED: no torch in bench/.venv (bash bench/setup.sh installs it)");
    None
}

#[test]
fn pytorch_loads_dlc_checkpoints_strictly_with_the_same_outputs() {
    let Some(py) = torch_python() else { return };
    let root = temp("e2e");
    let mut names = vec![];
    for case in cases() {
        let dir = root.join(&case.name);
        std::fs::create_dir_all(&dir).expect("a case directory");
        std::fs::write(dir.join("case.dl"), &case.program).expect("write");
        let run = Command::new(env!("CARGO_BIN_EXE_dlc")).args(["run", "case.dl"]).current_dir(&dir).output().expect("dlc");
        assert!(run.status.success(), "{}: dlc run failed:\n{}", case.name, String::from_utf8_lossy(&run.stderr));
        names.push(case.name);
    }
    // One Python process for every case: importing torch takes seconds.
    let check = Command::new(&py)
        .arg(workspace().join("tests/fixtures/torch_twins.py"))
        .arg("check-dirs")
        .arg(&root)
        .args(&names)
        .output()
        .expect("python");
    let said = String::from_utf8_lossy(&check.stdout).to_string() + &String::from_utf8_lossy(&check.stderr);
    print!("{said}");
    assert!(check.status.success(), "PyTorch could not load a dlc checkpoint or computes other outputs:\n{said}");
    for name in &names {
        assert!(said.contains(&format!("{name}: loaded with strict=True")), "{name} was not checked:\n{said}");
    }
    // Two training steps: PyTorch reads the two batches each batch norm counted.
    let counts: Vec<&str> = said.lines().filter(|l| l.contains("num_batches_tracked")).collect();
    assert!(counts.len() >= 4 && counts.iter().all(|l| l.ends_with("= 2")), "{counts:?}");
    let _ = std::fs::remove_dir_all(&root);
}

/// The DL twin of torch_twins.py's `Small`, which pretrained_small.safetensors is for.
const SMALL: &str = r#"
use std.nn
use std.data
use std.optim
model Small() {
  fc = Linear(4, 8)
  bn = BatchNorm1d(8)
  head = Sequential((Linear(8, 8), relu, Linear(8, 3)))
  forward(x: f32[B, 4]) -> f32[B, 3] = x |> fc |> bn |> relu |> head
}
data d = npy("pretrained_small_x.npy", row: f32[4], labels: "pretrained_small_y.npy", label_row: f32[3]) |> batch(6)
"#;

fn trainer_error(src: &str, root: &Path) -> String {
    let mut p = Program::check("init.dl", src, Some(root));
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    match Trainer::new(&mut p.session, info, TrainOptions::new(root.to_path_buf(), 0)) {
        Ok(_) => panic!("the trainer started from a state dict that does not fit"),
        Err(e) => e.to_string(),
    }
}

fn train_from(file: &str) -> String {
    format!("{SMALL}train {{\n  model = Small()\n  data = d\n  loss = mse(model(x), y)\n  optimizer = sgd(lr: 0.1)\n  steps = 1\n  init = \"{file}\"\n}}\n")
}

#[test]
fn init_starts_training_from_a_pytorch_state_dict() {
    let root = fixtures();
    let file = checkpoint::read_safetensors(&root.join("pretrained_small.safetensors")).expect("the fixture");
    let mut p = Program::check("init.dl", &train_from("pretrained_small.safetensors"), Some(&root));
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let t = Trainer::new(&mut p.session, info, TrainOptions::new(root.clone(), 0)).expect("a trainer");
    let mut got = t.parameters();
    got.extend(t.buffers());
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(described(&got), described(&file));
    for ((n, a), (_, b)) in got.iter().zip(&file) {
        assert_eq!(a.to_f64(), b.to_f64(), "`{n}` is PyTorch's value");
    }
    let tracked = got.iter().find(|(n, _)| n == "bn.num_batches_tracked").expect("the counter");
    assert_eq!(tracked.1.to_f64(), vec![5.0], "PyTorch trained 5 steps");

    // An evaluation from the same file gives PyTorch's eval-mode outputs (y is what PyTorch computed).
    let src = format!("{SMALL}evaluate {{ model = Small(), data = d, checkpoint = \"pretrained_small.safetensors\", metrics = max(abs(model(x) - y)) }}\n");
    let mut p = Program::check("eval.dl", &src, Some(&root));
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut t = Trainer::new(&mut p.session, info, TrainOptions::new(root.clone(), 0)).expect("an evaluation");
    let worst = t.evaluate_recipe().expect("evaluated")[0];
    assert!(worst <= 1e-5, "dlc's outputs differ from PyTorch's by {worst}");
}

#[test]
fn a_state_dict_that_does_not_fit_names_every_difference() {
    let root = fixtures();
    let dir = temp("misfit");
    for f in ["pretrained_small_x.npy", "pretrained_small_y.npy"] {
        std::fs::copy(root.join(f), dir.join(f)).expect("copy");
    }
    // PyTorch's file with one name gone, one added, one shape changed.
    let mut file = checkpoint::read_safetensors(&root.join("pretrained_small.safetensors")).expect("the fixture");
    file.retain(|(n, _)| n != "fc.bias");
    file.push(("extra.weight".into(), Tensor::from_f64(dlc_language::types::DType::F32, vec![2], vec![0.0, 1.0])));
    for (n, t) in file.iter_mut() {
        if n == "head.2.weight" {
            *t = Tensor::from_f64(t.dtype, vec![3, 4], vec![0.0; 12]);
        }
    }
    write_safetensors(&dir.join("misfit.safetensors"), &file);
    let e = trainer_error(&train_from("misfit.safetensors"), &dir);
    for part in [
        "into `Small`",
        "missing (the model has them, the file does not): `fc.bias`",
        "unexpected (the file has them, the model does not): `extra.weight`",
        "`head.2.weight`: f32[3, 4] in the file, f32[3, 8] in the model",
    ] {
        assert!(e.contains(part), "the message lacks `{part}`:\n{e}");
    }
    // A file that is not there says so.
    assert!(trainer_error(&train_from("absent.safetensors"), &dir).contains("absent.safetensors"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn write_safetensors(path: &Path, tensors: &[(String, Tensor)]) {
    let dtype = |t: &Tensor| match t.dtype {
        dlc_language::types::DType::I64 => safetensors::Dtype::I64,
        _ => safetensors::Dtype::F32,
    };
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, t)| match dtype(t) {
            safetensors::Dtype::I64 => t.to_f64().iter().flat_map(|v| (*v as i64).to_le_bytes()).collect(),
            _ => t.to_f64().iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((n, t), b)| (n.clone(), safetensors::tensor::TensorView::new(dtype(t), t.shape.clone(), b).expect("a view")))
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).expect("serialised")).expect("written");
}
