//! /proc/mounts (and /etc/mtab, same format): which file system is under a path.

use crate::facts::Mount;
use crate::parse::ParseError;

/// Decode the kernel's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134`
/// backslash). A backslash not followed by three octal digits is kept as written.
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let digits = &b[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = (u32::from(digits[0] - b'0') << 6)
                    | (u32::from(digits[1] - b'0') << 3)
                    | u32::from(digits[2] - b'0');
                if v <= 0xff {
                    out.push(v as u8);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every well-formed line; lines with fewer than four fields are skipped. A table with no
/// well-formed line at all is an error (garbage or a truncated copy).
pub fn parse_mounts(text: &str) -> Result<Vec<Mount>, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    if crate::parse::host::looks_binary(text) {
        return Err(ParseError::Malformed(
            "binary content, not a mount table".into(),
        ));
    }
    let mut mounts = Vec::new();
    let mut bad = 0usize;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !f[1].starts_with('/') {
            bad += 1;
            continue;
        }
        mounts.push(Mount {
            source: unescape_octal(f[0]),
            target: unescape_octal(f[1]),
            fstype: unescape_octal(f[2]),
            options: f[3].split(',').map(unescape_octal).collect(),
        });
    }
    if mounts.is_empty() {
        return Err(ParseError::Malformed(format!(
            "no mount line understood ({bad} lines skipped)"
        )));
    }
    Ok(mounts)
}

/// Lexically normalise an absolute path: drop `.`, resolve `..`, collapse slashes.
pub fn normalize_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether `path` is `mountpoint` or below it (component-wise: /data2 is not under /data).
pub fn is_under(path: &str, mountpoint: &str) -> bool {
    let mp = mountpoint.trim_end_matches('/');
    if mp.is_empty() {
        return path.starts_with('/');
    }
    path == mp || (path.starts_with(mp) && path.as_bytes().get(mp.len()) == Some(&b'/'))
}

/// The mount `path` lives on: the longest mount point above it; among mounts on the same
/// point, the last (it hides the earlier ones).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    let path = normalize_path(path);
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if !is_under(&path, &m.target) {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) => m.target.trim_end_matches('/').len() >= b.target.trim_end_matches('/').len(),
        };
        if better {
            best = Some(m);
        }
    }
    best
}

/// A tmpfs `size=` option in bytes: "268435456k", "64m", "1g", "65536" (bytes). Percentages
/// ("50%") depend on RAM and give `None`.
pub fn parse_size(opt: &str) -> Option<u64> {
    let s = opt.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1u64 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1u64 << 30),
        't' | 'T' => (&s[..s.len() - 1], 1u64 << 40),
        c if c.is_ascii_digit() => (s, 1),
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// What kind of storage a file system type is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsClass {
    /// A local block device (ext4, xfs, btrfs, zfs, ...).
    Local,
    /// Memory (tmpfs, ramfs): fast, lost at reboot, counts against RAM.
    Memory,
    /// A network file system (nfs, cifs, ceph, lustre, gpfs, beegfs, ...).
    Network,
    /// A FUSE file system (object storage gateways, sshfs, ...).
    Fuse,
    /// A container's union file system (overlay, aufs).
    Overlay,
    /// A host directory shared into a VM (9p, virtiofs).
    HostShare,
    /// A read-only image (squashfs, iso9660, erofs).
    Image,
    Other,
}

