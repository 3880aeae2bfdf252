//! Running a helper command (nvidia-smi, nvcc, ldd) with a hard timeout.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// What a command printed, or why there is nothing: "nvidia-smi: not found", "nvidia-smi:
/// timed out after 10 s", "nvidia-smi: exit status 9: NVIDIA-SMI has failed because ...".
pub fn run(program: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{program}: not found"),
            _ => format!("{program}: {e}"),
        })?;
    // Read the pipes on threads so a chatty command cannot block on a full pipe.
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.take(64 << 20).read_to_end(&mut b);
        }
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.take(1 << 20).read_to_end(&mut b);
        }
        b
    });
    let status = match child.wait_timeout(timeout) {
        Ok(Some(s)) => s,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{program}: timed out after {} s",
                timeout.as_secs()
            ));
        }
        Err(e) => return Err(format!("{program}: {e}")),
    };
    let out = String::from_utf8_lossy(&out_t.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned();
    if status.success() {
        Ok(out)
    } else {
        let first = out
            .lines()
            .chain(err.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string();
        Err(format!("{program}: {status}: {first}")
            .trim_end_matches(": ")
            .to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_is_a_reason() {
        let e = run("gpuaudit-no-such-program", &[], Duration::from_secs(1)).unwrap_err();
        assert_eq!(e, "gpuaudit-no-such-program: not found");
    }

    #[cfg(unix)]
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
}
