//! Jupyter configuration files (`jupyter_*_config.py` and `.json`, and the
//! `jupyter_server_config.d/*.json` that extensions drop), reduced to the settings gpuaudit
//! judges. Token and password values are never kept.

use crate::parse::ParseError;

/// Setting names kept, whatever the class (ServerApp, NotebookApp,
/// ZMQChannelsWebsocketConnection, IdentityProvider, ...).
const KEYS: &[&str] = &[
    "iopub_data_rate_limit",
    "iopub_msg_rate_limit",
    "rate_limit_window",
    "root_dir",
    "notebook_dir",
    "ip",
    "token",
    "password",
    "hashed_password",
    "allow_origin",
    "allow_remote_access",
    "disable_check_xsrf",
];

/// Classes whose every setting is kept (resource monitors that poll).
const CLASSES: &[&str] = &["ResourceUseDisplay"];

/// Extension names (in jpserver_extensions / nbserver_extensions) that poll the machine.
pub const POLLING_EXTENSIONS: &[&str] = &[
    "jupyter_resource_usage",
    "jupyterlab_nvdashboard",
    "nvdashboard",
    "jupyterlab_system_monitor",
    "jupyter_server_resource_usage",
];

fn keep(class: &str, key: &str) -> bool {
    let key_base = key.split('.').next().unwrap_or(key);
    CLASSES.contains(&class)
        || KEYS.contains(&key_base)
        || ((key_base == "jpserver_extensions" || key_base == "nbserver_extensions")
            && POLLING_EXTENSIONS.iter().any(|e| key.ends_with(e)))
}

/// Token and password values become "<set>" (or "''" when empty).
fn redact(key: &str, value: &str) -> String {
    let k = key.rsplit('.').next().unwrap_or(key);
    if matches!(k, "token" | "password" | "hashed_password") {
        let t = value.trim().trim_matches(['\'', '"']);
        if t.is_empty() || value.trim() == "u''" {
            "''".into()
        } else {
            "<set>".into()
        }
    } else {
        value.trim().to_string()
    }
}

/// `c.ServerApp.iopub_data_rate_limit = 1000` lines. Everything else (other settings,
/// Python code) is ignored.
pub fn parse_py(text: &str) -> Result<Vec<(String, String)>, ParseError> {
    if crate::parse::host::looks_binary(text) {
        return Err(ParseError::Malformed(
            "binary content, not a Python config".into(),
        ));
    }
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let Some(rest) = l.strip_prefix("c.") else {
            continue;
        };
        let Some((lhs, rhs)) = rest.split_once('=') else {
            continue;
        };
        let lhs = lhs.trim();
        let Some((class, key)) = lhs.split_once('.') else {
            continue;
        };
        if !class.chars().all(|c| c.is_alphanumeric() || c == '_')
            || !key
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        {
            continue;
        }
        if !keep(class, key) {
            continue;
        }
        let value = strip_comment(rhs.trim());
        let name = format!("{class}.{key}");
        let v = redact(&name, &value);
        out.push((name, v));
    }
    Ok(out)
}

fn strip_comment(v: &str) -> String {
    let mut in_q: Option<char> = None;
    for (i, c) in v.char_indices() {
        match (in_q, c) {
            (None, '\'' | '"') => in_q = Some(c),
            (Some(q), c) if c == q => in_q = None,
            (None, '#') => return v[..i].trim().to_string(),
            _ => {}
        }
    }
    v.trim().to_string()
}

/// `{"ServerApp": {"iopub_data_rate_limit": 1e10, "jpserver_extensions": {"x": true}}}`.
pub fn parse_json(text: &str) -> Result<Vec<(String, String)>, ParseError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ParseError::Malformed(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| ParseError::Malformed("not a JSON object".into()))?;
    let mut out = Vec::new();
    for (class, settings) in obj {
        let Some(s) = settings.as_object() else {
            continue;
        };
        flatten(class, "", s, &mut out, 0);
    }
    Ok(out)
}

fn flatten(
    class: &str,
    prefix: &str,
    m: &serde_json::Map<String, serde_json::Value>,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    if depth > 4 {
        return;
    }
    for (k, v) in m {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            serde_json::Value::Object(inner) => flatten(class, &key, inner, out, depth + 1),
            _ => {
                if keep(class, &key) {
                    let name = format!("{class}.{key}");
                    let raw = match v {
                        serde_json::Value::String(s) => format!("'{s}'"),
                        serde_json::Value::Bool(b) => if *b { "True" } else { "False" }.into(),
                        other => other.to_string(),
                    };
                    let val = redact(&name, &raw);
                    out.push((name, val));
                }
            }
        }
    }
}

/// The reduced file a snapshot keeps: Python assignments, which [`parse_py`] reads back to the
/// same settings.
pub fn reduce(settings: &[(String, String)]) -> String {
    let mut s = String::from("# reduced by gpuaudit collect: only the settings it judges\n");
    for (k, v) in settings {
        let v = if v == "<set>" { "'<set>'" } else { v.as_str() };
        s.push_str(&format!("c.{k} = {v}\n"));
    }
    s
}

