//! The dynamic loader's cache: /etc/ld.so.cache (binary) and `ldconfig -p` (its text form).
//!
//! Both give (soname, path) pairs in the loader's order of preference.

use crate::parse::ParseError;

/// One entry of the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// "libnccl.so.2".
    pub soname: String,
    /// "/usr/lib/x86_64-linux-gnu/libnccl.so.2".
    pub path: String,
    /// The architecture part of the flags, as `ldconfig -p` prints it ("x86-64", "AArch64"),
    /// or `None` for the 32-bit default.
    pub arch: Option<String>,
}

const MAGIC_NEW: &[u8] = b"glibc-ld.so.cache1.1";
const HEADER_NEW: usize = 48;
const ENTRY_NEW: usize = 24;

fn u32_le(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn cstr(b: &[u8], at: usize) -> Option<String> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|c| *c == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

fn arch_name(flags: u32) -> Option<String> {
    // glibc's FLAG_REQUIRED_MASK values (elf/cache.c print_entry).
    Some(
        match flags & 0xff00 {
            0x0000 => return None,
            0x0100 => "SPARC 64-bit",
            0x0200 => "IA-64",
            0x0300 => "x86-64",
            0x0400 => "64bit",
            0x0500 => "PowerPC 64-bit",
            0x0700 => "MIPS64",
            0x0800 => "x32",
            0x0900 => "ARM-hard",
            0x0a00 => "AArch64",
            0x0b00 => "soft-float",
            0x0c00 => "N32",
            0x0d00 => "riscv 64",
            _ => "other",
        }
        .to_string(),
    )
}

/// The binary cache, "glibc-ld.so.cache1.1" format (alone, or after the old "ld.so-1.7.0"
/// part of the compatibility format). Little-endian, as on x86-64 and AArch64.
pub fn parse_ld_so_cache(bytes: &[u8]) -> Result<Vec<CacheEntry>, ParseError> {
    if bytes.is_empty() {
        return Err(ParseError::Empty);
    }
    let start = bytes
        .windows(MAGIC_NEW.len())
        .position(|w| w == MAGIC_NEW)
        .ok_or_else(|| ParseError::Malformed("no glibc-ld.so.cache1.1 header".into()))?;
    let b = &bytes[start..];
    let nlibs =
        u32_le(b, 20).ok_or_else(|| ParseError::Malformed("truncated header".into()))? as usize;
    let table_end = nlibs
        .checked_mul(ENTRY_NEW)
        .and_then(|n| n.checked_add(HEADER_NEW))
        .filter(|end| *end <= b.len())
        .ok_or_else(|| {
            ParseError::Malformed(match nlibs {
                1 => "1 entry does not fit in the file".to_string(),
                n => format!("{n} entries do not fit in the file"),
            })
        })?;
    let mut out = Vec::with_capacity(nlibs);
    let mut at = HEADER_NEW;
    while at < table_end {
        let flags = u32_le(b, at).unwrap_or(0);
        let key = u32_le(b, at + 4).unwrap_or(u32::MAX) as usize;
        let value = u32_le(b, at + 8).unwrap_or(u32::MAX) as usize;
        at += ENTRY_NEW;
        // String offsets count from the start of the new-format header.
        let (Some(soname), Some(path)) = (cstr(b, key), cstr(b, value)) else {
            continue;
        };
        if soname.is_empty() || !path.starts_with('/') {
            continue;
        }
        out.push(CacheEntry {
            soname,
            path,
            arch: arch_name(flags),
        });
    }
    Ok(out)
}

/// `ldconfig -p`: "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2".
pub fn parse_ldconfig_p(text: &str) -> Result<Vec<CacheEntry>, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, path)) = line.split_once(" => ") else {
            continue;
        };
        let left = left.trim();
        let (soname, flags) = match left.split_once(" (") {
            Some((s, f)) => (s.trim(), f.trim_end_matches(')')),
            None => (left, ""),
        };
        let path = path.trim();
        if soname.is_empty() || !path.starts_with('/') {
            continue;
        }
        let arch = flags
            .split(',')
            .map(str::trim)
            .find(|f| !f.starts_with("libc") && !f.starts_with("hwcap") && !f.is_empty())
            .map(str::to_string);
        out.push(CacheEntry {
            soname: soname.to_string(),
            path: path.to_string(),
            arch,
        });
    }
    if out.is_empty() {
        return Err(ParseError::Malformed("no 'name => path' line".into()));
    }
    Ok(out)
}

