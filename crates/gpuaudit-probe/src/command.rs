//! Running a helper command (nvidia-smi, nvcc, ldd, ldconfig) for its output, through
//! [`crate::process`]: its own process group, a hard deadline, output capped.

use crate::process::{self, Caps, Cmd, Ended};
use std::time::Duration;

/// What a command printed, or why there is nothing: "nvidia-smi: not found", "nvidia-smi:
/// timed out after 10 s", "nvidia-smi: exit status 9: NVIDIA-SMI has failed because ...",
/// "nvidia-smi: printed more than 16 MiB".
pub fn run(program: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    run_cmd(&Cmd::new(program).args(args), timeout)
}

/// [`run`] for a prepared command (environment, working directory).
pub fn run_cmd(cmd: &Cmd, timeout: Duration) -> Result<String, String> {
    run_output(cmd, timeout).map_err(|f| f.reason)
}

/// Why a command gave no output to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// In words, naming the program.
    pub reason: String,
    /// It answered, but with more than [`process::STDOUT_CAP`]: an answer too large to read,
    /// not one that was never given.
    pub too_large: bool,
}

/// [`run_cmd`], saying whether the command answered with more than can be read.
pub fn run_output(cmd: &Cmd, timeout: Duration) -> Result<String, Failed> {
    let program = cmd.program();
    let failed = |reason: String| Failed {
        reason,
        too_large: false,
    };
    let o = process::run(cmd, timeout, Caps::default()).map_err(failed)?;
    let status = match o.ended {
        Ended::Exited(st) => st,
        Ended::TimedOut(t) => {
            return Err(failed(format!(
                "{program}: timed out after {} s",
                t.as_secs()
            )));
        }
    };
    if o.stdout_dropped > 0 {
        return Err(Failed {
            reason: format!(
                "{program}: printed more than {} MiB, not read",
                process::STDOUT_CAP >> 20
            ),
            too_large: true,
        });
    }
    let out = o.stdout_text();
    if status.success() {
        return Ok(out);
    }
    let err = o.stderr_text();
    let first = out
        .lines()
        .chain(err.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(500)
        .collect::<String>();
    Err(failed(
        format!("{program}: {status}: {first}")
            .trim_end_matches(": ")
            .to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_is_a_reason() {
        let e = run("gpuaudit-no-such-program", &[], Duration::from_secs(1)).unwrap_err();
        assert_eq!(e, "gpuaudit-no-such-program: not found");
    }

    #[test]
    fn output_failure_and_timeout() {
        assert_eq!(
            run("echo", &["hi"], Duration::from_secs(5)).unwrap(),
            "hi\n"
        );
        let e = run("sh", &["-c", "echo broken; exit 3"], Duration::from_secs(5)).unwrap_err();
        assert!(e.contains("broken"), "{e}");
        let e = run("sleep", &["5"], Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("timed out"), "{e}");
    }

    #[test]
    fn output_over_the_cap_is_a_reason_not_a_truncated_answer() {
        let e = run(
            "sh",
            &["-c", "head -c 20000000 /dev/zero"],
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert_eq!(e, "sh: printed more than 16 MiB, not read");
        // An answer too large to read, which run_output tells from a failure.
        let big = Cmd::new("sh").args(["-c", "head -c 20000000 /dev/zero"]);
        let f = run_output(&big, Duration::from_secs(30)).unwrap_err();
        assert!(f.too_large, "{f:?}");
        let broken = Cmd::new("sh").args(["-c", "echo broken; exit 3"]);
        let f = run_output(&broken, Duration::from_secs(5)).unwrap_err();
        assert!(!f.too_large, "{f:?}");
        let f = run_output(
            &Cmd::new("gpuaudit-no-such-program"),
            Duration::from_secs(1),
        );
        assert!(!f.unwrap_err().too_large);
    }
}
