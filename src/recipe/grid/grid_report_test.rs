//! recipe/grid/grid_report.rs's tests: the grid's report from results written before.
use super::*;
use crate::recipe::grid::TargetTask;
use serde_json::json;

/// evaluate names an installed model by its name, and results written before it did hold
/// the installed folder's path: the report finds the model's figure in either, whether the
/// grid names the model or gives its folder; a trained folder is found by its path.
#[test]
fn a_model_is_found_by_name_or_by_its_installed_folder() {
    let name = "all-MiniLM-L6-v2";
    let folder = home::installed_folder(name)
        .unwrap_or_else(|| panic!("{name} is not installed: bash datasets/fetch.sh models"));
    let target = Domain {
        name: "sts".into(),
        train: "train.parquet".into(),
        test: "test.parquet".into(),
        dev: None,
        task: TargetTask::Sts,
        lr: 2e-5,
        warmup: 0.1,
        article: None,
    };
    let row = |model: &str, v: f64| json!({"model": model, "dataset": "sts", "metrics": {"spearman_cosine": v}});
    for written in [name.to_string(), folder.display().to_string()] {
        let r = Results {
            path: "results.json".into(),
            target: &target,
            results: vec![row("runs/gold-sts", 0.1), row(&written, 0.8)],
        };
        for asked in [Path::new(name), folder.as_path()] {
            let got = r.score(asked).unwrap();
            assert_eq!(got, 0.8, "written {written}, asked {}", asked.display());
        }
        assert_eq!(r.score(Path::new("runs/gold-sts")).unwrap(), 0.1);
        let e = r
            .score(Path::new("runs/gold-other"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no spearman_cosine of model runs/gold-other"),
            "{e}"
        );
    }
}
