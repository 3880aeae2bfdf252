//! `/proc/driver/nvidia/gpus/<bus-id>/information`: what the kernel module says about a GPU
//! without NVML (model, UUID, VBIOS, bus location). The last source of GPU facts, when NVML
//! and nvidia-smi do not answer.

use super::ParseError;

/// The fields gpuaudit uses; `None` where the file does not have the line (or it is "?").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuInformation {
    pub model: Option<String>,
    pub uuid: Option<String>,
    pub vbios: Option<String>,
    pub bus_location: Option<String>,
}

/// Lines like `Model: \t\t NVIDIA H200`.
pub fn parse_gpu_information(text: &str) -> Result<GpuInformation, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut info = GpuInformation::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        // The driver prints "?" for what it does not know (a GPU that failed to initialise).
        if value.is_empty() || value == "?" {
            continue;
        }
        let value = Some(super::host::truncate(value, 200));
        match key.trim() {
            "Model" => info.model = value,
            "GPU UUID" => info.uuid = value,
            "Video BIOS" => info.vbios = value,
            "Bus Location" => info.bus_location = value,
            _ => {}
        }
    }
    if info.model.is_none() && info.bus_location.is_none() {
        return Err(ParseError::Malformed(
            "no Model or Bus Location line".into(),
        ));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_h200_file() {
        let text = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000070\n\
                    Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nBus Location: \t 0000:00:07.0\n\
                    Device Minor: \t 1\nGPU Excluded:\t No\n";
        let i = parse_gpu_information(text).unwrap();
        assert_eq!(i.model.as_deref(), Some("NVIDIA H200"));
        assert_eq!(
            i.uuid.as_deref(),
            Some("GPU-00000000-0000-0000-0000-000000000070")
        );
        assert_eq!(i.vbios.as_deref(), Some("96.00.a5.00.1a"));
        assert_eq!(i.bus_location.as_deref(), Some("0000:00:07.0"));
    }

    #[test]
    fn unknown_fields_and_garbage() {
        let i = parse_gpu_information(
            "Model: \t NVIDIA A100\nVideo BIOS: \t ??.??.??.??.??\nGPU UUID: ?\n",
        )
        .unwrap();
        assert_eq!(i.uuid, None);
        assert_eq!(i.vbios.as_deref(), Some("??.??.??.??.??"));
        assert_eq!(parse_gpu_information(""), Err(ParseError::Empty));
        assert!(parse_gpu_information("\u{1b}[2J binary junk").is_err());
    }
}
