//! Installed versions of the stack around the GPU: the package database (dpkg's status file,
//! readable by anyone; rpm's database through `rpm -qa`, which is the only way to read it),
//! and the container stack's programs' own `--version` answers (runc, containerd, dockerd,
//! nvidia-ctk, nvidia-container-cli), each through the bounded command runner.
//!
//! `collect` writes what this reads: dpkg's status file reduced to the watched packages (same
//! format), `cmd/rpm-packages.txt` (the watched lines of rpm's listing) and
//! `cmd/program-versions.json` (each program's answer, bounded as the live read bounds it), so
//! the snapshot gives the same facts.

use crate::command;
use crate::root::{abs, RootFs};
use gpuaudit_core::facts::{InstalledPackages, ProgramVersion, VersionFacts};
use gpuaudit_core::parse::packages::{
    format_dpkg_status, format_rpm_listing, parse_dpkg_status, parse_rpm_listing, RPM_QUERY_FORMAT,
};
use gpuaudit_core::parse::version::program_version;
use gpuaudit_core::reading::Reading;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub const DPKG_STATUS: &str = "var/lib/dpkg/status";
/// Where rpm keeps its database (the older and the newer place).
pub const RPM_DBS: &[&str] = &["var/lib/rpm", "usr/lib/sysimage/rpm"];
pub const RPM_FILE: &str = "cmd/rpm-packages.txt";
pub const PROGRAMS_FILE: &str = "cmd/program-versions.json";

/// The programs asked for their version, and where each is looked for (the first that exists).
pub const PROGRAMS: &[(&str, &[&str])] = &[
    (
        "runc",
        &[
            "usr/bin/runc",
            "usr/sbin/runc",
            "usr/local/bin/runc",
            "usr/local/sbin/runc",
        ],
    ),
    (
        "containerd",
        &["usr/bin/containerd", "usr/local/bin/containerd"],
    ),
    (
        "dockerd",
        &[
            "usr/bin/dockerd",
            "usr/sbin/dockerd",
            "usr/local/bin/dockerd",
        ],
    ),
    (
        "nvidia-ctk",
        &["usr/bin/nvidia-ctk", "usr/local/bin/nvidia-ctk"],
    ),
    (
        "nvidia-container-cli",
        &[
            "usr/bin/nvidia-container-cli",
            "usr/local/bin/nvidia-container-cli",
        ],
    ),
];

/// One program's `--version` runs this long at most.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(5);
/// `rpm -qa` runs this long at most (a few seconds on a large database).
pub const RPM_TIMEOUT: Duration = Duration::from_secs(30);
/// What is kept of a program's answer: its first lines, each cut.
pub const ANSWER_LINES: usize = 8;
pub const ANSWER_LINE_CHARS: usize = 200;

pub const NO_DATABASE: &str =
    "no package database (neither /var/lib/dpkg/status nor an rpm database under /var/lib/rpm or /usr/lib/sysimage/rpm)";
pub const NO_VERSIONS_PART: &str =
    "not in the snapshot (no cmd/program-versions.json: it was collected before gpuaudit read versions)";

