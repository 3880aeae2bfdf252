//! `nvidia-smi nvlink -s`: per-GPU NVLink link state and speed.

use super::ParseError;
use crate::facts::NvLink;

/// One entry per GPU block in the output, in order: (GPU index, its links).
pub fn parse_status(_text: &str) -> Result<Vec<(u32, Vec<NvLink>)>, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}
