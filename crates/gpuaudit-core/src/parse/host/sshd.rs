//! sshd_config and authorized_keys.

use crate::facts::SshdConfig;
use crate::parse::ParseError;

/// The sshd keywords gpuaudit judges (lower case); a snapshot keeps only these (and `Match`).
pub const RELEVANT: &[&str] = &[
    "passwordauthentication",
    "permitrootlogin",
    "permitemptypasswords",
    "kbdinteractiveauthentication",
    "challengeresponseauthentication",
    "pubkeyauthentication",
    "authorizedkeysfile",
    "usepam",
];

/// One directive: (line number, keyword in lower case, value).
pub type Directive = (usize, String, String);

/// The directives of one file, in order. A line that is not `Keyword value` is returned apart
/// (its number); a file that is mostly such lines, or binary, is an error: it is not an
/// sshd_config.
pub fn parse_sshd_file(text: &str) -> Result<(Vec<Directive>, Vec<usize>), ParseError> {
    if crate::parse::host::looks_binary(text) {
        return Err(ParseError::Malformed(
            "binary content, not an sshd_config".into(),
        ));
    }
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        // "Keyword value", "Keyword=value" and "Keyword = value" are all accepted by sshd.
        let split = l
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(l.len());
        let (k, rest) = l.split_at(split);
        let v = rest.trim_start().trim_start_matches('=').trim();
        let v = v.split(" #").next().unwrap_or(v).trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()) || v.is_empty() {
            bad.push(i + 1);
            continue;
        }
        out.push((i + 1, k.to_ascii_lowercase(), unquote(v)));
    }
    if bad.len() > out.len() {
        return Err(ParseError::Malformed(format!(
            "{} of {} lines are not 'Keyword value': not an sshd_config",
            bad.len(),
            bad.len() + out.len()
        )));
    }
    Ok((out, bad))
}

fn unquote(v: &str) -> String {
    let t = v.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        t[1..t.len() - 1].to_string()
    } else {
        t.to_string()
    }
}

/// Fold directives (already in the order sshd reads them, Includes expanded) into the
/// settings sshd applies: the first value of a keyword wins; after a `Match` line, settings
/// belong to that Match (until the next Match; `Match all` goes back to every connection).
pub fn fold(files: &[(String, Vec<Directive>, Vec<usize>)]) -> SshdConfig {
    let mut c = SshdConfig::default();
    let mut current_match: Option<String> = None;
    for (file, directives, bad) in files {
        // A file split around its Include lines comes in several pieces.
        if !c.files.contains(file) {
            c.files.push(file.clone());
        }
        c.ignored.extend(bad.iter().map(|n| format!("{file}:{n}")));
        for (_, k, v) in directives {
            if k == "match" {
                current_match = (!v.eq_ignore_ascii_case("all")).then(|| v.clone());
                continue;
            }
            // Only the judged keywords are kept (a snapshot keeps no others).
            if !RELEVANT.contains(&k.as_str()) {
                continue;
            }
            match &current_match {
                None => {
                    if !c.global.iter().any(|(gk, _)| gk == k) {
                        c.global.push((k.clone(), v.clone()));
                    }
                }
                Some(m) => {
                    if !c.matched.iter().any(|(mm, mk, _)| mm == m && mk == k) {
                        c.matched.push((m.clone(), k.clone(), v.clone()));
                    }
                }
            }
        }
    }
    c
}

/// The reduced sshd_config a snapshot keeps: the relevant keywords and the Match lines, in
/// order, from the files already folded in order.
pub fn reduce(files: &[(String, Vec<Directive>, Vec<usize>)]) -> String {
    let mut s = String::from(
        "# reduced by gpuaudit collect: only the settings it judges, Includes expanded\n",
    );
    for (file, directives, _) in files {
        s.push_str(&format!("# from {file}\n"));
        for (_, k, v) in directives {
            if k == "match" {
                s.push_str(&format!("Match {v}\n"));
            } else if RELEVANT.contains(&k.as_str()) {
                s.push_str(&format!("{k} {v}\n"));
            }
        }
    }
    s
}

/// The reduced copy of one sshd configuration file that a snapshot keeps: one line per line
/// (so line numbers stay), the judged keywords and `Match`/`Include` lines as they are, other
/// settings as "Keyword omitted", comments and blank lines empty, lines that are not
/// "Keyword value" as "?". [`parse_sshd_file`] and [`fold`] give the same result on it.
pub fn reduce_file(text: &str) -> String {
    let mut s = String::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            s.push('\n');
            continue;
        }
        match parse_sshd_file(line) {
            Ok((d, _)) if d.len() == 1 => {
                let (_, k, v) = &d[0];
                if RELEVANT.contains(&k.as_str()) || k == "match" || k == "include" {
                    s.push_str(&format!("{k} {v}\n"));
                } else {
                    s.push_str(&format!("{k} omitted\n"));
                }
            }
            _ => s.push_str("?\n"),
        }
    }
    s
}

/// A parsed authorized_keys line: (option names, key type, base64 key blob).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLine {
    pub options: Vec<String>,
    pub key_type: String,
    pub blob: String,
}