/// A program's answer as the snapshot keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub program: String,
    /// The machine's path ("/usr/bin/runc").
    pub path: String,
    /// What it printed (bounded), where it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Why there is no answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn bound(text: &str) -> String {
    text.lines()
        .take(ANSWER_LINES)
        .map(|l| l.chars().take(ANSWER_LINE_CHARS).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Ask each program that exists under the live root (never in a snapshot).
pub fn ask_programs(root: &RootFs) -> Vec<Answer> {
    let mut out = Vec::new();
    for (program, paths) in PROGRAMS {
        let Some(rel) = paths.iter().find(|p| root.exists(p)) else {
            continue;
        };
        let path = abs(rel);
        let (output, error) = match command::run(&path, &["--version"], PROGRAM_TIMEOUT) {
            Ok(o) => (Some(bound(&o)), None),
            Err(e) => (None, Some(bound(&e))),
        };
        out.push(Answer {
            program: program.to_string(),
            path,
            output,
            error,
        });
    }
    out
}

/// The facts of the answers: the version each printed, or why there is none.
pub fn program_facts(answers: &[Answer]) -> Vec<ProgramVersion> {
    answers
        .iter()
        .map(|a| {
            let version = match (&a.output, &a.error) {
                (_, Some(e)) => Reading::unavailable(e.clone()),
                (Some(o), None) => match program_version(&a.program, o) {
                    Some(v) => Reading::Value(v),
                    None => Reading::unavailable(format!(
                        "{} --version printed no version: '{}'",
                        a.path,
                        gpuaudit_core::parse::host::truncate(
                            o.lines().next().unwrap_or("").trim(),
                            80
                        )
                    )),
                },
                (None, None) => Reading::unavailable(format!("{}: no answer recorded", a.path)),
            };
            ProgramVersion {
                program: a.program.clone(),
                path: a.path.clone(),
                version,
            }
        })
        .collect()
}

/// The programs' answers: asked live, read back from a snapshot.
pub fn answers(root: &RootFs) -> Result<Vec<Answer>, String> {
    if root.is_live() {
        return Ok(ask_programs(root));
    }
    match root.read_text(PROGRAMS_FILE)? {
        None => Err(NO_VERSIONS_PART.into()),
        Some(t) => serde_json::from_str(&t)
            .map_err(|e| format!("{}: not a list of answers: {e}", abs(PROGRAMS_FILE))),
    }
}

/// Whether rpm keeps a database under this root.
fn has_rpm(root: &RootFs) -> bool {
    RPM_DBS.iter().any(|d| root.exists(d))
}

/// rpm's listing: `rpm -qa` live, `cmd/rpm-packages.txt` from a snapshot. `Ok(None)`: no rpm
/// database.
fn rpm_listing(root: &RootFs) -> Result<Option<String>, String> {
    if root.is_live() {
        if !has_rpm(root) {
            return Ok(None);
        }
        let qf = RPM_QUERY_FORMAT.replace("\\t", "\t").replace("\\n", "\n");
        return command::run("rpm", &["-qa", "--qf", &qf], RPM_TIMEOUT).map(Some);
    }
    root.read_text(RPM_FILE)
}

/// The watched packages of the package database. A snapshot keeps the database reduced to
/// them (not the machine's whole software list), in the database's own format, and rpm's
/// listing under `cmd/`.
pub fn read_packages(root: &RootFs) -> Reading<InstalledPackages> {
    let quiet = root.unrecorded();
    match quiet.read_text(DPKG_STATUS) {
        Ok(Some(t)) => {
            let packages = parse_dpkg_status(&t);
            root.record(DPKG_STATUS, format_dpkg_status(&packages));
            return Reading::Value(InstalledPackages {
                source: abs(DPKG_STATUS),
                packages,
            });
        }
        Ok(None) => {}
        Err(e) => {
            root.record_mark(DPKG_STATUS, &e);
            return Reading::unavailable(e);
        }
    }
    match rpm_listing(&quiet) {
        Ok(Some(t)) => {
            let packages = parse_rpm_listing(&t);
            root.record(RPM_FILE, format_rpm_listing(&packages));
            Reading::Value(InstalledPackages {
                source: "rpm -qa".into(),
                packages,
            })
        }
        Ok(None) => Reading::unavailable(NO_DATABASE),
        Err(e) => {
            root.record_note(format!("{RPM_FILE}: {e}"));
            root.record_mark(RPM_FILE, &e);
            Reading::unavailable(e)
        }
    }
}

/// The versions; from a snapshot without a versions part, nothing (and a snapshot collected
/// from it must not claim one).
pub fn read(root: &RootFs) -> VersionFacts {
    let quiet = root.unrecorded();
    if !quiet.is_live() && !quiet.exists(PROGRAMS_FILE) {
        return VersionFacts::unread(NO_VERSIONS_PART);
    }
    let packages = read_packages(root);
    let answers = answers(&quiet);
    match &answers {
        Ok(a) => match serde_json::to_string_pretty(a) {
            Ok(s) => root.record(PROGRAMS_FILE, s),
            Err(e) => root.record_note(format!("{PROGRAMS_FILE}: {e}")),
        },
        Err(e) => root.record_mark(PROGRAMS_FILE, e),
    }
    VersionFacts {
        packages,
        programs: answers.map(|a| program_facts(&a)).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn snapshot_versions_read_back() {
        let d = tempfile::tempdir().unwrap();
        let root = RootFs::new(d.path());
        assert_eq!(read(&root), VersionFacts::unread(NO_VERSIONS_PART));
        fs::create_dir_all(d.path().join("cmd")).unwrap();
        let answers = vec![
            Answer {
                program: "runc".into(),
                path: "/usr/bin/runc".into(),
                output: Some("runc version 1.1.11\ncommit: v1.1.11-0-g4bccb38\n".into()),
                error: None,
            },
            Answer {
                program: "containerd".into(),
                path: "/usr/bin/containerd".into(),
                output: Some("containerd: weird".into()),
                error: None,
            },
            Answer {
                program: "dockerd".into(),
                path: "/usr/bin/dockerd".into(),
                output: None,
                error: Some("/usr/bin/dockerd: timed out after 5 s".into()),
            },
        ];
        fs::write(
            d.path().join(PROGRAMS_FILE),
            serde_json::to_string(&answers).unwrap(),
        )
        .unwrap();
        let v = read(&root);
        assert_eq!(v.packages.reason(), Some(NO_DATABASE));
        let p = v.programs.value().unwrap();
        assert_eq!(p[0].version, Reading::Value("1.1.11".to_string()));
        assert!(p[1]
            .version
            .reason()
            .unwrap()
            .contains("printed no version"));
        assert_eq!(
            p[2].version.reason(),
            Some("/usr/bin/dockerd: timed out after 5 s")
        );
        // An rpm listing; then a dpkg status file, which wins.
        fs::write(
            d.path().join(RPM_FILE),
            "runc\t1.1.12-1.el9\tx86_64\tRed Hat, Inc.\n",
        )
        .unwrap();
        let v = read(&root);
        assert_eq!(v.packages.value().unwrap().source, "rpm -qa");
        assert_eq!(v.package("runc").unwrap().version, "1.1.12-1.el9");
        fs::create_dir_all(d.path().join("var/lib/dpkg")).unwrap();
        fs::write(
            d.path().join(DPKG_STATUS),
            "Package: runc\nStatus: install ok installed\nVersion: 1.1.12-0ubuntu2\n",
        )
        .unwrap();
        let v = read(&root);
        assert_eq!(v.packages.value().unwrap().source, "/var/lib/dpkg/status");
        fs::write(
            d.path().join(DPKG_STATUS),
            "# gpuaudit-unreadable: /var/lib/dpkg/status: permission denied\n",
        )
        .unwrap();
        assert_eq!(
            read(&root).packages.reason(),
            Some("/var/lib/dpkg/status: permission denied")
        );
        fs::write(d.path().join(PROGRAMS_FILE), "{not json").unwrap();
        assert!(read(&root)
            .programs
            .reason()
            .unwrap()
            .contains("not a list"));
    }

    #[test]
    fn answers_are_bounded() {
        let long = format!("{}\n", "x".repeat(1000)).repeat(50);
        let b = bound(&long);
        assert_eq!(b.lines().count(), ANSWER_LINES);
        assert!(b.lines().all(|l| l.chars().count() == ANSWER_LINE_CHARS));
    }
}
