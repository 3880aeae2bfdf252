//! Versions of the software stack as programs and package databases write them, and how two
//! of them compare.
//!
//! One scheme serves every product security.versions judges: the NVIDIA driver
//! ("570.133.20"), runc ("1.1.12", "1.4.0-rc.3"), Docker ("27.1.1"), containerd ("1.7.27",
//! "v2.0.4"), the container toolkit ("1.17.8"), and the same versions as packages write them
//! ("5:27.1.1-1~ubuntu.22.04~jammy", "1.17.8-1", "1.1.12-0ubuntu2~22.04.1", "1.7.27-1.el9").
//! [`Upstream::parse`] strips a package's epoch and revision, and compares the rest as Debian
//! compares versions (deb-version(7)): digit runs as numbers, other runs character by
//! character with letters before other characters and `~` before everything, even the end.
//! A pre-release written "-rc.3" / "-beta.1" / "-alpha" is read as "~rc.3", so that
//! "1.4.0-rc.3" < "1.4.0", as it is.

use std::cmp::Ordering;

/// Longest version string kept (a longer one is not a version).
pub const MAX_VERSION_CHARS: usize = 128;

/// An upstream version, with what surrounded it in a package's version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// "1.1.12", "1.4.0~rc.3": what is compared.
    pub version: String,
    /// The package's revision ("0ubuntu2~22.04.1", "1.el9"), where there was one.
    pub revision: Option<String>,
}

impl Upstream {
    /// The upstream part of a version: a leading "v" and an epoch ("5:") dropped, a
    /// pre-release "-rc…" / "-beta…" / "-alpha…" read as "~rc…", and the revision (after the
    /// last "-") set apart. `None` where it does not start with a digit, or holds characters
    /// no version has.
    pub fn parse(s: &str) -> Option<Upstream> {
        let s = s.trim();
        if s.is_empty() || s.chars().count() > MAX_VERSION_CHARS {
            return None;
        }
        let s = s.strip_prefix('v').unwrap_or(s);
        let s = match s.split_once(':') {
            Some((epoch, rest))
                if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) =>
            {
                rest
            }
            Some(_) => return None,
            None => s,
        };
        if !s.starts_with(|c: char| c.is_ascii_digit())
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '~' | '-' | '_'))
        {
            return None;
        }
        let mut v = s.to_string();
        for pre in ["-rc", "-beta", "-alpha", "-RC"] {
            if let Some(i) = v.find(pre) {
                v.replace_range(i..i + 1, "~");
            }
        }
        let (version, revision) = match v.rsplit_once('-') {
            Some((u, r)) if !u.is_empty() && !r.is_empty() => (u.to_string(), Some(r.to_string())),
            Some(_) => return None,
            None => (v, None),
        };
        Some(Upstream { version, revision })
    }
}

/// Compare two upstream versions as Debian does (deb-version(7), the upstream part).
pub fn compare(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        // The non-digit prefix, character by character.
        let na = a.iter().take_while(|c| !c.is_ascii_digit()).count();
        let nb = b.iter().take_while(|c| !c.is_ascii_digit()).count();
        let o = compare_text(&a[..na], &b[..nb]);
        if o != Ordering::Equal {
            return o;
        }
        a = &a[na..];
        b = &b[nb..];
        // The digit run, as a number (leading zeros do not count).
        let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
        let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let o = compare_number(&a[..da], &b[..db]);
        if o != Ordering::Equal {
            return o;
        }
        a = &a[da..];
        b = &b[db..];
        if a.is_empty() && b.is_empty() {
            return Ordering::Equal;
        }
    }
}

/// Where a character sorts: `~` first (before the end), then the end, letters, the rest.
fn weight(c: Option<&u8>) -> i32 {
    match c {
        Some(b'~') => -1,
        None => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(*c),
        Some(c) => i32::from(*c) + 256,
    }
}