/// Keep the entries of the machine's own (64-bit) architecture where the cache has any:
/// 32-bit copies of the driver's libraries (for Steam, Wine) are not what CUDA programs load.
pub fn native_entries(entries: Vec<CacheEntry>) -> Vec<CacheEntry> {
    if entries.iter().any(|e| e.arch.is_some()) {
        entries.into_iter().filter(|e| e.arch.is_some()).collect()
    } else {
        entries
    }
}

/// Write a cache in the new format (what `ldconfig` writes since glibc 2.32): for tests and
/// fixtures. Entries are (soname, path, flags), e.g. 0x0303 for an x86-64 ELF library.
pub fn encode_ld_so_cache(entries: &[(&str, &str, u32)]) -> Vec<u8> {
    let mut strings = Vec::new();
    let table_len = HEADER_NEW + entries.len() * ENTRY_NEW;
    let mut offs = Vec::new();
    for (k, v, _) in entries {
        let ko = table_len + strings.len();
        strings.extend_from_slice(k.as_bytes());
        strings.push(0);
        let vo = table_len + strings.len();
        strings.extend_from_slice(v.as_bytes());
        strings.push(0);
        offs.push((ko as u32, vo as u32));
    }
    let mut b = Vec::new();
    b.extend_from_slice(b"glibc-ld.so.cache1.1");
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    b.extend_from_slice(&[0u8; 4]);
    b.extend_from_slice(&[0u8; 16]);
    for ((_, _, flags), (ko, vo)) in entries.iter().zip(offs) {
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&ko.to_le_bytes());
        b.extend_from_slice(&vo.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
    }
    b.extend_from_slice(&strings);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_cache_round_trip() {
        let b = encode_ld_so_cache(&[
            (
                "libnccl.so.2",
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                0x0303,
            ),
            (
                "libcuda.so.1",
                "/usr/lib/i386-linux-gnu/libcuda.so.1",
                0x0003,
            ),
            (
                "libcuda.so.1",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                0x0303,
            ),
        ]);
        let e = parse_ld_so_cache(&b).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].soname, "libnccl.so.2");
        assert_eq!(e[0].arch.as_deref(), Some("x86-64"));
        let n = native_entries(e);
        assert_eq!(n.len(), 2);
        assert!(n.iter().all(|e| e.path.contains("x86_64")));
        // With the old-format prefix in front.
        let mut old = b"ld.so-1.7.0\0\0\0\0\0".to_vec();
        old.extend_from_slice(&b);
        assert_eq!(parse_ld_so_cache(&old).unwrap().len(), 3);
    }

    #[test]
    fn binary_cache_garbage() {
        assert!(parse_ld_so_cache(b"").is_err());
        assert!(parse_ld_so_cache(b"not a cache at all").is_err());
        let mut b = encode_ld_so_cache(&[("libx.so.1", "/lib/libx.so.1", 0x0303)]);
        // Claim a million entries.
        b[20..24].copy_from_slice(&1_000_000u32.to_le_bytes());
        assert_eq!(
            parse_ld_so_cache(&b).unwrap_err(),
            ParseError::Malformed("1000000 entries do not fit in the file".into())
        );
        // One entry, its table cut short.
        let b = encode_ld_so_cache(&[("libx.so.1", "/lib/libx.so.1", 0x0303)]);
        assert_eq!(
            parse_ld_so_cache(&b[..HEADER_NEW + 4]).unwrap_err(),
            ParseError::Malformed("1 entry does not fit in the file".into())
        );
        // Offsets past the end are skipped.
        let mut b = encode_ld_so_cache(&[("libx.so.1", "/lib/libx.so.1", 0x0303)]);
        b[HEADER_NEW + 4..HEADER_NEW + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse_ld_so_cache(&b).unwrap().len(), 0);
    }

    #[test]
    fn ldconfig_p_text() {
        let t = "1234 libs found in cache `/etc/ld.so.cache'\n\
\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n\
\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n\
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n\
Cache generated by: ldconfig (Ubuntu GLIBC 2.39) stable release version 2.39\n";
        let e = native_entries(parse_ldconfig_p(t).unwrap());
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
        assert!(parse_ldconfig_p("garbage").is_err());
    }
}
