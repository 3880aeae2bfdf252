//! Workloads rehearsed on the machine (`gpuaudit rehearse`).

pub mod pipeline;
