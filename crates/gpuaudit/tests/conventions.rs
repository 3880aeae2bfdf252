//! Issue 23, "Conventions": one rule for every command, run on the real binary. The table
//! unless JSON is asked for (piped too); an `--output` extension that names no format is an
//! error naming those known; `-o` and `--output` everywhere (`--out` kept, hidden); the
//! audit's options before `audit`; `report`'s exit status is the audit's; `--interval`'s
//! suggestion is one it accepts; completions know the check ids and the model names.

mod common;

use common::{audit, fixture, gpuaudit, small_rehearsal_as_table};

fn run(args: &[&str]) -> (i32, String, String) {
    let o = gpuaudit()
        .args(args)
        .env("GPUAUDIT_NOW", "2026-12-01T10:00:00Z")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn root(name: &str) -> String {
    fixture(name).display().to_string()
}

#[test]
fn rehearse_piped_is_the_table_as_the_audit_is() {
    let tmp = tempfile::tempdir().unwrap();
    let args = small_rehearsal_as_table();
    let o = gpuaudit()
        .args(&args)
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("gpuaudit rehearse: batch"), "{out}");
    // JSON where the file says so.
    let file = tmp.path().join("r.json");
    let mut with_file = args.clone();
    let f = file.display().to_string();
    with_file.extend(["-o", &f]);
    let o = gpuaudit()
        .args(&with_file)
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["schema"], "gpuaudit.rehearse/1");
}

#[test]
fn an_output_extension_that_names_no_format_is_an_error_naming_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.xyz");
    let o = out.display().to_string();
    let (code, stdout, err) = run(&["--root", &root("h200-x2-vm"), "--output", &o]);
    assert_eq!(code, 2, "{err}");
    assert!(stdout.is_empty());
    assert!(
        err.contains("'.xyz' names no format this command writes; the extensions it knows: .txt (the table), .json, .md, .html"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!out.exists(), "nothing written");
    // With --format the name is the user's business; .txt is the table.
    let (code, _, err) = run(&["--root", &root("h200-x2-vm"), "-o", &o, "--format", "md"]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("###"));
    let txt = dir.path().join("x.txt").display().to_string();
    assert_eq!(run(&["--root", &root("h200-x2-vm"), "-o", &txt]).0, 0);
    // bench knows only the table and JSON (said before it looks for a GPU).
    let md = dir.path().join("b.md").display().to_string();
    let (code, _, err) = run(&["bench", "-o", &md]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(".txt (the table), .json (or give --format)"),
        "{err}"
    );
    // compare and fleet too.
    let (_, report) = audit("h200-x2-vm", &[]);
    let saved = dir.path().join("vm.json");
    std::fs::write(&saved, report.to_string()).unwrap();
    let s = saved.display().to_string();
    let (code, _, err) = run(&["compare", &s, &s, "-o", &o]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["fleet", &s, "-o", &o]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn report_exits_as_the_audit_did() {
    let dir = tempfile::tempdir().unwrap();
    for (name, want) in [("h200-x2-x8-link", 1), ("h200-x2-vm", 0)] {
        let (code, report) = audit(name, &[]);
        assert_eq!(code, want);
        let saved = dir.path().join(format!("{name}.json"));
        std::fs::write(&saved, report.to_string()).unwrap();
        let s = saved.display().to_string();
        for extra in [&[][..], &["-q"][..], &["--format", "json"][..]] {
            let mut args = vec!["report", s.as_str()];
            args.extend(extra);
            let (code, out, err) = run(&args);
            assert_eq!(code, want, "{name} {extra:?}: {err}");
            assert!(!out.is_empty());
        }
    }
}

#[test]
fn output_is_o_and_output_everywhere_and_out_still_works() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--out", "--output", "-o"] {
        let d = dir.path().join(format!("man{flag}"));
        let (code, _, err) = run(&["man", flag, &d.display().to_string()]);
        assert_eq!(code, 0, "{flag}: {err}");
        assert!(d.join("gpuaudit.1").exists(), "{flag}");
    }
    let (_, help, _) = run(&["collect", "--help"]);
    assert!(help.contains("-o, --output <DIR>"), "{help}");
    assert!(!help.contains("--out "), "the old name is hidden: {help}");
    let (_, help, _) = run(&["man", "--help"]);
    assert!(help.contains("-o, --output <DIR>"), "{help}");
    for cmd in [
        &["audit"][..],
        &["report"],
        &["bench"],
        &["burn"],
        &["rehearse"],
        &["fleet"],
        &["compare"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let (_, help, _) = run(&args);
        assert!(help.contains("-o, --output <FILE>"), "{cmd:?}: {help}");
    }
    let f = dir.path().join("r.json");
    let (code, _, err) = run(&[
        "--root",
        &root("h200-x2-vm"),
        "-o",
        &f.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&f)
        .unwrap()
        .contains("gpuaudit.report/1"));
}

#[test]
fn the_audits_options_may_come_before_audit() {
    let r = root("h200-x2-x8-link");
    let (a, before, err) = run(&["--root", &r, "audit", "--format", "json"]);
    assert_eq!(a, 1, "{err}");
    let (b, after, _) = run(&["audit", "--root", &r, "--format", "json"]);
    assert_eq!((a, &before), (b, &after));
    // Before another command: refused, naming the option and where it goes.
    let (code, out, err) = run(&["--root", &r, "checks"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("--root is the audit's, not `gpuaudit checks`'s"),
        "{err}"
    );
}

#[test]
fn interval_suggests_what_it_accepts() {
    let (code, _, err) = run(&["serve", "--interval", "5"]);
    assert_eq!(code, 2);
    assert!(err.contains("'5': a duration needs its unit: 5s"), "{err}");
    assert!(!err.contains("5ms"), "{err}");
}

#[test]
fn completions_offer_check_ids_after_explain_and_models_after_expect() {
    // fish's generator completes options' values only (not a positional's): --expect there.
    for (shell, words) in [
        (
            "bash",
            &["pcie.link", "nvlink.status", "h100-sxm5-80gb", "h200"][..],
        ),
        (
            "zsh",
            &["pcie.link", "nvlink.status", "h100-sxm5-80gb", "h200"][..],
        ),
        ("fish", &["h100-sxm5-80gb", "h200"][..]),
    ] {
        let (code, script, _) = run(&["completions", shell]);
        assert_eq!(code, 0);
        for word in words {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    // Not in --help: the lists are long, and `gpuaudit checks` / `models` give them.
    let (_, help, _) = run(&["explain", "--help"]);
    assert!(!help.contains("nvlink.status"), "{help}");
    // An id stays free text: a typo gets the did-you-mean, not clap's list.
    let (code, _, err) = run(&["explain", "pcie.lnik"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean pcie.link?"), "{err}");
}