fn is_key_type(t: &str) -> bool {
    t.starts_with("ssh-")
        || t.starts_with("ecdsa-sha2-")
        || t.starts_with("sk-ssh-")
        || t.starts_with("sk-ecdsa-")
}

/// One line of authorized_keys: `[options] keytype base64 [comment]`. `None` for blank lines
/// and comments; `Err` for a line that is not a key.
pub fn parse_key_line(line: &str) -> Option<Result<KeyLine, String>> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') {
        return None;
    }
    let (options, rest) = if is_key_type(l.split_whitespace().next().unwrap_or("")) {
        (Vec::new(), l)
    } else {
        // Options run to the first unquoted whitespace.
        let mut in_quote = false;
        let mut prev = '\0';
        let mut end = l.len();
        for (i, c) in l.char_indices() {
            if c == '"' && prev != '\\' {
                in_quote = !in_quote;
            } else if c.is_whitespace() && !in_quote {
                end = i;
                break;
            }
            prev = c;
        }
        (option_names(&l[..end]), l[end..].trim_start())
    };
    let mut it = rest.split_whitespace();
    let (Some(key_type), Some(blob)) = (it.next(), it.next()) else {
        return Some(Err("no key type and key".into()));
    };
    if !is_key_type(key_type) {
        return Some(Err(format!(
            "'{}' is not a key type",
            crate::parse::host::truncate(key_type, 40)
        )));
    }
    Some(Ok(KeyLine {
        options,
        key_type: key_type.to_string(),
        blob: blob.to_string(),
    }))
}

/// "restrict,command=\"a,b\",from=\"10.0.0.1\"" -> ["restrict", "command", "from"].
pub fn option_names(opts: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut prev = '\0';
    for c in opts.chars() {
        if c == '"' && prev != '\\' {
            in_quote = !in_quote;
        } else if c == ',' && !in_quote {
            names.push(std::mem::take(&mut cur));
        } else if !in_quote {
            cur.push(c);
        }
        prev = c;
    }
    names.push(cur);
    names
        .into_iter()
        .map(|n| {
            n.split('=')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// Key size in bits: fixed for Ed25519 and the ECDSA curves, read from the modulus for RSA
/// and from p for DSA.
pub fn key_bits(key_type: &str, blob: &str) -> Option<u32> {
    let t = key_type.trim_end_matches("-cert-v01@openssh.com");
    match t {
        "ssh-ed25519" | "sk-ssh-ed25519@openssh.com" => Some(256),
        "ecdsa-sha2-nistp256" | "sk-ecdsa-sha2-nistp256@openssh.com" => Some(256),
        "ecdsa-sha2-nistp384" => Some(384),
        "ecdsa-sha2-nistp521" => Some(521),
        "ssh-rsa" | "ssh-dss" => {
            let b = base64_decode(blob)?;
            let mut fields = Fields { b: &b, at: 0 };
            let name = fields.next()?;
            if name != t.as_bytes() {
                return None;
            }
            // RSA: e, n. DSA: p first.
            let n = if t == "ssh-rsa" {
                fields.next()?;
                fields.next()?
            } else {
                fields.next()?
            };
            mpint_bits(n)
        }
        _ => None,
    }
}

struct Fields<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let len_bytes = self.b.get(self.at..self.at.checked_add(4)?)?;
        let len =
            u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
        let start = self.at + 4;
        let f = self.b.get(start..start.checked_add(len)?)?;
        self.at = start + len;
        Some(f)
    }
}

fn mpint_bits(n: &[u8]) -> Option<u32> {
    let first = n.iter().position(|b| *b != 0)?;
    let lead = n[first];
    let bits = (n.len() - first - 1) * 8 + (8 - lead.leading_zeros() as usize);
    u32::try_from(bits).ok()
}

/// Standard base64 (padding optional); `None` on any other character.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut nbits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
            acc &= (1 << nbits) - 1;
        }
    }
    Some(out)
}

