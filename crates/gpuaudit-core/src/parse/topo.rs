//! `nvidia-smi topo -m`: the connection matrix between GPUs (and NICs).

use super::ParseError;
use crate::facts::Topology;

pub fn parse(_text: &str) -> Result<Topology, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}
