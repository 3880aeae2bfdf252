//! `nvidia-smi nvlink -s`: per-GPU NVLink link state and speed.
//!
//! ```text
//! GPU 0: NVIDIA H200 (UUID: GPU-...)
//!          Link 0: 26.562 GB/s
//!          Link 1: <inactive>
//! ```
//!
//! A GPU whose links are all down (or that has no NVLink bridge) gets the line
//! "NVML: Unable to retrieve NVLink information as all links are inActive" instead of links;
//! it is returned with an empty list and `all_inactive` set, since the output does not say how
//! many links it has.
//!
//! nvidia-smi prints every link of a GPU, a link that is down as `<inactive>`. Only the links
//! the text lists are returned: a listing pasted with lines elided (`...`, `[snip]`) or cut
//! short names fewer links than the GPU has, and a link it does not name is not known, not
//! down (the caller compares the listed links with what the model has). A link listed twice
//! in one block (a paste that repeats lines) counts once, as first listed.

use super::text::{first_line, shorten, strip_ansi};
use super::ParseError;
use crate::facts::NvLink;

/// One GPU block of the output.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuLinks {
    pub gpu: u32,
    pub links: Vec<NvLink>,
    /// NVML said that every link of this GPU is inactive (no link lines follow). Distinct from
    /// a block with no lines at all, which says nothing.
    pub all_inactive: bool,
}

/// One entry per GPU block in the output, in order.
///
/// Output that consists only of the "all links are inActive" message (no GPU header) gives an
/// empty list.
pub fn parse_status(text: &str) -> Result<Vec<GpuLinks>, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let clean = strip_ansi(text);
    let mut gpus: Vec<GpuLinks> = Vec::new();
    let mut all_inactive_message = false;
    for line in clean.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(index) = gpu_header(line)? {
            gpus.push(GpuLinks {
                gpu: index,
                links: Vec::new(),
                all_inactive: false,
            });
            continue;
        }
        if line.to_ascii_lowercase().contains("all links are inactive") {
            all_inactive_message = true;
            if let Some(g) = gpus.last_mut() {
                // Only where no link line was printed: the message then stands for them all.
                g.all_inactive = g.links.is_empty();
            }
            continue;
        }
        let Some((link, value)) = link_line(line) else {
            // Warnings and notes between blocks say nothing about the links.
            continue;
        };
        let link = link?;
        let Some(g) = gpus.last_mut() else {
            return Err(ParseError::Malformed(format!(
                "nvidia-smi nvlink -s: a link line before any GPU line: {}",
                shorten(line, 80)
            )));
        };
        let state = link_state(g.gpu, link, value)?;
        if !g.links.iter().any(|l| l.link == state.link) {
            g.links.push(state);
        }
        g.all_inactive = false;
    }
    if gpus.is_empty() && !all_inactive_message {
        return Err(ParseError::Malformed(format!(
            "nvidia-smi nvlink -s: no GPU lines; it printed: {}",
            first_line(&clean)
        )));
    }
    Ok(gpus)
}

/// "GPU 0: NVIDIA H200 (UUID: ...)" -> Some(0).
fn gpu_header(line: &str) -> Result<Option<u32>, ParseError> {
    let Some(rest) = line.strip_prefix("GPU ") else {
        return Ok(None);
    };
    let Some((index, _)) = rest.split_once(':') else {
        return Ok(None);
    };
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    index.parse::<u32>().map(Some).map_err(|_| {
        ParseError::Malformed(format!(
            "nvidia-smi nvlink -s: GPU index {} out of range",
            shorten(index, 20)
        ))
    })
}

/// "Link 3: 26.562 GB/s" -> (3, "26.562 GB/s").
fn link_line(line: &str) -> Option<(Result<u32, ParseError>, &str)> {
    let rest = line.strip_prefix("Link ")?;
    let (number, value) = rest.split_once(':')?;
    let number = number.trim();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let link = number.parse::<u32>().map_err(|_| {
        ParseError::Malformed(format!(
            "nvidia-smi nvlink -s: link number {} out of range",
            shorten(number, 20)
        ))
    });
    Some((link, value.trim()))
}