/// Expand the `%h`, `%u` and `%%` tokens of AuthorizedKeysFile; a relative path is under the
/// home directory.
pub fn expand_keys_file(pattern: &str, user: &str, home: &str) -> String {
    let mut s = String::new();
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        if c == '%' {
            match it.next() {
                Some('h') => s.push_str(home),
                Some('u') => s.push_str(user),
                Some('%') => s.push('%'),
                Some(x) => {
                    s.push('%');
                    s.push(x);
                }
                None => s.push('%'),
            }
        } else {
            s.push(c);
        }
    }
    if s.starts_with('/') {
        s
    } else {
        format!("{}/{}", home.trim_end_matches('/'), s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real 1024-bit RSA public key (test material only).
    pub const RSA1024: &str = "AAAAB3NzaC1yc2EAAAADAQABAAAAgQCkGxb4DiyRQYczmByPp+2Ung/Em7iMes9mPT9O7on20KxUSe+XkmgKMPcxlp5L42rizS/CUHzSa1dJC4RwXRnJcYkKkp5eDZj0Ac4/XlqpAsY1HrY/xuLiw4+wlbBOGS1iSc6pbFwejRBwGjiyNAiwRx/3vqlXYeNcE6RkCNUk6w==";

    #[test]
    fn sshd_first_value_wins_and_match_is_apart() {
        let main = "# comment\nInclude /etc/ssh/sshd_config.d/*.conf\nPasswordAuthentication yes\nPermitRootLogin=yes\nMatch User admin\n  PasswordAuthentication yes\nMatch all\nUsePAM yes\n";
        let inc = "PasswordAuthentication no\n";
        let (inc_d, _) = parse_sshd_file(inc).unwrap();
        let (main_d, bad) = parse_sshd_file(main).unwrap();
        assert!(bad.is_empty());
        // sshd reads the include first (it sits at the top of the main file).
        let files = vec![
            (
                "/etc/ssh/sshd_config.d/50-cloud.conf".to_string(),
                inc_d,
                vec![],
            ),
            ("/etc/ssh/sshd_config".to_string(), main_d, vec![]),
        ];
        let c = fold(&files);
        assert_eq!(c.get("PasswordAuthentication"), Some("no"));
        assert_eq!(c.get("permitrootlogin"), Some("yes"));
        assert_eq!(c.get("usepam"), Some("yes"));
        assert_eq!(
            c.matched,
            vec![(
                "User admin".into(),
                "passwordauthentication".into(),
                "yes".into()
            )]
        );
        let r = reduce(&files);
        assert!(r.contains("passwordauthentication no\n"));
        assert!(r.contains("Match User admin\n"));
        assert!(!r
            .lines()
            .any(|l| l.to_ascii_lowercase().starts_with("include")));
        // The reduced form folds to the same settings.
        let (rd, rb) = parse_sshd_file(&r).unwrap();
        let again = fold(&[("x".into(), rd, rb)]);
        assert_eq!(again.global, c.global);
        assert_eq!(again.matched, c.matched);
    }

    #[test]
    fn reduced_file_keeps_lines_and_settings() {
        let t = "# c\nPort 22\nPasswordAuthentication yes\n???\nMatch User x\n  PermitRootLogin yes\nBanner /etc/issue\n";
        let r = reduce_file(t);
        assert_eq!(r.lines().count(), t.lines().count());
        let (a, abad) = parse_sshd_file(t).unwrap();
        let (b, bbad) = parse_sshd_file(&r).unwrap();
        assert_eq!(abad, bbad);
        assert_eq!(a.len(), b.len());
        let fa = fold(&[("f".into(), a, abad)]);
        let fb = fold(&[("f".into(), b, bbad)]);
        assert_eq!(
            fa.get("passwordauthentication"),
            fb.get("passwordauthentication")
        );
        assert_eq!(fa.matched, fb.matched);
        assert!(!r.contains("issue"));
    }

    #[test]
    fn sshd_garbage() {
        assert!(parse_sshd_file("\0\u{1}\u{2}\u{3}ELF").is_err());
        assert!(parse_sshd_file("{{{ not\n}}} a config\n!!!\n").is_err());
        let (d, bad) = parse_sshd_file("PermitRootLogin no\n???\nUsePAM yes\n").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(bad, vec![2]);
    }

    #[test]
    fn key_lines() {
        let k = parse_key_line(&format!("ssh-rsa {RSA1024} user@host"))
            .unwrap()
            .unwrap();
        assert!(k.options.is_empty());
        assert_eq!(key_bits(&k.key_type, &k.blob), Some(1024));
        let k = parse_key_line(&format!(
            "restrict,command=\"rsync --server, x\",from=\"10.0.0.0/8\" ssh-rsa {RSA1024} c"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(k.options, vec!["restrict", "command", "from"]);
        let k = parse_key_line("no-pty ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA x")
            .unwrap()
            .unwrap();
        assert_eq!(k.options, vec!["no-pty"]);
        assert_eq!(key_bits("ssh-ed25519", "whatever"), Some(256));
        assert!(parse_key_line("# c").is_none());
        assert!(parse_key_line("").is_none());
        assert!(parse_key_line("garbage").unwrap().is_err());
        assert!(parse_key_line("\u{0}\u{1}\u{2} xx yy").unwrap().is_err());
        assert_eq!(key_bits("ssh-rsa", "!!!"), None);
        assert_eq!(key_bits("ssh-rsa", "AAAA"), None);
    }

    #[test]
    fn base64_and_paths() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8").unwrap(), b"hello");
        assert!(base64_decode("a b").is_none());
        assert_eq!(
            expand_keys_file(".ssh/authorized_keys", "ann", "/home/ann"),
            "/home/ann/.ssh/authorized_keys"
        );
        assert_eq!(
            expand_keys_file("/etc/ssh/keys/%u", "ann", "/home/ann"),
            "/etc/ssh/keys/ann"
        );
        assert_eq!(
            expand_keys_file("%h/.ssh/k%%", "ann", "/home/ann"),
            "/home/ann/.ssh/k%"
        );
    }
}