impl FsClass {
    pub fn of(fstype: &str) -> FsClass {
        let t = fstype.to_ascii_lowercase();
        if t.starts_with("fuse") {
            // fuse.juicefs / fuse.lustre-like gateways are still FUSE: every read crosses
            // into user space.
            return FsClass::Fuse;
        }
        match t.as_str() {
            "ext2" | "ext3" | "ext4" | "xfs" | "btrfs" | "zfs" | "f2fs" | "bcachefs" | "jfs"
            | "reiserfs" | "vfat" | "exfat" | "ntfs" | "ntfs3" => FsClass::Local,
            "tmpfs" | "ramfs" | "devtmpfs" => FsClass::Memory,
            "nfs" | "nfs4" | "cifs" | "smb3" | "smbfs" | "ceph" | "cephfs" | "glusterfs"
            | "lustre" | "gpfs" | "beegfs" | "wekafs" | "ocfs2" | "gfs2" | "afs" | "pvfs2"
            | "orangefs" | "panfs" | "vast" => FsClass::Network,
            "overlay" | "overlayfs" | "aufs" => FsClass::Overlay,
            "9p" | "virtiofs" | "vboxsf" | "drvfs" => FsClass::HostShare,
            "squashfs" | "iso9660" | "erofs" | "cramfs" => FsClass::Image,
            _ => FsClass::Other,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FsClass::Local => "local",
            FsClass::Memory => "memory",
            FsClass::Network => "network",
            FsClass::Fuse => "fuse",
            FsClass::Overlay => "overlay",
            FsClass::HostShare => "host share",
            FsClass::Image => "read-only image",
            FsClass::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes_decode() {
        assert_eq!(unescape_octal(r"/mnt/my\040data"), "/mnt/my data");
        assert_eq!(unescape_octal(r"a\011b\012c\134d"), "a\tb\nc\\d");
        // Odd escapes stay as written.
        assert_eq!(unescape_octal(r"x\04"), r"x\04");
        assert_eq!(unescape_octal(r"x\999y"), r"x\999y");
        assert_eq!(unescape_octal("trailing\\"), "trailing\\");
        assert_eq!(unescape_octal(r"\400"), r"\400");
        // A non-UTF-8 byte does not panic.
        assert_eq!(unescape_octal(r"\377"), "\u{fffd}");
    }

    #[test]
    fn parses_fixture_like_table_and_finds_mounts() {
        let t = "proc /proc proc rw,relatime 0 0\n\
                 /dev/vda / ext4 rw,relatime,discard 0 0\n\
                 tmpfs /dev/shm tmpfs rw,relatime,size=263998500k 0 0\n\
                 tmpfs /dev/shm tmpfs rw,relatime,size=268435456k 0 0\n\
                 nas:/export /mnt/my\\040data nfs4 rw,soft,rsize=65536,wsize=65536 0 0\n\
                 garbage\n";
        let m = parse_mounts(t).unwrap();
        assert_eq!(m.len(), 5);
        let shm = mount_of(&m, "/dev/shm").unwrap();
        assert_eq!(shm.option("size"), Some("268435456k"));
        let nfs = mount_of(&m, "/mnt/my data/x/../y").unwrap();
        assert_eq!(nfs.fstype, "nfs4");
        assert_eq!(nfs.option("soft"), Some(""));
        assert_eq!(nfs.option("rsize"), Some("65536"));
        assert_eq!(mount_of(&m, "/mnt/my datax").unwrap().target, "/");
        assert_eq!(mount_of(&m, "/home/u").unwrap().fstype, "ext4");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse_mounts("").is_err());
        assert!(parse_mounts("\0\u{1}\u{2}binary\0").is_err());
        assert!(parse_mounts("hello world\n").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536k"), Some(64 << 20));
        assert_eq!(parse_size("64m"), Some(64 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("50%"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999k"), None);
    }

    #[test]
    fn paths() {
        assert_eq!(normalize_path("/a//b/./c/../d/"), "/a/b/d");
        assert_eq!(normalize_path("/../.."), "/");
        assert!(is_under("/data/x", "/data"));
        assert!(!is_under("/data2", "/data"));
        assert!(is_under("/anything", "/"));
    }

    #[test]
    fn classes() {
        assert_eq!(FsClass::of("nfs4"), FsClass::Network);
        assert_eq!(FsClass::of("fuse.s3fs"), FsClass::Fuse);
        assert_eq!(FsClass::of("overlay"), FsClass::Overlay);
        assert_eq!(FsClass::of("ext4"), FsClass::Local);
    }
}