/// The reduced JSON file a snapshot keeps for a `.json` configuration: [`parse_json`] reads it
/// back to the same settings.
pub fn reduce_json(settings: &[(String, String)]) -> String {
    let mut root = serde_json::Map::new();
    for (k, v) in settings {
        let parts: Vec<&str> = k.split('.').collect();
        insert(&mut root, &parts, json_value(v));
    }
    serde_json::to_string_pretty(&serde_json::Value::Object(root)).unwrap_or_else(|_| "{}".into())
        + "\n"
}

fn insert(
    m: &mut serde_json::Map<String, serde_json::Value>,
    parts: &[&str],
    v: serde_json::Value,
) {
    match parts {
        [] => {}
        [last] => {
            m.insert(last.to_string(), v);
        }
        [first, rest @ ..] => {
            let e = m
                .entry(first.to_string())
                .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
            if !e.is_object() {
                *e = serde_json::Value::Object(serde_json::Map::new());
            }
            if let serde_json::Value::Object(inner) = e {
                insert(inner, rest, v);
            }
        }
    }
}

fn json_value(v: &str) -> serde_json::Value {
    use serde_json::Value;
    match v.trim() {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "None" => Value::Null,
        "<set>" => Value::String("<set>".into()),
        t => {
            if let Some(s) = parse_string(t) {
                return Value::String(s);
            }
            if let Ok(i) = t.parse::<i64>() {
                return Value::from(i);
            }
            if let Some(n) = t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                return Value::Number(n);
            }
            Value::String(t.to_string())
        }
    }
}

/// A number as Python writes it ("1e6", "1_000_000", "10000000.0", "int(1e10)" is not one).
pub fn parse_number(v: &str) -> Option<f64> {
    let t = v.trim().replace('_', "");
    t.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// A string literal's content ('x', "x", u'x', r"x").
pub fn parse_string(v: &str) -> Option<String> {
    let t = v.trim().trim_start_matches(['u', 'r', 'b']);
    let q = t.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &t[1..];
    let end = inner.find(q)?;
    Some(inner[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_config() {
        let t = "# Configuration file for jupyter-server.\n\
                 c = get_config()  #noqa\n\
                 c.ServerApp.iopub_data_rate_limit = 1000  # lowered\n\
                 c.ServerApp.token = 'abcdef0123456789'\n\
                 c.ServerApp.password = ''\n\
                 c.ServerApp.ip = '0.0.0.0'\n\
                 c.ServerApp.root_dir = '/mnt/nfs/notebooks'\n\
                 c.ResourceUseDisplay.track_cpu_percent = True\n\
                 c.ServerApp.open_browser = False\n\
                 c.NotebookApp.notebook_dir = \"/home/ann\"\n";
        let s = parse_py(t).unwrap();
        assert_eq!(
            s,
            vec![
                ("ServerApp.iopub_data_rate_limit".into(), "1000".into()),
                ("ServerApp.token".into(), "<set>".into()),
                ("ServerApp.password".into(), "''".into()),
                ("ServerApp.ip".into(), "'0.0.0.0'".into()),
                ("ServerApp.root_dir".into(), "'/mnt/nfs/notebooks'".into()),
                ("ResourceUseDisplay.track_cpu_percent".into(), "True".into()),
                ("NotebookApp.notebook_dir".into(), "\"/home/ann\"".into()),
            ]
        );
        // The reduced form reads back the same, without the secret.
        let r = reduce(&s);
        assert!(!r.contains("abcdef"));
        let back = parse_py(&r).unwrap();
        assert_eq!(back, s);
        assert!(parse_py("\0\0\0\u{1}").is_err());
    }

    #[test]
    fn json_config() {
        let t = r#"{"ServerApp": {"iopub_data_rate_limit": 1e10, "token": "",
                   "jpserver_extensions": {"jupyter_resource_usage": true, "other": true}},
                   "ResourceUseDisplay": {"mem_limit": 1000}}"#;
        let s = parse_json(t).unwrap();
        assert_eq!(
            s,
            vec![
                (
                    "ServerApp.iopub_data_rate_limit".into(),
                    "10000000000.0".into()
                ),
                ("ServerApp.token".into(), "''".into()),
                (
                    "ServerApp.jpserver_extensions.jupyter_resource_usage".into(),
                    "True".into()
                ),
                ("ResourceUseDisplay.mem_limit".into(), "1000".into()),
            ]
        );
        assert_eq!(parse_json(&reduce_json(&s)).unwrap(), s);
        assert!(parse_json("{not json").is_err());
        assert!(parse_json("[]").is_err());
        assert_eq!(parse_json("").unwrap(), vec![]);
    }

    #[test]
    fn values() {
        assert_eq!(parse_number("1e6"), Some(1e6));
        assert_eq!(parse_number("1_000_000"), Some(1e6));
        assert_eq!(parse_number("'x'"), None);
        assert_eq!(parse_string("'/mnt/x'").as_deref(), Some("/mnt/x"));
        assert_eq!(parse_string("u\"/a\"").as_deref(), Some("/a"));
        assert_eq!(parse_string("1"), None);
    }
}
