//! The recording machine's CPU as one line of text, from the identity its header records.

/// The recording machine's CPU in one line (`labperf info`, the HTML report's header).
pub fn cpu_name(cpu: &labperf_common::CpuId) -> String {
    use labperf_common::CpuId;
    match cpu {
        CpuId::X86 {
            vendor,
            family,
            model,
            stepping,
            model_name,
        } => format!(
            "{vendor} family {family:#x} model {model:#x} stepping {stepping} ({model_name})"
        ),
        CpuId::Arm {
            midr,
            implementer,
            part,
            variant,
            revision,
        } => format!(
            "MIDR {} implementer {implementer:#x} part {part:#x} r{variant}p{revision}",
            midr.map_or_else(|| "unknown".into(), |m| format!("{m:#x}"))
        ),
        CpuId::Alpha { model } => format!("Alpha {model}"),
        CpuId::Unknown { cpuinfo } => cpuinfo.lines().next().unwrap_or("unknown").to_string(),
    }
}
