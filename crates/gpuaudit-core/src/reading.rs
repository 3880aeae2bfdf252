//! `Reading<T>`: a value read from the machine, or the reason it could not be read.
//!
//! gpuaudit never substitutes 0 (or any other default) for a value it could not read: a check
//! that needs a missing reading reports `skip` and passes the reason on.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading<T> {
    Value(T),
    /// Why the value is missing, in words a person can act on ("NVML: not supported on this GPU").
    Unavailable(String),
}

impl<T> Reading<T> {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Reading::Unavailable(reason.into())
    }

    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unavailable(_) => None,
        }
    }

    pub fn into_value(self) -> Option<T> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unavailable(_) => None,
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Reading::Value(_) => None,
            Reading::Unavailable(r) => Some(r),
        }
    }

    pub fn is_value(&self) -> bool {
        matches!(self, Reading::Value(_))
    }

    pub fn as_ref(&self) -> Reading<&T> {
        match self {
            Reading::Value(v) => Reading::Value(v),
            Reading::Unavailable(r) => Reading::Unavailable(r.clone()),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Reading<U> {
        match self {
            Reading::Value(v) => Reading::Value(f(v)),
            Reading::Unavailable(r) => Reading::Unavailable(r),
        }
    }

    pub fn and_then<U>(self, f: impl FnOnce(T) -> Reading<U>) -> Reading<U> {
        match self {
            Reading::Value(v) => f(v),
            Reading::Unavailable(r) => Reading::Unavailable(r),
        }
    }

    /// This reading if it has a value, else `other`; when both are missing, both reasons are kept.
    pub fn or(self, other: Reading<T>) -> Reading<T> {
        match (self, other) {
            (Reading::Value(v), _) => Reading::Value(v),
            (Reading::Unavailable(_), Reading::Value(v)) => Reading::Value(v),
            (Reading::Unavailable(a), Reading::Unavailable(b)) if a == b => Reading::Unavailable(a),
            (Reading::Unavailable(a), Reading::Unavailable(b)) => {
                Reading::Unavailable(format!("{a}; {b}"))
            }
        }
    }

    /// `Some(value)` or `Err(reason)`, for `?`-style use in checks.
    pub fn get(&self) -> Result<&T, &str> {
        match self {
            Reading::Value(v) => Ok(v),
            Reading::Unavailable(r) => Err(r),
        }
    }
}

impl<T> Default for Reading<T> {
    fn default() -> Self {
        Reading::Unavailable("not read".into())
    }
}

impl<T, E: fmt::Display> From<Result<T, E>> for Reading<T> {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => Reading::Value(v),
            Err(e) => Reading::Unavailable(e.to_string()),
        }
    }
}

/// Serialized as the plain value, or as `{"unavailable": "reason"}`.
impl<T: Serialize> Serialize for Reading<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Reading::Value(v) => v.serialize(s),
            Reading::Unavailable(r) => {
                #[derive(Serialize)]
                struct U<'a> {
                    unavailable: &'a str,
                }
                U { unavailable: r }.serialize(s)
            }
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Reading<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        if let Some(r) = v
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get("unavailable"))
            .and_then(|r| r.as_str())
        {
            return Ok(Reading::Unavailable(r.to_string()));
        }
        serde_json::from_value(v)
            .map(Reading::Value)
            .map_err(serde::de::Error::custom)
    }
}

/// The schema of the serde form above: the value's own schema, or an object with the one
/// key `unavailable` holding the reason. (Written by hand: a derive would describe the Rust
/// enum, `{"Value": ...}`, not what is serialized.)
impl<T: schemars::JsonSchema> schemars::JsonSchema for Reading<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Reading_{}", T::schema_name()).into()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        format!("gpuaudit_core::Reading<{}>", T::schema_id()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let value = generator.subschema_for::<T>();
        schemars::json_schema!({
            "description": "A reading: its value, or why it could not be taken.",
            "anyOf": [
                value,
                {
                    "type": "object",
                    "properties": {"unavailable": {"type": "string"}},
                    "required": ["unavailable"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_value_or_reason() {
        let a: Reading<u32> = Reading::Value(16);
        let b: Reading<u32> = Reading::unavailable("sysfs: no such file");
        assert_eq!(serde_json::to_string(&a).unwrap(), "16");
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            r#"{"unavailable":"sysfs: no such file"}"#
        );
        let back: Reading<u32> = serde_json::from_str(r#"{"unavailable":"x"}"#).unwrap();
        assert_eq!(back, Reading::unavailable("x"));
        let back: Reading<u32> = serde_json::from_str("16").unwrap();
        assert_eq!(back, Reading::Value(16));
    }

    #[test]
    fn or_keeps_both_reasons() {
        let a: Reading<u32> = Reading::unavailable("NVML: not supported");
        let b: Reading<u32> = Reading::unavailable("sysfs: missing");
        assert_eq!(
            a.clone().or(b).reason(),
            Some("NVML: not supported; sysfs: missing")
        );
        assert_eq!(a.or(Reading::Value(3)).value(), Some(&3));
    }
}