fn link_state(gpu: u32, link: u32, value: &str) -> Result<NvLink, ParseError> {
    let inactive = NvLink {
        link,
        active: false,
        version: None,
        speed_gbps: None,
        remote_bus_id: None,
    };
    if value.eq_ignore_ascii_case("<inactive>") {
        return Ok(inactive);
    }
    let speed = value
        .strip_suffix("GB/s")
        .map(str::trim)
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0);
    match speed {
        Some(speed) => Ok(NvLink {
            active: true,
            speed_gbps: Some(speed),
            ..inactive
        }),
        // Not a state this parser knows ("Link 0: Replay Errors: 0" is `nvlink -e` output).
        None => Err(ParseError::Malformed(format!(
            "nvidia-smi nvlink -s: GPU {gpu} link {link}: unexpected value {:?}",
            shorten(value, 40)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(link: u32, speed: f64) -> NvLink {
        NvLink {
            link,
            active: true,
            version: None,
            speed_gbps: Some(speed),
            remote_bus_id: None,
        }
    }

    fn gpu(gpu: u32, links: Vec<NvLink>) -> GpuLinks {
        GpuLinks {
            gpu,
            links,
            all_inactive: false,
        }
    }

    fn down(link: u32) -> NvLink {
        NvLink {
            link,
            active: false,
            version: None,
            speed_gbps: None,
            remote_bus_id: None,
        }
    }

    #[test]
    fn h200_style_output_with_inactive_links() {
        let text = "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000060)\n\
                    \t Link 0: 26.562 GB/s\n\
                    \t Link 1: 26.562 GB/s\n\
                    \t Link 2: <inactive>\n\
                    GPU 1: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000070)\n\
                    \t Link 0: 26.562 GB/s\n\
                    \t Link 1: <inactive>\n\
                    \t Link 2: 26.562 GB/s\n";
        let got = parse_status(text).unwrap();
        assert_eq!(
            got,
            vec![
                gpu(0, vec![active(0, 26.562), active(1, 26.562), down(2)]),
                gpu(1, vec![active(0, 26.562), down(1), active(2, 26.562)]),
            ]
        );
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(parse_status(&crlf).unwrap(), got);
    }

    #[test]
    fn eighteen_links_of_a_b200_class_gpu() {
        let mut text = String::from("GPU 3: NVIDIA GB200 (UUID: GPU-x)\n");
        for l in 0..18 {
            text.push_str(&format!("         Link {l}: 53.125 GB/s\n"));
        }
        let got = parse_status(&text).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].gpu, 3);
        assert_eq!(got[0].links.len(), 18);
        assert!(!got[0].all_inactive);
        assert!(got[0]
            .links
            .iter()
            .all(|l| l.active && l.speed_gbps == Some(53.125)));
    }

    #[test]
    fn all_links_inactive_message() {
        let per_gpu = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-a)\n\
                       NVML: Unable to retrieve NVLink information as all links are inActive\n\
                       GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-b)\n\
                       NVML: Unable to retrieve NVLink information as all links are inActive\n";
        let inactive = |g| GpuLinks {
            all_inactive: true,
            ..gpu(g, vec![])
        };
        assert_eq!(
            parse_status(per_gpu).unwrap(),
            vec![inactive(0), inactive(1)]
        );
        let alone = "NVML: Unable to retrieve NVLink information as all links are inActive\n";
        assert_eq!(parse_status(alone).unwrap(), vec![]);
    }

    #[test]
    fn one_gpu_of_eight_with_every_link_down() {
        // As a B200/H200 board prints it when one GPU lost its NVLinks: the others list theirs.
        let mut text = String::new();
        for g in 0..8 {
            text.push_str(&format!("GPU {g}: NVIDIA H200 (UUID: GPU-{g})\n"));
            if g == 5 {
                text.push_str(
                    "NVML: Unable to retrieve NVLink information as all links are inActive\n",
                );
            } else {
                for l in 0..18 {
                    text.push_str(&format!("\t Link {l}: 26.562 GB/s\n"));
                }
            }
        }
        let got = parse_status(&text).unwrap();
        assert_eq!(got.len(), 8);
        for g in &got {
            assert_eq!(g.all_inactive, g.gpu == 5, "GPU {}", g.gpu);
            assert_eq!(g.links.len(), if g.gpu == 5 { 0 } else { 18 });
        }
        // A header with no line under it says nothing about the links.
        let bare = parse_status("GPU 0: NVIDIA H200 (UUID: GPU-0)\n").unwrap();
        assert_eq!(bare, vec![gpu(0, vec![])]);
    }

    #[test]
    fn a_listing_cut_short_returns_only_the_links_it_names() {
        // Lines elided when pasted: two of an A100's twelve links are named, both up.
        let text = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n\
                    \t Link 0: 25 GB/s\n\
                    \t ...\n\
                    \t Link 11: 25 GB/s\n\
                    [snip]\n";
        let got = parse_status(text).unwrap();
        assert_eq!(got, vec![gpu(0, vec![active(0, 25.0), active(11, 25.0)])]);
        // Lines that only look like a GPU's header or a link say nothing ("GPU : ...",
        // "Link : ...").
        let odd = "GPU 0: X\n Link 0: 25 GB/s\nGPU : not a header\nGPU 1a: nor this\n Link : 9 GB/s\n Link 2x: 9 GB/s\n";
        assert_eq!(
            parse_status(odd).unwrap(),
            vec![gpu(0, vec![active(0, 25.0)])]
        );
        // A line repeated by the paste counts once, as first listed.
        let twice = "GPU 0: X\n Link 0: 25 GB/s\n Link 1: <inactive>\n Link 1: 25 GB/s\n";
        assert_eq!(
            parse_status(twice).unwrap(),
            vec![gpu(0, vec![active(0, 25.0), down(1)])]
        );
    }

    #[test]
    fn errors() {
        assert_eq!(parse_status("").unwrap_err(), ParseError::Empty);
        assert_eq!(parse_status("  \n\t\n").unwrap_err(), ParseError::Empty);
        assert!(matches!(
            parse_status("Failed to initialize NVML: Driver/library version mismatch\n"),
            Err(ParseError::Malformed(m)) if m.contains("version mismatch")
        ));
        assert!(matches!(
            parse_status("\t Link 0: 26.562 GB/s\n"),
            Err(ParseError::Malformed(m)) if m.contains("before any GPU")
        ));
        assert!(matches!(
            parse_status("GPU 0: X\n Link 0: Replay Errors: 0\n"),
            Err(ParseError::Malformed(m)) if m.contains("unexpected value")
        ));
        assert!(matches!(
            parse_status("GPU 0: X\n Link 0: inf GB/s\n"),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(
            parse_status("GPU 99999999999: X\n"),
            Err(ParseError::Malformed(m)) if m.contains("out of range")
        ));
        assert!(matches!(
            parse_status("GPU 0: X\n Link 99999999999: <inactive>\n"),
            Err(ParseError::Malformed(m)) if m.contains("out of range")
        ));
    }
}