fn compare_text(a: &[u8], b: &[u8]) -> Ordering {
    let mut i = 0;
    loop {
        let (x, y) = (a.get(i), b.get(i));
        if x.is_none() && y.is_none() {
            return Ordering::Equal;
        }
        let o = weight(x).cmp(&weight(y));
        if o != Ordering::Equal {
            return o;
        }
        i += 1;
    }
}

fn compare_number(a: &[u8], b: &[u8]) -> Ordering {
    let strip = |s: &[u8]| -> usize { s.iter().take_while(|c| **c == b'0').count() };
    let (a, b) = (&a[strip(a)..], &b[strip(b)..]);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Whether `version` belongs to `branch`: "*" is every version, "570" is 570 and 570.*,
/// "1.2" is 1.2 and 1.2.* (and 1.2.0~rc.1), never 1.20.
pub fn in_branch(version: &str, branch: &str) -> bool {
    if branch == "*" {
        return true;
    }
    match version.strip_prefix(branch) {
        Some(rest) => rest.is_empty() || rest.starts_with(['.', '~']),
        None => false,
    }
}

/// The version a program printed for itself (`--version`), by program name: `runc`,
/// `containerd`, `dockerd` / `docker`, `nvidia-ctk`, `nvidia-container-cli`. `None` where the
/// output does not carry one in the form the program writes.
pub fn program_version(program: &str, output: &str) -> Option<String> {
    let word_after = |prefix: &str| -> Option<String> {
        output.lines().find_map(|l| {
            let rest = l.trim().strip_prefix(prefix)?;
            let w = rest.split(|c: char| c.is_whitespace() || c == ',').next()?;
            Upstream::parse(w).map(|_| w.to_string())
        })
    };
    match program {
        // "runc version 1.1.12"
        "runc" => word_after("runc version "),
        // "containerd containerd.io 1.6.28 ae07eda…", "containerd github.com/containerd/containerd v1.7.12 …"
        "containerd" => output.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "containerd").then_some(())?;
            let v = w.nth(1)?;
            Upstream::parse(v).map(|_| v.trim_start_matches('v').to_string())
        }),
        // "Docker version 27.1.1, build 6312585"
        "dockerd" | "docker" => word_after("Docker version "),
        // "NVIDIA Container Toolkit CLI version 1.16.2"
        "nvidia-ctk" => word_after("NVIDIA Container Toolkit CLI version "),
        // "cli-version: 1.16.2"
        "nvidia-container-cli" => word_after("cli-version: "),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    fn up(s: &str) -> String {
        Upstream::parse(s).map(|u| u.version).unwrap_or_default()
    }

    #[test]
    fn upstream_of_package_versions() {
        assert_eq!(up("5:27.1.1-1~ubuntu.22.04~jammy"), "27.1.1");
        assert_eq!(up("1.17.8-1"), "1.17.8");
        assert_eq!(up("1.1.12-0ubuntu2~22.04.1"), "1.1.12");
        assert_eq!(up("1.7.27-1.el9"), "1.7.27");
        assert_eq!(up("v2.0.4"), "2.0.4");
        assert_eq!(up("1.4.0-rc.3"), "1.4.0~rc.3");
        assert_eq!(up("1.5.0-rc.3-1"), "1.5.0~rc.3");
        assert_eq!(up("570.133.20"), "570.133.20");
        assert_eq!(up("1.0.0-rc93"), "1.0.0~rc93");
        assert_eq!(
            Upstream::parse("1.1.12-0ubuntu2").and_then(|u| u.revision),
            Some("0ubuntu2".to_string())
        );
        assert_eq!(Upstream::parse("27.1.1").and_then(|u| u.revision), None);
        for bad in [
            "", "abc", "x:1.0", ":1.0", "1.0-", "-1", "1.0 beta", "1.0;rm", "v",
        ] {
            assert_eq!(Upstream::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Upstream::parse(&"1".repeat(MAX_VERSION_CHARS)).map(|_| ()),
            Some(())
        );
        assert_eq!(Upstream::parse(&"1".repeat(MAX_VERSION_CHARS + 1)), None);
    }

    #[test]
    fn debian_order() {
        let cases = [
            ("570.133.20", "570.133.07", Greater),
            ("570.86.15", "570.133.07", Less),
            ("1.1.12", "1.1.11", Greater),
            ("1.1.9", "1.1.12", Less),
            ("1.17.8", "1.17.8", Equal),
            ("1.17.08", "1.17.8", Equal),
            ("1.4.0~rc.3", "1.4.0", Less),
            ("1.4.0~rc.2", "1.4.0~rc.3", Less),
            ("1.4.0~rc.3", "1.3.9", Greater),
            ("1.0", "1.0.0", Less),
            ("1.0a", "1.0", Greater),
            ("1.0a", "1.0+", Less),
            ("1.0~", "1.0", Less),
            ("1.0~~", "1.0~", Less),
            ("27.1.1", "27.1.0", Greater),
            ("26.1.14", "26.1.5", Greater),
            ("13.0.88", "13.0", Greater),
            ("12.9.86", "13.0", Less),
        ];
        for (a, b, o) in cases {
            assert_eq!(compare(a, b), o, "{a} vs {b}");
            assert_eq!(compare(b, a), o.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn branches() {
        assert!(in_branch("570.133.20", "570"));
        assert!(in_branch("570", "570"));
        assert!(!in_branch("5700.1", "570"));
        assert!(!in_branch("575.51.02", "570"));
        assert!(in_branch("1.2.8", "1.2"));
        assert!(in_branch("1.4.0~rc.3", "1.4"));
        assert!(in_branch("1.4.0~rc.3", "1.4.0"));
        assert!(!in_branch("1.20.1", "1.2"));
        assert!(in_branch("anything", "*"));
    }

    #[test]
    fn versions_programs_print() {
        let runc = "runc version 1.1.12\ncommit: v1.1.12-0-g51d5e946\nspec: 1.0.2-dev\ngo: go1.20.13\nlibseccomp: 2.5.4\n";
        assert_eq!(program_version("runc", runc).as_deref(), Some("1.1.12"));
        assert_eq!(
            program_version(
                "runc",
                "runc version 1.1.7-0ubuntu1~22.04.2\nspec: 1.0.2-dev\n"
            )
            .as_deref(),
            Some("1.1.7-0ubuntu1~22.04.2")
        );
        assert_eq!(
            program_version(
                "containerd",
                "containerd containerd.io 1.6.28 ae07eda36dd25f8a1b98dfbf587313b99c0190bb\n"
            )
            .as_deref(),
            Some("1.6.28")
        );
        assert_eq!(
            program_version(
                "containerd",
                "containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20\n"
            )
            .as_deref(),
            Some("2.0.4")
        );
        assert_eq!(
            program_version("dockerd", "Docker version 27.1.1, build cc13f95\n").as_deref(),
            Some("27.1.1")
        );
        assert_eq!(
            program_version(
                "nvidia-ctk",
                "NVIDIA Container Toolkit CLI version 1.16.2\ncommit: a5a5833c14a15fd9c86bcece85d5ec6621b65652\n"
            )
            .as_deref(),
            Some("1.16.2")
        );
        assert_eq!(
            program_version(
                "nvidia-container-cli",
                "cli-version: 1.17.8\nlib-version: 1.17.8\nbuild date: 2025-05-30T13:47+00:00\n"
            )
            .as_deref(),
            Some("1.17.8")
        );
        assert_eq!(program_version("runc", "runc: command not found"), None);
        assert_eq!(program_version("containerd", "containerd"), None);
        assert_eq!(program_version("containerd", "ctr x 1.6.0"), None);
        assert_eq!(program_version("crio", "crio version 1.30"), None);
        assert_eq!(
            program_version("dockerd", "Docker version dev, build x"),
            None
        );
    }
}
