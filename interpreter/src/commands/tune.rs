//! `dlc tune FILE`: run enough steps of each `train` recipe for autotuning to measure every
//! region it measures, and save the choices to the tuning file, so that later runs start with
//! them (no measuring, no native code compiled for regions where the interpreter won).

use dlc::train::{apply_overrides, TrainOptions, Trainer};
use dlc_language::syntax::ast::RecipeKind;
use std::path::Path;

pub fn main(file: &Path) -> i32 {
    let (mut p, root) = match crate::session::load_quietly(file, "nothing to tune") {
        Ok(loaded) => loaded,
        Err(status) => return status,
    };
    let recipes: Vec<_> = p.session.t.recipes.iter().filter(|r| r.kind == RecipeKind::Train).cloned().collect();
    if recipes.is_empty() {
        eprintln!("error: `{}` has no `train` recipe to tune", file.display());
        return 1;
    }
    for mut info in recipes {
        let name = info.name.clone().unwrap_or_else(|| "train".into());
        // Warm-up and trials of every measured region, and one step to spare.
        let steps = dlc::exec::fused::TUNE_LAUNCHES + 1;
        if let Err(e) = apply_overrides(&mut info, &[("steps".into(), steps.to_string())]) {
            eprintln!("error: {e}");
            return 1;
        }
        let mut opts = TrainOptions::new(root.clone(), 0);
        opts.tuning_file = true;
        opts.checkpoints = false;
        let result = Trainer::new(&mut p.session, info, opts).and_then(|mut t| t.run().map(|_| crate::reports::tuning(t.kernels())));
        match result {
            Ok(r) => {
                println!("{}", crate::reports::products_line(&r));
                println!(
                "tune: train `{name}`: {} regions of {}+ elements: {} native, {} interpreter ({} measured now, {} from the tuning file){}",
                r["regions"],
                dlc::exec::fused::AUTOTUNE_MIN,
                r["native"],
                r["interpreter"],
                r["measured_now"],
                r["from_file"],
                r["file"]
                    .as_str()
                    .map(|f| format!("; saved in {f}"))
                    .unwrap_or_else(|| "; no tuning file (DLC_TUNE_CACHE=0 or no home directory)".into())
                )
            }
            Err(e) => {
                eprintln!("error: tuning `{name}` failed: {e}");
                return 1;
            }
        }
    }
    0
}
